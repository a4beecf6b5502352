//! `provider-kubernetes`: wires the provider's library into the managed runtime and the manager.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    provider_kubernetes::PROVIDER.main()
}

//! `provider-file`: the provider's descriptor, run.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    provider_file::PROVIDER.main()
}

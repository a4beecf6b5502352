//! provider-nop, second build: the same code reporting the version `<version>+next` (in `--version` and
//! in its user agent, `provider-nop/0.1.0+next (<identity>)`), so that a rolling update in the fault
//! schedule runs two builds with different version strings side by side, as a real upgrade does.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let mut info = provider_nop::INFO;
    info.binary.version = concat!(env!("CARGO_PKG_VERSION"), "+next");
    managed::cli::main(info, provider_nop::setup)
}

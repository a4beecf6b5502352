//! The core binary, second build: the same code reporting the version `<version>+next`, for the rolling
//! update with mixed versions in the fault schedule.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    crossplane::cli::main(manager::BinaryInfo {
        name: "crossplane",
        version: concat!(env!("CARGO_PKG_VERSION"), "+next"),
    })
}

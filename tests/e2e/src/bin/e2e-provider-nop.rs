//! provider-nop as the fault schedule runs it: the same wiring as `providers/provider-nop/src/main.rs`,
//! built in this package so that its tests get its path (`CARGO_BIN_EXE_e2e-provider-nop`). It reports
//! provider-nop's own version; `e2e-provider-nop-next` is the second build of a rolling update.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    managed::cli::main(provider_nop::INFO, provider_nop::setup)
}

//! provider-sql as the bad-input suite runs it: exactly what `providers/provider-sql/src/main.rs`
//! calls, built in this package so that its tests get its path (`CARGO_BIN_EXE_e2e-provider-sql`).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    managed::cli::main(provider_sql::INFO, provider_sql::setup)
}

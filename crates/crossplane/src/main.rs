//! `crossplane`: `crossplane core start` and `crossplane rbac start`. Only wiring lives here; see the
//! library's [`crossplane::cli`].
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::FromArgMatches;
use crossplane::cli::{self, Cli, Component, CoreCommand, RbacCommand};
use manager::BinaryInfo;

fn main() -> ExitCode {
    let matches = cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let binary = BinaryInfo {
        name: env!("CARGO_BIN_NAME"),
        version: env!("CARGO_PKG_VERSION"),
    };
    let result = runtime.block_on(async move {
        match cli.component {
            Component::Core {
                command: CoreCommand::Start(args),
            } => cli::core_start(args, binary).await,
            Component::Rbac {
                command: RbacCommand::Start(args),
            } => cli::rbac_start(args, binary).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let manager::Error::Usage(usage) = &e {
                usage.exit();
            }
            eprintln!("error: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}

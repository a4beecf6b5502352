//! The end of every binary's `main`: one tokio runtime, the command's future on it, and the process's
//! exit code from its outcome.

use std::future::Future;
use std::process::ExitCode;

/// An error that ends a command: how it is told and which exit code it gives.
pub trait Failure: std::fmt::Display {
    /// The exit code: 2 for a usage error, 1 for anything else.
    fn exit_code(&self) -> u8 {
        1
    }

    /// Ends the process the way a usage error does (its usage, exit code 2) when this is one; returns
    /// otherwise. The default is never one.
    fn exit_if_usage(&self) {}
}

impl Failure for crate::Error {
    fn exit_code(&self) -> u8 {
        u8::try_from(crate::Error::exit_code(self)).unwrap_or(1)
    }

    fn exit_if_usage(&self) {
        if let crate::Error::Usage(usage) = self {
            usage.exit();
        }
    }
}

/// Runs `future` on a new multi-threaded tokio runtime and turns its outcome into the exit code: 0, or
/// the error printed as `error: …` with its [`Failure::exit_code`] (a usage error exits with its usage).
pub fn block_on<E, F>(future: F) -> ExitCode
where
    E: Failure,
    F: Future<Output = Result<(), E>>,
{
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    exit_code(runtime.block_on(future))
}

/// The exit code of a command's outcome, printing its error.
pub fn exit_code<E: Failure>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.exit_if_usage();
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Broken;

    impl std::fmt::Display for Broken {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("broken")
        }
    }

    impl Failure for Broken {}

    #[test]
    fn success_is_zero_and_an_error_its_code() {
        assert_eq!(block_on(async { Ok::<(), Broken>(()) }), ExitCode::SUCCESS);
        assert_eq!(block_on(async { Err::<(), Broken>(Broken) }), ExitCode::from(1));
        let stopped = crate::Error::StopIncomplete(1);
        assert_eq!(Failure::exit_code(&stopped), 1);
    }
}

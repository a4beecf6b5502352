//! Composition functions as local processes for the tests: the virtualenv `cargo xtask test` installs,
//! and a function process that is killed on drop.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::wait_for;

/// A program of the function virtualenv (`target/function-venv/bin`); fails clearly when it is missing.
pub fn venv_bin(name: &str) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/function-venv/bin")
        .join(name);
    anyhow::ensure!(
        p.is_file(),
        "{} is missing: run `cargo xtask test` once (it installs function-pythonic and the Python SDK \
         into target/function-venv), then run this test again",
        p.display()
    );
    Ok(p)
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(testenv::free_port()?)
}

/// A function process, killed on drop.
pub struct Served {
    _process: testenv::process::Process,
    /// `127.0.0.1:port`.
    pub address: String,
    /// Its log file.
    pub log: PathBuf,
}

/// Starts `program args... <address args>` and waits until it accepts connections.
pub async fn serve(program: PathBuf, args: &[&str], name: &str) -> anyhow::Result<Served> {
    serve_at(program, args, name, free_port()?).await
}

/// Like [`serve`], on a given port.
pub async fn serve_at(program: PathBuf, args: &[&str], name: &str, port: u16) -> anyhow::Result<Served> {
    let address = format!("127.0.0.1:{port}");
    let log = std::env::temp_dir().join(format!("function-{name}.log"));
    let mut cmd = std::process::Command::new(&program);
    cmd.args(args).args(["--address", &address]);
    let mut process = testenv::process::Process::spawn(name, cmd, &log, testenv::process::Output::Log)
        .with_context(|| format!("starting {}", program.display()))?;
    let a = address.clone();
    wait_for(
        &format!("{name} listening on {address}"),
        Duration::from_secs(60),
        || {
            let a = a.clone();
            let exited = process.try_exit();
            let log = log.clone();
            async move {
                if let Some(status) = exited {
                    anyhow::bail!("{name} exited ({status}); see {}", log.display());
                }
                Ok(tokio::net::TcpStream::connect(&a).await.ok().map(|_| ()))
            }
        },
    )
    .await?;
    Ok(Served {
        _process: process,
        address,
        log,
    })
}

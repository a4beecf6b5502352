//! A real PostgreSQL server for provider-sql's tests, from Debian's `postgresql` package.
//!
//! [`Postgres::start`] runs `initdb` into a fresh directory under the system temp dir and starts
//! `postgres` on a free loopback port, with a superuser `postgres` whose password is random
//! (scram-sha-256 over TCP), `log_line_prefix` naming the application and user of every line, and
//! DDL statements and connections logged. The server is stopped and its directory removed on drop.
//!
//! `initdb` and `postgres` refuse to run as root. When the tests run as root (as CI does), both are run
//! as the `postgres` system user the package creates, through `setpriv` (which execs, so the process
//! this module holds is `postgres` itself and signals reach it directly).
//!
//! The binaries are found in `/usr/lib/postgresql/<major>/bin` (the highest major installed), or in the
//! directory named by the environment variable [`ENV_PG_BIN`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{
    Error, Result,
    process::{Output, Process},
};

/// Overrides the directory of the PostgreSQL binaries.
pub const ENV_PG_BIN: &str = "CROSSPLANE_RS_PG_BIN";

/// The superuser's name.
pub const SUPERUSER: &str = "postgres";

/// The `log_line_prefix`: time, pid, application name, user and database.
pub const LOG_LINE_PREFIX: &str = "%m [%p] app=%a user=%u db=%d ";

/// A PostgreSQL server on 127.0.0.1.
#[derive(Debug)]
pub struct Postgres {
    base: PathBuf,
    bin: PathBuf,
    port: u16,
    password: String,
    as_postgres_user: bool,
    child: Mutex<Option<Process>>,
}

/// The directory holding `initdb`, `postgres` and `psql`.
pub fn bin_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(ENV_PG_BIN) {
        return Ok(PathBuf::from(dir));
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(Error::io(
            "looking for PostgreSQL (install Debian's `postgresql` package)",
            root,
        ))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((major, bin))
        })
        .collect();
    majors.sort();
    majors.pop().map(|(_, bin)| bin).ok_or_else(|| {
        Error::Unexpected(format!(
            "no PostgreSQL server under {} (install Debian's `postgresql` package)",
            root.display()
        ))
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Postgres {
    /// Initialises a data directory and starts the server; returns once it accepts connections.
    pub fn start() -> Result<Self> {
        let bin = bin_dir()?;
        let base = std::env::temp_dir().join(format!("crossplane-rs-pg-{}", uuid::Uuid::new_v4().simple()));
        let data = base.join("data");
        std::fs::create_dir_all(&data).map_err(Error::io("creating the PostgreSQL directory", &data))?;
        let password = uuid::Uuid::new_v4().simple().to_string();
        let pwfile = base.join("pwfile");
        std::fs::write(&pwfile, &password).map_err(Error::io("writing the password file", &pwfile))?;
        let as_postgres_user = is_root();
        if as_postgres_user {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&data)
                .arg(&pwfile)
                .status()
                .map_err(Error::io("running chown", &data))?;
            if !status.success() {
                return Err(Error::Unexpected(format!(
                    "chown of {} to the postgres user failed",
                    data.display()
                )));
            }
        }
        let log = base.join("initdb.log");
        let out = std::fs::File::create(&log).map_err(Error::io("creating the initdb log", &log))?;
        let err = out
            .try_clone()
            .map_err(Error::io("creating the initdb log", &log))?;
        let mut initdb = Self::command(&bin, "initdb", as_postgres_user);
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
            .args(["--auth-host=scram-sha-256", "--auth-local=trust"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let status = initdb.status().map_err(Error::io("running initdb", &bin))?;
        let _ = std::fs::remove_file(&pwfile);
        if !status.success() {
            return Err(Error::Component {
                component: "initdb".into(),
                message: format!("exited with {status}"),
                log,
            });
        }
        let pg = Self {
            base,
            bin,
            port: crate::ports::free_port()?,
            password,
            as_postgres_user,
            child: Mutex::new(None),
        };
        pg.start_server()?;
        Ok(pg)
    }

    fn command(bin: &Path, program: &str, as_postgres_user: bool) -> Command {
        if as_postgres_user {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=postgres", "--regid=postgres", "--init-groups", "--"])
                .arg(bin.join(program));
            c
        } else {
            Command::new(bin.join(program))
        }
    }

    /// The server's log (stderr of every run).
    pub fn log_path(&self) -> PathBuf {
        self.base.join("postgres.log")
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// `127.0.0.1`.
    pub fn host(&self) -> &str {
        "127.0.0.1"
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A libpq keyword/value connection string for `user`/`password` on `dbname`.
    pub fn conn_string(&self, user: &str, password: &str, dbname: &str) -> String {
        let q = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
        format!(
            "host={} port={} user={} password={} dbname={} sslmode=disable",
            self.host(),
            self.port,
            q(user),
            q(password),
            q(dbname)
        )
    }

    /// The superuser's connection string to the `postgres` database.
    pub fn admin_conn_string(&self) -> String {
        self.conn_string(SUPERUSER, &self.password, "postgres")
    }

    /// The `psql` binary.
    pub fn psql(&self) -> PathBuf {
        self.bin.join("psql")
    }

    /// True while the server process runs.
    pub fn is_running(&self) -> bool {
        let mut guard = self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_mut() {
            Some(c) => c.is_running(),
            None => false,
        }
    }

    fn start_server(&self) -> Result<()> {
        let log = self.log_path();
        let before = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let data = self.base.join("data");
        let mut cmd = Self::command(&self.bin, "postgres", self.as_postgres_user);
        cmd.arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg("listen_addresses=127.0.0.1")
            .arg("-c")
            .arg(format!("unix_socket_directories={}", data.display()))
            .arg("-c")
            .arg(format!("log_line_prefix={LOG_LINE_PREFIX}"))
            .args(["-c", "log_statement=ddl", "-c", "log_connections=on"])
            .args(["-c", "fsync=off", "-c", "max_connections=300"]);
        let child = Process::spawn("postgres", cmd, &log, Output::AppendLog)?;
        *self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read(&log).unwrap_or_default();
            let new = String::from_utf8_lossy(text.get(before as usize..).unwrap_or_default());
            if new.contains("ready to accept connections") {
                return Ok(());
            }
            if !self.is_running() {
                return Err(Error::Component {
                    component: "postgres".into(),
                    message: "exited during start-up".into(),
                    log,
                });
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "postgres to accept connections".into(),
                    seconds: 30,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (fast shutdown: SIGINT) and waits for it to exit; SIGKILL after 20 s.
    pub fn stop(&self) -> Result<()> {
        let mut guard = self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(mut child) = guard.take() else {
            return Ok(());
        };
        child.stop_with(nix::sys::signal::Signal::SIGINT, Duration::from_secs(20));
        Ok(())
    }

    /// Starts the server again after [`stop`](Self::stop), on the same port and data.
    pub fn restart(&self) -> Result<()> {
        self.stop()?;
        self.start_server()
    }

    /// Starts a stopped server.
    pub fn resume(&self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        self.start_server()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.stop();
        if std::env::var_os("CROSSPLANE_RS_KEEP_PG").is_none() {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

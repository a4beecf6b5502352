//! Logging: a tracing subscriber writing text or JSON lines to stderr, filtered by `--log-level`.
//!
//! JSON lines have zap's shape, as controller-runtime and Crossplane write them (`ts` in RFC 3339,
//! `level`, `logger`, `msg`, then the event's fields), so log pipelines built for upstream keep
//! working. Text lines are colored only when stderr is a terminal.

use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::config::args::LogFormat;

/// The global subscriber could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The filter did not parse ([`Args::resolve`](crate::Args::resolve) checks this first).
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// Why it did not parse.
        source: tracing_subscriber::filter::ParseError,
    },
    /// Another global subscriber was installed already.
    #[error("cannot install the log subscriber: {0}")]
    Install(String),
}

/// kube-runtime's watcher warns on every retry of a 403; the elector and the controllers report a
/// Forbidden once, naming the RBAC rule to add, so these repeats are quieted unless the filter names
/// the target itself.
const QUIET_WATCHER: &str = "kube_runtime::watcher=error";

/// kube-client logs every failed request at error level without saying which request it was ("failed
/// with error client error (Connect)"), once per retry while the apiserver is down. The elector and the
/// controllers report failures with their context, so these lines (and kube-client's debug-level HTTP
/// spans) are off unless the filter names `kube_client` itself.
const QUIET_CLIENT: &str = "kube_client::client::builder=off";

/// The filter actually installed: `filter` plus the quieting directives it does not override.
fn full_filter(filter: &str) -> String {
    let mut full = filter.to_owned();
    if !filter.contains("kube_runtime") {
        full = format!("{full},{QUIET_WATCHER}");
    }
    if !filter.contains("kube_client") {
        full = format!("{full},{QUIET_CLIENT}");
    }
    full
}

/// The crates of this workspace that every binary links; `--debug` turns them up.
const OUR_CRATES: [&str; 6] = [
    "election",
    "manager",
    "managed",
    "composition",
    "crossplane",
    "apis",
];

/// The filter that `--debug` stands for: debug for this workspace's crates and the binary's own
/// (`binary_crate`, e.g. `provider_nop`), info for everything else, so that kube's and hyper's debug
/// output does not drown the controllers' (upstream's `--debug` is likewise scoped to Crossplane's loggers).
pub fn debug_filter(binary_crate: &str) -> String {
    let mut filter = "info".to_owned();
    for c in OUR_CRATES.iter().chain(std::iter::once(&binary_crate)) {
        if !filter.split(',').any(|d| d == format!("{c}=debug")) {
            filter.push_str(&format!(",{c}=debug"));
        }
    }
    filter
}

/// Installs the global tracing subscriber. Call once, early in `main`.
pub fn init(format: LogFormat, filter: &str) -> Result<(), LoggingError> {
    let full = full_filter(filter);
    let env_filter = EnvFilter::try_new(&full).map_err(|source| LoggingError::Filter {
        filter: filter.to_owned(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder
            .with_target(true)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.event_format(ZapJson).try_init(),
    };
    result.map_err(|e| LoggingError::Install(e.to_string()))
}

/// zap's JSON line: `{"level":"info","ts":"…","logger":"<target>","msg":"…",<fields>}`.
struct ZapJson;

/// The fields of one event, `message` renamed to `msg`.
struct Fields(serde_json::Map<String, serde_json::Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        let name = match field.name() {
            "message" => "msg",
            other => other,
        };
        self.0.insert(name.to_owned(), value);
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

/// zap's level names (zap has no trace level; it is written as `debug`, as logr's V(1) is).
fn zap_level(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        _ => "debug",
    }
}

/// One event as a zap JSON object.
fn zap_line(event: &Event<'_>, ts: &str) -> serde_json::Map<String, serde_json::Value> {
    let meta = event.metadata();
    let mut fields = Fields(serde_json::Map::new());
    fields.0.insert("level".into(), zap_level(meta.level()).into());
    fields.0.insert("ts".into(), ts.into());
    fields.0.insert("logger".into(), meta.target().into());
    fields.0.insert("msg".into(), "".into());
    event.record(&mut fields);
    fields.0
}

impl<S, N> FormatEvent<S, N> for ZapJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let ts = jiff::Timestamp::now().to_string();
        let line = serde_json::to_string(&zap_line(event, &ts)).map_err(|_| std::fmt::Error)?;
        writeln!(writer, "{line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_have_zaps_keys() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .map_err(|_| std::io::ErrorKind::Other)?
                    .extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .event_format(ZapJson)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "manager::test", lease = "ns/l", n = 3, "stopped leading");
        });
        let bytes = buf.0.lock().map(|b| b.clone()).unwrap_or_default();
        let line: serde_json::Value = serde_json::from_slice(&bytes).expect("one JSON line");
        assert_eq!(line["level"], "warn");
        assert_eq!(line["logger"], "manager::test");
        assert_eq!(line["msg"], "stopped leading");
        assert_eq!(line["lease"], "ns/l");
        assert_eq!(line["n"], 3);
        assert!(
            line["ts"]
                .as_str()
                .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
        );
    }

    #[test]
    fn debug_is_scoped_to_our_crates() {
        let f = debug_filter("provider_nop");
        assert!(f.starts_with("info,"));
        assert!(f.contains("manager=debug") && f.contains("provider_nop=debug"));
        assert_eq!(debug_filter("crossplane").matches("crossplane=debug").count(), 1);
        assert!(EnvFilter::try_new(&f).is_ok());
    }

    #[test]
    fn quieting_directives_yield_to_the_user() {
        assert_eq!(
            full_filter("info"),
            "info,kube_runtime::watcher=error,kube_client::client::builder=off"
        );
        assert_eq!(
            full_filter("debug,kube_client=debug"),
            "debug,kube_client=debug,kube_runtime::watcher=error"
        );
        assert_eq!(
            full_filter("kube_runtime=debug"),
            "kube_runtime=debug,kube_client::client::builder=off"
        );
    }
}

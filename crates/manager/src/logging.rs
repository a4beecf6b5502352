//! Logging: a tracing subscriber writing text or JSON lines to stderr, filtered by `--log-level`.

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;

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
        LogFormat::Text => builder.with_target(true).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    result.map_err(|e| LoggingError::Install(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! Kubernetes API errors in words, for what users read (conditions, Events, logs): the apiserver's own
//! message and what to do about it, never a `Debug` dump of the `Status` it sent.

/// What to do about an apiserver answer with HTTP status `code`, if there is anything to say.
pub fn hint(code: u16) -> Option<&'static str> {
    Some(match code {
        400 | 422 => "the apiserver refused the object as invalid: correct the fields it names",
        401 => "the apiserver did not accept the credentials: check the kubeconfig or ServiceAccount token",
        403 => {
            "RBAC does not allow it: grant the ServiceAccount this controller runs as the permission named"
        }
        404 => "it does not exist: check its name and namespace, and that its CRD is installed",
        409 => "another writer changed it first; it is retried",
        429 | 500..=599 => "the apiserver is overloaded or failing; it is retried with backoff",
        _ => return None,
    })
}

/// The apiserver's message (its reason when the message is empty) of an API error, or the error's own
/// words for a transport or decoding failure.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        kube::Error::Api(s) if !s.reason.is_empty() => s.reason.clone(),
        kube::Error::Api(s) => format!("the apiserver answered {}", s.code),
        other => format!("cannot talk to the apiserver: {other}"),
    }
}

/// The HTTP status of an API error.
pub fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// [`message`] followed by the [`hint`] for its status: `<apiserver's words> (<what to do>)`.
pub fn explain(e: &kube::Error) -> String {
    let m = message(e);
    match code(e).and_then(hint) {
        Some(h) => format!("{m} ({h})"),
        None => m,
    }
}

/// A watch's error in words: [`explain`] of the API error inside it, or the watcher's own words for the
/// rest (the `Status` an apiserver sent in a watch event is never shown as a `Debug` dump).
pub fn explain_watch(e: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(k) | W::WatchStartFailed(k) | W::WatchFailed(k) => explain(k),
        W::WatchError(s) => explain(&kube::Error::Api(s.clone())),
        W::NoResourceVersion => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        let mut s = kube::core::Status::failure(message, "Forbidden");
        s.code = code;
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn carries_the_apiservers_words_and_what_to_do_never_a_debug_dump() {
        let e = api(
            403,
            r#"configmaps "x" is forbidden: User "u" cannot create resource "configmaps""#,
        );
        let s = explain(&e);
        assert!(s.starts_with(r#"configmaps "x" is forbidden: User "u""#), "{s}");
        assert!(s.contains("grant the ServiceAccount"), "{s}");
        assert!(!s.contains("Status {") && !s.contains("ApiError"), "{s}");
        assert!(
            e.to_string().contains("Status {"),
            "kube's own Display is the dump we avoid"
        );
        assert_eq!(explain(&api(418, "teapot")), "teapot");
        assert!(explain(&api(404, "")).starts_with("Forbidden ("));
    }

    #[test]
    fn a_watch_error_is_the_apiservers_words_too() {
        use kube::runtime::watcher::Error as W;
        let listed = W::InitialListFailed(api(403, "cannot list configmaps"));
        assert_eq!(
            explain_watch(&listed),
            explain(&api(403, "cannot list configmaps"))
        );
        let kube::Error::Api(status) = api(410, "too old resource version") else {
            unreachable!("api() builds an API error")
        };
        let s = explain_watch(&W::WatchError(status));
        assert_eq!(s, "too old resource version", "{s}");
        assert!(!explain_watch(&listed).contains("Status {"));
    }
}

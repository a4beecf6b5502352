//! Resolving a Usage's `resourceSelector` to one object (upstream's `apiSelectorResolver`): the first
//! candidate carrying every `matchLabels` label and, with `matchControllerRef`, the Usage's controller.
//! The apiserver lists by labels; this module decides among what it returned, and words the misses.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// What the resolver knows of one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its name.
    pub name: String,
    /// Its namespace, if namespaced.
    pub namespace: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The uid of its controller, if it has one.
    pub controller: Option<String>,
}

/// The uid of the controller among `owners`.
pub fn controller_uid(owners: &[OwnerReference]) -> Option<String> {
    owners
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// Whether `labels` carries every one of `wanted`.
pub fn matches_labels(labels: &BTreeMap<String, String>, wanted: &BTreeMap<String, String>) -> bool {
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// `matchLabels` as a label selector (`a=b,c=d`), for the apiserver's list.
pub fn label_selector(wanted: &BTreeMap<String, String>) -> String {
    wanted
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The candidate a selector picks: the first with the labels and, when `controller` is `Some`, that
/// controller. `Err` says in words why none was picked (`kind` names the kind).
pub fn pick<'a>(
    kind: &str,
    candidates: &'a [Candidate],
    wanted: &BTreeMap<String, String>,
    controller: Option<Option<&str>>,
) -> Result<&'a Candidate, String> {
    let labelled: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| matches_labels(&c.labels, wanted))
        .collect();
    if labelled.is_empty() {
        return Err(format!("no {kind} found matching labels {}", shown(wanted)));
    }
    match controller {
        None => Ok(labelled[0]),
        Some(usage_controller) => labelled
            .into_iter()
            .find(|c| usage_controller.is_some() && c.controller.as_deref() == usage_controller)
            .ok_or_else(|| {
                format!(
                    "no {kind} found matching labels {} and with the same controller reference as the Usage",
                    shown(wanted)
                )
            }),
    }
}

/// Labels as `{a: b, c: d}`.
fn shown(labels: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, labels: &[(&str, &str)], controller: Option<&str>) -> Candidate {
        Candidate {
            name: name.into(),
            namespace: None,
            labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
            controller: controller.map(str::to_owned),
        }
    }

    fn wanted(labels: &[(&str, &str)]) -> BTreeMap<String, String> {
        labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    #[test]
    fn the_first_candidate_with_every_label_is_picked() {
        let cs = [
            c("a", &[("foo", "baz")], None),
            c("b", &[("foo", "bar"), ("x", "y")], None),
            c("c", &[("foo", "bar")], None),
        ];
        assert_eq!(
            pick("ConfigMap", &cs, &wanted(&[("foo", "bar")]), None).map(|c| c.name.as_str()),
            Ok("b")
        );
        assert_eq!(
            label_selector(&wanted(&[("foo", "bar"), ("a", "b")])),
            "a=b,foo=bar"
        );
    }

    #[test]
    fn with_match_controller_ref_only_a_sibling_is_picked() {
        let cs = [
            c("a", &[("usage", "used")], Some("other")),
            c("b", &[("usage", "used")], Some("xr")),
        ];
        let w = wanted(&[("usage", "used")]);
        assert_eq!(
            pick("NopResource", &cs, &w, Some(Some("xr"))).map(|c| c.name.as_str()),
            Ok("b")
        );
        let e =
            pick("NopResource", &cs, &w, Some(None)).expect_err("a Usage without a controller matches none");
        assert_eq!(
            e,
            "no NopResource found matching labels {usage: used} and with the same controller reference as the Usage"
        );
    }

    #[test]
    fn no_match_is_said_in_words() {
        let e = pick("ConfigMap", &[], &wanted(&[("tier", "critical")]), None).expect_err("none");
        assert_eq!(e, "no ConfigMap found matching labels {tier: critical}");
    }
}

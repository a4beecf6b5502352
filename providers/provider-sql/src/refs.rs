//! Resolving `…Ref` and `…Selector` fields to the external name of the referenced resource of the same
//! group (and, for namespaced kinds, the same namespace), as upstream's generated resolvers do. A
//! resolved value is written into the spec (through late initialization) and kept; a field already set
//! is not resolved again.

use apis::meta::ANNOTATION_EXTERNAL_NAME;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use managed::ExternalError;

use crate::types::{Reference, Selector, VERSION};

/// Resolves `r` or `sel` to the external name of a `kind` (`plural`) in `group`. `Ok(None)` when neither
/// is set.
#[allow(clippy::too_many_arguments)]
pub async fn resolve(
    kube: &kube::Client,
    group: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
    field: &str,
    r: Option<&Reference>,
    sel: Option<&Selector>,
) -> Result<Option<String>, ExternalError> {
    let ar = ApiResource {
        group: group.to_owned(),
        version: VERSION.to_owned(),
        api_version: format!("{group}/{VERSION}"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    };
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(kube.clone(), ns, &ar),
        None => Api::all_with(kube.clone(), &ar),
    };
    let obj = if let Some(r) = r {
        let shown = match namespace {
            Some(ns) => format!("{kind} {ns}/{}", r.name),
            None => format!("{kind} {:?}", r.name),
        };
        api.get_opt(&r.name)
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot resolve {field}Ref to {shown}"), e))?
            .ok_or_else(|| ExternalError::new(format!("cannot resolve {field}Ref: {shown} not found")))?
    } else if let Some(sel) = sel {
        let labels: Vec<String> = sel.match_labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut found = api
            .list(&ListParams::default().labels(&labels.join(",")))
            .await
            .map_err(|e| ExternalError::wrap(format!("cannot resolve {field}Selector"), e))?
            .items;
        found.sort_by_key(|o| o.name_any());
        found.into_iter().next().ok_or_else(|| {
            ExternalError::new(format!(
                "cannot resolve {field}Selector: no {kind} matches {labels:?}"
            ))
        })?
    } else {
        return Ok(None);
    };
    let name = obj
        .annotations()
        .get(ANNOTATION_EXTERNAL_NAME)
        .cloned()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ExternalError::new(format!(
                "cannot resolve {field}: {kind} {:?} has no external name yet",
                obj.name_any()
            ))
        })?;
    Ok(Some(name))
}

//! The Operations a CronOperation or WatchOperation creates from its `operationTemplate` (upstream's
//! `NewOperation` of both): the template's labels, annotations and spec, the label naming the creator,
//! and the creator as controller owner, so that deleting it deletes its Operations.
//!
//! - A CronOperation's Operation is named `<cronoperation>-<scheduled unix seconds>`.
//! - A WatchOperation's Operation is named `<watchoperation>-<7 hex digits>` of a hash of the watched
//!   resource's kind, namespace, name, uid and resourceVersion (and deletion time), so one change
//!   makes one Operation however often it is seen. Every step gets the watched resource as the required
//!   resource `ops.crossplane.io/watched-resource`, and the Operation carries the resource's identity
//!   in annotations.

use std::collections::BTreeMap;

use apis::ops::{
    self, CronOperation, FunctionRequirements, Operation, OperationTemplate, RequiredResourceSelector,
    WatchOperation,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

/// The watched resource an Operation is made for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watched {
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace ("" for a cluster-scoped one).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid ("" when it is gone).
    pub uid: String,
    /// Its resourceVersion ([`ops::RESOURCE_VERSION_DELETED`] when it is gone).
    pub resource_version: String,
    /// When it was deleted, if it was.
    pub deleted: Option<Timestamp>,
}

fn owner<K: Resource<DynamicType = ()>>(obj: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn from_template(
    template: &OperationTemplate,
    name: String,
    label: (&str, String),
    owner: OwnerReference,
) -> Operation {
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels;
    labels.insert(label.0.to_owned(), label.1);
    let mut op = Operation::new(&name, template.spec.clone());
    op.metadata = ObjectMeta {
        name: Some(name),
        labels: Some(labels),
        annotations: (!meta.annotations.is_empty()).then_some(meta.annotations),
        owner_references: Some(vec![owner]),
        ..Default::default()
    };
    op
}

/// The Operation a CronOperation creates for its run scheduled at `scheduled`.
pub fn cron_operation(co: &CronOperation, scheduled: Timestamp) -> Operation {
    let name = format!("{}-{}", co.name_any(), scheduled.as_second());
    from_template(
        &co.spec.operation_template,
        name,
        (ops::LABEL_CRON_OPERATION, co.name_any()),
        owner(co),
    )
}

/// Go's `schema.GroupVersionKind.String()`, which upstream hashes.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// The name of the Operation a WatchOperation named `watch_operation` creates for `w`.
pub fn watch_operation_name(watch_operation: &str, w: &Watched) -> String {
    let mut input = format!(
        "{}/{}/{}/{}/{}",
        gvk_string(&w.api_version, &w.kind),
        w.namespace,
        w.name,
        w.uid,
        w.resource_version
    );
    if let Some(t) = w.deleted {
        input.push('/');
        input.push_str(&t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    }
    let digest = Sha256::digest(input.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{watch_operation}-{}", &hex[..7])
}

/// The Operation a WatchOperation creates for a change of `w`, named `name`.
pub fn watch_operation(wo: &WatchOperation, w: &Watched, name: String) -> Operation {
    let mut op = from_template(
        &wo.spec.operation_template,
        name,
        (ops::LABEL_WATCH_OPERATION, wo.name_any()),
        owner(wo),
    );
    let selector = RequiredResourceSelector {
        requirement_name: ops::REQUIREMENT_WATCHED_RESOURCE.to_owned(),
        api_version: w.api_version.clone(),
        kind: w.kind.clone(),
        name: Some(w.name.clone()),
        match_labels: None,
        namespace: (!w.namespace.is_empty()).then(|| w.namespace.clone()),
    };
    for step in &mut op.spec.pipeline {
        step.requirements
            .get_or_insert_with(FunctionRequirements::default)
            .required_resources
            .push(selector.clone());
    }
    let mut annotations: BTreeMap<String, String> = op.metadata.annotations.take().unwrap_or_default();
    annotations.insert(ops::ANNOTATION_WATCHED_API_VERSION.into(), w.api_version.clone());
    annotations.insert(ops::ANNOTATION_WATCHED_KIND.into(), w.kind.clone());
    annotations.insert(ops::ANNOTATION_WATCHED_NAME.into(), w.name.clone());
    annotations.insert(
        ops::ANNOTATION_WATCHED_RESOURCE_VERSION.into(),
        w.resource_version.clone(),
    );
    if !w.namespace.is_empty() {
        annotations.insert(ops::ANNOTATION_WATCHED_NAMESPACE.into(), w.namespace.clone());
    }
    op.metadata.annotations = Some(annotations);
    op
}

#[cfg(test)]
mod tests {
    use apis::apiextensions::FunctionReference;
    use apis::ops::{CronOperationSpec, OperationSpec, PipelineStep, TemplateMetadata, WatchOperationSpec};

    use super::*;

    fn template() -> OperationTemplate {
        OperationTemplate {
            metadata: Some(TemplateMetadata {
                labels: [("team".to_owned(), "a".to_owned())].into(),
                annotations: BTreeMap::new(),
            }),
            spec: OperationSpec {
                pipeline: vec![PipelineStep {
                    step: "nop".into(),
                    function_ref: FunctionReference { name: "f".into() },
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_cron_operation_names_its_operation_after_the_scheduled_time() {
        let mut co = CronOperation::new(
            "basic-cronop",
            CronOperationSpec {
                schedule: "* * * * *".into(),
                operation_template: template(),
                ..Default::default()
            },
        );
        co.metadata.uid = Some("u1".into());
        let op = cron_operation(&co, Timestamp::from_second(1_700_000_040).expect("time"));
        assert_eq!(op.name_any(), "basic-cronop-1700000040");
        assert_eq!(op.labels()[ops::LABEL_CRON_OPERATION], "basic-cronop");
        assert_eq!(op.labels()["team"], "a");
        let o = &op.owner_references()[0];
        assert_eq!(
            (o.kind.as_str(), o.uid.as_str(), o.controller),
            ("CronOperation", "u1", Some(true))
        );
    }

    #[test]
    fn a_watch_operation_injects_the_watched_resource_and_names_each_change_once() {
        let wo = WatchOperation::new(
            "basic-watchop",
            WatchOperationSpec {
                operation_template: template(),
                ..Default::default()
            },
        );
        let w = Watched {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "default".into(),
            name: "test-configmap".into(),
            uid: "u".into(),
            resource_version: "7".into(),
            deleted: None,
        };
        let name = watch_operation_name("basic-watchop", &w);
        assert!(
            name.starts_with("basic-watchop-") && name.len() == "basic-watchop-".len() + 7,
            "{name}"
        );
        assert_eq!(name, watch_operation_name("basic-watchop", &w));
        let changed = Watched {
            resource_version: "8".into(),
            ..w.clone()
        };
        assert_ne!(name, watch_operation_name("basic-watchop", &changed));
        let op = watch_operation(&wo, &w, name);
        let req = &op.spec.pipeline[0]
            .requirements
            .as_ref()
            .expect("requirements")
            .required_resources[0];
        assert_eq!(req.requirement_name, ops::REQUIREMENT_WATCHED_RESOURCE);
        assert_eq!(
            (req.name.as_deref(), req.namespace.as_deref()),
            (Some("test-configmap"), Some("default"))
        );
        assert_eq!(op.annotations()[ops::ANNOTATION_WATCHED_RESOURCE_VERSION], "7");
        assert_eq!(op.labels()[ops::LABEL_WATCH_OPERATION], "basic-watchop");
        assert_eq!(gvk_string("v1", "ConfigMap"), "/v1, Kind=ConfigMap");
    }
}

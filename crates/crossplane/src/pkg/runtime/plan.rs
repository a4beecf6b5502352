//! What one revision's runtime is made of, read once from the revision, its package and its
//! DeploymentRuntimeConfig: names, labels, owners, image, pull settings and TLS Secrets. The builders
//! ([`super::deployment`], [`super::service`], [`super::identity`]) are pure functions of a [`Plan`].

use std::collections::BTreeMap;

use apis::pkg::{DeploymentRuntimeConfigSpec, LABEL_PACKAGE, LABEL_REVISION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::pkg::kind::Kind;
use crate::pkg::object::{owner_ref, str_at};

/// The Lease every revision of package `package` stands for: `crossplane-leader-election-<package>`
/// (for a package named `provider-nop`, the Lease provider-nop's binary uses by default), at most 253
/// characters.
pub fn lease_name(package: &str) -> String {
    let name = format!("crossplane-leader-election-{package}");
    name.chars().take(253).collect()
}

/// One revision's runtime, before it is built.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Provider or Function.
    pub kind: Kind,
    /// The namespace the runtime runs in (the core's).
    pub namespace: String,
    /// The package's name.
    pub package: String,
    /// The revision's name.
    pub revision: String,
    /// The revision's UID.
    pub revision_uid: String,
    /// The image the runtime runs (the package image is the controller image): the revision's
    /// `status.resolvedImage` (after ImageConfig rewrites), else its `spec.image`.
    pub image: String,
    /// `spec.packagePullPolicy`, when set: it overrides the runtime config's pull policy.
    pub pull_policy: Option<String>,
    /// `spec.packagePullSecrets`, added to the Pods and the ServiceAccount.
    pub pull_secrets: Vec<String>,
    /// The pull secret of the ImageConfig applied to the revision (`SetImagePullSecret`), added to the
    /// Pods after `pull_secrets` (upstream's; not to the ServiceAccount). Set by the reconciler.
    pub image_config_pull_secret: Option<String>,
    /// The TLS server Secret.
    pub tls_server: Option<String>,
    /// The TLS client Secret.
    pub tls_client: Option<String>,
    /// The controller reference to the revision (Deployment, PDB, ServiceAccount, Role, RoleBinding).
    pub revision_owner: OwnerReference,
    /// The controller reference to the package (the Service and the TLS Secrets, which every
    /// revision of the package shares).
    pub package_owner: Option<OwnerReference>,
    /// Labels on every object: the revision's own (its package's, `pkg.crossplane.io/package`) and
    /// `commonLabels`.
    pub labels: BTreeMap<String, String>,
    /// The DeploymentRuntimeConfig's spec (empty without one).
    pub config: DeploymentRuntimeConfigSpec,
}

impl Plan {
    /// The plan of revision `rev` of `kind`, running in `namespace` with `config`.
    pub fn of(
        kind: Kind,
        rev: &DynamicObject,
        namespace: &str,
        config: DeploymentRuntimeConfigSpec,
    ) -> Result<Plan, crate::Error> {
        let revision = rev.name_any();
        let package = rev
            .labels()
            .get(LABEL_PACKAGE)
            .cloned()
            .ok_or_else(|| {
                crate::Error::Message(format!(
                    "{} {revision} has no {LABEL_PACKAGE} label; the package manager creates revisions, not users",
                    kind.revision().kind
                ))
            })?;
        let mut labels = rev.labels().clone();
        if let Some(common) = rev.data.pointer("/spec/commonLabels").and_then(Value::as_object) {
            for (k, v) in common {
                if let Some(v) = v.as_str() {
                    labels.insert(k.clone(), v.to_string());
                }
            }
        }
        labels.insert(LABEL_REVISION.to_string(), revision.clone());
        if let Some(l) = kind.runtime_label() {
            labels.insert(l.to_string(), package.clone());
        }
        let package_owner = rev
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == kind.name())
            .cloned();
        let pull_secrets = rev
            .data
            .pointer("/spec/packagePullSecrets")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.get("name").and_then(Value::as_str))
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let tls = |field: &str| str_at(rev, field).filter(|s| !s.is_empty()).map(str::to_string);
        Ok(Plan {
            kind,
            namespace: namespace.to_string(),
            revision_uid: rev.uid().unwrap_or_default(),
            image: str_at(rev, "/status/resolvedImage")
                .filter(|s| !s.is_empty())
                .or_else(|| str_at(rev, "/spec/image"))
                .unwrap_or_default()
                .to_string(),
            pull_policy: str_at(rev, "/spec/packagePullPolicy").map(str::to_string),
            pull_secrets,
            image_config_pull_secret: None,
            tls_server: tls("/spec/tlsServerSecretName"),
            tls_client: tls("/spec/tlsClientSecretName"),
            revision_owner: owner_ref(rev, &kind.revision().api_version, &kind.revision().kind, true)?,
            package_owner,
            labels,
            config,
            package,
            revision,
        })
    }

    /// The Pods' selector: the revision and the package (upstream's).
    pub fn selector(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::from([(LABEL_REVISION.to_string(), self.revision.clone())]);
        if let Some(l) = self.kind.runtime_label() {
            s.insert(l.to_string(), self.package.clone());
        }
        s
    }

    /// The Service's selector: every revision of the package, so that during an upgrade the Pods of
    /// both revisions serve and the address never points at nothing.
    pub fn service_selector(&self) -> BTreeMap<String, String> {
        match self.kind.runtime_label() {
            Some(l) => BTreeMap::from([(l.to_string(), self.package.clone())]),
            None => self.selector(),
        }
    }

    /// The Deployment's (and PodDisruptionBudget's) name: the runtime config's, else the revision's.
    pub fn deployment_name(&self) -> String {
        self.config
            .deployment_template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.name.clone())
            .unwrap_or_else(|| self.revision.clone())
    }

    /// The ServiceAccount's name: the runtime config's, else the revision's.
    pub fn service_account_name(&self) -> String {
        self.config
            .service_account_template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.name.clone())
            .unwrap_or_else(|| self.revision.clone())
    }

    /// The Service's name: the runtime config's, else the package's.
    pub fn service_name(&self) -> String {
        self.config
            .service_template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.name.clone())
            .unwrap_or_else(|| self.package.clone())
    }

    /// The Lease the runtime stands for.
    pub fn lease(&self) -> String {
        lease_name(&self.package)
    }

    /// The owners of objects the revision controls.
    pub fn revision_owners(&self) -> Vec<OwnerReference> {
        vec![self.revision_owner.clone()]
    }

    /// The owners of objects every revision of the package shares: the package when known, else the
    /// revision.
    pub fn package_owners(&self) -> Vec<OwnerReference> {
        match &self.package_owner {
            Some(p) => vec![p.clone()],
            None => self.revision_owners(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A revision `provider-nop-abc` of package `provider-nop`.
    pub fn revision(kind: Kind) -> DynamicObject {
        let pkg = kind.name();
        serde_json::from_value(json!({
            "apiVersion": "pkg.crossplane.io/v1",
            "kind": format!("{pkg}Revision"),
            "metadata": {
                "name": "pkg-x-abc",
                "uid": "uid-rev",
                "labels": {"pkg.crossplane.io/package": "pkg-x", "team": "a"},
                "ownerReferences": [{"apiVersion": "pkg.crossplane.io/v1", "kind": pkg, "name": "pkg-x",
                    "uid": "uid-pkg", "controller": true}],
            },
            "spec": {
                "desiredState": "Active", "image": "127.0.0.1:5000/org/pkg-x:v1", "revision": 1,
                "packagePullSecrets": [{"name": "creds"}],
                "tlsServerSecretName": "pkg-x-tls-server", "tlsClientSecretName": "pkg-x-tls-client",
                "commonLabels": {"common": "yes"},
            },
        }))
        .expect("a revision")
    }

    pub fn plan(kind: Kind) -> Plan {
        Plan::of(kind, &revision(kind), "crossplane-system", Default::default()).expect("a plan")
    }

    #[test]
    fn names_labels_and_owners_come_from_the_revision() {
        let p = plan(Kind::Provider);
        assert_eq!(p.package, "pkg-x");
        assert_eq!(p.deployment_name(), "pkg-x-abc");
        assert_eq!(p.service_name(), "pkg-x");
        assert_eq!(p.lease(), "crossplane-leader-election-pkg-x");
        assert_eq!(p.labels["pkg.crossplane.io/revision"], "pkg-x-abc");
        assert_eq!(p.labels["pkg.crossplane.io/provider"], "pkg-x");
        assert_eq!(p.labels["team"], "a");
        assert_eq!(p.labels["common"], "yes");
        assert_eq!(p.pull_secrets, ["creds"]);
        assert_eq!(p.revision_owner.kind, "ProviderRevision");
        assert_eq!(p.package_owners()[0].kind, "Provider");
        assert_eq!(p.service_selector().len(), 1, "every revision of the package");
        assert_eq!(p.selector().len(), 2);
        assert_eq!(
            plan(Kind::Function).selector()["pkg.crossplane.io/function"],
            "pkg-x"
        );
    }

    #[test]
    fn the_runtime_runs_the_resolved_image() {
        assert_eq!(plan(Kind::Provider).image, "127.0.0.1:5000/org/pkg-x:v1");
        let mut rev = revision(Kind::Provider);
        rev.data["status"] = json!({"resolvedImage": "127.0.0.1:5000/mirror/pkg-x:v1"});
        let p = Plan::of(Kind::Provider, &rev, "crossplane-system", Default::default()).expect("a plan");
        assert_eq!(p.image, "127.0.0.1:5000/mirror/pkg-x:v1");
    }

    #[test]
    fn a_runtime_config_names_the_objects() {
        let mut p = plan(Kind::Provider);
        p.config = serde_json::from_value(json!({
            "deploymentTemplate": {"metadata": {"name": "d"}},
            "serviceTemplate": {"metadata": {"name": "s"}},
            "serviceAccountTemplate": {"metadata": {"name": "sa"}},
        }))
        .expect("config");
        assert_eq!(
            (p.deployment_name(), p.service_name(), p.service_account_name()),
            ("d".into(), "s".into(), "sa".into())
        );
    }
}

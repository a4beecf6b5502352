//! Conversion between the cluster-scoped Object's v1alpha1 and v1alpha2 (the hub and storage version),
//! field for field as upstream's `ConvertTo`/`ConvertFrom` (`apis/cluster/object/v1alpha1/conversion.go`):
//!
//! - copied both ways: metadata, status (conditions, observed generation, `atProvider.manifest`),
//!   `writeConnectionSecretToRef`, `providerConfigRef`, `deletionPolicy`, `connectionDetails`,
//!   `forProvider.manifest`, `references` and `readiness.policy`;
//! - `managementPolicy` (v1alpha1) ⇄ `managementPolicies` (v1alpha2): `Default` ⇄ `["*"]` (and any set
//!   holding `*` or all four actions), `ObserveCreateUpdate` ⇄ `[Observe, Create, Update]`, `ObserveDelete`
//!   ⇄ `[Observe, Delete]`, `Observe` ⇄ `[Observe]`. Other v1alpha2 sets have no v1alpha1 spelling and
//!   leave `managementPolicy` unset (the apiserver then defaults it to `Default`), as upstream;
//! - dropped, as upstream: v1alpha1's `providerRef` and `watch`; v1alpha2's `watch`,
//!   `forProvider.deletionPropagationPolicy` and `readiness.celQuery`.
//!
//! Upstream maps unset `managementPolicies` on an object not yet created to `Default`; here an unset list
//! reads as its default `["*"]`, which maps to `Default` too.
//!
//! [`convert`] is the webhook's entry point: one object as JSON, to the desired `apiVersion`.

use std::collections::BTreeSet;

use apis::{ManagementAction, ResourceSpec};
use kube::Resource;
use serde_json::Value;

use crate::types::v1alpha1::{self, ManagementPolicy};
use crate::types::{ObjectFields, ObjectParameters, ObjectStatus, Readiness, cluster};

/// v1alpha1 to v1alpha2 (upstream's `ConvertTo`).
pub fn to_v1alpha2(src: &v1alpha1::Object) -> cluster::Object {
    let s = &src.spec;
    let spec = cluster::ObjectSpec {
        resource_spec: ResourceSpec {
            write_connection_secret_to_ref: s.write_connection_secret_to_ref.clone(),
            provider_config_ref: s.provider_config_ref.clone(),
            management_policies: policies(s.management_policy.unwrap_or_default()),
            deletion_policy: s.deletion_policy,
        },
        object: ObjectFields {
            connection_details: s.connection_details.clone(),
            for_provider: ObjectParameters {
                manifest: s.for_provider.manifest.clone(),
                deletion_propagation_policy: None,
            },
            references: s.references.clone(),
            readiness: Readiness {
                policy: s.readiness.policy,
                cel_query: None,
            },
            watch: false,
        },
    };
    cluster::Object {
        metadata: src.metadata.clone(),
        spec,
        status: Some(status(src.status.as_ref())),
    }
}

/// v1alpha2 to v1alpha1 (upstream's `ConvertFrom`).
pub fn to_v1alpha1(src: &cluster::Object) -> v1alpha1::Object {
    let s = &src.spec;
    let spec = v1alpha1::ObjectSpec {
        write_connection_secret_to_ref: s.resource_spec.write_connection_secret_to_ref.clone(),
        provider_config_ref: s.resource_spec.provider_config_ref.clone(),
        provider_ref: None,
        deletion_policy: s.resource_spec.deletion_policy,
        connection_details: s.object.connection_details.clone(),
        for_provider: v1alpha1::ObjectParameters {
            manifest: s.object.for_provider.manifest.clone(),
        },
        management_policy: policy(&s.resource_spec.management_policies),
        references: s.object.references.clone(),
        readiness: v1alpha1::Readiness {
            policy: s.object.readiness.policy,
        },
        watch: false,
    };
    v1alpha1::Object {
        metadata: src.metadata.clone(),
        spec,
        status: Some(status(src.status.as_ref())),
    }
}

/// Upstream copies the status struct whole, so an absent status converts to an empty one.
fn status(s: Option<&ObjectStatus>) -> ObjectStatus {
    s.cloned().unwrap_or_default()
}

/// v1alpha1's policy as v1alpha2's actions.
pub fn policies(p: ManagementPolicy) -> Vec<ManagementAction> {
    use ManagementAction::*;
    match p {
        ManagementPolicy::Default => vec![All],
        ManagementPolicy::ObserveCreateUpdate => vec![Observe, Create, Update],
        ManagementPolicy::ObserveDelete => vec![Observe, Delete],
        ManagementPolicy::Observe => vec![Observe],
    }
}

/// v1alpha2's actions as v1alpha1's policy, `None` for a set v1alpha1 cannot say.
pub fn policy(actions: &[ManagementAction]) -> Option<ManagementPolicy> {
    use ManagementAction::*;
    let set: BTreeSet<ManagementAction> = actions.iter().copied().collect();
    let has = |a: &[ManagementAction]| a.iter().all(|x| set.contains(x));
    let any = |a: &[ManagementAction]| a.iter().any(|x| set.contains(x));
    if set.contains(&All) || has(&[Observe, Create, Update, Delete]) {
        Some(ManagementPolicy::Default)
    } else if has(&[Observe, Create, Update]) && !set.contains(&Delete) {
        Some(ManagementPolicy::ObserveCreateUpdate)
    } else if has(&[Observe, Delete]) && !any(&[Create, Update]) {
        Some(ManagementPolicy::ObserveDelete)
    } else if set.contains(&Observe) && !any(&[Create, Update, Delete]) {
        Some(ManagementPolicy::Observe)
    } else {
        None
    }
}

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The object has no `apiVersion`, or one this CRD does not serve.
    #[error("cannot convert Object from apiVersion {from:?} to {to:?}: only {v1}/{v2} are served")]
    Unsupported {
        /// The object's `apiVersion`.
        from: String,
        /// The desired one.
        to: String,
        /// The two served versions.
        v1: &'static str,
        /// See `v1`.
        v2: &'static str,
    },
    /// The object does not match its version's schema.
    #[error("Object {name:?} is not a valid {api_version} Object: {source}")]
    Invalid {
        /// Its name.
        name: String,
        /// Its `apiVersion`.
        api_version: String,
        /// The decoding error.
        source: serde_json::Error,
    },
}

fn api_version<K: Resource<DynamicType = ()>>() -> String {
    K::api_version(&()).into_owned()
}

/// Converts one Object (JSON, as the apiserver sends it) to `desired` (`kubernetes.crossplane.io/v1alpha1`
/// or `/v1alpha2`). An object already at `desired` is returned unchanged.
pub fn convert(object: Value, desired: &str) -> Result<Value, ConversionError> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let v1 = api_version::<v1alpha1::Object>();
    let v2 = api_version::<cluster::Object>();
    let unsupported = || ConversionError::Unsupported {
        from: from.clone(),
        to: desired.to_owned(),
        v1: "kubernetes.crossplane.io/v1alpha1",
        v2: "kubernetes.crossplane.io/v1alpha2",
    };
    if ![&v1, &v2].contains(&&from) || ![&v1, &v2].contains(&&desired.to_owned()) {
        return Err(unsupported());
    }
    if from == desired {
        return Ok(object);
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let invalid = |source| ConversionError::Invalid {
        name: name.clone(),
        api_version: from.clone(),
        source,
    };
    let out = if from == v1 {
        let src: v1alpha1::Object = serde_json::from_value(object).map_err(invalid)?;
        serde_json::to_value(to_v1alpha2(&src))
    } else {
        let src: cluster::Object = serde_json::from_value(object).map_err(invalid)?;
        serde_json::to_value(to_v1alpha1(&src))
    };
    out.map_err(invalid)
}

#[cfg(test)]
mod tests {
    use apis::{DeletionPolicy, ProviderConfigReference, SecretReference};
    use serde_json::json;

    use super::*;
    use crate::types::{
        ConnectionDetail, DeletionPropagation, DependsOn, PatchesFrom, ReadinessPolicy, Reference,
    };

    const V1: &str = "kubernetes.crossplane.io/v1alpha1";
    const V2: &str = "kubernetes.crossplane.io/v1alpha2";

    /// Upstream's `TestConvertTo` "converts to v1alpha2" case, as JSON.
    fn upstream_v1alpha1() -> Value {
        json!({
            "apiVersion": V1,
            "kind": "Object",
            "metadata": {"name": "coolobject", "uid": "u-1", "resourceVersion": "7", "labels": {"a": "b"},
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {
                "deletionPolicy": "Orphan",
                "providerConfigRef": {"name": "cfg"},
                "providerRef": {"name": "old"},
                "writeConnectionSecretToRef": {"name": "s", "namespace": "ns"},
                "connectionDetails": [{"apiVersion": "v1", "kind": "Secret", "name": "topsecret",
                                        "fieldPath": "data.token", "toConnectionSecretKey": "token"}],
                "forProvider": {"manifest": {"apiVersion": "v1", "kind": "Secret",
                                             "metadata": {"name": "topsecret"}}},
                "managementPolicy": "Observe",
                "references": [{
                    "dependsOn": {"apiVersion": "v1", "kind": "Secret", "name": "topsecret", "namespace": "coolns"},
                    "patchesFrom": {"apiVersion": "v1", "kind": "Secret", "name": "topsecret", "namespace": "coolns",
                                    "fieldPath": "data.password"},
                    "toFieldPath": "data",
                }],
                "readiness": {"policy": "DeriveFromObject"},
                "watch": true,
            },
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                                "lastTransitionTime": "2026-01-02T03:04:06Z"}],
                "observedGeneration": 3,
                "atProvider": {"manifest": {"kind": "Secret"}},
            },
        })
    }

    fn v1(value: Value) -> v1alpha1::Object {
        serde_json::from_value(value).expect("a v1alpha1 Object")
    }

    #[test]
    fn to_v1alpha2_maps_every_field_as_upstream() {
        let src = v1(upstream_v1alpha1());
        let dst = to_v1alpha2(&src);
        assert_eq!(dst.metadata, src.metadata, "metadata copied whole");
        let r = &dst.spec.resource_spec;
        assert_eq!(r.deletion_policy, DeletionPolicy::Orphan);
        assert_eq!(r.management_policies, vec![ManagementAction::Observe]);
        assert_eq!(
            r.provider_config_ref,
            Some(ProviderConfigReference {
                name: "cfg".into(),
                policy: None
            })
        );
        assert_eq!(
            r.write_connection_secret_to_ref,
            Some(SecretReference {
                name: "s".into(),
                namespace: "ns".into()
            })
        );
        let o = &dst.spec.object;
        assert_eq!(
            o.connection_details,
            vec![ConnectionDetail {
                api_version: Some("v1".into()),
                kind: Some("Secret".into()),
                name: Some("topsecret".into()),
                namespace: None,
                field_path: Some("data.token".into()),
                to_connection_secret_key: Some("token".into()),
            }]
        );
        assert_eq!(o.for_provider.manifest["metadata"]["name"], "topsecret");
        assert_eq!(o.for_provider.deletion_propagation_policy, None);
        let dep = DependsOn {
            api_version: Some("v1".into()),
            kind: Some("Secret".into()),
            name: "topsecret".into(),
            namespace: Some("coolns".into()),
        };
        assert_eq!(
            o.references,
            vec![Reference {
                depends_on: Some(dep.clone()),
                patches_from: Some(PatchesFrom {
                    depends_on: dep,
                    field_path: "data.password".into()
                }),
                to_field_path: Some("data".into()),
            }]
        );
        assert_eq!(o.readiness.policy, ReadinessPolicy::DeriveFromObject);
        assert!(!o.watch, "upstream does not carry watch");
        let status = dst.status.expect("status");
        assert_eq!(status, src.status.expect("status"), "status copied whole");
    }

    #[test]
    fn management_policies_map_both_ways_as_upstream() {
        use ManagementAction::*;
        for (p, actions) in [
            (ManagementPolicy::Default, vec![All]),
            (
                ManagementPolicy::ObserveCreateUpdate,
                vec![Observe, Create, Update],
            ),
            (ManagementPolicy::ObserveDelete, vec![Observe, Delete]),
            (ManagementPolicy::Observe, vec![Observe]),
        ] {
            assert_eq!(policies(p), actions, "{p:?} to v1alpha2");
            assert_eq!(policy(&actions), Some(p), "{actions:?} back to v1alpha1");
        }
        // Sets upstream also recognizes, and those it leaves unset.
        assert_eq!(
            policy(&[Delete, Update, Create, Observe]),
            Some(ManagementPolicy::Default)
        );
        assert_eq!(policy(&[Observe, All]), Some(ManagementPolicy::Default));
        assert_eq!(
            policy(&[Observe, Create, Update, LateInitialize]),
            Some(ManagementPolicy::ObserveCreateUpdate)
        );
        assert_eq!(
            policy(&[Observe, LateInitialize]),
            Some(ManagementPolicy::Observe)
        );
        assert_eq!(policy(&[Observe, Create]), None);
        assert_eq!(policy(&[Observe, Update, Delete]), None);
        assert_eq!(policy(&[LateInitialize]), None);
        assert_eq!(policy(&[]), None);
    }

    #[test]
    fn unset_management_policy_is_default() {
        let mut v = upstream_v1alpha1();
        v["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("managementPolicy");
        let dst = to_v1alpha2(&v1(v));
        assert_eq!(
            dst.spec.resource_spec.management_policies,
            vec![ManagementAction::All]
        );
    }

    #[test]
    fn unknown_management_policy_is_an_error() {
        let mut v = upstream_v1alpha1();
        v["spec"]["managementPolicy"] = json!("ObserveOnly");
        let e = convert(v, V2).expect_err("refused").to_string();
        assert!(e.contains("coolobject") && e.contains("ObserveOnly"), "{e}");
    }

    #[test]
    fn to_v1alpha1_drops_what_v1alpha1_cannot_hold() {
        let mut dst = to_v1alpha2(&v1(upstream_v1alpha1()));
        dst.spec.object.for_provider.deletion_propagation_policy = Some(DeletionPropagation::Foreground);
        dst.spec.object.readiness = Readiness {
            policy: ReadinessPolicy::DeriveFromCelQuery,
            cel_query: Some("true".into()),
        };
        dst.spec.object.watch = true;
        dst.spec.resource_spec.management_policies =
            vec![ManagementAction::Observe, ManagementAction::Create];
        let back = to_v1alpha1(&dst);
        assert_eq!(
            back.spec.management_policy, None,
            "no v1alpha1 spelling: left unset"
        );
        assert_eq!(
            back.spec.readiness.policy,
            ReadinessPolicy::DeriveFromCelQuery,
            "cast as upstream"
        );
        assert!(!back.spec.watch);
        let json = serde_json::to_value(&back).expect("json");
        assert!(
            json["spec"]["forProvider"]
                .get("deletionPropagationPolicy")
                .is_none()
        );
        assert!(json["spec"]["readiness"].get("celQuery").is_none());
        assert!(json["spec"].get("managementPolicy").is_none());
    }

    #[test]
    fn v1alpha1_round_trips_except_the_dropped_fields() {
        let v = upstream_v1alpha1();
        let there = convert(v.clone(), V2).expect("to v1alpha2");
        assert_eq!(there["apiVersion"], V2);
        assert_eq!(there["spec"]["managementPolicies"], json!(["Observe"]));
        assert!(there["spec"].get("managementPolicy").is_none());
        let back = convert(there, V1).expect("back to v1alpha1");
        let mut expected = v;
        expected["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("providerRef");
        expected["spec"]["watch"] = json!(false);
        assert_eq!(back, expected);
    }

    #[test]
    fn v1alpha2_round_trips_except_the_dropped_fields() {
        let v = json!({
            "apiVersion": V2, "kind": "Object",
            "metadata": {"name": "o", "annotations": {"x": "y"}},
            "spec": {
                "deletionPolicy": "Delete",
                "managementPolicies": ["Observe", "Delete"],
                "providerConfigRef": {"name": "default"},
                "forProvider": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap"},
                                "deletionPropagationPolicy": "Orphan"},
                "readiness": {"policy": "AllTrue"},
                "watch": true,
            },
        });
        let there = convert(v.clone(), V1).expect("to v1alpha1");
        assert_eq!(there["spec"]["managementPolicy"], "ObserveDelete");
        let back = convert(there, V2).expect("back");
        let mut expected = v;
        expected["spec"]["forProvider"]
            .as_object_mut()
            .expect("fp")
            .remove("deletionPropagationPolicy");
        expected["spec"]["watch"] = json!(false);
        expected["status"] = json!({"atProvider": {}});
        assert_eq!(back, expected);
    }

    #[test]
    fn same_version_is_unchanged_and_other_versions_are_refused() {
        let v = upstream_v1alpha1();
        assert_eq!(convert(v.clone(), V1).expect("same"), v);
        let e = convert(v.clone(), "kubernetes.crossplane.io/v1beta1").expect_err("refused");
        assert!(e.to_string().contains("v1beta1"), "{e}");
        let mut other = v;
        other["apiVersion"] = json!("example.org/v1");
        assert!(convert(other, V2).is_err());
    }
}

//! End-to-end runs of the engine through its public entry points, each modelled on a
//! documented upstream behaviour.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use composition::input::{PatchType, Resources};
use composition::{
    Composed, ConnectionDetails, DesiredComposed, Error, ObservedComposed, Ready, Request, compose, run,
};
use serde_json::{Value, json};

fn input(v: Value) -> Resources {
    Resources::from_value(&v).unwrap()
}

fn xr() -> Value {
    json!({
        "apiVersion": "example.org/v1alpha1",
        "kind": "XNopBucket",
        "metadata": {"name": "my-xr", "uid": "0f1e", "labels": {"team": "a"}},
        "spec": {"location": "EU", "sizeGb": 10, "crossplane": {}}
    })
}

fn resource<'a>(out: &'a Composed, name: &str) -> &'a Value {
    &out.resources.get(name).unwrap().resource
}

/// The Composition of the end-to-end test: NopResources with patches and transforms.
fn nop_input() -> Resources {
    input(json!({
        "apiVersion": "pt.fn.crossplane.io/v1beta1",
        "kind": "Resources",
        "patchSets": [{"name": "labels", "patches": [
            {"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.labels", "toFieldPath": "metadata.labels"}
        ]}],
        "resources": [
            {
                "name": "bucket",
                "base": {
                    "apiVersion": "nop.crossplane.io/v1alpha1",
                    "kind": "NopResource",
                    "spec": {"forProvider": {"conditionAfter": [{"time": "5s", "conditionType": "Ready", "conditionStatus": "True"}]}}
                },
                "patches": [
                    {"type": "PatchSet", "patchSetName": "labels"},
                    {"fromFieldPath": "spec.location", "toFieldPath": "spec.forProvider.fields.region",
                     "transforms": [{"type": "map", "map": {"EU": "eu-north-1", "US": "us-east-2"}}]},
                    {"fromFieldPath": "spec.sizeGb", "toFieldPath": "spec.forProvider.fields.size",
                     "transforms": [
                        {"type": "math", "math": {"type": "Multiply", "multiply": 1024}},
                        {"type": "convert", "convert": {"toType": "string"}},
                        {"type": "string", "string": {"type": "Format", "fmt": "%sMi"}}
                     ]},
                    {"type": "CombineFromComposite", "toFieldPath": "metadata.annotations[example.org/id]",
                     "combine": {"strategy": "string", "variables": [
                        {"fromFieldPath": "metadata.name"}, {"fromFieldPath": "metadata.uid"}],
                        "string": {"fmt": "%s-%s"}}},
                    {"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider.fields.arn", "toFieldPath": "status.arn"},
                    {"type": "CombineToComposite", "toFieldPath": "status.summary",
                     "combine": {"strategy": "string", "variables": [
                        {"fromFieldPath": "metadata.name"}, {"fromFieldPath": "status.atProvider.fields.arn"}],
                        "string": {"fmt": "%s=%s"}}}
                ],
                "connectionDetails": [
                    {"name": "user", "type": "FromValue", "value": "admin"},
                    {"name": "password", "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "pw"},
                    {"name": "arn", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.fields.arn"}
                ]
            },
            {
                "name": "queue",
                "base": {"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource"},
                "patches": [
                    {"fromFieldPath": "spec.location", "toFieldPath": "spec.forProvider.fields.tier",
                     "transforms": [{"type": "match", "match": {
                        "patterns": [{"type": "regexp", "regexp": "^E", "result": "europe"}],
                        "fallbackValue": "other"}}]}
                ],
                "readinessChecks": [
                    {"type": "MatchString", "fieldPath": "status.atProvider.fields.state", "matchString": "Online"}
                ]
            }
        ]
    }))
}

// Crossplane docs (function-patch-and-transform guide): From* patches render the
// desired composed resources from the XR before they exist; To* patches wait for the
// observed resources; nothing is ready yet.
#[test]
fn first_run_renders_desired_resources() {
    let out = compose(&nop_input(), &xr(), &BTreeMap::new()).unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(
        resource(&out, "bucket"),
        &json!({
            "apiVersion": "nop.crossplane.io/v1alpha1",
            "kind": "NopResource",
            "metadata": {"labels": {"team": "a"}, "annotations": {"example.org/id": "my-xr-0f1e"}},
            "spec": {"forProvider": {
                "conditionAfter": [{"time": "5s", "conditionType": "Ready", "conditionStatus": "True"}],
                "fields": {"region": "eu-north-1", "size": "10240Mi"}
            }}
        })
    );
    assert_eq!(
        resource(&out, "queue")["spec"]["forProvider"]["fields"]["tier"],
        "europe"
    );
    assert_eq!(out.resources.get("bucket").unwrap().ready, Ready::Unspecified);
    assert_eq!(
        out.composite,
        json!({"apiVersion": "example.org/v1alpha1", "kind": "XNopBucket"})
    );
    assert!(out.connection_details.is_empty());
}

// Docs: once composed resources exist, To* patches copy their observed fields to the
// XR, connection details are gathered, readiness is checked, and the desired resources
// keep the observed names.
#[test]
fn later_run_uses_observed_state() {
    let observed = BTreeMap::from([
        (
            "bucket".to_owned(),
            ObservedComposed {
                resource: json!({
                    "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource",
                    "metadata": {"name": "my-xr-abcde"},
                    "status": {"atProvider": {"fields": {"arn": "arn:nop:1"}},
                               "conditions": [{"type": "Ready", "status": "True"}]}
                }),
                connection_details: ConnectionDetails::from([("pw".to_owned(), b"s3cret".to_vec())]),
            },
        ),
        (
            "queue".to_owned(),
            ObservedComposed::from(json!({
                "metadata": {"name": "my-xr-fghij"},
                "status": {"atProvider": {"fields": {"state": "Creating"}},
                           "conditions": [{"type": "Ready", "status": "True"}]}
            })),
        ),
    ]);
    let out = compose(&nop_input(), &xr(), &observed).unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(
        out.composite,
        json!({"apiVersion": "example.org/v1alpha1", "kind": "XNopBucket",
               "status": {"arn": "arn:nop:1", "summary": "my-xr-abcde=arn:nop:1"}})
    );
    assert_eq!(resource(&out, "bucket")["metadata"]["name"], "my-xr-abcde");
    assert_eq!(out.resources.get("bucket").unwrap().ready, Ready::True);
    // The queue's custom check wants state Online, whatever its Ready condition says.
    assert_eq!(out.resources.get("queue").unwrap().ready, Ready::Unspecified);
    assert_eq!(
        out.connection_details,
        ConnectionDetails::from([
            ("user".to_owned(), b"admin".to_vec()),
            ("password".to_owned(), b"s3cret".to_vec()),
            ("arn".to_owned(), b"arn:nop:1".to_vec()),
        ])
    );
}

// Docs, patch policy: an Optional (default) patch with a missing source is skipped
// silently and the resource is still composed.
#[test]
fn optional_missing_source_is_skipped() {
    let r = input(
        json!({"resources": [{"name": "a", "base": {"kind": "K"}, "patches": [
            {"fromFieldPath": "spec.missing", "toFieldPath": "spec.x"},
            {"fromFieldPath": "spec.location", "toFieldPath": "spec.y"}
        ]}]}),
    );
    let out = compose(&r, &xr(), &BTreeMap::new()).unwrap();
    assert!(out.warnings.is_empty());
    assert_eq!(resource(&out, "a"), &json!({"kind": "K", "spec": {"y": "EU"}}));
}

// Docs, patch policy: a Required patch with a missing source blocks the creation of a
// new composed resource (with a warning naming resource and patch index).
#[test]
fn required_missing_source_blocks_new_resource() {
    let r = input(
        json!({"resources": [{"name": "a", "base": {"kind": "K"}, "patches": [
            {"fromFieldPath": "spec.location", "toFieldPath": "spec.y"},
            {"fromFieldPath": "spec.missing", "policy": {"fromFieldPath": "Required"}}
        ]}]}),
    );
    let out = compose(&r, &xr(), &BTreeMap::new()).unwrap();
    assert!(!out.resources.contains_key("a"));
    assert_eq!(
        out.warnings,
        [
            "not adding new composed resource \"a\" to desired state because \"FromCompositeFieldPath\" patch at index 1 has 'policy.fromFieldPath: Required': spec.missing: no such field"
        ]
    );
}

// Upstream: for a resource that already exists, the Required patch is ignored with a
// warning and the resource stays desired.
#[test]
fn required_missing_source_on_existing_resource_is_a_warning() {
    let r = input(
        json!({"resources": [{"name": "a", "base": {"kind": "K"}, "patches": [
            {"fromFieldPath": "spec.missing", "policy": {"fromFieldPath": "Required"}},
            {"type": "ToCompositeFieldPath", "fromFieldPath": "status.nope", "toFieldPath": "status.x",
             "policy": {"fromFieldPath": "Required"}}
        ]}]}),
    );
    let observed = BTreeMap::from([(
        "a".to_owned(),
        ObservedComposed::from(json!({"metadata": {"name": "a-1"}})),
    )]);
    let out = compose(&r, &xr(), &observed).unwrap();
    assert_eq!(
        resource(&out, "a"),
        &json!({"kind": "K", "metadata": {"name": "a-1"}})
    );
    assert_eq!(out.warnings.len(), 2);
    assert!(out.warnings[0].starts_with(
        "cannot render composed resource \"a\" \"FromCompositeFieldPath\" patch at index 0: ignoring 'policy.fromFieldPath: Required'"
    ));
    assert!(out.warnings[1].contains("\"ToCompositeFieldPath\" patch at index 1"));
}

// Upstream: a map key that is not in the map is a fatal error naming the resource and
// the patch index.
#[test]
fn bad_map_key_is_fatal() {
    let r = input(
        json!({"resources": [{"name": "bucket", "base": {"kind": "K"}, "patches": [
            {"fromFieldPath": "metadata.name"},
            {"fromFieldPath": "spec.location", "toFieldPath": "spec.region",
             "transforms": [{"type": "map", "map": {"US": "us-east-2"}}]}
        ]}]}),
    );
    let err = compose(&r, &xr(), &BTreeMap::new()).unwrap_err();
    assert!(
        matches!(&err, Error::Patch { resource, index: 1, patch_type: PatchType::FromCompositeFieldPath, .. } if resource == "bucket")
    );
    assert_eq!(
        err.to_string(),
        "cannot render composed resource \"bucket\" \"FromCompositeFieldPath\" patch at index 1: transform at index 0 returned error: map transform could not resolve: key EU is not found in map"
    );
}

// Upstream: a conversion that fails is a fatal error naming the resource and index.
#[test]
fn failed_conversion_is_fatal() {
    let r = input(
        json!({"resources": [{"name": "db", "base": {"kind": "K"}, "patches": [
            {"fromFieldPath": "spec.location", "toFieldPath": "spec.size",
             "transforms": [{"type": "convert", "convert": {"toType": "int64"}}]}
        ]}]}),
    );
    assert_eq!(
        compose(&r, &xr(), &BTreeMap::new()).unwrap_err().to_string(),
        "cannot render composed resource \"db\" \"FromCompositeFieldPath\" patch at index 0: transform at index 0 returned error: convert transform could not resolve: strconv.ParseInt: parsing \"EU\": invalid syntax"
    );
}

// Upstream: the input is validated first; patch sets must exist.
#[test]
fn invalid_input_is_fatal() {
    let r = input(json!({"resources": [{"name": "a", "patches": [{"type": "ToCompositeFieldPath"}]}]}));
    assert_eq!(
        compose(&r, &xr(), &BTreeMap::new()).unwrap_err().to_string(),
        "invalid Function input: resources[0].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type ToCompositeFieldPath"
    );
    let r = input(
        json!({"resources": [{"name": "a", "base": {}, "patches": [{"type": "PatchSet", "patchSetName": "x"}]}]}),
    );
    assert_eq!(
        compose(&r, &xr(), &BTreeMap::new()).unwrap_err().to_string(),
        "cannot resolve PatchSets: cannot find PatchSet by name x"
    );
    assert_eq!(
        compose(&r, &json!("not an object"), &BTreeMap::new()).unwrap_err(),
        Error::CompositeNotObject
    );
}

// README: a template without base patches the resource a previous pipeline step
// produced; without one, that is an error.
#[test]
fn templates_without_base_patch_previous_steps() {
    let r = input(json!({"resources": [{"name": "a", "patches": [
        {"fromFieldPath": "spec.location", "toFieldPath": "spec.region"}
    ]}]}));
    let err = compose(&r, &xr(), &BTreeMap::new()).unwrap_err();
    assert_eq!(err, Error::NoBase("a".into()));
    let previous = BTreeMap::from([(
        "a".to_owned(),
        DesiredComposed {
            resource: json!({"kind": "FromGoTemplating", "spec": {"keep": true}}),
            ready: Ready::Unspecified,
        },
    )]);
    let (observed, composite) = (BTreeMap::new(), xr());
    let req = Request {
        desired: Some(&previous),
        ..Request::new(&r, &composite, &observed)
    };
    let out = run(&req).unwrap();
    assert_eq!(
        resource(&out, "a"),
        &json!({"kind": "FromGoTemplating", "spec": {"keep": true, "region": "EU"}})
    );
}

// Docs, environment patches: environment.patches run before the resources, between the
// XR and the environment; resources then patch from and to the environment.
#[test]
fn environment_patches() {
    let r = input(json!({
        "environment": {"patches": [
            {"type": "ToEnvironmentFieldPath", "fromFieldPath": "spec.location", "toFieldPath": "location"},
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "defaults.tier", "toFieldPath": "status.tier"}
        ]},
        "resources": [{"name": "a", "base": {"kind": "K"}, "patches": [
            {"type": "FromEnvironmentFieldPath", "fromFieldPath": "location", "toFieldPath": "spec.location"},
            {"type": "ToEnvironmentFieldPath", "fromFieldPath": "status.id", "toFieldPath": "ids.a"}
        ]}]
    }));
    let env = json!({"defaults": {"tier": "gold"}});
    let observed = BTreeMap::from([(
        "a".to_owned(),
        ObservedComposed::from(json!({"status": {"id": "i-1"}})),
    )]);
    let composite = xr();
    let req = Request {
        environment: Some(&env),
        ..Request::new(&r, &composite, &observed)
    };
    let out = run(&req).unwrap();
    assert_eq!(
        out.environment,
        json!({"defaults": {"tier": "gold"}, "location": "EU", "ids": {"a": "i-1"}})
    );
    assert_eq!(out.composite["status"]["tier"], "gold");
    assert_eq!(resource(&out, "a")["spec"]["location"], "EU");

    // Upstream: a Required environment patch whose source is missing is fatal; an
    // Optional one is skipped.
    let r = input(json!({"environment": {"patches": [
        {"type": "ToEnvironmentFieldPath", "fromFieldPath": "spec.nope"},
        {"type": "ToEnvironmentFieldPath", "fromFieldPath": "spec.nope", "policy": {"fromFieldPath": "Required"}}
    ]}}));
    assert_eq!(
        compose(&r, &xr(), &BTreeMap::new()).unwrap_err().to_string(),
        "cannot apply the \"ToEnvironmentFieldPath\" environment patch at index 1: spec.nope: no such field"
    );
}

// Upstream: a readiness check that cannot run is a warning, not a failure.
#[test]
fn readiness_errors_are_warnings() {
    let r = input(json!({"resources": [{"name": "a", "base": {"kind": "K"},
        "readinessChecks": [{"type": "MatchInteger", "fieldPath": "status.count", "matchInteger": 1}]}]}));
    let observed = BTreeMap::from([(
        "a".to_owned(),
        ObservedComposed::from(json!({"status": {"count": "1"}})),
    )]);
    let out = compose(&r, &xr(), &observed).unwrap();
    assert_eq!(out.resources.get("a").unwrap().ready, Ready::Unspecified);
    assert_eq!(
        out.warnings,
        [
            "cannot check readiness of composed resource \"a\": cannot run readiness check at index 0: status.count: not a (int64) number"
        ]
    );
}

// The input round-trips through the wire format unchanged.
#[test]
fn input_round_trips() {
    let v = json!({
        "apiVersion": "pt.fn.crossplane.io/v1beta1",
        "kind": "Resources",
        "patchSets": [{"name": "p", "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "a"}]}],
        "resources": [{
            "name": "r",
            "base": {"kind": "K"},
            "patches": [{"type": "ToCompositeFieldPath", "fromFieldPath": "a", "toFieldPath": "b",
                "policy": {"fromFieldPath": "Required", "toFieldPath": "MergeObjectsAppendArrays"},
                "transforms": [
                    {"type": "match", "match": {"patterns": [{"type": "literal", "literal": "x", "result": null}], "fallbackTo": "Input"}},
                    {"type": "string", "string": {"type": "Regexp", "regexp": {"match": "(.)", "group": 1}}},
                    {"type": "convert", "convert": {"toType": "float64", "format": "quantity"}},
                    {"type": "math", "math": {"type": "ClampMax", "clampMax": 3}}
                ]}],
            "connectionDetails": [{"name": "n", "type": "FromValue", "value": "v"}],
            "readinessChecks": [{"type": "MatchCondition", "matchCondition": {"type": "Synced", "status": "True"}}]
        }]
    });
    let parsed = input(v.clone());
    assert_eq!(serde_json::to_value(&parsed).unwrap(), v);
}

// Unknown enumeration values are rejected when the input is read.
#[test]
fn unknown_types_are_rejected() {
    let err = Resources::from_value(&json!({"resources": [{"name": "a", "patches": [{"type": "Bogus"}]}]}))
        .unwrap_err();
    assert!(err.to_string().contains("unknown variant `Bogus`"), "{err}");
}

//! The reconciler's decision table, row by row (crossplane-runtime's `reconciler_test.go` rows): paused,
//! unsupported policies, orphaning, external name, safe create, observe, create, update, late-init,
//! delete, observe-only, creation pending and the end of a term.
//!
//! The provider's side is a fake [`ExternalClient`] that records its calls. The Kubernetes side is a
//! recording transport under a real [`kube::Client`]: it applies merge patches (checking a
//! `resourceVersion` precondition) and status replaces to one stored object, and accepts Events. It is
//! not an API server; what the writes do on a real one is covered by the providers' tests against the
//! test bed.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use apis::meta::{ANNOTATION_PAUSED, FINALIZER_MANAGED};
use apis::{ManagementAction, ResourceSpec, ResourceStatus};
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use kube::{CustomResource, Resource};
use manager::Fence;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::*;
use crate::external::{ExternalCreation, ExternalDelete, ExternalObservation, ExternalUpdate};
use manager::controller::event::Recorder;

/// A test kind.
#[derive(CustomResource, Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.crossplane.io",
    version = "v1",
    kind = "Thing",
    status = "ThingStatus"
)]
struct ThingSpec {
    #[serde(flatten)]
    resource_spec: ResourceSpec,
    #[serde(default)]
    size: Option<i64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
struct ThingStatus {
    #[serde(flatten)]
    resource_status: ResourceStatus,
}

crate::impl_managed!(cluster Thing);

/// What the fake external client answers, and what it was asked.
#[derive(Clone, Default)]
struct Script {
    observation: ExternalObservation,
    /// The call that fails (`"observe"`, `"create"`, ...).
    fail: Option<&'static str>,
    /// Fail as if the term had ended.
    not_leader: bool,
    /// `observe` late-initializes `spec.size` to this.
    late_init_size: Option<i64>,
    calls: Arc<Mutex<Vec<&'static str>>>,
}

impl Script {
    fn exists(up_to_date: bool) -> Self {
        Self {
            observation: ExternalObservation {
                resource_exists: true,
                resource_up_to_date: up_to_date,
                ..ExternalObservation::default()
            },
            ..Self::default()
        }
    }

    fn record(&self, call: &'static str) -> Result<(), ExternalError> {
        self.calls.lock().expect("calls").push(call);
        match self.fail {
            Some(c) if c == call && self.not_leader => Err(ExternalError::refused(
                call,
                manager::NotLeader {
                    identity: "me".into(),
                    lease: "l".into(),
                    ended_at: "now".into(),
                    reason: "lost".into(),
                },
            )),
            Some(c) if c == call => Err(ExternalError::new(format!("{call} exploded"))),
            _ => Ok(()),
        }
    }
}

struct FakeConnector(Script);

impl ExternalConnector<Thing> for FakeConnector {
    type Client = Script;

    async fn connect(&self, _: &kube::Client, _: &Fence, _: &Thing) -> Result<Script, ExternalError> {
        self.0.record("connect")?;
        Ok(self.0.clone())
    }
}

impl ExternalClient<Thing> for Script {
    async fn observe(&mut self, mr: &mut Thing) -> Result<ExternalObservation, ExternalError> {
        self.record("observe")?;
        if let Some(size) = self.late_init_size {
            mr.spec.size = Some(size);
        }
        Ok(self.observation.clone())
    }

    async fn create(&mut self, mr: &mut Thing) -> Result<ExternalCreation, ExternalError> {
        self.record("create")?;
        meta::set_external_name(mr.meta_mut(), "ext-thing");
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, _: &mut Thing) -> Result<ExternalUpdate, ExternalError> {
        self.record("update")?;
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, _: &mut Thing) -> Result<ExternalDelete, ExternalError> {
        self.record("delete")?;
        Ok(ExternalDelete::default())
    }
}

/// One request the reconciler sent: method, path and JSON body.
#[derive(Debug, Clone)]
struct Sent {
    method: Method,
    path: String,
    body: Value,
}

/// The recording transport: one stored object, patched and status-replaced in place.
#[derive(Clone)]
struct Transport {
    object: Arc<Mutex<Value>>,
    sent: Arc<Mutex<Vec<Sent>>>,
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

impl Transport {
    fn answer(&self, method: &Method, path: &str, body: &Value) -> (u16, Value) {
        let mut object = self.object.lock().expect("object");
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let own = format!("/apis/test.crossplane.io/v1/things/{name}");
        let bump = |o: &mut Value| {
            let rv: u64 = o["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            o["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        };
        match (method, path) {
            (&Method::POST, p) if p.ends_with("/events") => (201, body.clone()),
            (&Method::PATCH, p) if p == own => {
                let want = &body["metadata"]["resourceVersion"];
                if !want.is_null() && *want != object["metadata"]["resourceVersion"] {
                    return (409, json!({"kind": "Status", "code": 409, "reason": "Conflict"}));
                }
                merge(&mut object, body);
                bump(&mut object);
                (200, object.clone())
            }
            (&Method::PUT, p) if p == format!("{own}/status") => {
                object["status"] = body["status"].clone();
                bump(&mut object);
                (200, object.clone())
            }
            _ => (404, json!({"kind": "Status", "code": 404, "reason": "NotFound"})),
        }
    }
}

impl tower::Service<Request<Body>> for Transport {
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let path = parts.uri.path().to_owned();
            let (code, answer) = this.answer(&parts.method, &path, &body);
            this.sent.lock().expect("sent").push(Sent {
                method: parts.method,
                path,
                body,
            });
            let bytes = serde_json::to_vec(&answer).unwrap_or_default();
            let mut resp = Response::new(Body::from(bytes));
            *resp.status_mut() = http::StatusCode::from_u16(code).unwrap_or_default();
            Ok(resp)
        })
    }
}

/// What one reconcile did.
struct Outcome {
    requeue: Requeue,
    calls: Vec<&'static str>,
    sent: Vec<Sent>,
    stored: Thing,
    /// The metrics registry, rendered after the reconcile.
    metrics: String,
}

impl Outcome {
    fn synced(&self) -> (String, String) {
        self.condition("Synced")
    }

    fn condition(&self, type_: &str) -> (String, String) {
        let c = condition::get(self.stored.conditions(), type_);
        c.map(|c| (format!("{:?}", c.status), c.reason.clone()))
            .unwrap_or_default()
    }

    fn events(&self) -> Vec<String> {
        self.sent
            .iter()
            .filter(|s| s.path.ends_with("/events"))
            .map(|s| s.body["reason"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The metadata patches, in order.
    fn metadata_patches(&self) -> Vec<&Value> {
        self.sent
            .iter()
            .filter(|s| s.method == Method::PATCH)
            .map(|s| &s.body)
            .collect()
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.stored.annotations().get(key).map(String::as_str)
    }
}

fn thing() -> Thing {
    let mut t = Thing::new(
        "t",
        ThingSpec {
            resource_spec: ResourceSpec::default(),
            size: None,
        },
    );
    t.metadata.uid = Some("uid-1".into());
    t.metadata.resource_version = Some("1".into());
    t.metadata.generation = Some(1);
    t.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::now(),
    ));
    t
}

fn with_policies(mut t: Thing, actions: &[ManagementAction]) -> Thing {
    t.spec.resource_spec.management_policies = actions.to_vec();
    t
}

fn annotated(mut t: Thing, annotations: &[(&str, &str)]) -> Thing {
    for (k, v) in annotations {
        t.annotations_mut().insert((*k).into(), (*v).into());
    }
    t
}

fn deleting(mut t: Thing, finalizers: &[&str]) -> Thing {
    t.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::now(),
    ));
    t.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    t
}

async fn reconcile_with(mr: Thing, script: Script, options: Options, fence: Fence) -> Outcome {
    let stored = mr.clone();
    reconcile_over(stored, mr, script, options, fence).await
}

/// Reconciles `mr` (as read from the cache) while the server holds `stored`.
async fn reconcile_over(stored: Thing, mr: Thing, script: Script, options: Options, fence: Fence) -> Outcome {
    let transport = Transport {
        object: Arc::new(Mutex::new(serde_json::to_value(&stored).expect("json"))),
        sent: Arc::new(Mutex::new(Vec::new())),
    };
    let client = kube::Client::new(transport.clone(), "default");
    let registry = prometheus::Registry::new();
    let calls = script.calls.clone();
    let shared = Shared {
        connector: Arc::new(FakeConnector(script)),
        options,
        client: manager::fence_client(client, &fence),
        fence,
        recorder: Recorder::new("managed/thing", "test"),
        mr_metrics: ManagedMetrics::new(&registry).expect("managed metrics"),
    };
    let requeue = super::reconcile(&shared, mr).await;
    let stored = serde_json::from_value(transport.object.lock().expect("object").clone()).expect("thing");
    let sent = transport.sent.lock().expect("sent").clone();
    let calls = calls.lock().expect("calls").clone();
    let metrics = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .expect("encode");
    Outcome {
        requeue,
        calls,
        sent,
        stored,
        metrics,
    }
}

async fn reconcile(mr: Thing, script: Script) -> Outcome {
    reconcile_with(mr, script, Options::default(), Fence::never_lapsing("test")).await
}

fn ok(reason: &str) -> (String, String) {
    ("True".into(), reason.into())
}

fn not_ok(reason: &str) -> (String, String) {
    ("False".into(), reason.into())
}

fn is_poll(r: Requeue) -> bool {
    // 60 s ± 10 %.
    matches!(r, Requeue::After(d) if d >= Duration::from_secs(54) && d <= Duration::from_secs(66))
}

#[tokio::test]
async fn paused_by_annotation_or_empty_policies_does_not_connect() {
    for mr in [
        annotated(thing(), &[(ANNOTATION_PAUSED, "true")]),
        with_policies(thing(), &[]),
    ] {
        let o = reconcile(mr, Script::exists(true)).await;
        assert_eq!(o.requeue, Requeue::Never);
        assert!(o.calls.is_empty(), "{:?}", o.calls);
        assert_eq!(o.synced(), not_ok("ReconcilePaused"));
        assert_eq!(o.events(), [reason::PAUSED]);
    }
}

#[tokio::test]
async fn unsupported_policies_are_an_error_without_connecting() {
    use ManagementAction::*;
    let o = reconcile(with_policies(thing(), &[All, Observe]), Script::exists(true)).await;
    assert_eq!(o.requeue, Requeue::Never);
    assert!(o.calls.is_empty());
    assert_eq!(o.synced(), not_ok("ReconcileError"));
    assert_eq!(o.events(), [reason::INVALID_POLICY]);
}

#[tokio::test]
async fn orphaning_delete_removes_only_the_finalizer() {
    let mut mr = deleting(thing(), &[FINALIZER_MANAGED]);
    mr.spec.resource_spec.deletion_policy = apis::DeletionPolicy::Orphan;
    let o = reconcile(mr, Script::exists(true)).await;
    assert_eq!(o.requeue, Requeue::Never);
    assert!(o.calls.is_empty(), "no external call: {:?}", o.calls);
    assert!(o.stored.finalizers().is_empty());
}

#[tokio::test]
async fn external_name_defaults_to_the_name_with_a_precondition() {
    let o = reconcile(thing(), Script::exists(true)).await;
    let first = o.metadata_patches()[0];
    assert_eq!(
        first["metadata"]["annotations"][ANNOTATION_EXTERNAL_NAME],
        json!("t")
    );
    assert_eq!(first["metadata"]["resourceVersion"], json!("1"));
    assert_eq!(o.annotation(ANNOTATION_EXTERNAL_NAME), Some("t"));

    // Without NameAsExternalName, nothing is written before connecting.
    let options = Options {
        name_as_external_name: false,
        ..Options::default()
    };
    let o = reconcile_with(thing(), Script::exists(true), options, Fence::never_lapsing("t")).await;
    assert_eq!(o.annotation(ANNOTATION_EXTERNAL_NAME), None);
}

#[tokio::test]
async fn a_create_of_unknown_outcome_stops_unless_the_name_is_deterministic() {
    let pending = || {
        annotated(
            thing(),
            &[(ANNOTATION_EXTERNAL_CREATE_PENDING, "2026-01-01T00:00:00Z")],
        )
    };
    let o = reconcile(pending(), Script::default()).await;
    assert_eq!(o.requeue, Requeue::Never);
    assert!(o.calls.is_empty(), "{:?}", o.calls);
    assert_eq!(o.condition("Ready"), not_ok("Creating"));
    assert_eq!(o.synced(), not_ok("ReconcileError"));
    let message = condition::get(o.stored.conditions(), "Synced").and_then(|c| c.message.clone());
    assert_eq!(message.as_deref(), Some(decision::CREATE_INCOMPLETE));

    let options = Options {
        deterministic_external_name: true,
        ..Options::default()
    };
    let o = reconcile_with(pending(), Script::default(), options, Fence::never_lapsing("t")).await;
    assert_eq!(o.calls, ["connect", "observe", "create"]);
}

#[tokio::test]
async fn connect_and_observe_failures_are_reconcile_errors_with_backoff() {
    for (fail, event) in [
        ("connect", reason::CANNOT_CONNECT),
        ("observe", reason::CANNOT_OBSERVE),
    ] {
        let script = Script {
            fail: Some(fail),
            ..Script::exists(true)
        };
        let o = reconcile(thing(), script).await;
        assert_eq!(o.requeue, Requeue::Backoff, "{fail}");
        assert_eq!(o.synced(), not_ok("ReconcileError"), "{fail}");
        assert_eq!(o.events(), [event], "{fail}");
        assert!(!o.calls.contains(&"create"));
    }
}

#[tokio::test]
async fn missing_resource_is_created_between_pending_and_succeeded_annotations() {
    let o = reconcile(thing(), Script::default()).await;
    assert_eq!(o.calls, ["connect", "observe", "create"]);
    assert_eq!(o.requeue, Requeue::Immediately);
    assert_eq!(o.condition("Ready"), not_ok("Creating"));
    assert_eq!(o.synced(), ok("ReconcileSuccess"));
    assert_eq!(o.events(), [reason::CREATED]);
    assert!(o.stored.finalizers().iter().any(|f| f == FINALIZER_MANAGED));
    // The pending annotation is written (with a precondition) before create, the succeeded one after.
    let patches = o.metadata_patches();
    let pending = patches
        .iter()
        .position(|p| !p["metadata"]["annotations"][ANNOTATION_EXTERNAL_CREATE_PENDING].is_null())
        .expect("pending written");
    assert!(!patches[pending]["metadata"]["resourceVersion"].is_null());
    let succeeded = patches
        .iter()
        .position(|p| !p["metadata"]["annotations"][ANNOTATION_EXTERNAL_CREATE_SUCCEEDED].is_null())
        .expect("succeeded written");
    assert!(pending < succeeded);
    // The external name create chose is recorded.
    assert_eq!(o.annotation(ANNOTATION_EXTERNAL_NAME), Some("ext-thing"));
}

#[tokio::test]
async fn failed_create_records_the_failure_and_backs_off() {
    let script = Script {
        fail: Some("create"),
        ..Script::default()
    };
    let o = reconcile(thing(), script).await;
    assert_eq!(o.requeue, Requeue::Backoff);
    assert!(o.annotation(ANNOTATION_EXTERNAL_CREATE_FAILED).is_some());
    assert_eq!(o.condition("Ready"), not_ok("Creating"));
    assert_eq!(o.synced(), not_ok("ReconcileError"));
    assert_eq!(o.events(), [reason::CANNOT_CREATE]);
}

#[tokio::test]
async fn up_to_date_resource_is_only_polled() {
    let o = reconcile(thing(), Script::exists(true)).await;
    assert_eq!(o.calls, ["connect", "observe"]);
    assert!(is_poll(o.requeue), "{:?}", o.requeue);
    assert_eq!(o.synced(), ok("ReconcileSuccess"));
    assert!(o.events().is_empty());
    let first = r#"crossplane_managed_resource_first_time_to_reconcile_seconds_count{gvk="test.crossplane.io/v1, Kind=Thing"} 1"#;
    assert!(o.metrics.contains(first), "{}", o.metrics);
}

#[test]
fn lifecycle_metrics_follow_crossplane_runtime() {
    let registry = prometheus::Registry::new();
    let m = ManagedMetrics::new(&registry).expect("metrics");
    let mut t = thing();
    t.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::now() - jiff::SignedDuration::from_secs(3),
    ));
    m.first_time_reconciled(&t);
    // Not ready yet: only remembered as last found up to date.
    m.up_to_date(&t);
    condition::set(
        t.conditions_mut(),
        [Condition::available(), Condition::reconcile_success()],
    );
    // Synced is known now: not a first reconcile any more.
    m.first_time_reconciled(&t);
    m.up_to_date(&t);
    m.up_to_date(&t);
    m.drift(&t);
    m.record_state([&t, &thing()]);
    m.deleted(&deleting(t, &[]));
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .expect("encode");
    let gvk = r#"{gvk="test.crossplane.io/v1, Kind=Thing"}"#;
    for line in [
        format!("crossplane_managed_resource_first_time_to_reconcile_seconds_count{gvk} 1"),
        format!("crossplane_managed_resource_first_time_to_readiness_seconds_count{gvk} 1"),
        format!("crossplane_managed_resource_drift_seconds_count{gvk} 1"),
        format!("crossplane_managed_resource_deletion_seconds_count{gvk} 1"),
        format!("crossplane_managed_resource_exists{gvk} 2"),
        format!("crossplane_managed_resource_ready{gvk} 1"),
        format!("crossplane_managed_resource_synced{gvk} 1"),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    // The readiness histogram saw ~3 s: not in the 1 s bucket, in the 5 s one.
    let bucket = |le: &str, n: u32| {
        format!(
            r#"crossplane_managed_resource_first_time_to_readiness_seconds_bucket{{gvk="test.crossplane.io/v1, Kind=Thing",le="{le}"}} {n}"#
        )
    };
    assert!(text.contains(&bucket("1", 0)), "{text}");
    assert!(text.contains(&bucket("5", 1)), "{text}");
}

#[tokio::test]
async fn poll_hint_shortens_the_poll() {
    let mut script = Script::exists(true);
    script.observation.poll_after = Some(Duration::from_secs(3));
    let o = reconcile(thing(), script).await;
    assert_eq!(o.requeue, Requeue::After(Duration::from_secs(3)));
}

#[tokio::test]
async fn stale_resource_is_updated_unless_policies_forbid() {
    use ManagementAction::*;
    let o = reconcile(thing(), Script::exists(false)).await;
    assert_eq!(o.calls, ["connect", "observe", "update"]);
    assert_eq!(o.events(), [reason::UPDATED]);
    assert!(is_poll(o.requeue));

    for actions in [&[Observe, Create, Delete][..], &[Observe]] {
        let o = reconcile(with_policies(thing(), actions), Script::exists(false)).await;
        assert_eq!(o.calls, ["connect", "observe"], "{actions:?}");
        assert_eq!(o.synced(), ok("ReconcileSuccess"));
    }

    let script = Script {
        fail: Some("update"),
        ..Script::exists(false)
    };
    let o = reconcile(thing(), script).await;
    assert_eq!(o.requeue, Requeue::Backoff);
    assert_eq!(o.events(), [reason::CANNOT_UPDATE]);
}

#[tokio::test]
async fn late_initialized_spec_is_written_back_unless_policies_forbid() {
    use ManagementAction::*;
    let script = || {
        let mut s = Script::exists(true);
        s.observation.resource_late_initialized = true;
        s.late_init_size = Some(7);
        s
    };
    let o = reconcile(thing(), script()).await;
    assert_eq!(o.stored.spec.size, Some(7));
    let spec_patch = o
        .metadata_patches()
        .into_iter()
        .find(|p| !p["spec"].is_null())
        .expect("spec patched");
    assert!(!spec_patch["metadata"]["resourceVersion"].is_null());

    let no_li = with_policies(thing(), &[Observe, Create, Update, Delete]);
    let o = reconcile(no_li, script()).await;
    assert_eq!(o.stored.spec.size, None);
}

#[tokio::test]
async fn observe_only_missing_resource_is_an_error_not_a_create() {
    use ManagementAction::*;
    let o = reconcile(with_policies(thing(), &[Observe]), Script::default()).await;
    assert_eq!(o.calls, ["connect", "observe"]);
    assert_eq!(o.synced(), not_ok("ReconcileError"));
    assert!(is_poll(o.requeue));
}

#[tokio::test]
async fn recently_created_but_unseen_resource_waits() {
    let recent = Timestamp::now().to_string();
    let mr = annotated(
        thing(),
        &[(ANNOTATION_EXTERNAL_CREATE_SUCCEEDED, recent.as_str())],
    );
    let o = reconcile(mr, Script::default()).await;
    assert_eq!(o.calls, ["connect", "observe"]);
    assert_eq!(o.requeue, Requeue::Backoff);
    assert_eq!(o.events(), [reason::PENDING]);
}

#[tokio::test]
async fn deletion_deletes_then_removes_the_finalizer() {
    let o = reconcile(deleting(thing(), &[FINALIZER_MANAGED]), Script::exists(true)).await;
    assert_eq!(o.calls, ["connect", "observe", "delete"]);
    assert_eq!(o.condition("Ready"), not_ok("Deleting"));
    assert_eq!(o.requeue, Requeue::Backoff);
    assert_eq!(o.events(), [reason::DELETED]);
    assert!(
        !o.stored.finalizers().is_empty(),
        "kept until the resource is gone"
    );

    let o = reconcile(deleting(thing(), &[FINALIZER_MANAGED]), Script::default()).await;
    assert_eq!(o.calls, ["connect", "observe"]);
    assert_eq!(o.requeue, Requeue::Never);
    assert!(o.stored.finalizers().is_empty());
    let deleted =
        r#"crossplane_managed_resource_deletion_seconds_count{gvk="test.crossplane.io/v1, Kind=Thing"} 1"#;
    assert!(o.metrics.contains(deleted), "{}", o.metrics);

    let others = deleting(thing(), &[FINALIZER_MANAGED, "example.com/other"]);
    let o = reconcile(others, Script::exists(true)).await;
    assert_eq!(o.calls, ["connect", "observe"]);
    assert_eq!(o.requeue, Requeue::After(Duration::from_secs(5)));

    let script = Script {
        fail: Some("delete"),
        ..Script::exists(true)
    };
    let o = reconcile(deleting(thing(), &[FINALIZER_MANAGED]), script).await;
    assert_eq!(o.requeue, Requeue::Backoff);
    assert_eq!(o.condition("Ready"), not_ok("Deleting"));
    assert_eq!(o.events(), [reason::CANNOT_DELETE]);
}

#[tokio::test]
async fn a_conflicting_write_backs_off_quietly() {
    // The stored object moved on since it was read: the external-name write (with a precondition) fails.
    let mut stored = thing();
    stored.metadata.resource_version = Some("2".into());
    let o = reconcile_over(
        stored,
        thing(),
        Script::exists(true),
        Options::default(),
        Fence::never_lapsing("t"),
    )
    .await;
    assert_eq!(o.requeue, Requeue::Backoff);
    assert!(o.calls.is_empty());
    assert!(o.events().is_empty());
}

#[tokio::test]
async fn the_end_of_the_term_stops_quietly() {
    // The fence is closed: the first write is refused and nothing reaches the transport.
    let fence = Fence::never_lapsing("test");
    fence.revoke("the term ended");
    let o = reconcile_with(thing(), Script::default(), Options::default(), fence).await;
    assert_eq!(o.requeue, Requeue::Never);
    assert!(o.sent.is_empty(), "{:?}", o.sent);

    // An external call refused by the fence: no error condition, no event.
    let script = Script {
        fail: Some("create"),
        not_leader: true,
        ..Script::default()
    };
    let o = reconcile(thing(), script).await;
    assert_eq!(o.requeue, Requeue::Never);
    assert!(o.events().is_empty());
    assert_ne!(o.synced(), not_ok("ReconcileError"));
}

#[tokio::test]
async fn a_connection_secret_that_cannot_be_written_is_a_reconcile_error() {
    // The transport refuses Secrets (404 to every Secret request): publishing fails after observe.
    let mut mr = thing();
    mr.spec.resource_spec.write_connection_secret_to_ref = Some(apis::SecretReference {
        name: "conn".into(),
        namespace: "ns".into(),
    });
    let o = reconcile(mr, Script::exists(true)).await;
    assert_eq!(o.calls, ["connect", "observe"]);
    assert_eq!(o.requeue, Requeue::Backoff);
    assert_eq!(o.synced(), not_ok("ReconcileError"));
    assert_eq!(o.events(), [reason::CANNOT_PUBLISH]);
}

//! The server-side fence (`election::admission`): with the generated ValidatingAdmissionPolicy in
//! place, the apiserver itself refuses every write of the provider's ServiceAccount that does not come
//! from the pod holding the Lease. Shown with pod-bound tokens, as pods get them:
//!
//! - a replica run without leader election (a mistake the client-side fence cannot catch) has every
//!   write refused with a message naming the Lease and its holder;
//! - a leader frozen with SIGSTOP until a standby took over is refused whatever it sends when it
//!   resumes: none of its writes succeeds after the new leader's acquisition;
//! - writes that left the leader inside its term but reach the apiserver after the takeover (held in a
//!   relay meanwhile: the gap no client-side fence can close) are refused with 403, where their
//!   resourceVersions alone would have let them through;
//! - the new leader's writes succeed, and the work is finished.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use common::{ready_and_synced, user_agent};
use election::admission::{Covers, FencePolicy};
use jiff::Timestamp;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, CustomResourceExt, ResourceExt};
use provider_nop::types::NopResource;
use serde_json::json;
use testenv::go_candidate::CandidateOptions;
use testenv::log_dir;
use testenv::support::{Process, eventually, fast_lease_args, install_crds, replica_args, wait_holder};
use testenv::{Cluster, ControlPlane, GoCandidate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const BIN: &str = env!("CARGO_BIN_EXE_provider-nop");
const LEASE: &str = "crossplane-leader-election-provider-nop";
const SA: &str = "provider-nop";
const MESSAGE: &str = "only the pod holding Lease";

/// A replica in pod `pod` (identity `<pod>_1`, controller-runtime's `<hostname>_<uuid>` form), with a
/// token bound to that pod.
async fn replica(c: &Cluster, ns: &str, pod: &str, election: bool) -> Result<Process> {
    replica_via(c, ns, pod, election, None).await
}

/// [`replica`], reaching the apiserver through `relay` when given.
async fn replica_via(
    c: &Cluster,
    ns: &str,
    pod: &str,
    election: bool,
    relay: Option<SocketAddr>,
) -> Result<Process> {
    let mut kubeconfig = c.pod_kubeconfig(ns, SA, pod).await?;
    if let Some(relay) = relay {
        let text = std::fs::read_to_string(&kubeconfig)?;
        let via = kubeconfig.with_extension("relayed.kubeconfig");
        std::fs::write(&via, text.replace(&c.server, &format!("https://{relay}")))?;
        kubeconfig = via;
    }
    let identity = format!("{pod}_1");
    let mut args = replica_args(c, ns, LEASE, &identity);
    if let Some(i) = args.iter().position(|a| a == "--kubeconfig") {
        args[i + 1] = kubeconfig.display().to_string();
    }
    if !election && let Some(a) = args.iter_mut().find(|a| *a == "--leader-election") {
        *a = "--leader-election=false".into();
    }
    args.extend(["--poll", "2s", "--max-reconcile-rate", "50"].map(String::from));
    args.extend(fast_lease_args());
    Ok(Process::start(BIN, &log_dir!("nop-fencing"), &identity, &args)?)
}

fn nop(ns: &str, i: usize) -> Result<NopResource> {
    let mut r = nop_without_secret(ns, i)?;
    r.spec.resource_spec.write_connection_secret_to_ref = Some(apis::SecretReference {
        name: format!("conn-{i:02}"),
        namespace: ns.to_owned(),
    });
    Ok(r)
}

/// A NopResource whose first write is its finalizer (no connection secret to read first).
fn nop_without_secret(ns: &str, i: usize) -> Result<NopResource> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "nop.crossplane.io/v1alpha1",
        "kind": "NopResource",
        "metadata": { "name": format!("{ns}-{i:02}"), "labels": { "test": ns } },
        "spec": {
            "forProvider": {
                "conditionAfter": [{ "time": "1s", "conditionType": "Ready", "conditionStatus": "True" }],
                "connectionDetails": [{ "name": "index", "value": i.to_string() }],
            },
        },
    }))?)
}

async fn all_ready(api: &Api<NopResource>, selector: &ListParams, n: usize) -> Result<bool> {
    let items = api.list(selector).await?.items;
    Ok(items.len() == n && items.iter().all(ready_and_synced))
}

/// A private control plane with the NopResource CRD, a namespace whose ServiceAccount may do anything
/// (RBAC is not what these tests are about: the fence decides), and the fence for that ServiceAccount
/// and the namespace's Lease, in force.
struct Bed {
    cp: ControlPlane,
    c: Cluster,
    client: kube::Client,
    ns: String,
    user: String,
}

async fn setup() -> Result<Bed> {
    // A control plane of its own: kube-apiserver v1.36 stops resolving a built-in paramKind (here Lease)
    // for good once no binding names it (kubernetes/kubernetes#130887), so a second run on a shared
    // apiserver would find the fence open.
    let cp = ControlPlane::private().await?;
    let c = cp.cluster().clone();
    let client = c.client().await?;
    install_crds(&client, &[NopResource::crd()]).await?;
    let ns = c.namespace("nop-fence").await?;
    let name = format!("crossplane-rs-fence-{ns}");

    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "kind": "ServiceAccount", "name": SA, "namespace": ns }],
    }))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &crb)
        .await?;
    let fence = FencePolicy {
        name: &name,
        service_account_namespace: &ns,
        service_account: SA,
        lease_namespace: &ns,
        lease: LEASE,
        covers: Covers::Everything,
    };
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    policies.create(&PostParams::default(), &fence.policy()?).await?;
    bindings.create(&PostParams::default(), &fence.binding()?).await?;

    // The policy is in force once a pod that does not hold the Lease is refused. (While the Lease is
    // missing the policy admits everything; see `FencePolicy::binding`.)
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": LEASE },
        "spec": { "holderIdentity": "", "leaseDurationSeconds": 1 },
    }))?;
    leases.create(&PostParams::default(), &lease).await?;
    let probe = testenv::client_from(&c.pod_kubeconfig(&ns, SA, "nop-probe").await?).await?;
    let probe_cms: Api<ConfigMap> = Api::namespaced(probe, &ns);
    eventually("the fence policy in force", Duration::from_secs(30), || {
        let cms = probe_cms.clone();
        async move {
            let cm: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "probe" } }))?;
            Ok(match cms.create(&PostParams::default(), &cm).await {
                Err(kube::Error::Api(s)) => s.code == 403 && s.message.contains(MESSAGE),
                Ok(_) => {
                    cms.delete("probe", &DeleteParams::default()).await.ok();
                    false
                }
                Err(_) => false,
            })
        }
    })
    .await?;

    let user = fence.user();
    Ok(Bed {
        cp,
        c,
        client,
        ns,
        user,
    })
}

/// Waits until all `n` resources are Ready and Synced; on a time-out the error carries `p`'s log.
async fn wait_ready(api: &Api<NopResource>, selector: &ListParams, n: usize, p: &Process) -> Result<()> {
    eventually(
        &format!("{n} resources Ready"),
        Duration::from_secs(60),
        || async move { all_ready(api, selector, n).await },
    )
    .await
    .with_context(|| p.log_text())
}

#[tokio::test]
async fn the_apiserver_refuses_writes_from_pods_that_do_not_hold_the_lease() -> Result<()> {
    let Bed {
        cp,
        c,
        client,
        ns,
        user,
    } = setup().await?;
    // The leader reaches the apiserver through a holding relay, so that when it is frozen, what it had
    // in flight arrives after the takeover: without it a frozen leader sends nothing late (its own
    // client-side fence stops it when it runs again), and the fence would be judged on nothing.
    let relay = HoldingRelay::start(c.server.trim_start_matches("https://").to_owned()).await?;
    let mut a = replica_via(&c, &ns, "nop-a", true, Some(relay.addr)).await?;
    wait_holder(&client, &ns, LEASE, &a.identity, Duration::from_secs(20))
        .await
        .with_context(|| a.log_text())?;
    let b = replica(&c, &ns, "nop-b", true).await?;
    let rogue = replica(&c, &ns, "nop-c", false).await?;
    let started = Timestamp::now();

    let api: Api<NopResource> = Api::all(client.clone());
    let selector = ListParams::default().labels(&format!("test={ns}"));
    for i in 0..10 {
        api.create(&PostParams::default(), &nop(&ns, i)?).await?;
    }
    wait_ready(&api, &selector, 10, &a).await?;

    // Give the leader work, hold what it sends, and freeze it once the relay holds some of it: those
    // writes passed its client-side fence inside its term. Once the standby has taken over they are
    // delivered while the leader is still frozen; then it runs again.
    let before = relay.held_chunks();
    relay.hold(true);
    for i in 10..15 {
        api.create(&PostParams::default(), &nop(&ns, i)?).await?;
    }
    eventually(
        "the frozen leader's writes held in the relay",
        Duration::from_secs(10),
        || {
            // Five new resources give the leader at least five writes to send (besides its renewals).
            let n = relay.held_chunks();
            async move { Ok(n >= before + 5) }
        },
    )
    .await
    .with_context(|| a.log_text())?;
    a.pause()?;
    let frozen = Timestamp::now();
    wait_holder(&client, &ns, LEASE, &b.identity, Duration::from_secs(30))
        .await
        .with_context(|| b.log_text())?;
    relay.hold(false);
    let ua_a = user_agent(&a.identity);
    eventually(
        "the frozen leader's held writes in the audit log, after the takeover",
        Duration::from_secs(30),
        || {
            let (log, ua_a, ns, b_id) = (c.audit(), ua_a.clone(), ns.clone(), b.identity.clone());
            async move {
                let events = log.read()?.events;
                let acquired = acquired_by(&events, &ns, &b_id)?;
                Ok(events.iter().any(|e| {
                    e.user_agent == ua_a
                        && e.is_write()
                        && e.resource == "nopresources"
                        && e.received > acquired
                }))
            }
        },
    )
    .await
    .with_context(|| a.log_text())?;
    for i in 15..20 {
        api.create(&PostParams::default(), &nop(&ns, i)?).await?;
    }
    a.resume()?;
    let resumed = Timestamp::now();
    wait_ready(&api, &selector, 20, &b).await?;
    // Positive control for "none admitted after the takeover": the resumed leader ran again and its
    // requests reach the audit log (its elector at least reads or tries to renew the Lease).
    eventually(
        "a request of the resumed leader in the audit log",
        Duration::from_secs(30),
        || {
            let (log, ua_a) = (c.audit(), ua_a.clone());
            async move {
                Ok(log
                    .read()?
                    .events
                    .iter()
                    .any(|e| e.user_agent == ua_a && e.received > resumed))
            }
        },
    )
    .await
    .with_context(|| a.log_text())?;

    // The audit log: the writes of the ServiceAccount to this test's objects (Events are exempt).
    let events = c.audit().read()?.events;
    let writes: Vec<&testenv::AuditEvent> = events
        .iter()
        .filter(|e| {
            e.is_write()
                && e.user == user
                && e.received >= started
                && ((e.resource == "nopresources" && e.name.starts_with(&ns))
                    || (e.namespace == ns && e.resource == "secrets"))
        })
        .collect();
    let of = |p: &Process| -> Vec<&testenv::AuditEvent> {
        let ua = user_agent(&p.identity);
        writes.iter().copied().filter(|e| e.user_agent == ua).collect()
    };
    let count = |w: &[&testenv::AuditEvent], keep: &dyn Fn(&testenv::AuditEvent) -> bool| {
        w.iter().filter(|e| keep(e)).count()
    };
    let ok = |e: &testenv::AuditEvent| (200..300).contains(&e.code);
    let refused = |e: &testenv::AuditEvent| e.code == 403;
    // Refused before admission: a stale resourceVersion (the new leader wrote the object first).
    let conflict = |e: &testenv::AuditEvent| e.code == 409;
    let acquired = acquired_by(&events, &ns, &b.identity)?;

    let rogue_writes = of(&rogue);
    let rogue_ok = count(&rogue_writes, &ok);
    let a_writes = of(&a);
    let a_ok_after = count(&a_writes, &|e| ok(e) && e.received > acquired);
    let a_refused_after = count(&a_writes, &|e| refused(e) && e.received > acquired);
    let a_conflict_after = count(&a_writes, &|e| conflict(e) && e.received > acquired);
    let a_after = count(&a_writes, &|e| e.received > acquired);
    let b_writes = of(&b);
    let b_ok = count(&b_writes, &ok);
    let b_refused_after = count(&b_writes, &|e| refused(e) && e.received > acquired);
    println!(
        "rogue: {} writes, {rogue_ok} admitted; frozen leader: {} writes, {a_after} after b's acquisition: \
         {a_ok_after} admitted, {a_refused_after} refused by the fence (403), {a_conflict_after} with 409 \
         (frozen {:.1} s); new leader: {b_ok} admitted, {b_refused_after} refused",
        rogue_writes.len(),
        a_writes.len(),
        resumed.duration_since(frozen).as_secs_f64(),
    );
    ensure!(
        !rogue_writes.is_empty(),
        "the replica without election never tried to write"
    );
    ensure!(
        rogue_ok == 0,
        "{rogue_ok} writes of the replica without election were admitted"
    );
    ensure!(
        rogue.log_text().contains(MESSAGE)
            && rogue
                .log_text()
                .contains("Run every replica with leader election"),
        "the refused replica's log does not say why and what to do:\n{}",
        rogue.log_text()
    );
    // The filter sees the leader's writes (it did the first ten resources' work), so none after the
    // takeover means none was admitted, not that none was looked at.
    let a_ok_before = count(&a_writes, &|e| ok(e) && e.received <= acquired);
    ensure!(
        a_ok_before > 0,
        "no admitted write of the leader before the takeover: the filter sees nothing of it"
    );
    // Positive control for the fence: the frozen leader did send writes that arrived after the
    // takeover, and every one was refused (by the fence, or by the apiserver's stale-resourceVersion
    // check that runs before it), none admitted.
    ensure!(
        a_after > 0,
        "no write of the frozen leader arrived after b took over, so the fence was judged on nothing"
    );
    ensure!(
        a_ok_after == 0,
        "{a_ok_after} writes of the frozen leader were admitted after b took over"
    );
    // Which check refuses each is a race: the new leader reconciles the same objects at once, so a late
    // write usually meets a newer resourceVersion (409, decided before admission) and otherwise the
    // fence (403). Both are counted; `writes_delayed_past_the_takeover_are_refused` below takes a
    // taker that writes nothing, so that only the fence stands in the way there.
    ensure!(
        a_refused_after + a_conflict_after == a_after,
        "of the frozen leader's {a_after} writes after b took over, {a_refused_after} were refused with 403 \
         and {a_conflict_after} with 409, and the rest got another answer; every one must be refused"
    );
    ensure!(b_ok > 0, "the new leader wrote nothing");
    publish(
        "refuses_pods_that_do_not_hold_the_lease",
        json!({
            "rogue_writes": rogue_writes.len(),
            "rogue_admitted": rogue_ok,
            "frozen_leader_writes": a_writes.len(),
            "frozen_leader_admitted_before_takeover": a_ok_before,
            "frozen_leader_admitted_after_takeover": a_ok_after,
            "frozen_leader_writes_after_takeover": a_after,
            "frozen_leader_refused_after_takeover": a_refused_after,
            "frozen_leader_conflict_after_takeover": a_conflict_after,
            "frozen_seconds": resumed.duration_since(frozen).as_secs_f64(),
            "new_leader_admitted": b_ok,
            "new_leader_refused_after_acquisition": b_refused_after,
        }),
    )?;
    // Not asserted: a write the new leader sends within milliseconds of its acquisition can meet the
    // apiserver's copy of the Lease before it caught up, and is refused and retried.

    // The private control plane goes with everything in it.
    drop((a, b, rogue, relay));
    drop(cp);
    Ok(())
}

/// A loopback TCP relay in front of the apiserver whose client-to-server direction can be held: what the
/// client sends in the first [`HoldingRelay::IN_FLIGHT`] of a hold is kept and delivered on release, as
/// a slow network or a frozen process delays a write that had already passed the client-side fence.
/// What it sends later in the hold is dropped with the connection: that is the client giving up (its
/// term lapsed and its requests were cancelled, which closes their TLS sessions), and a frozen process
/// would not have sent it. TLS passes through untouched.
struct HoldingRelay {
    addr: SocketAddr,
    hold: watch::Sender<Option<Instant>>,
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HoldingRelay {
    const IN_FLIGHT: Duration = Duration::from_millis(1500);

    async fn start(upstream: String) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (hold, held) = watch::channel(None::<Instant>);
        let counter = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let held_chunks = counter.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let (upstream, mut held, counter) = (upstream.clone(), held.clone(), counter.clone());
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut down_r, mut down_w) = down.into_split();
                    let (mut up_r, mut up_w) = up.into_split();
                    let responses = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut up_r, &mut down_w).await;
                    });
                    // Read as it arrives, noting whether it came late in a hold; forward in order.
                    let (chunks, mut queue) = tokio::sync::mpsc::unbounded_channel::<(bool, Vec<u8>)>();
                    let arrivals = held.clone();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        while let Ok(n) = down_r.read(&mut buf).await {
                            let (holding, late) = {
                                let since = arrivals.borrow();
                                (
                                    since.is_some(),
                                    since.is_some_and(|since| since.elapsed() > Self::IN_FLIGHT),
                                )
                            };
                            if holding && !late && n > 0 {
                                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            if n == 0 || chunks.send((late, buf[..n].to_vec())).is_err() {
                                break;
                            }
                        }
                    });
                    while let Some((late, chunk)) = queue.recv().await {
                        if late
                            || held.wait_for(Option::is_none).await.is_err()
                            || up_w.write_all(&chunk).await.is_err()
                        {
                            break;
                        }
                    }
                    // Keep the upstream open until the apiserver has answered what was delivered.
                    let _ = held.wait_for(Option::is_none).await;
                    let _ = tokio::time::timeout(Duration::from_secs(10), responses).await;
                });
            }
        });
        Ok(Self {
            addr,
            hold,
            held: held_chunks,
        })
    }

    fn hold(&self, on: bool) {
        self.hold.send_replace(on.then(Instant::now));
    }

    /// Chunks the client sent into a hold, within its in-flight window, so far (kept for delivery).
    fn held_chunks(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The gap the fence closes: the leader's writes are held on their way to the apiserver (they passed its
/// client-side fence), its term lapses, another candidate takes the Lease, and then the writes arrive.
/// The taker is client-go's candidate, which writes nothing but the Lease, so the late writes'
/// resourceVersions still match and only the fence stands between them and the objects.
#[tokio::test]
async fn writes_delayed_past_the_takeover_are_refused() -> Result<()> {
    let Bed {
        cp,
        c,
        client,
        ns,
        user,
    } = setup().await?;
    let relay = HoldingRelay::start(c.server.trim_start_matches("https://").to_owned()).await?;
    let a = replica_via(&c, &ns, "nop-a", true, Some(relay.addr)).await?;
    wait_holder(&client, &ns, LEASE, &a.identity, Duration::from_secs(20))
        .await
        .with_context(|| a.log_text())?;
    let mut taker = CandidateOptions::new(&ns, LEASE, "nop-b_1");
    (taker.lease_duration, taker.renew_deadline, taker.retry_period) = (
        Duration::from_secs(6),
        Duration::from_secs(4),
        Duration::from_secs(1),
    );
    let b = GoCandidate::spawn(&c, &taker)?;
    let api: Api<NopResource> = Api::all(client.clone());
    let selector = ListParams::default().labels(&format!("test={ns}"));
    for i in 0..5 {
        api.create(&PostParams::default(), &nop(&ns, i)?).await?;
    }
    wait_ready(&api, &selector, 5, &a).await?;

    // Hold a's requests, then give it work while its term is still valid: its writes leave it and wait
    // in the relay. Its renewals wait too, so its term lapses and the client-go candidate takes over.
    relay.hold(true);
    let mut held = Vec::new();
    for i in 5..10 {
        let created = api
            .create(&PostParams::default(), &nop_without_secret(&ns, i)?)
            .await?;
        held.push((created.name_any(), created.resource_version()));
    }
    wait_holder(&client, &ns, LEASE, &taker.identity, Duration::from_secs(30)).await?;
    relay.hold(false);

    let ua_a = user_agent(&a.identity);
    let late_writes = |events: &[testenv::AuditEvent], acquired: Timestamp| -> Vec<testenv::AuditEvent> {
        events
            .iter()
            .filter(|e| {
                e.is_write()
                    && e.user == user
                    && e.user_agent == ua_a
                    && e.received > acquired
                    && e.resource != "leases"
                    && e.resource != "events"
            })
            .cloned()
            .collect()
    };
    // Wait for the held writes to arrive (each held create gives the old leader one write to send),
    // rather than for a fixed time.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (events, acquired) = loop {
        let events = c.audit().read()?.events;
        let acquired = acquired_by(&events, &ns, &taker.identity)?;
        if late_writes(&events, acquired).len() >= held.len() || Instant::now() > deadline {
            break (events, acquired);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let late_owned = late_writes(&events, acquired);
    let late: Vec<&testenv::AuditEvent> = late_owned.iter().collect();
    let admitted = late.iter().filter(|e| (200..300).contains(&e.code)).count();
    let refused = late.iter().filter(|e| e.code == 403).count();
    let codes: Vec<String> = late
        .iter()
        .map(|e| {
            let took = e.stage_time.duration_since(e.received).as_secs_f64();
            format!("{} {}/{} {} in {took:.1} s", e.verb, e.resource, e.name, e.code)
        })
        .collect();
    println!(
        "old leader's writes that arrived after the takeover: {} ({admitted} admitted, {refused} refused): {codes:?}",
        late.len()
    );
    ensure!(
        !late.is_empty(),
        "no write of the old leader arrived after the takeover, so this run showed nothing; a's log:\n{}",
        a.log_text()
    );
    // Nothing else wrote these objects, so their resourceVersions matched and only the fence refused
    // them. None took effect: the objects are as they were created.
    ensure!(
        refused == late.len(),
        "{refused} of {} late writes refused by the fence: {codes:?}",
        late.len()
    );
    for (name, rv) in &held {
        let now = api.get(name).await?;
        ensure!(
            now.resource_version() == *rv,
            "{name} was written after it was created (resourceVersion {rv:?} -> {:?}): {codes:?}",
            now.resource_version()
        );
    }
    ensure!(
        admitted == 0,
        "{admitted} late writes of the old leader were admitted: {late:?}"
    );
    publish(
        "refuses_writes_delayed_past_the_takeover",
        json!({
            "held_creates": held.len(),
            "late_writes": late.len(),
            "refused_403": refused,
            "admitted": admitted,
            "objects_unchanged": held.len(),
            "late_write_list": codes,
        }),
    )?;
    drop((a, b, relay));
    drop(cp);
    Ok(())
}

/// Writes a test's figures as JSON to `$FENCING_FIGURES_DIR/<test>.json` (else under the test's
/// target tmp dir), where `cargo xtask fencing` collects them for `docs/fencing.md`.
fn publish(test: &str, figures: serde_json::Value) -> Result<()> {
    let dir = std::env::var_os("FENCING_FIGURES_DIR").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fencing-figures"),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{test}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&figures)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// When `identity`'s term began: its first successful write of the Lease naming itself.
fn acquired_by(events: &[testenv::AuditEvent], ns: &str, identity: &str) -> Result<Timestamp> {
    events
        .iter()
        .filter(|e| {
            e.resource == "leases"
                && e.namespace == ns
                && e.is_write()
                && (200..300).contains(&e.code)
                && e.lock_holder().as_deref() == Some(identity)
        })
        .map(|e| e.received)
        .min()
        .with_context(|| format!("no Lease write by {identity} in the audit log"))
}

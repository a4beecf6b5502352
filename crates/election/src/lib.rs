//! Kubernetes leader election that shares a lock with client-go candidates, with standbys that watch
//! instead of polling and a term guard that fences leader work by the clock.
//!
//! # Use
//!
//! ```no_run
//! # async fn demo(client: kube::Client, registry: prometheus::Registry) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use election::{ElectorBuilder, Leadership, Timings};
//!
//! let timings = Timings::new(Duration::from_secs(60), Duration::from_secs(50), Duration::from_secs(2));
//! let elector = ElectorBuilder::new(client, "crossplane-system", "crossplane-leader-election-core", "pod-a")
//!     .timings(timings)
//!     .metrics(&registry)
//!     .build()?;
//! let mut leadership = elector.leadership();
//! let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
//! let election = tokio::spawn(elector.run(async move { let _ = stop_rx.await; }));
//! while leadership.changed().await.is_ok() {
//!     if let Leadership::Leading { term } = &*leadership.borrow_and_update() {
//!         let guard = term.guard();
//!         // start leader work; it checks guard.check() before every write and stops at guard.lapsed()
//!         # drop(guard);
//!     }
//! }
//! // on SIGTERM: stop leader work first, then let the elector release the lock
//! let _ = stop_tx.send(());
//! election.await??;
//! # Ok(()) }
//! ```
//!
//! # Protocol
//!
//! The record, its writes and its expiry are client-go's (`tools/leaderelection`), so Go and Rust
//! candidates can share one lock:
//!
//! - **Record**: a Lease's `spec.holderIdentity`, `leaseDurationSeconds`, `acquireTime` and `renewTime`
//!   (MicroTime, six fractional digits, UTC) and `leaseTransitions`. `spec.strategy`,
//!   `spec.preferredHolder`, unknown fields, labels and annotations are preserved; the configured labels
//!   are set on every write.
//! - **Transitions** go up by one only when the holder changes (including re-acquiring after one's own
//!   release); `acquireTime` is set on acquisition and kept by renewals.
//! - **Expiry** is judged locally: a record expires `leaseDurationSeconds` (the record's, not the
//!   config's) after this candidate saw it *change*, by its own monotonic clock. Remote timestamps are
//!   written but never read for decisions.
//! - **Acquisition**: holder `""` (released) is acquired at once; a missing lock is created at once; a
//!   record held by someone else is acquired when it expires.
//! - **Writes** are conditional on the last-seen `resourceVersion`. The leader renews every
//!   `retry_period` with a single replace; on 409 it counts `leader_election_slowpath_total`, re-reads
//!   and replaces again if the record is still its own.
//! - **Release** on shutdown (when `release_on_cancel`, after the caller's leader work has stopped):
//!   holder `""`, `leaseDurationSeconds: 1`, times now, transitions kept; only if the record is still
//!   ours; a 409 is retried once after re-reading.
//! - **Locks**: [`LockKind::Lease`], [`LockKind::ConfigMap`] (annotation
//!   `control-plane.alpha.kubernetes.io/leader`) and [`LockKind::ConfigMapAndLease`] (client-go's
//!   MultiLock, for migrating ConfigMap → MultiLock → Lease).
//!
//! Where this crate departs from client-go, on purpose:
//!
//! - **Standbys watch** their lock (field selector on the name) and never poll: a timer fires at the
//!   observed expiry instant; a release seen on the watch is acquired at once; a broken watch re-lists.
//!   The leader uses the same watch to notice foreign writes and steps down at once instead of at its
//!   next renew. A MultiLock watches both objects.
//! - **A standby keeps a connection ready** for its acquiring write: kube's client speaks HTTP/1.1 and
//!   the watch holds one connection, so a following candidate sends `GET /version` at once and then
//!   every [`KEEP_WARM`] (80 s, below the apiserver's 90 s idle timeout), and the acquiring write does
//!   not open a TCP connection and a TLS session inside the handover. It reads no lock and needs no RBAC.
//! - **The term guard** ([`Guard`]) is valid until `sent + renew_deadline`, where `sent` is when the last
//!   successful renew was *sent*; it lapses by the clock even when the apiserver never answers, and the
//!   elector publishes `Following` at that instant.
//! - **A lost term is not the end**: the elector returns to being a standby; the caller decides whether
//!   to exit.
//! - **Requests** each get a timeout of `max(1 s, renew_deadline / 2)`, separate from the renew budget.
//! - **Errors are retried**, never returned: Forbidden is logged with the verb, resource, namespace and
//!   the RBAC rule to add, and retried with a backoff up to 60 s.
//!
//! # Bad input
//!
//! Nothing read from the cluster can make the elector panic. What each case does:
//!
//! | Input | Behaviour |
//! |---|---|
//! | holder `null`, missing, not a string, or `""` | released: acquired at once |
//! | `leaseDurationSeconds` missing, not an integer, 0 or negative | expired as soon as observed (client-go reads it as 0) |
//! | `leaseDurationSeconds` above 1 h | clamped to [`MAX_LEASE_DURATION`] with a warning; instant arithmetic never overflows |
//! | `acquireTime` / `renewTime` missing or unparsable | ignored (times never drive decisions); a renew writes `acquireTime` = now if it was unreadable |
//! | `leaseTransitions` missing or unreadable | read as 0; counts outside `0..=i32::MAX` are clamped; increments saturate |
//! | whole `spec` missing or not an object | an empty record: released |
//! | ConfigMap without the annotation | an empty record: released (client-go) |
//! | ConfigMap annotation not a JSON object | held by [`UNKNOWN_LEADER`] for one *configured* lease duration after it was observed, then overwritten (client-go would fail forever) |
//! | MultiLock objects with different holders | held by [`UNKNOWN_LEADER`] (client-go), expiring like any record |
//! | lock deleted under the leader | the leader re-creates it at once (on the watch's delete event, or a 404 on renew) and its term goes on; standbys wait out the deleted record as if it were still there; if someone else re-created it first, the leader steps down |
//! | lock deleted while nobody leads | created at once by a candidate that saw no live holder; one that saw a live holder waits out that record first |
//! | lock rewritten by someone else (`kubectl edit` of the holder, a release by hand) | the leader steps down at once when the watch shows it; a write that keeps this candidate as holder (labels, duration) is adopted and overwritten by the next renew |
//! | Forbidden | logged as one error naming verb, resource, namespace and the RBAC rule to add; retried with backoff (no crash loop) |
//! | apiserver unreachable (connection refused, DNS, TLS) | logged as one error per streak naming the request, the cause and what to check; retried every retry period (the watch backs off to 30 s); a standby meanwhile |
//! | watch event older than what was already seen | ignored (resourceVersions are compared as integers) |
//!
//! # Observability
//!
//! - Metrics (in the registry given to [`ElectorBuilder::metrics`]): `leader_election_master_status{name}`
//!   and `leader_election_slowpath_total{name}`.
//! - Events on the lock object(s): type Normal, reason `LeaderElection`, note `<identity> became leader` /
//!   `<identity> stopped leading`.
//! - A tracing span `leader_election` with `identity`, `lease` (`namespace/name`), `lock` and, once
//!   leading, `transitions`; one info/warn line per leadership change.
//!
//! # RBAC
//!
//! In the lock's namespace: `get, list, watch, create, update` on `leases` (group `coordination.k8s.io`)
//! and, for ConfigMap locks, on `configmaps` (core group); `create, patch` on `events`
//! (group `events.k8s.io`) for the events.
//!
//! # Server-side fence
//!
//! The guard cannot stop a write that was begun in the term from arriving after it (a frozen process
//! sends it when it resumes). [`admission::FencePolicy`] renders a `ValidatingAdmissionPolicy` that makes
//! the apiserver refuse such writes: it admits a ServiceAccount's writes only from the pod that holds the
//! Lease.
#![forbid(unsafe_code)]

pub mod admission;
mod config;
pub mod duration;
mod elector;
mod error;
mod events;
mod expiry;
mod guard;
mod leadership;
mod lock;
mod metrics;
mod microtime;
mod record;
mod timings;
mod warm;
mod watch;

pub use config::{ConfigError, ElectionConfig, ElectorBuilder, LockKind};
pub use elector::Elector;
pub use error::{Error, error_chain};
pub use guard::{Guard, LapseReason, TermLapsed};
pub use leadership::{Leadership, Term};
pub use record::UNKNOWN_LEADER;
#[cfg(feature = "clap")]
pub use timings::TimingFlags;
pub use timings::{JITTER_FACTOR, MAX_LEASE_DURATION, Timings};
pub use warm::KEEP_WARM;

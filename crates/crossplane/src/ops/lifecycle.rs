//! What a CronOperation or WatchOperation reads from the Operations it created (upstream's
//! `internal/ops/lifecycle`): when the latest was created and the latest succeeded, which still run, and
//! which to delete so that at most the history limits of succeeded and failed ones are kept. Pure
//! functions over the listed Operations.

use apis::condition::{self, ConditionStatus};
use apis::ops::{
    self, Operation, REASON_PIPELINE_RUNNING, REASON_PIPELINE_SUCCESS, RunningOperationRef, TYPE_SUCCEEDED,
};
use jiff::Timestamp;
use kube::ResourceExt;

/// When `op` was created (the epoch when the apiserver gave it no timestamp).
pub fn created(op: &Operation) -> Timestamp {
    op.metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

fn succeeded(op: &Operation) -> Option<&apis::Condition> {
    op.status
        .as_ref()
        .and_then(|s| condition::get(&s.conditions, TYPE_SUCCEEDED))
}

/// Whether `op` is still running: its `Succeeded` condition has reason `PipelineRunning`.
pub fn is_running(op: &Operation) -> bool {
    succeeded(op).is_some_and(|c| c.reason == REASON_PIPELINE_RUNNING)
}

/// When the latest of `ops` was created.
pub fn latest_created(ops: &[Operation]) -> Option<Timestamp> {
    ops.iter().map(created).max()
}

/// When the latest of `ops` succeeded: the transition time of `Succeeded` of those with reason
/// `PipelineSuccess`.
pub fn latest_succeeded(ops: &[Operation]) -> Option<Timestamp> {
    ops.iter()
        .filter_map(succeeded)
        .filter(|c| c.reason == REASON_PIPELINE_SUCCESS)
        .map(|c| c.last_transition_time.0)
        .max()
}

/// The names of the running Operations, sorted.
pub fn running(ops: &[Operation]) -> Vec<String> {
    let mut names: Vec<String> = ops
        .iter()
        .filter(|o| is_running(o))
        .map(|o| o.name_any())
        .collect();
    names.sort();
    names
}

/// References to the running Operations, sorted by name.
pub fn running_refs(ops: &[Operation]) -> Vec<RunningOperationRef> {
    running(ops)
        .into_iter()
        .map(|name| RunningOperationRef { name })
        .collect()
}

/// The Operations to delete: beyond the `keep_succeeded` newest succeeded and the `keep_failed` newest
/// failed ones (a limit of zero or less keeps none). Running ones and ones without an outcome are kept.
pub fn garbage(keep_succeeded: i32, keep_failed: i32, ops: &[Operation]) -> Vec<String> {
    let mut sorted: Vec<&Operation> = ops.iter().collect();
    sorted.sort_by_key(|o| std::cmp::Reverse(created(o)));
    let (mut kept_succeeded, mut kept_failed) = (0, 0);
    let mut out = Vec::new();
    for op in sorted {
        let (kept, limit) = match succeeded(op).map(|c| c.status) {
            Some(ConditionStatus::True) => (&mut kept_succeeded, keep_succeeded),
            Some(ConditionStatus::False) => (&mut kept_failed, keep_failed),
            _ => continue,
        };
        if *kept < limit {
            *kept += 1;
        } else {
            out.push(op.name_any());
        }
    }
    out
}

/// The history limits of a spec, with upstream's defaults.
pub fn limits(successful: Option<i32>, failed: Option<i32>) -> (i32, i32) {
    (
        successful.unwrap_or(ops::DEFAULT_SUCCESSFUL_HISTORY_LIMIT),
        failed.unwrap_or(ops::DEFAULT_FAILED_HISTORY_LIMIT),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use apis::Condition;
    use apis::ops::{OperationSpec, OperationStatus, REASON_PIPELINE_ERROR};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// An Operation named `name`, created `at` seconds after the epoch, with `Succeeded` of `status` and
    /// `reason` (none when `reason` is empty), which changed at `at + 1`.
    pub(crate) fn op(name: &str, at: i64, status: ConditionStatus, reason: &str) -> Operation {
        let mut o = Operation::new(name, OperationSpec::default());
        o.metadata.creation_timestamp = Some(Time(Timestamp::from_second(at).expect("time")));
        if !reason.is_empty() {
            let mut c = Condition::new(TYPE_SUCCEEDED, status, reason);
            c.last_transition_time = Time(Timestamp::from_second(at + 1).expect("time"));
            o.status = Some(OperationStatus {
                conditions: vec![c],
                ..Default::default()
            });
        }
        o
    }

    fn ok(name: &str, at: i64) -> Operation {
        op(name, at, ConditionStatus::True, REASON_PIPELINE_SUCCESS)
    }

    fn failed(name: &str, at: i64) -> Operation {
        op(name, at, ConditionStatus::False, REASON_PIPELINE_ERROR)
    }

    fn running_op(name: &str, at: i64) -> Operation {
        op(name, at, ConditionStatus::Unknown, REASON_PIPELINE_RUNNING)
    }

    #[test]
    fn history_keeps_the_newest_of_each_outcome_and_every_running_one() {
        let ops = vec![
            ok("s1", 10),
            ok("s3", 30),
            ok("s2", 20),
            failed("f1", 15),
            failed("f2", 25),
            running_op("r1", 1),
            op("new", 0, ConditionStatus::Unknown, ""),
        ];
        let mut gone = garbage(2, 1, &ops);
        gone.sort();
        assert_eq!(gone, ["f1", "s1"]);
        let mut none_kept = garbage(0, 0, &ops);
        none_kept.sort();
        assert_eq!(none_kept, ["f1", "f2", "s1", "s2", "s3"]);
        assert!(garbage(10, 10, &ops).is_empty());
    }

    #[test]
    fn latest_times_and_running_operations() {
        let ops = vec![
            ok("a", 10),
            failed("b", 40),
            running_op("d", 30),
            running_op("c", 20),
        ];
        assert_eq!(latest_created(&ops), Timestamp::from_second(40).ok());
        assert_eq!(latest_succeeded(&ops), Timestamp::from_second(11).ok());
        assert_eq!(running(&ops), ["c", "d"]);
        assert_eq!(running_refs(&ops)[0].name, "c");
        assert_eq!(latest_created(&[]), None);
        assert_eq!(latest_succeeded(&[failed("x", 1)]), None);
        assert_eq!(limits(None, None), (3, 1));
        assert_eq!(limits(Some(2), Some(0)), (2, 0));
    }
}

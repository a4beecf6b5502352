//! The NopResource's external client. Only `observe` does anything: a resource being deleted is reported
//! gone (so `delete` is never called); otherwise, for each condition type, the latest `conditionAfter`
//! entry whose time has come is set, the connection details are emitted, and the resource is reported
//! existing and up to date (so `create` and `update` are never called). The observation asks to be
//! polled again when the next entry falls due, so conditions flip on time, not at the next poll.

use std::collections::BTreeMap;
use std::time::Duration;

use apis::{Condition, ConditionStatus};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};
use managed::{
    ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation,
    ExternalUpdate, Managed,
};
use manager::Fence;

use crate::types::{NopResource, ResourceConditionAfter};

/// Connects to nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NopConnector;

/// Talks to nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NopClient;

impl ExternalConnector<NopResource> for NopConnector {
    type Client = NopClient;

    async fn connect(
        &self,
        _: &kube::Client,
        _: &Fence,
        _: &NopResource,
    ) -> Result<NopClient, ExternalError> {
        Ok(NopClient)
    }
}

fn parse_status(s: &str) -> ConditionStatus {
    match s {
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    }
}

/// The conditions due at age `elapsed` (the latest entry per type), and how long until the next entry
/// falls due. Entries with an invalid time are skipped.
pub fn due_conditions(
    entries: &[ResourceConditionAfter],
    elapsed: Duration,
) -> (Vec<&ResourceConditionAfter>, Option<Duration>) {
    let mut latest: BTreeMap<&str, (Duration, &ResourceConditionAfter)> = BTreeMap::new();
    let mut next: Option<Duration> = None;
    for e in entries {
        let Ok(at) = manager::duration::parse_duration(&e.time) else {
            continue;
        };
        if at <= elapsed {
            let slot = latest.entry(e.condition_type.as_str()).or_insert((at, e));
            if at >= slot.0 {
                *slot = (at, e);
            }
        } else {
            let wait = at - elapsed;
            next = Some(next.map_or(wait, |n| n.min(wait)));
        }
    }
    (latest.into_values().map(|(_, e)| e).collect(), next)
}

impl ExternalClient<NopResource> for NopClient {
    async fn observe(&mut self, mr: &mut NopResource) -> Result<ExternalObservation, ExternalError> {
        if mr.meta().deletion_timestamp.is_some() {
            return Ok(ExternalObservation::default());
        }
        let created = mr
            .meta()
            .creation_timestamp
            .as_ref()
            .map_or_else(Timestamp::now, |t| t.0);
        let elapsed = Timestamp::now().duration_since(created).unsigned_abs();
        let (due, next) = due_conditions(&mr.spec.for_provider.condition_after, elapsed);
        let conditions: Vec<Condition> = due
            .into_iter()
            .map(|e| Condition {
                type_: e.condition_type.clone(),
                status: parse_status(&e.condition_status),
                last_transition_time: Time(Timestamp::now()),
                reason: e.condition_reason.clone().unwrap_or_default(),
                message: None,
                observed_generation: None,
            })
            .collect();
        apis::condition::set(mr.conditions_mut(), conditions);
        let fields = mr.spec.for_provider.fields.clone();
        mr.status.get_or_insert_with(Default::default).at_provider.fields = fields;
        let connection_details = mr
            .spec
            .for_provider
            .connection_details
            .iter()
            .map(|d| (d.name.clone(), d.value.clone().into_bytes()))
            .collect();
        tracing::debug!(resource = %mr.name_any(), ?elapsed, ?next, "observed");
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: true,
            connection_details,
            // A little slack so the entry is due when we come back.
            poll_after: next.map(|n| n + Duration::from_millis(50)),
            ..ExternalObservation::default()
        })
    }

    async fn create(&mut self, _: &mut NopResource) -> Result<ExternalCreation, ExternalError> {
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, _: &mut NopResource) -> Result<ExternalUpdate, ExternalError> {
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, _: &mut NopResource) -> Result<ExternalDelete, ExternalError> {
        Ok(ExternalDelete::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(time: &str, t: &str, s: &str) -> ResourceConditionAfter {
        ResourceConditionAfter {
            time: time.into(),
            condition_type: t.into(),
            condition_status: s.into(),
            condition_reason: None,
        }
    }

    #[test]
    fn latest_due_entry_per_type_and_next_deadline() {
        let entries = vec![
            after("30s", "Ready", "True"),
            after("60s", "Ready", "False"),
            after("90s", "Ready", "True"),
            after("90s", "Green", "True"),
            after("bogus", "Blue", "True"),
        ];
        let (due, next) = due_conditions(&entries, Duration::from_secs(10));
        assert!(due.is_empty());
        assert_eq!(next, Some(Duration::from_secs(20)));
        let (due, next) = due_conditions(&entries, Duration::from_secs(61));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].condition_status, "False");
        assert_eq!(next, Some(Duration::from_secs(29)));
        let (due, next) = due_conditions(&entries, Duration::from_secs(100));
        assert_eq!(due.len(), 2);
        assert!(due.iter().any(|e| e.condition_type == "Green"));
        assert!(
            due.iter()
                .any(|e| e.condition_type == "Ready" && e.condition_status == "True")
        );
        assert_eq!(next, None);
    }
}

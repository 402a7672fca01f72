//! The last-change trigger time: when the change that a sync publishes happened.
//!
//! Per service, the tracker keeps the trigger times it saw at the previous sync: the Service's
//! creation time and each pod's Ready transition time. A sync reports the earliest of the times
//! that moved since then. Several changes of one object between two syncs make the value an
//! approximation, a limit upstream accepts too.

use ahash::RandomState;
use dashmap::DashMap;

use super::ServiceId;
use crate::model::{Name, Pod, Service, Timestamp};

#[derive(Debug, Default)]
struct TriggerState {
    service: Option<Timestamp>,
    /// Ready transition times by pod name, sorted by name: a sync walks its pods (sorted by name
    /// too) and this list side by side, with no hashing.
    pods: Vec<(Name, Timestamp)>,
}

impl TriggerState {
    fn get(&self, pod: &str) -> Option<Timestamp> {
        self.pods
            .binary_search_by(|(n, _)| n.as_str().cmp(pod))
            .ok()
            .map(|i| self.pods[i].1)
    }
}

/// Trigger times by service. Thread-safe; concurrent calls of [`compute`](Self::compute) for the
/// same service are not supported (a work queue never runs one key twice at once).
#[derive(Debug, Default)]
pub struct TriggerTimeTracker {
    services: DashMap<ServiceId, TriggerState, RandomState>,
}

impl TriggerTimeTracker {
    pub fn new() -> Self {
        TriggerTimeTracker::default()
    }

    /// The trigger time to publish for this sync of the service, `None` meaning "no annotation",
    /// and the service's new state.
    ///
    /// - The first call for a service returns its creation timestamp.
    /// - Later calls return the earliest pod Ready transition later than the one stored for that
    ///   pod (a pod not stored counts as changed), together with the creation timestamp if it
    ///   moved. When nothing moved, `None`: a spec change of the Service is not measurable.
    ///
    /// The stored state is replaced by this call's: pods not in `pods` are forgotten, and pods
    /// without a Ready transition time are not stored.
    pub fn compute(
        &self,
        namespace: &Name,
        name: &Name,
        service: &Service,
        pods: &[&Pod],
    ) -> Option<Timestamp> {
        let id = ServiceId::from_names(namespace.clone(), name.clone());
        // Taken out and put back: no lock is held while the pods are walked.
        let previous = self.services.remove(&id).map(|(_, state)| state);

        let mut earliest_change: Option<Timestamp> = None;
        let mut note = |t: Timestamp| {
            earliest_change = Some(earliest_change.map_or(t, |e| e.min(t)));
        };

        let mut pod_times: Vec<(Name, Timestamp)> = Vec::with_capacity(pods.len());
        let mut sorted = true;
        let before: &[(Name, Timestamp)] = previous.as_ref().map_or(&[], |p| p.pods.as_slice());
        let mut cursor = 0;
        for pod in pods {
            let Some(t) = pod.ready_transition() else {
                continue;
            };
            let name = &pod.meta.name;
            if pod_times
                .last()
                .is_some_and(|(last, _)| last.as_str() >= name.as_str())
            {
                sorted = false;
            }
            // Side by side with the sorted previous state; a binary search if pods are unsorted.
            let was = if sorted {
                while cursor < before.len() && before[cursor].0.as_str() < name.as_str() {
                    cursor += 1;
                }
                before
                    .get(cursor)
                    .filter(|(n, _)| n == name)
                    .map(|(_, t)| *t)
            } else {
                previous.as_ref().and_then(|p| p.get(name))
            };
            if was.is_none_or(|b| t > b) {
                note(t);
            }
            pod_times.push((name.clone(), t));
        }
        if !sorted {
            pod_times.sort_by(|a, b| a.0.cmp(&b.0));
            pod_times.dedup_by(|a, b| a.0 == b.0);
        }

        let service_time = service.meta.creation_timestamp;
        if let Some(t) = service_time
            && previous
                .as_ref()
                .and_then(|p| p.service)
                .is_none_or(|b| t > b)
        {
            note(t);
        }

        self.services.insert(
            id,
            TriggerState {
                service: service_time,
                pods: pod_times,
            },
        );

        match previous {
            None => service_time,
            Some(_) => earliest_change,
        }
    }

    /// [`compute`](Self::compute) for a sync where only the `changed` pods moved since the last
    /// one (`None`: deleted or no longer selected): the same result without walking every pod.
    /// Returns `None` when the service has no state yet, so the caller must use `compute`.
    pub fn compute_changed(
        &self,
        namespace: &Name,
        name: &Name,
        service: &Service,
        changed: &[(Name, Option<&Pod>)],
    ) -> Option<Option<Timestamp>> {
        let id = ServiceId::from_names(namespace.clone(), name.clone());
        let mut state = self.services.get_mut(&id)?;
        let mut earliest_change: Option<Timestamp> = None;
        let mut note = |t: Timestamp| {
            earliest_change = Some(earliest_change.map_or(t, |e| e.min(t)));
        };
        for (pod_name, pod) in changed {
            let at = state
                .pods
                .binary_search_by(|(n, _)| n.as_str().cmp(pod_name.as_str()));
            match (pod.and_then(|p| p.ready_transition()), at) {
                (None, Ok(i)) => {
                    state.pods.remove(i);
                }
                (None, Err(_)) => {}
                (Some(t), Ok(i)) => {
                    if t > state.pods[i].1 {
                        note(t);
                    }
                    state.pods[i].1 = t;
                }
                (Some(t), Err(i)) => {
                    note(t);
                    state.pods.insert(i, (pod_name.clone(), t));
                }
            }
        }
        let service_time = service.meta.creation_timestamp;
        if let Some(t) = service_time
            && state.service.is_none_or(|b| t > b)
        {
            note(t);
        }
        state.service = service_time;
        Some(earliest_change)
    }

    /// Drops the service's state; its next computation is a first one.
    pub fn delete_service(&self, namespace: &Name, name: &Name) {
        self.services
            .remove(&ServiceId::from_names(namespace.clone(), name.clone()));
    }

    /// The number of services with state.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }
}

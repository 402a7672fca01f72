//! One batch of service syncs: plans computed in parallel, applied in order, results fed back.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::incremental::{Changes, Located};
use super::slice_metrics::SliceSyncMetrics;
use super::{ENDPOINTSLICE_CONTROLLER, Engine, endpoints, mirroring};
use crate::index::ServiceKey;
use crate::model::{AddressType, EndpointSlice, Name, Pod, Service, ServiceType, keys};
use crate::queue::{RetryDecision, WorkQueue};
use crate::reconcile::slices::{
    IncrementalInput, SyncInput, address_types, reconcile, reconcile_incremental,
    set_plan_trigger_time,
};
use crate::reconcile::{Event, Plan};
use crate::sink::apply::{AppliedWrite, TypeStatus, apply_plan};
use crate::sink::{Object, Sink, Verb};
use crate::tracker::EndpointSliceTracker;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncOutcome {
    Success,
    Error,
    /// The informer cache is behind the controller's own writes; retried with backoff.
    Stale,
}

impl SyncOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncOutcome::Success => "success",
            SyncOutcome::Error => "error",
            SyncOutcome::Stale => "stale",
        }
    }
}

/// What one sync of one service did.
#[derive(Clone, Debug)]
pub struct SyncRecord {
    pub at: Duration,
    pub service: ServiceKey,
    pub controller: &'static str,
    pub outcome: SyncOutcome,
    pub message: Option<String>,
    /// Accepted writes, in order, as the API server returned them.
    pub writes: Vec<AppliedWrite>,
    /// Wall-clock time the sync took: computing the plan and carrying it out.
    pub took: Duration,
    /// The sync failed for the last time allowed: the key was dropped from the queue.
    pub dropped: bool,
    /// What upstream's EndpointSlice or mirroring metrics count of this sync; `None` for the
    /// Endpoints controller, and for syncs that reconciled nothing (stale, no selector).
    pub slice_metrics: Option<SliceSyncMetrics>,
    /// A create met a terminating namespace and, as upstream, the rest of the writes were dropped
    /// without an error: a success that did not write all it planned.
    pub abandoned: bool,
    /// Objects the sync deleted that the API server no longer had (answered NotFound): not writes,
    /// but the engine's view drops them at once rather than when the watch says so.
    pub gone: Vec<Object>,
}

impl SyncRecord {
    pub(super) fn new(at: Duration, service: ServiceKey, controller: &'static str) -> Self {
        SyncRecord {
            at,
            service,
            controller,
            outcome: SyncOutcome::Success,
            message: None,
            writes: Vec::new(),
            took: Duration::ZERO,
            dropped: false,
            slice_metrics: None,
            abandoned: false,
            gone: Vec::new(),
        }
    }
}

enum Prepared {
    /// Nothing to do: the service has no selector or is an ExternalName.
    Nothing,
    /// The service is gone.
    Gone,
    Stale,
    /// The metrics are boxed to keep the enum small; they are moved to the record.
    Plan(Plan, Box<SliceSyncMetrics>),
}

pub(super) const STALE_MESSAGE: &str = "EndpointSlice informer cache is out of date";

/// Records a sync's own slice writes, and the slices it found gone, in its controller's generation
/// tracker.
pub(super) fn track_own_writes(tracker: &EndpointSliceTracker, record: &SyncRecord) {
    for w in &record.writes {
        if let Object::EndpointSlice(slice) = &w.object {
            match w.verb {
                Verb::Delete => tracker.expect_deletion(slice),
                Verb::Create | Verb::Update => tracker.update(slice),
            }
        }
    }
    for slice in record.gone.iter().filter_map(Object::as_slice) {
        tracker.expect_deletion(slice);
    }
}

impl SyncRecord {
    /// The queue's side of a finished sync: the key's failures are forgotten on success; on error
    /// it is retried with backoff, or dropped once out of retries.
    pub(super) fn settle(&mut self, queue: &WorkQueue<ServiceKey>, error: Option<String>) {
        match error {
            None => queue.forget(&self.service),
            Some(message) => {
                self.dropped = matches!(queue.retry_or_drop(&self.service), RetryDecision::Dropped);
                self.message = Some(message);
            }
        }
    }
}

/// A key taken from one controller's queue.
enum Job {
    Slices(ServiceKey),
    Endpoints(ServiceKey),
    Mirroring(ServiceKey),
}

/// A job's plan.
enum Planned {
    Slices(ServiceKey, Prepared),
    Endpoints(ServiceKey, endpoints::Prepared),
    Mirroring(ServiceKey, mirroring::Prepared),
    /// The job's controller does not run.
    Nothing(ServiceKey),
}

impl Engine {
    /// Takes the services that are ready now, reconciles them in parallel and applies their plans
    /// to `sink`, in the order they became ready.
    pub fn sync_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.mark_pods_on_changed_nodes();
        self.recompute_topology_if_needed();
        let max = self.options.max_batch;
        let mut jobs: Vec<Job> = self
            .queue
            .pop_ready(max)
            .into_iter()
            .map(Job::Slices)
            .collect();
        if let Some(controller) = &self.endpoints {
            jobs.extend(
                controller
                    .queue
                    .pop_ready(max)
                    .into_iter()
                    .map(Job::Endpoints),
            );
        }
        if let Some(controller) = &self.mirroring {
            let keys = controller.queue.pop_ready(max);
            jobs.extend(keys.into_iter().map(Job::Mirroring));
        }
        if jobs.is_empty() {
            return Vec::new();
        }
        let timed = |job: &Job| {
            let started = Instant::now();
            let store = &self.endpoints_store;
            let planned = match (job, &self.endpoints, &self.mirroring) {
                (Job::Slices(key), _, _) => Planned::Slices(key.clone(), self.prepare(key)),
                (Job::Endpoints(key), Some(c), _) => {
                    Planned::Endpoints(key.clone(), c.prepare(&self.index, store, key))
                }
                (Job::Mirroring(key), _, Some(c)) => {
                    Planned::Mirroring(key.clone(), c.prepare(&self.index, store, key))
                }
                (Job::Endpoints(key) | Job::Mirroring(key), _, _) => Planned::Nothing(key.clone()),
            };
            (planned, started.elapsed())
        };
        // One job is planned here: handing it to a worker costs more than it saves.
        let planned: Vec<(Planned, Duration)> = match &self.pool {
            Some(pool) if jobs.len() > 1 => pool.install(|| jobs.par_iter().map(timed).collect()),
            _ => jobs.iter().map(timed).collect(),
        };
        let at = self.clock.now();
        let mut records = Vec::with_capacity(planned.len());
        for (planned, planning) in planned {
            let started = Instant::now();
            let mut record = match planned {
                Planned::Slices(key, prepared) => {
                    let record = self.finish(&key, prepared, sink, at);
                    self.queue.done(&key);
                    record
                }
                Planned::Endpoints(key, prepared) => match &self.endpoints {
                    Some(c) => {
                        let mut events = Vec::new();
                        let record =
                            c.finish(&key, prepared, sink, &self.endpoints_store, at, &mut events);
                        self.events.lock().extend(events);
                        self.observe_own_writes(&record);
                        record
                    }
                    None => SyncRecord::new(at, key, endpoints::ENDPOINTS_CONTROLLER),
                },
                Planned::Mirroring(key, prepared) => match &self.mirroring {
                    Some(c) => {
                        let mut events = Vec::new();
                        let record = c.finish(&key, prepared, sink, at, &mut events);
                        self.events.lock().extend(events);
                        if self.options.observe_writes {
                            track_own_writes(&c.tracker, &record);
                        }
                        self.observe_own_writes(&record);
                        record
                    }
                    None => SyncRecord::new(at, key, mirroring::MIRRORING_CONTROLLER),
                },
                Planned::Nothing(key) => SyncRecord::new(at, key, ENDPOINTSLICE_CONTROLLER),
            };
            record.took = planning + started.elapsed();
            self.count(&record);
            self.check_after_sync(&record);
            records.push(record);
        }
        records
    }

    fn count(&self, record: &SyncRecord) {
        let mut stats = self.stats.lock();
        stats.syncs += 1;
        match record.outcome {
            SyncOutcome::Success => {}
            SyncOutcome::Error => stats.sync_errors += 1,
            SyncOutcome::Stale => stats.stale += 1,
        }
        stats.dropped += u64::from(record.dropped);
    }

    /// Everything of a sync that reads only: the plan.
    fn prepare(&self, key: &ServiceKey) -> Prepared {
        let Some(service) = self.index.services().get(&key.namespace, &key.name) else {
            // Deleted: forget what the trackers knew; the garbage collector removes its slices.
            self.slices.delete_service(&key.namespace, &key.name);
            self.triggers
                .lock()
                .delete_service(&key.namespace, &key.name);
            self.topology.write().remove_service(&key.to_string());
            // The locator keeps the slices until the garbage collector's deletions arrive.
            return Prepared::Gone;
        };
        if service.service_type == ServiceType::ExternalName || service.selector.is_none() {
            return Prepared::Nothing;
        }
        let slices = self.managed_slices(key);
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        // Upstream's newer form: a Service recreated under the same name starts afresh.
        if self.slices.stale_slices_for_uid(
            &key.namespace,
            &key.name,
            &service.meta.uid,
            &slice_refs,
        ) {
            return Prepared::Stale;
        }
        let changes = self.changes.take(key);
        let planned = |plan: Plan, incremental: bool| {
            let metrics = SliceSyncMetrics::of_service(
                &service,
                &slice_refs,
                &plan,
                &self.options.reconcile,
                incremental,
            );
            Prepared::Plan(plan, Box::new(metrics))
        };
        if !changes.full
            && self.options.incremental
            && let Some(plan) = self.prepare_incremental(key, &service, &changes, &slice_refs)
        {
            return planned(plan, true);
        }
        let plan = self.full_plan(key, &service, &slice_refs, |pods| {
            self.triggers
                .lock()
                .compute(&key.namespace, &key.name, &service, pods)
        });
        planned(plan, false)
    }

    /// The slices of `key` that the EndpointSlice controller reconciles: managed, not being
    /// deleted.
    pub(super) fn managed_slices(&self, key: &ServiceKey) -> Vec<Arc<EndpointSlice>> {
        self.index
            .slices()
            .for_service(key)
            .into_iter()
            .filter(|s| {
                s.meta.deletion_timestamp.is_none()
                    && s.managed_by().map(|m| m.as_str()) == Some(keys::ENDPOINTSLICE_CONTROLLER)
            })
            .collect()
    }

    /// The full reconcile of a service over the index, with the trigger time `trigger_time` gives
    /// for its pods.
    pub(super) fn full_plan(
        &self,
        key: &ServiceKey,
        service: &Service,
        slices: &[&EndpointSlice],
        trigger_time: impl FnOnce(&[&Pod]) -> Option<crate::model::Timestamp>,
    ) -> Plan {
        let nodes = self.nodes.read().clone();
        let topology = self.topology.read();
        // The members are borrowed under the namespace's read lock, not cloned.
        self.index.with_members(key, |pods| {
            reconcile(&SyncInput {
                service,
                pods,
                nodes: nodes.as_ref(),
                slices,
                trigger_time: trigger_time(pods),
                topology: &topology,
                options: &self.options.reconcile,
            })
        })
    }

    /// The plan of a sync where only some pods changed since the last successful one, computed
    /// from those pods and the slices holding them. `None` when the incremental reconciler's
    /// preconditions do not hold: the caller reconciles in full.
    fn prepare_incremental(
        &self,
        key: &ServiceKey,
        service: &Service,
        changes: &Changes,
        slices: &[&EndpointSlice],
    ) -> Option<Plan> {
        let selector = service.selector.as_ref()?;
        // The changed pods as they are now: None when gone or no longer selected.
        let current: Vec<(Name, Option<Arc<Pod>>)> = changes
            .pods
            .iter()
            .map(|name| {
                let pod = self
                    .index
                    .pods()
                    .get(&key.namespace, name)
                    .filter(|p| p.meta.labels.matches(selector));
                (name.clone(), pod)
            })
            .collect();
        let changed: Vec<(Name, Option<&Pod>)> = current
            .iter()
            .map(|(n, p)| (n.clone(), p.as_deref()))
            .collect();
        let position: HashMap<&str, usize, ahash::RandomState> = slices
            .iter()
            .enumerate()
            .map(|(i, s)| (s.meta.name.as_str(), i))
            .collect();
        // Where each changed pod's endpoints are, looked up once: `located[c * types + t]`. A pod
        // held by several slices (duplicates someone left) cannot be placed incrementally.
        let types = address_types(service);
        let mut located: Vec<Option<usize>> = Vec::with_capacity(changed.len() * types.len());
        for (name, _) in &changed {
            for at in &types {
                located.push(match self.locator.locate(key, name, at) {
                    Located::Nowhere => None,
                    Located::In(slice) => Some(*position.get(slice.as_str())?),
                    Located::Ambiguous => return None,
                });
            }
        }
        let locate = |name: &str, at: &AddressType| {
            let c = changed
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
                .ok()?;
            let t = types.iter().position(|t| t == at)?;
            located[c * types.len() + t]
        };
        let nodes = self.nodes.read().clone();
        let topology = self.topology.read();
        let mut plan = reconcile_incremental(&IncrementalInput {
            service,
            changed: &changed,
            nodes: nodes.as_ref(),
            slices,
            locate: &locate,
            // Set below, once the plan is known to be incremental: computing it moves the
            // tracker's state, which the full path would then miss.
            trigger_time: None,
            topology: &topology,
            options: &self.options.reconcile,
        })?;
        let trigger_time =
            self.triggers
                .lock()
                .compute_changed(&key.namespace, &key.name, service, &changed)?;
        set_plan_trigger_time(&mut plan, trigger_time);
        self.stats.lock().incremental_syncs += 1;
        Some(plan)
    }

    /// Applies a prepared sync and feeds its results back: to the trackers, the index (as the
    /// watch would), and the queue.
    fn finish(
        &self,
        key: &ServiceKey,
        prepared: Prepared,
        sink: &dyn Sink,
        at: Duration,
    ) -> SyncRecord {
        let mut record = SyncRecord::new(at, key.clone(), ENDPOINTSLICE_CONTROLLER);
        // Whether the slices are now what a full sync would leave: the next sync may then be
        // incremental.
        let mut complete = false;
        let error = match prepared {
            Prepared::Nothing => None,
            Prepared::Gone => {
                record.slice_metrics = Some(SliceSyncMetrics::deleted());
                None
            }
            Prepared::Stale => {
                record.outcome = SyncOutcome::Stale;
                Some(STALE_MESSAGE.to_string())
            }
            Prepared::Plan(mut plan, mut metrics) => {
                let outcome = apply_plan(sink, &mut plan);
                metrics.applied(&outcome);
                record.slice_metrics = Some(*metrics);
                let error = outcome.error_message();
                record.abandoned = outcome
                    .per_type
                    .iter()
                    .any(|t| t.status == TypeStatus::NamespaceTerminating);
                complete = error.is_none() && !record.abandoned;
                record.writes = outcome.records;
                record.gone = outcome.gone;
                if self.options.observe_writes {
                    track_own_writes(&self.slices, &record);
                }
                self.topology
                    .write()
                    .apply(&key.to_string(), &plan.topology_changes);
                self.observe_own_writes(&record);
                let mut events = plan.events;
                if let Some(message) = &error {
                    record.outcome = SyncOutcome::Error;
                    events.push(Event::warning(
                        "FailedToUpdateEndpointSlices",
                        format!("Error updating Endpoint Slices for Service {key}: {message}"),
                    ));
                }
                self.events
                    .lock()
                    .extend(events.into_iter().map(|e| (key.clone(), e)));
                error
            }
        };
        if complete {
            self.changes.synced(key);
        } else if error.is_some() || record.abandoned {
            self.changes.failed(key);
        } else {
            // Gone, or nothing to keep for it: nothing to remember either.
            self.changes.forget(key);
        }
        record.settle(&self.queue, error);
        record
    }
}

//! The EndpointSlice controller inside the engine: its queue (upstream's `endpoint_slice` queue
//! and rate limiter), generation and trigger-time trackers, topology cache, and what it remembers
//! between syncs so that the next one can be incremental.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::Cluster;
use super::batch::BatchWindows;
use super::controller::{Controller, Handlers, PodRules, STALE_MESSAGE, SyncOutcome, SyncRecord};
use super::incremental::{ChangeLog, Changes, Located, Locator};
use super::slice_metrics::SliceSyncMetrics;
use crate::index::{Index, ServiceKey, is_managed};
use crate::model::{
    AddressType, EndpointSlice, Labels, Name, Node, Pod, Service, ServiceType, keys,
};
use crate::queue::{Clock, QueueConfig, WorkQueue};
use crate::reconcile::slices::{
    IncrementalInput, SyncInput, address_types, reconcile, reconcile_incremental,
    set_plan_trigger_time,
};
use crate::reconcile::topology::TopologyCache;
use crate::reconcile::{Event, Plan};
use crate::sink::Sink;
use crate::tracker::{self, EndpointSliceTracker, TriggerTimeTracker};

/// The controller name in sync records and events.
pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice";

pub(super) struct EndpointSliceController {
    pub queue: WorkQueue<ServiceKey>,
    /// `--endpointslice-updates-batch-period`: the delay of pod-triggered syncs, fixed or adaptive.
    batch: BatchWindows,
    /// The generations of the slices this controller wrote (upstream's endpointSliceTracker).
    tracker: EndpointSliceTracker,
    triggers: Mutex<TriggerTimeTracker>,
    /// What changed since each service's last sync.
    changes: ChangeLog,
    /// Which slices hold each pod's endpoints.
    locator: Locator,
    topology: RwLock<TopologyCache>,
    /// Nodes changed in a way that moves zone ratios since topology was last computed.
    topology_dirty: AtomicBool,
}

pub(super) enum Prepared {
    /// Nothing to do: the service has no selector or is an ExternalName.
    Nothing,
    /// The service is gone.
    Gone,
    Stale,
    /// The metrics are boxed to keep the enum small; they are moved to the record.
    Plan(Plan, Box<SliceSyncMetrics>),
}

/// The slices of `key` that the EndpointSlice controller reconciles: managed, not being
/// deleted. The index's store holds only slices labelled as managed by this controller.
pub(super) fn managed_slices(index: &Index, key: &ServiceKey) -> Vec<Arc<EndpointSlice>> {
    let store = index.slices();
    debug_assert_eq!(store.manager(), keys::ENDPOINTSLICE_CONTROLLER);
    let mut slices = store.for_service(key);
    slices.retain(|s| s.meta.deletion_timestamp.is_none());
    slices
}

impl EndpointSliceController {
    pub fn new(batch: BatchWindows, clock: Arc<dyn Clock>) -> Self {
        EndpointSliceController {
            queue: WorkQueue::new(QueueConfig::default(), clock),
            batch,
            tracker: EndpointSliceTracker::new(),
            triggers: Mutex::new(TriggerTimeTracker::new()),
            changes: ChangeLog::default(),
            locator: Locator::default(),
            topology: RwLock::new(TopologyCache::new()),
            // Read the nodes before the first sync, even when there are none: with no node seen,
            // upstream's cache has no zone ratios and refuses hints for insufficient node
            // information, not for nodes in one zone.
            topology_dirty: AtomicBool::new(true),
        }
    }

    /// The full reconcile of a service over the index, with the trigger time `trigger_time` gives
    /// for its pods.
    pub fn full_plan(
        &self,
        cx: &Cluster,
        key: &ServiceKey,
        service: &Service,
        slices: &[&EndpointSlice],
        trigger_time: impl FnOnce(&[&Pod]) -> Option<crate::model::Timestamp>,
    ) -> Plan {
        let nodes = cx.index.nodes().snapshot();
        let topology = self.topology.read();
        // The members are borrowed under the namespace's read lock, not cloned.
        cx.index.with_members(key, |pods| {
            reconcile(&SyncInput {
                service,
                pods,
                nodes: nodes.as_ref(),
                slices,
                trigger_time: trigger_time(pods),
                topology: &topology,
                options: &cx.options.reconcile,
            })
        })
    }

    /// The trigger time from the changed pods alone, as they are now; `None` when the tracker
    /// holds nothing for the service yet and needs every pod.
    fn trigger_time_of_changed(
        &self,
        key: &ServiceKey,
        service: &Service,
        changed: &[(Name, Option<&Pod>)],
    ) -> Option<Option<crate::model::Timestamp>> {
        self.triggers
            .lock()
            .compute_changed(&key.namespace, &key.name, service, changed)
    }

    /// The plan of a sync where only some pods changed since the last successful one, computed
    /// from those pods and the slices holding them. `None` when the incremental reconciler's
    /// preconditions do not hold: the caller reconciles in full.
    fn prepare_incremental(
        &self,
        cx: &Cluster,
        key: &ServiceKey,
        service: &Service,
        changed: &[(Name, Option<&Pod>)],
        left_out: &[&Pod],
        slices: &[&EndpointSlice],
    ) -> Option<Plan> {
        let position: HashMap<&str, usize, ahash::RandomState> = slices
            .iter()
            .enumerate()
            .map(|(i, s)| (s.meta.name.as_str(), i))
            .collect();
        // Where each changed pod's endpoints are, looked up once: `located[c * types + t]`. A pod
        // held by several slices (duplicates someone left) cannot be placed incrementally.
        let types = address_types(service);
        let mut located: Vec<Option<usize>> = Vec::with_capacity(changed.len() * types.len());
        for (name, _) in changed {
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
        let nodes = cx.index.nodes().snapshot();
        let topology = self.topology.read();
        let mut plan = reconcile_incremental(&IncrementalInput {
            service,
            changed,
            left_out,
            nodes: nodes.as_ref(),
            slices,
            locate: &locate,
            // Set below, once the plan is known to be incremental: computing it moves the
            // tracker's state, which the full path would then miss.
            trigger_time: None,
            topology: &topology,
            options: &cx.options.reconcile,
        })?;
        let trigger_time = self.trigger_time_of_changed(key, service, changed)?;
        set_plan_trigger_time(&mut plan, trigger_time);
        cx.stats.lock().incremental_syncs += 1;
        Some(plan)
    }
}

/// The changed pods as they are now: `None` when gone or no longer selected.
fn changed_now(
    cx: &Cluster,
    key: &ServiceKey,
    selector: &Labels,
    changes: &Changes,
) -> Vec<(Name, Option<Arc<Pod>>)> {
    changes
        .pods
        .iter()
        .map(|name| {
            let pod = cx
                .index
                .pods()
                .get(&key.namespace, name)
                .filter(|p| p.meta.labels.matches(selector));
            (name.clone(), pod)
        })
        .collect()
}

/// The pods the last sync left out for a missing node that did not change since, as they are;
/// `None` when one is gone (its change should have been noted).
fn left_out_now(
    cx: &Cluster,
    key: &ServiceKey,
    selector: &Labels,
    changes: &Changes,
) -> Option<Vec<Arc<Pod>>> {
    changes
        .left_out
        .iter()
        .filter(|name| changes.pods.binary_search(name).is_err())
        .map(|name| {
            cx.index
                .pods()
                .get(&key.namespace, name)
                .filter(|p| p.meta.labels.matches(selector))
        })
        .collect()
}

/// Nothing the reconcilers read differs: a watch echo of the engine's own write, a relist or a
/// resync, or someone's edit that changed nothing kept here.
fn same_content(old: &EndpointSlice, new: &EndpointSlice) -> bool {
    std::ptr::eq(old, new)
        || (old.meta.uid == new.meta.uid
            && old.meta.name == new.meta.name
            && old.meta.namespace == new.meta.namespace
            && old.meta.deletion_timestamp == new.meta.deletion_timestamp
            && old.meta.labels == new.meta.labels
            && old.meta.annotations == new.meta.annotations
            && old.owner_references == new.owner_references
            && old.address_type == new.address_type
            && old.ports == new.ports
            && old.endpoints == new.endpoints)
}

impl EndpointSliceController {
    fn rules(&self) -> PodRules<'_> {
        PodRules {
            changes: &self.changes,
            queue: &self.queue,
            batch: &self.batch,
        }
    }
}

impl Handlers for EndpointSliceController {
    fn queue(&self) -> &WorkQueue<ServiceKey> {
        &self.queue
    }

    fn queue_name(&self) -> &'static str {
        super::QUEUE_ENDPOINTSLICE
    }

    fn service_changed(&self, key: &ServiceKey, _: Option<&Service>, new: Option<&Service>) {
        self.rules().service_changed(key, new);
    }

    fn pod_changed(&self, key: &ServiceKey, pod: &Name, queued: bool) {
        self.rules().pod_changed(key, pod, queued);
    }

    fn wrote(&self, key: &ServiceKey, at: Duration) {
        self.batch.wrote(key, at);
    }

    /// An endpoint reads only a node's existence and zone: the pods on a node that came, went or
    /// moved zone count as changed, and their services are synced after the batch period
    /// (upstream queues nothing for a node; see `before_batch`).
    /// Readiness and zones also feed the topology cache, recomputed once before the next batch.
    fn node_changed(&self, old: Option<&Node>, new: Option<&Node>) {
        let Some(name) = new.or(old).map(|n| &n.name) else {
            return;
        };
        let (zone_moved, ready_moved) = match (old, new) {
            (Some(old), Some(new)) => (old.zone() != new.zone(), old.ready != new.ready),
            _ => (true, true),
        };
        if zone_moved {
            self.changes.node_changed(name);
        }
        if zone_moved || ready_moved {
            self.topology_dirty.store(true, Ordering::Release);
        }
    }

    fn slice_manager(&self) -> Option<&'static str> {
        Some(keys::ENDPOINTSLICE_CONTROLLER)
    }

    /// Keeps the locator current. A slice someone else changed means the service's slices may no
    /// longer be what its last sync left, so its next sync is full; whether a sync is queued is
    /// the generation tracker's answer, as upstream's.
    fn slice_changed(
        &self,
        old: Option<&EndpointSlice>,
        new: Option<&EndpointSlice>,
        by_watch: bool,
    ) {
        let managed = new.filter(|new| is_managed(new));
        self.locator.slice_changed(old, managed);
        let others = by_watch
            && !old
                .zip(new)
                .is_some_and(|(old, new)| same_content(old, new));
        if others {
            for slice in [old, managed].into_iter().flatten() {
                if let Ok(key) = tracker::service_of_slice(slice) {
                    self.changes.force_full(&key);
                }
            }
        }
        // A slice without its service-name label names no service to sync.
        for key in tracker::on_slice_changed(&self.tracker, old, new)
            .into_iter()
            .flatten()
        {
            self.changes.force_full(&key);
            self.queue
                .add_after(key, tracker::slice_event_delay(self.batch.floor()));
        }
    }

    /// Pods on nodes that came, went or moved zone count as changed in the services selecting
    /// them, which are queued; zone ratios are recomputed when node readiness or zones moved, and
    /// services whose hints no longer fit are synced in full. Once per batch, however many node
    /// events came (upstream's topology queue has one constant key for the same reason).
    fn before_batch(&self, index: &Index) {
        let nodes = self.changes.take_changed_nodes();
        // No sync runs now, so a service not synced yet has a full sync coming and needs no
        // marks: a cold start, whose nodes all arrive first, skips the walk over every pod.
        if !nodes.is_empty() && self.changes.any_synced() {
            let mut queued: HashSet<ServiceKey, ahash::RandomState> = HashSet::default();
            for (key, pod) in index.members_on_nodes(&nodes) {
                if self.changes.is_synced(&key) {
                    self.changes.pod_changed(&key, &pod);
                }
                // Upstream queues nothing here, and keeps the endpoints of a deleted node's pods
                // until the pod GC deletes them (40 s at least), or leaves a new node's pods out
                // and a moved node's old zone in place until something else syncs the service.
                if queued.insert(key.clone()) {
                    let delay = self.batch.delay(&key, || self.queue.now());
                    self.queue.add_after(key, delay);
                }
            }
        }
        if !self.topology_dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let nodes = index.nodes().snapshot();
        let overloaded = {
            let mut topology = self.topology.write();
            topology.set_nodes(nodes.values().map(|node| &**node));
            topology.overloaded_services()
        };
        for key in overloaded {
            if let Some(key) = ServiceKey::parse(&key) {
                self.changes.force_full(&key);
                self.queue.add(key);
            }
        }
    }

    fn resync(&self, index: &Index) {
        self.rules().resync(index);
    }
}

impl Controller for EndpointSliceController {
    type Prepared = Prepared;

    /// Everything of a sync that reads only: the plan.
    fn prepare(&self, cx: &Cluster<'_>, key: &ServiceKey) -> Prepared {
        let Some(service) = cx.index.services().get(&key.namespace, &key.name) else {
            // Deleted: forget what the trackers knew; the garbage collector removes its slices.
            self.tracker.delete_service(&key.namespace, &key.name);
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
        let slices = managed_slices(cx.index, key);
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        // Upstream's newer form: a Service recreated under the same name starts afresh.
        if self.tracker.stale_slices_for_uid(
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
                &cx.options.reconcile,
                incremental,
            );
            Prepared::Plan(plan, Box::new(metrics))
        };
        // The changed pods as they are now, when the change log knows them, and those the last
        // sync left out that did not change.
        let (current, left_out) = match &service.selector {
            Some(selector) if !changes.full && cx.options.incremental => (
                Some(changed_now(cx, key, selector, &changes)),
                left_out_now(cx, key, selector, &changes),
            ),
            _ => (None, None),
        };
        let left_out: Option<Vec<&Pod>> = left_out
            .as_ref()
            .map(|pods| pods.iter().map(|p| p.as_ref()).collect());
        let changed: Option<Vec<(Name, Option<&Pod>)>> = current.as_ref().map(|current| {
            current
                .iter()
                .map(|(n, p)| (n.clone(), p.as_deref()))
                .collect()
        });
        if let Some(changed) = &changed
            && let Some(left_out) = &left_out
            && let Some(plan) =
                self.prepare_incremental(cx, key, &service, changed, left_out, &slice_refs)
        {
            return planned(plan, true);
        }
        // Known changes that the incremental path could not place (pods of several port groups,
        // say) still give the trigger time without a walk over every pod.
        let known_trigger_time = changed
            .as_ref()
            .and_then(|changed| self.trigger_time_of_changed(key, &service, changed));
        let plan = self.full_plan(cx, key, &service, &slice_refs, |pods| {
            known_trigger_time.unwrap_or_else(|| {
                self.triggers
                    .lock()
                    .compute(&key.namespace, &key.name, &service, pods)
            })
        });
        planned(plan, false)
    }

    /// Applies a prepared sync and feeds its result back to the incremental state, the topology
    /// cache and the queue. The caller feeds the writes back (the generation tracker, the index) as
    /// the watch would deliver them.
    fn finish(
        &self,
        _: &Cluster<'_>,
        key: &ServiceKey,
        prepared: Prepared,
        sink: &dyn Sink,
        at: Duration,
        events: &mut Vec<(ServiceKey, Event)>,
    ) -> (SyncRecord, Option<String>) {
        let mut record = SyncRecord::new(at, key.clone(), ENDPOINTSLICE_CONTROLLER);
        // Whether the slices are now what a full sync would leave: the next sync may then be
        // incremental.
        let mut complete = false;
        // Pods left out for a missing node, which the next sync looks at again.
        let mut left_out = Vec::new();
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
            Prepared::Plan(mut plan, metrics) => {
                let applied = record.apply_slice_plan(sink, &mut plan, *metrics);
                let error = applied.error;
                // A pod on a missing node fails the sync (it is retried), but the slices are
                // still as planned: only a write that failed makes the next sync full.
                complete = !applied.write_failed && !record.abandoned;
                if complete {
                    left_out = std::mem::take(&mut plan.pods_on_missing_nodes);
                }
                // Most syncs change nothing here: no lock taken, no key formatted.
                if !plan.topology_changes.is_empty() {
                    self.topology
                        .write()
                        .apply(&key.to_string(), &plan.topology_changes);
                }
                let mut raised = plan.events;
                if let Some(message) = &error {
                    raised.push(Event::warning(
                        "FailedToUpdateEndpointSlices",
                        format!("Error updating Endpoint Slices for Service {key}: {message}"),
                    ));
                }
                events.extend(raised.into_iter().map(|e| (key.clone(), e)));
                error
            }
        };
        if complete {
            self.changes.synced(key);
            self.changes.left_out(key, left_out);
        } else if error.is_some() || record.abandoned {
            self.changes.failed(key);
        } else {
            // Gone, or nothing to keep for it: nothing to remember either.
            self.changes.forget(key);
        }
        (record, error)
    }

    fn slice_tracker(&self) -> Option<&EndpointSliceTracker> {
        Some(&self.tracker)
    }
}

impl EndpointSliceController {
    /// The adaptive batch period's window now, when the batch period is adaptive.
    pub fn adaptive_window(&self) -> Option<Duration> {
        self.batch.adaptive_window()
    }
}

//! The engine: changes in, batches of ready services reconciled in parallel, writes out, results back
//! to the queue. One engine serves `simulate`, the replay of traces and (later) `run`.

mod batch;
mod controller;
mod dns;
mod endpoints;
mod incremental;
mod invariant;
mod load_balancer;
mod mirroring;
mod relist;
mod slice_metrics;
mod slices;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::time::Duration;

use parking_lot::Mutex;

use crate::change::Change;
use crate::controllers::Controllers;
use crate::index::{Index, PodProjection, ServiceKey, pod_projection};
use crate::model::{EndpointSlice, Meta, Name, Node, Pod, Service, compare_resource_versions};
use crate::queue::{Clock, QueueMetrics, WorkQueue};
use crate::reconcile::{Event, Options};
use controller::Handlers;

pub use batch::{AdaptiveBatch, BatchPeriod, WriteRate};
pub use controller::{HostUpdate, SyncOutcome, SyncRecord};
pub use endpoints::ENDPOINTS_CONTROLLER;
pub use invariant::Violation;
pub use load_balancer::{
    LoadBalancerOptions, ProviderCall, ProviderOperation, QUEUE_SERVICE, SERVICE_LB_CONTROLLER,
};
pub use mirroring::MIRRORING_CONTROLLER;
pub use slice_metrics::{CacheEntry, SliceSyncMetrics, TypeSyncMetrics};
pub use slices::ENDPOINTSLICE_CONTROLLER;

#[derive(Clone, Debug)]
pub struct EngineOptions {
    pub reconcile: Options,
    /// `--endpointslice-updates-batch-period`: the delay of pod-triggered syncs; with
    /// `adaptive_batch`, the narrowest window.
    pub batch_period: Duration,
    /// `--endpointslice-updates-batch-period auto`: a window per service that widens while the
    /// engine writes over its budget.
    pub adaptive_batch: Option<AdaptiveBatch>,
    /// Parallel reconcile workers.
    pub workers: usize,
    /// The most services one batch takes from the queue.
    pub max_batch: usize,
    /// Reconcile only what changed when a service's last sync allows it; off, every sync is full.
    pub incremental: bool,
    /// The controllers that run.
    pub controllers: Controllers,
    /// `--endpoint-updates-batch-period`: the delay of the Endpoints controller's pod-triggered
    /// syncs.
    pub endpoints_batch_period: Duration,
    /// `--endpoint-updates-batch-period auto`.
    pub endpoints_adaptive_batch: Option<AdaptiveBatch>,
    /// The mirroring controller's options (`--mirroring-max-endpoints-per-subset`).
    pub mirroring: crate::reconcile::mirroring::Options,
    /// `--mirroring-endpointslice-updates-batch-period`.
    pub mirroring_batch_period: Duration,
    /// Feed accepted writes back into the index and trackers, as the watch will deliver them. Off
    /// when the sink writes nothing (`run --dry-run`): the index then holds only what the cluster
    /// holds, and every sync is compared with it.
    pub observe_writes: bool,
    /// After every sync that succeeded in full, check that a full reconcile of the same state
    /// would write nothing (see `invariant`). Costs one full reconcile per sync: for tests and
    /// `simulate --check-invariants`.
    pub check_invariants: bool,
    /// The service (LoadBalancer) controller's provider and class.
    pub load_balancers: LoadBalancerOptions,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            reconcile: Options::default(),
            batch_period: Duration::ZERO,
            adaptive_batch: None,
            workers: 2,
            max_batch: 1024,
            incremental: true,
            controllers: Controllers::ENDPOINTSLICE,
            endpoints_batch_period: Duration::ZERO,
            endpoints_adaptive_batch: None,
            mirroring: crate::reconcile::mirroring::Options::default(),
            mirroring_batch_period: Duration::ZERO,
            observe_writes: true,
            check_invariants: false,
            load_balancers: LoadBalancerOptions::default(),
        }
    }
}

/// Counters of what the engine did.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    pub changes: u64,
    pub syncs: u64,
    /// Syncs that reconciled only the pods that changed.
    pub incremental_syncs: u64,
    pub sync_errors: u64,
    pub stale: u64,
    pub dropped: u64,
    /// Syncs checked against the invariant, and those after which it did not hold.
    pub invariant_checks: u64,
    pub invariant_violations: u64,
}

impl EngineStats {
    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &EngineStats) {
        let sum = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        sum(&mut self.changes, other.changes);
        sum(&mut self.syncs, other.syncs);
        sum(&mut self.incremental_syncs, other.incremental_syncs);
        sum(&mut self.sync_errors, other.sync_errors);
        sum(&mut self.stale, other.stale);
        sum(&mut self.dropped, other.dropped);
        sum(&mut self.invariant_checks, other.invariant_checks);
        sum(&mut self.invariant_violations, other.invariant_violations);
    }
}

/// How many objects of each kind the engine holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectCounts {
    pub services: usize,
    pub pods: usize,
    pub nodes: usize,
    /// Slices of the EndpointSlice and mirroring controllers.
    pub endpoint_slices: usize,
    pub endpoints: usize,
}

/// Upstream's names of the controllers' queues, as client-go's workqueue metrics label them.
pub const QUEUE_ENDPOINTSLICE: &str = "endpoint_slice";
pub const QUEUE_ENDPOINTS: &str = "endpoint";
pub const QUEUE_MIRRORING: &str = "endpoint_slice_mirroring";

/// Where a slice change the engine takes in comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A watch (or a relist): anyone's change, the engine's own included.
    Watch,
    /// The API server's answer to one of the engine's own writes.
    OwnWrite,
}

/// Whether `incoming` is an older version than `held`. The engine takes its own writes' answers at
/// once, so the watch can then deliver a version it has already replaced (an informer, fed by
/// the watch alone, never goes back). Taking it would put the cache back in time: the next sync
/// would find it stale and retry with backoff, and a busy service would wait minutes for its
/// write. Versions that do not order (not the API server's integers) are taken as they come.
fn older_than(incoming: &Meta, held: &Meta) -> bool {
    compare_resource_versions(&incoming.resource_version, &held.resource_version)
        == Some(std::cmp::Ordering::Less)
}

/// A pod update that upstream's projection ignores but a full reconcile would still read
/// differently: another pod under the same name, a phase, node or Ready transition time (the
/// trigger time) that moved without a readiness change, as when a relist skips the events between.
fn reads_differ(old: &crate::model::Pod, new: &crate::model::Pod) -> bool {
    old.meta.uid() != new.meta.uid()
        || old.phase != new.phase
        || old.node_name != new.node_name
        || old.has_pod_ip != new.has_pod_ip
        || old.ready_transition() != new.ready_transition()
        || (!Arc::ptr_eq(&old.named_ports, &new.named_ports) && old.named_ports != new.named_ports)
}

/// What every controller's sync reads of the cluster, beside its own state.
struct Cluster<'a> {
    index: &'a Index,
    options: &'a EngineOptions,
    stats: &'a Mutex<EngineStats>,
}

pub struct Engine {
    options: EngineOptions,
    /// The EndpointSlice controller, built even when it does not run (its queue then stays
    /// empty), as `Engine::queue` hands its queue out.
    endpointslice: slices::EndpointSliceController,
    /// The Endpoints controller, when it runs.
    endpoints: Option<endpoints::EndpointsController>,
    /// The mirroring controller, when it runs.
    mirroring: Option<mirroring::MirroringController>,
    /// The service (LoadBalancer) controller, when it runs.
    load_balancer: Option<load_balancer::LoadBalancerController>,
    index: Index,
    clock: Arc<dyn Clock>,
    pool: Option<rayon::ThreadPool>,
    events: Mutex<Vec<(ServiceKey, Event)>>,
    stats: Mutex<EngineStats>,
    violations: Mutex<Vec<Violation>>,
    /// Every controller's accepted writes, for the adaptive batch period's budget.
    write_rate: Arc<WriteRate>,
    /// Some batch has begun to read the index. Until then every service's first sync is full, so
    /// a pod change need not be noted or queue anything (see [`Engine::note_pod_changes`]).
    began_syncing: AtomicBool,
}

impl Engine {
    pub fn new(options: EngineOptions, clock: Arc<dyn Clock>) -> Engine {
        // Without threads to spare, plans are made on the caller's thread.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.workers.max(1))
            .thread_name(|i| format!("sliced-worker-{i}"))
            .build()
            .ok();
        // The budget an adaptive batch period starts from; `sliced run` moves it.
        let budget = [options.adaptive_batch, options.endpoints_adaptive_batch]
            .into_iter()
            .flatten()
            .map(|a| a.write_qps)
            .fold(f64::INFINITY, f64::min);
        let write_rate = Arc::new(WriteRate::new(budget));
        let endpoints = options.controllers.endpoints.then(|| {
            let batch = batch::BatchWindows::new(
                options.endpoints_batch_period,
                options.endpoints_adaptive_batch,
                Arc::clone(&write_rate),
            );
            endpoints::EndpointsController::new(batch, Arc::clone(&clock))
        });
        let mirroring = options.controllers.mirroring.then(|| {
            mirroring::MirroringController::new(
                options.mirroring.clone(),
                options.mirroring_batch_period,
                Arc::clone(&clock),
            )
        });
        let load_balancer = options.controllers.load_balancer.then(|| {
            let lb = &options.load_balancers;
            let provider = lb.provider.clone().unwrap_or_else(|| {
                let pools = lb.pools.clone();
                Arc::new(crate::reconcile::load_balancer::PoolProvider::new(pools))
            });
            load_balancer::LoadBalancerController::new(provider, lb, Arc::clone(&clock))
        });
        Engine {
            endpointslice: slices::EndpointSliceController::new(
                batch::BatchWindows::new(
                    options.batch_period,
                    options.adaptive_batch,
                    Arc::clone(&write_rate),
                ),
                Arc::clone(&clock),
            ),
            write_rate,
            endpoints,
            mirroring,
            load_balancer,
            options,
            index: Index::new(),
            clock,
            pool,
            events: Mutex::new(Vec::new()),
            stats: Mutex::new(EngineStats::default()),
            began_syncing: AtomicBool::new(false),
            violations: Mutex::new(Vec::new()),
        }
    }

    /// The controllers that run, in the order the loop syncs them.
    fn running(&self) -> impl Iterator<Item = &dyn Handlers> {
        let slices = self.options.controllers.endpointslice;
        [
            slices.then_some(&self.endpointslice as &dyn Handlers),
            self.endpoints.as_ref().map(|c| c as &dyn Handlers),
            self.mirroring.as_ref().map(|c| c as &dyn Handlers),
            self.load_balancer.as_ref().map(|c| c as &dyn Handlers),
        ]
        .into_iter()
        .flatten()
    }

    fn cluster(&self) -> Cluster<'_> {
        Cluster {
            index: &self.index,
            options: &self.options,
            stats: &self.stats,
        }
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn queue(&self) -> &WorkQueue<ServiceKey> {
        &self.endpointslice.queue
    }

    pub fn stats(&self) -> EngineStats {
        self.stats.lock().clone()
    }

    /// The workqueue figures of each running controller's queue, by upstream's queue name.
    pub fn queue_metrics(&self) -> Vec<(&'static str, QueueMetrics)> {
        self.running()
            .map(|c| (c.queue_name(), c.queue().metrics()))
            .collect()
    }

    /// The writes per second the engine is held to: an adaptive batch period widens while its
    /// writes exceed it; `sliced run` shares it with the sink's rate limiter.
    pub fn write_budget(&self) -> &Arc<crate::queue::WriteBudget> {
        &self.write_rate.budget
    }

    /// The window of each controller whose batch period is adaptive, for `/metrics`.
    pub fn batch_windows(&self) -> Vec<(&'static str, Duration)> {
        let mut windows = Vec::new();
        if let Some(w) = self.endpointslice.adaptive_window() {
            windows.push((ENDPOINTSLICE_CONTROLLER, w));
        }
        if let Some(w) = self.endpoints.as_ref().and_then(|c| c.adaptive_window()) {
            windows.push((ENDPOINTS_CONTROLLER, w));
        }
        windows
    }

    /// Objects held, by kind; each count is O(1) or O(shards).
    pub fn object_counts(&self) -> ObjectCounts {
        ObjectCounts {
            services: self.index.services().len(),
            pods: self.index.pods().len(),
            nodes: self.index.nodes().len(),
            endpoint_slices: self.index.slices().len() + self.index.mirrored_slices().len(),
            endpoints: self.index.endpoints().len(),
        }
    }

    /// The cluster's address pools, for the service controller's built-in provider.
    pub fn set_address_pools(&self, pools: Vec<crate::reconcile::load_balancer::pools::Pool>) {
        if let Some(c) = &self.load_balancer {
            c.pools_changed(&self.index, pools);
        }
    }

    /// The service controller's provider calls so far, when recorded, and forgets them.
    pub fn take_provider_calls(&self) -> Vec<ProviderCall> {
        self.load_balancer
            .as_ref()
            .map(|c| c.take_calls())
            .unwrap_or_default()
    }

    /// Events recorded on services so far, and forgets them.
    pub fn take_events(&self) -> Vec<(ServiceKey, Event)> {
        std::mem::take(&mut *self.events.lock())
    }

    /// Takes in one change as a watch delivers it, and queues the services it concerns, with
    /// upstream's rules and delays. The Pod or Service it carries moves into the index, uncopied.
    pub fn handle(&self, change: Change) {
        self.stats.lock().changes += 1;
        let change = match change {
            Change::Pod(pod) => return self.pod_applied(Arc::new(pod)),
            Change::Service(service) => return self.service_applied(Arc::new(service)),
            Change::Node(node) => return self.node_applied(Arc::new(node)),
            other => other,
        };
        match &change {
            Change::Pod(_) | Change::Service(_) | Change::Node(_) => {}
            Change::ServiceDeleted { namespace, name } => {
                let old = self.index.services().delete(namespace, name);
                let key = ServiceKey::new(namespace, name);
                for controller in self.running() {
                    controller.service_changed(&key, old.as_deref(), None);
                }
            }
            Change::PodDeleted { namespace, name } => {
                if let Some(old) = self.index.pods().delete(namespace, name)
                    && self.note_pod_changes()
                    && let Some(projection) = pod_projection(Some(&old), None)
                {
                    self.queue_for_projection(&projection, name);
                }
            }
            Change::NodeDeleted { name } => {
                if let Some(old) = self.index.nodes().delete(name) {
                    for controller in self.running() {
                        controller.node_changed(Some(&old), None);
                    }
                }
            }
            Change::EndpointSlice(slice) => self.slice_stored(Arc::clone(slice), Origin::Watch),
            Change::EndpointSliceDeleted { namespace, name } => {
                self.slice_deleted(namespace, name, None, Origin::Watch);
            }
            Change::Endpoints(endpoints) => {
                let Some(old) = self
                    .index
                    .endpoints()
                    .insert_unless(Arc::clone(endpoints), |new, held| {
                        older_than(&new.meta, &held.meta)
                    })
                else {
                    return;
                };
                for controller in self.running() {
                    controller.endpoints_changed(old.as_deref(), Some(endpoints), true);
                }
            }
            Change::EndpointsDeleted {
                namespace,
                name,
                uid,
            } => self.endpoints_deleted(namespace, name, uid, Origin::Watch),
            // Beyond address pools' selectors, namespaces matter only to the API server:
            // creates into a terminating one fail.
            Change::Namespace(ns) => {
                if let Some(lb) = &self.load_balancer {
                    lb.namespace_changed(&self.index, &ns.name, Some(&ns.labels));
                }
            }
            Change::NamespaceDeleted { name } => {
                if let Some(lb) = &self.load_balancer {
                    lb.namespace_changed(&self.index, name, None);
                }
            }
        }
    }

    fn node_applied(&self, node: Arc<Node>) {
        let old = self.index.nodes().apply(Arc::clone(&node));
        // A heartbeat changes nothing kept: the store keeps the node it had.
        if old.as_ref().is_some_and(|old| **old == *node) {
            return;
        }
        for controller in self.running() {
            controller.node_changed(old.as_deref(), Some(&node));
        }
    }

    fn service_applied(&self, service: Arc<Service>) {
        let key = ServiceKey::of(&service);
        let old = self.index.services().apply(Arc::clone(&service));
        for controller in self.running() {
            controller.service_changed(&key, old.as_deref(), Some(&service));
        }
    }

    fn pod_applied(&self, pod: Arc<Pod>) {
        // Handed over alone, so that the index can give an update the stored name.
        let (old, pod, projection) = self.index.pods().apply_projected(pod);
        if !self.note_pod_changes() {
            return;
        }
        match (projection, old) {
            (Some(projection), _) => self.queue_for_projection(&projection, &pod.meta.name),
            // Upstream queues nothing, but its next full sync reads the pod as it is now: the
            // incremental state must know it changed.
            (None, Some(old)) if reads_differ(&old, &pod) => self.pod_changed_unqueued(&pod),
            (None, _) => {}
        }
    }

    fn endpoints_deleted(&self, namespace: &Name, name: &Name, uid: &Name, origin: Origin) {
        let key = ServiceKey::new(namespace, name);
        // Our own create of a recreated Service's Endpoints can be fed back before the watch
        // delivers the old object's deletion: that deletion is of another object.
        let newer = self.index.endpoints().get(&key).is_some_and(|held| {
            !uid.is_empty() && !held.meta.uid.is_empty() && held.meta.uid != *uid
        });
        if newer {
            return;
        }
        // An informer tells of the deletion of an object it held, and of nothing else.
        let Some(old) = self.index.endpoints().remove(&key) else {
            return;
        };
        // The engine's own delete queues no sync of the Endpoints controller: it may find the
        // object back in the store for a moment, as a late watch event of it (its create)
        // arrives before the watch tells of the delete.
        for controller in self.running() {
            controller.endpoints_changed(Some(&old), None, origin == Origin::Watch);
        }
    }

    /// One lookup of the services a pod event concerns, for every controller.
    fn queue_for_projection(&self, projection: &PodProjection, pod: &Name) {
        for key in self.index.services_to_update(projection) {
            for controller in self.running() {
                controller.pod_changed(&key, pod, true);
            }
        }
    }

    /// A pod changed in a way the reconcilers read but that queues no sync (see
    /// [`reads_differ`]): noted for the services selecting it, so that their next sync, whatever
    /// queues it, takes it in.
    fn pod_changed_unqueued(&self, pod: &crate::model::Pod) {
        for key in self
            .index
            .services_for_pod(&pod.meta.namespace, &pod.meta.labels)
        {
            for controller in self.running() {
                controller.pod_changed(&key, &pod.meta.name, false);
            }
        }
    }

    /// What the controllers do once their caches are filled: the Endpoints controller syncs
    /// every Endpoints object, so that those left by deleted services go.
    pub fn start(&self) {
        for controller in self.running() {
            controller.started(&self.index);
        }
    }

    /// What the informers' periodic resync does: every Service (and, for mirroring, every
    /// Endpoints object) delivered again unchanged, so that every controller syncs each once. A
    /// sync finds nothing to do where the engine's state is current, and repairs what others
    /// changed without queueing a sync (a slice the tracker never saw, deleted).
    pub fn resync(&self) {
        for controller in self.running() {
            controller.resync(&self.index);
        }
    }

    /// Whether a pod change, already in the index, must be noted for the services it concerns
    /// and queue their syncs. Not before the first batch: every service is queued when it is
    /// delivered, and a service never synced is synced in full, reading every pod as the index
    /// holds it then. This makes the initial lists (a million pods on a restart, every pod of
    /// `sliced reconcile`) cost only their index updates.
    fn note_pod_changes(&self) -> bool {
        // Once a batch began the flag stays set, so the hot path after start-up needs no fence.
        if self.began_syncing.load(Ordering::Relaxed) {
            return true;
        }
        // Paired with the fence in `begin_batch`: either this change sees that a batch began and
        // is noted, or that batch reads the index after the change was applied.
        fence(Ordering::SeqCst);
        self.began_syncing.load(Ordering::Relaxed)
    }

    /// Marks that a batch is about to read the index (every plan calls it); see
    /// [`Engine::note_pod_changes`]. Only the first batch needs the fence: the flag never clears,
    /// and a change that races a later batch finds it set.
    pub(super) fn begin_batch(&self) {
        if self.began_syncing.load(Ordering::Relaxed) {
            return;
        }
        self.began_syncing.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// What each running controller does once before a batch.
    fn before_batch(&self) {
        for controller in self.running() {
            controller.before_batch(&self.index);
        }
    }

    /// When the next delayed service becomes ready, if any.
    pub fn next_ready_at(&self) -> Option<Duration> {
        self.before_batch();
        self.running()
            .filter_map(|c| c.queue().next_ready_at())
            .min()
    }

    /// Nothing ready, delayed or in progress.
    pub fn is_idle(&self) -> bool {
        self.running().all(|c| c.queue().is_idle())
    }

    /// Now, on the engine's clock.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// A slice stored by the API server: as its watch delivers it, or as one of the engine's own
    /// writes returned it. Each slice store keeps it or lets it go by its managed-by label.
    fn slice_stored(&self, slice: Arc<EndpointSlice>, origin: Origin) {
        let held = self.index.slice(&slice.meta.namespace, &slice.meta.name);
        if held.is_some_and(|held| older_than(&slice.meta, &held.meta)) {
            return;
        }
        for store in self.index.slice_stores() {
            let old = store.apply(Arc::clone(&slice));
            if old.is_some() || store.keeps(&slice) {
                self.slice_changed(store.manager(), old.as_deref(), Some(&slice), origin);
            }
        }
    }

    /// A slice deleted: by name as a watch tells it, or as the engine's own write deleted one of
    /// a known uid (which leaves alone a newer slice of the same name).
    fn slice_deleted(&self, namespace: &str, name: &str, uid: Option<&Name>, origin: Origin) {
        if let Some(uid) = uid.filter(|u| !u.is_empty())
            && self
                .index
                .slice(namespace, name)
                .is_some_and(|held| !held.meta.uid.is_empty() && held.meta.uid != *uid)
        {
            return;
        }
        for store in self.index.slice_stores() {
            if let Some(old) = store.delete(namespace, name) {
                self.slice_changed(store.manager(), Some(&old), None, origin);
            }
        }
    }

    /// Tells the running controller that manages `manager`'s slices of a change to one.
    fn slice_changed(
        &self,
        manager: &str,
        old: Option<&EndpointSlice>,
        new: Option<&EndpointSlice>,
        origin: Origin,
    ) {
        for controller in self.running() {
            if controller.slice_manager() == Some(manager) {
                controller.slice_changed(old, new, origin == Origin::Watch);
            }
        }
    }

    /// Writes that a sync made, fed back as the watch would deliver them, and deletions of what
    /// the sync found already gone.
    fn observe_own_writes(&self, record: &SyncRecord) {
        use crate::sink::{Object, Verb};
        if !self.options.observe_writes {
            return;
        }
        let deleted = |object: &Object| match object {
            Object::EndpointSlice(s) => {
                self.slice_deleted(
                    &s.meta.namespace,
                    &s.meta.name,
                    Some(&s.meta.uid),
                    Origin::OwnWrite,
                );
            }
            Object::Endpoints(e) => {
                self.endpoints_deleted(
                    &e.meta.namespace,
                    &e.meta.name,
                    &e.meta.uid,
                    Origin::OwnWrite,
                );
            }
        };
        for w in &record.writes {
            match (&w.verb, &w.object) {
                (Verb::Delete, object) => deleted(object),
                (_, Object::EndpointSlice(s)) => self.slice_stored(Arc::clone(s), Origin::OwnWrite),
                (_, Object::Endpoints(e)) => self.handle(Change::Endpoints(Arc::clone(e))),
            }
        }
        for object in &record.gone {
            deleted(object);
        }
    }
}

//! What the engine asks of every controller, the one loop that drives them, and what each sync
//! reports. A controller says which changes it wants ([`Handlers`], upstream's informer event
//! handlers), and gives the loop its queue, a plan for a key read from the index (made in
//! parallel with other keys' plans), and that plan carried out (in order), told as a
//! [`SyncRecord`]. Adding a controller is a module that implements [`Controller`], a field of
//! `Engine` and a line in `Engine::running` and in the loop below.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::batch::BatchWindows;
use super::incremental::ChangeLog;
use super::slice_metrics::SliceSyncMetrics;
use super::{Cluster, Engine};
use crate::index::{Index, ServiceKey};
use crate::model::{EndpointSlice, Endpoints, Name, Node, Service};
use crate::queue::{RetryDecision, WorkQueue};
use crate::reconcile::{Event, Plan};
use crate::sink::apply::{AppliedWrite, TypeStatus, apply_plan};
use crate::sink::{Object, Sink, Verb};
use crate::tracker::EndpointSliceTracker;

/// The changes a controller wants, each queueing what it concerns with the controller's own
/// delays. The index has taken the change in first. A hook not overridden wants nothing.
pub(super) trait Handlers: Sync {
    fn queue(&self) -> &WorkQueue<ServiceKey>;

    /// Upstream's name of its queue, as client-go's workqueue metrics label it.
    fn queue_name(&self) -> &'static str;

    /// A Service was added, changed or deleted (`new` is `None`).
    fn service_changed(&self, _key: &ServiceKey, _old: Option<&Service>, _new: Option<&Service>) {}

    /// A pod that `key` selects, or selected, changed. `queued`: upstream's handlers queue a sync
    /// for it; otherwise the change is only noted for the next sync, whatever queues it.
    fn pod_changed(&self, _key: &ServiceKey, _pod: &Name, _queued: bool) {}

    /// An Endpoints object was added, changed or deleted (`new` is `None`). `by_watch` is false
    /// only for a deletion this engine made itself.
    fn endpoints_changed(
        &self,
        _old: Option<&Endpoints>,
        _new: Option<&Endpoints>,
        _by_watch: bool,
    ) {
    }

    /// A Node was added, changed (not a heartbeat: something kept moved) or deleted (`new` is
    /// `None`).
    fn node_changed(&self, _old: Option<&Node>, _new: Option<&Node>) {}

    /// The managed-by value of the slices this controller writes, when it writes slices: the
    /// index keeps those for it, and tells it of their changes through `slice_changed`.
    fn slice_manager(&self) -> Option<&'static str> {
        None
    }

    /// A slice was stored or deleted (`new` is `None`) that this controller manages, or managed:
    /// `old` is the version of its slices the index held, `new` the slice as the API server
    /// stored it, whoever manages it now. `by_watch` is false for the API server's answer to the
    /// engine's own write.
    fn slice_changed(
        &self,
        _old: Option<&EndpointSlice>,
        _new: Option<&EndpointSlice>,
        _by_watch: bool,
    ) {
    }

    /// Before a batch is taken from the queue: what many changes asked for, done once.
    fn before_batch(&self, _index: &Index) {}

    /// Once its caches are filled, before the first sync.
    fn started(&self, _index: &Index) {}

    /// A sync of `key` at `at` had writes accepted, counted in the engine's write rate already:
    /// an adaptive batch period takes the service as busy.
    fn wrote(&self, _key: &ServiceKey, _at: Duration) {}

    /// The informers' periodic resync: every object it watches delivered again unchanged.
    fn resync(&self, _index: &Index) {}
}

pub(super) trait Controller: Handlers {
    /// A plan for one key: what `finish` carries out.
    type Prepared: Send;

    /// Everything of a sync that only reads. Runs on any worker, beside other keys' plans.
    fn prepare(&self, cx: &Cluster<'_>, key: &ServiceKey) -> Self::Prepared;

    /// Carries out a plan through `sink` and updates the controller's own state. Returns what
    /// the sync did and, when it failed, why (the loop settles the key in the queue with it).
    fn finish(
        &self,
        cx: &Cluster<'_>,
        key: &ServiceKey,
        prepared: Self::Prepared,
        sink: &dyn Sink,
        at: Duration,
        events: &mut Vec<(ServiceKey, Event)>,
    ) -> (SyncRecord, Option<String>);

    /// The generation tracker of the slices this controller writes, told of its own writes.
    fn slice_tracker(&self) -> Option<&EndpointSliceTracker> {
        None
    }
}

/// The handlers the controllers of selected pods (EndpointSlice, Endpoints) share, as upstream's
/// do: a Service change makes the next sync full and queues it at once; a pod change is noted for
/// the next sync, and queues one after the batch period when upstream's projection says so; a
/// resync queues every Service.
pub(super) struct PodRules<'a> {
    pub changes: &'a ChangeLog,
    pub queue: &'a WorkQueue<ServiceKey>,
    pub batch: &'a BatchWindows,
}

impl PodRules<'_> {
    pub fn service_changed(&self, key: &ServiceKey, new: Option<&Service>) {
        self.changes.force_full(key);
        if new.is_none() {
            self.batch.forget(key);
        }
        self.queue.add(key.clone());
    }

    pub fn pod_changed(&self, key: &ServiceKey, pod: &Name, queued: bool) {
        self.changes.pod_changed(key, pod);
        if queued {
            let delay = self.batch.delay(key, || self.queue.now());
            self.queue.add_after(key.clone(), delay);
        }
    }

    pub fn resync(&self, index: &Index) {
        for key in index.services().keys() {
            self.queue.add(key);
        }
    }
}

/// A key's plan, and the time it took to make.
pub(super) struct Planned<P> {
    key: ServiceKey,
    prepared: P,
    took: Duration,
}

impl<P> Planned<P> {
    pub fn key(&self) -> &ServiceKey {
        &self.key
    }
}

impl Engine {
    /// Plans `keys` of `controller`, in parallel when there is more than one.
    pub(super) fn plan<C: Controller>(
        &self,
        controller: &C,
        keys: Vec<ServiceKey>,
    ) -> Vec<Planned<C::Prepared>> {
        self.begin_batch();
        let cx = self.cluster();
        let timed = |key: ServiceKey| {
            let started = Instant::now();
            let prepared = controller.prepare(&cx, &key);
            Planned {
                key,
                prepared,
                took: started.elapsed(),
            }
        };
        // One key is planned here: handing it to a worker costs more than it saves.
        match &self.pool {
            Some(pool) if keys.len() > 1 => {
                // One plan per task: a batch's costly services (many pods, many changes) may sit
                // together, and the few halves rayon splits by default leave them to one worker
                // while the other waits (steady churn: 2.7 times the other's CPU).
                pool.install(|| keys.into_par_iter().with_max_len(1).map(timed).collect())
            }
            _ => keys.into_iter().map(timed).collect(),
        }
    }

    /// Carries out one plan of `controller` and feeds what it wrote back, as the watch will
    /// deliver it.
    pub(super) fn finish<C: Controller>(
        &self,
        controller: &C,
        planned: Planned<C::Prepared>,
        sink: &dyn Sink,
        at: Duration,
    ) -> SyncRecord {
        let started = Instant::now();
        let Planned {
            key,
            prepared,
            took,
        } = planned;
        let mut events = Vec::new();
        let (mut record, error) =
            controller.finish(&self.cluster(), &key, prepared, sink, at, &mut events);
        record.settle(controller.queue(), error);
        controller.queue().done(&key);
        if !events.is_empty() {
            self.events.lock().extend(events);
        }
        if self.options.observe_writes
            && let Some(tracker) = controller.slice_tracker()
        {
            track_own_writes(tracker, &record);
        }
        self.observe_own_writes(&record);
        if !record.writes.is_empty() {
            self.write_rate.record(at, record.writes.len());
            controller.wrote(&key, at);
        }
        record.took = took + started.elapsed();
        self.count(&record);
        if self.options.check_invariants {
            self.check_after_sync(&record);
        }
        record
    }

    /// Carries out `planned`, in order; or, when the sink takes several writes at once, on the
    /// workers at the same time. Keys of one controller in one batch are distinct, so each
    /// service's writes still go one sync at a time, and a sync's own steps stay in order.
    pub(super) fn finish_all<C: Controller>(
        &self,
        controller: &C,
        planned: Vec<Planned<C::Prepared>>,
        sink: &dyn Sink,
        at: Duration,
    ) -> Vec<SyncRecord> {
        match &self.pool {
            Some(pool) if sink.concurrency() > 1 => pool.install(|| {
                planned
                    .into_par_iter()
                    .with_max_len(1)
                    .map(|p| self.finish(controller, p, sink, at))
                    .collect()
            }),
            _ => planned
                .into_iter()
                .map(|p| self.finish(controller, p, sink, at))
                .collect(),
        }
    }

    /// Plans `keys` of `controller`, then carries the plans out in the keys' order.
    pub(super) fn sync_keys<C: Controller>(
        &self,
        controller: &C,
        keys: Vec<ServiceKey>,
        sink: &dyn Sink,
    ) -> Vec<SyncRecord> {
        let planned = self.plan(controller, keys);
        let at = self.clock.now();
        self.finish_all(controller, planned, sink, at)
    }
}

impl Engine {
    /// Takes the services that are ready now, reconciles them in parallel and applies their plans
    /// to `sink`: the EndpointSlice controller's, then the Endpoints controller's, then the
    /// mirroring controller's, each in the order they became ready.
    pub fn sync_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.before_batch();
        let max = self.options.max_batch;
        // Every queue is read before anything is written, so that no sync of this batch waits for
        // another's writes.
        let slices = self.endpointslice.queue().pop_ready(max);
        let endpoints = self
            .endpoints
            .as_ref()
            .map(|c| (c, c.queue().pop_ready(max)));
        let mirroring = self
            .mirroring
            .as_ref()
            .map(|c| (c, c.queue().pop_ready(max)));
        let load_balancer = self
            .load_balancer
            .as_ref()
            .map(|c| (c, c.queue().pop_ready(max)));
        let slices = self.plan(&self.endpointslice, slices);
        let endpoints = endpoints.map(|(c, keys)| (c, self.plan(c, keys)));
        let mirroring = mirroring.map(|(c, keys)| (c, self.plan(c, keys)));
        let load_balancer = load_balancer.map(|(c, keys)| (c, self.plan(c, keys)));
        let at = self.clock.now();
        let mut records = self.finish_all(&self.endpointslice, slices, sink, at);
        if let Some((c, planned)) = endpoints {
            records.extend(self.finish_all(c, planned, sink, at));
        }
        if let Some((c, planned)) = mirroring {
            records.extend(self.finish_all(c, planned, sink, at));
        }
        if let Some((c, planned)) = load_balancer {
            // Provider calls of different Services at once, up to `--concurrent-service-syncs`.
            match &c.workers {
                Some(workers) => records.extend(workers.install(|| {
                    planned
                        .into_par_iter()
                        .with_max_len(1)
                        .map(|p| self.finish(c, p, sink, at))
                        .collect::<Vec<_>>()
                })),
                None => records.extend(planned.into_iter().map(|p| self.finish(c, p, sink, at))),
            }
        }
        records
    }

    /// [`Engine::sync_ready`] until nothing is ready now: every record, in order. What is delayed
    /// stays queued (see `replay::drain` to let virtual time run on to it).
    pub fn sync_all_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        let mut records = Vec::new();
        loop {
            let batch = self.sync_ready(sink);
            if batch.is_empty() {
                return records;
            }
            records.extend(batch);
        }
    }

    /// One pass of controllers that have just started (`sliced reconcile`): every ready key of
    /// every controller synced once, and failures not retried. A service's EndpointSlices and
    /// then its Endpoints, services in namespace/name order, those that no longer exist (whose
    /// Endpoints are left over) last; then the mirroring controller's keys in the same order, so
    /// that it reads what the Endpoints controller wrote.
    pub fn sync_once(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.before_batch();
        let services = self.index.services();
        let order = |key: &crate::index::ServiceKey| {
            let gone = services.get(&key.namespace, &key.name).is_none();
            (gone, key.clone())
        };
        let mut slices = self.endpointslice.queue().pop_ready(usize::MAX);
        slices.sort_by_cached_key(order);
        let slices = self.plan(&self.endpointslice, slices);
        let endpoints = self.endpoints.as_ref().map(|c| {
            let mut keys = c.queue().pop_ready(usize::MAX);
            keys.sort_by_cached_key(order);
            (c, self.plan(c, keys))
        });
        let at = self.clock.now();
        let mut records = Vec::with_capacity(slices.len());
        match endpoints {
            None => {
                records.extend(
                    slices
                        .into_iter()
                        .map(|p| self.finish(&self.endpointslice, p, sink, at)),
                );
            }
            Some((c, endpoints)) => {
                // Merged in key order, a service's slices before its Endpoints.
                let mut slices = slices.into_iter().peekable();
                let mut endpoints = endpoints.into_iter().peekable();
                loop {
                    let slices_first = match (slices.peek(), endpoints.peek()) {
                        (Some(s), Some(e)) => order(s.key()) <= order(e.key()),
                        (Some(_), None) => true,
                        (None, Some(_)) => false,
                        (None, None) => break,
                    };
                    let record = if slices_first {
                        slices
                            .next()
                            .map(|p| self.finish(&self.endpointslice, p, sink, at))
                    } else {
                        endpoints.next().map(|p| self.finish(c, p, sink, at))
                    };
                    records.extend(record);
                }
            }
        }
        if let Some(c) = &self.mirroring {
            let mut keys = c.queue().pop_ready(usize::MAX);
            keys.sort();
            records.extend(self.sync_keys(c, keys, sink));
        }
        // Last, the load balancers, in namespace/name order: one provider call at a time, as
        // upstream's default of one service worker.
        if let Some(c) = &self.load_balancer {
            let mut keys = c.queue().pop_ready(usize::MAX);
            keys.sort();
            let planned = self.plan(c, keys);
            let at = self.clock.now();
            records.extend(planned.into_iter().map(|p| self.finish(c, p, sink, at)));
        }
        records
    }

    pub(super) fn count(&self, record: &SyncRecord) {
        let mut stats = self.stats.lock();
        stats.syncs += 1;
        match record.outcome {
            SyncOutcome::Success => {}
            SyncOutcome::Error => stats.sync_errors += 1,
            SyncOutcome::Stale => stats.stale += 1,
        }
        stats.dropped += u64::from(record.dropped);
    }
}

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
    /// The service controller's node-sync call, when this sync was one.
    pub host_update: Option<HostUpdate>,
}

/// One call of node sync to a provider: its time and whether it succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostUpdate {
    pub took: Duration,
    pub succeeded: bool,
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
            host_update: None,
        }
    }
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

impl SyncRecord {
    /// Carries out a plan of slice writes (the EndpointSlice or the mirroring controller's): the
    /// record takes the accepted writes, the objects found gone, the metrics, and whether a
    /// terminating namespace cut the plan short.
    pub(super) fn apply_slice_plan(
        &mut self,
        sink: &dyn Sink,
        plan: &mut Plan,
        mut metrics: SliceSyncMetrics,
    ) -> SlicePlanApplied {
        let outcome = apply_plan(sink, plan);
        metrics.applied(&outcome);
        let applied = SlicePlanApplied {
            error: outcome.error_message(),
            write_failed: outcome.write_failed,
        };
        self.slice_metrics = Some(metrics);
        self.abandoned = outcome
            .per_type
            .iter()
            .any(|t| t.status == TypeStatus::NamespaceTerminating);
        self.writes = outcome.records;
        self.gone = outcome.gone;
        if applied.error.is_some() {
            self.outcome = SyncOutcome::Error;
        }
        applied
    }
}

/// How carrying out a plan of slice writes ended.
pub(super) struct SlicePlanApplied {
    /// The sync's error: write errors, then the plan's own.
    pub error: Option<String>,
    /// A write failed: the slices are not what the plan wanted.
    pub write_failed: bool,
}

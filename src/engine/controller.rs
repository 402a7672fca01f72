//! What the engine asks of every controller: which changes it wants ([`Handlers`], upstream's
//! informer event handlers), and for the one loop its queue, a plan for a key read from the index
//! (made in parallel with other keys' plans), and that plan carried out (in order). Adding a
//! controller is a module that implements [`Controller`], a field of `Engine` and a line in
//! `Engine::running` and in the loop (`sync.rs`).

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::incremental::ChangeLog;
use super::record::{SyncRecord, track_own_writes};
use super::{Cluster, Engine};
use crate::index::{Index, ServiceKey};
use crate::model::{EndpointSlice, Endpoints, Name, Node, Service};
use crate::queue::WorkQueue;
use crate::reconcile::Event;
use crate::sink::Sink;
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
    pub batch_period: Duration,
}

impl PodRules<'_> {
    pub fn service_changed(&self, key: &ServiceKey) {
        self.changes.force_full(key);
        self.queue.add(key.clone());
    }

    pub fn pod_changed(&self, key: &ServiceKey, pod: &Name, queued: bool) {
        self.changes.pod_changed(key, pod);
        if queued {
            self.queue.add_after(key.clone(), self.batch_period);
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
                pool.install(|| keys.into_par_iter().map(timed).collect())
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
        record.took = took + started.elapsed();
        self.count(&record);
        self.check_after_sync(&record);
        record
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
        planned
            .into_iter()
            .map(|p| self.finish(controller, p, sink, at))
            .collect()
    }
}

//! What the engine's one loop asks of every controller: its queue, a plan for a key read from the
//! index (made in parallel with other keys' plans), and that plan carried out (in order). Adding a
//! controller is a module that implements [`Controller`] and a line in the loop (`sync.rs`).

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::record::{SyncRecord, track_own_writes};
use super::{Cluster, Engine};
use crate::index::ServiceKey;
use crate::queue::WorkQueue;
use crate::reconcile::Event;
use crate::sink::Sink;
use crate::tracker::EndpointSliceTracker;

pub(super) trait Controller: Sync {
    /// A plan for one key: what `finish` carries out.
    type Prepared: Send;

    fn queue(&self) -> &WorkQueue<ServiceKey>;

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

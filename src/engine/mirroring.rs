//! The EndpointSlice mirroring controller inside the engine: the custom Endpoints of selector-less
//! Services copied into slices, with its own queue (1 s doubling to 100 s, as upstream's),
//! slice store and generation tracker.

use std::sync::Arc;
use std::time::Duration;

use super::Cluster;
use super::controller::{Controller, Handlers, STALE_MESSAGE, SyncOutcome, SyncRecord};
use super::slice_metrics::SliceSyncMetrics;
use crate::index::{EndpointsStore, Index, ServiceKey};
use crate::model::{EndpointSlice, Endpoints, Service, keys};
use crate::queue::{Clock, QueueConfig, WorkQueue};
use crate::reconcile::mirroring::{self, MirrorInput, should_mirror};
use crate::reconcile::{Event, Plan};
use crate::sink::Sink;
use crate::tracker::{self, EndpointSliceTracker};

/// The controller name in sync records.
pub const MIRRORING_CONTROLLER: &str = "mirroring";

/// Upstream's mirroring queue: per-key backoff from 1 s, capped at 100 s.
fn queue_config() -> QueueConfig {
    QueueConfig {
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(100),
        ..QueueConfig::default()
    }
}

pub(super) struct MirroringController {
    pub queue: WorkQueue<ServiceKey>,
    /// `--mirroring-endpointslice-updates-batch-period`: the delay of slice-triggered syncs.
    batch_period: Duration,
    options: mirroring::Options,
    pub tracker: EndpointSliceTracker,
}

pub(super) enum Prepared {
    Stale,
    /// The metrics are boxed to keep the enum small; they are moved to the record.
    Plan(Plan, Box<SliceSyncMetrics>),
}

impl MirroringController {
    pub fn new(options: mirroring::Options, batch_period: Duration, clock: Arc<dyn Clock>) -> Self {
        MirroringController {
            queue: WorkQueue::new(queue_config(), clock),
            batch_period,
            options,
            tracker: EndpointSliceTracker::for_manager(keys::MIRRORING_CONTROLLER),
        }
    }

    fn plan(
        &self,
        service: Option<&Service>,
        store: &EndpointsStore,
        key: &ServiceKey,
        slices: &[&EndpointSlice],
    ) -> Plan {
        let endpoints = store.get(key);
        mirroring::reconcile(&MirrorInput {
            namespace: &key.namespace,
            name: &key.name,
            service,
            endpoints: endpoints.as_deref(),
            slices,
            options: &self.options,
        })
    }

    /// What a sync would write now, read-only (no tracker moves): an empty plan when the mirrored
    /// slices are as a full sync leaves them.
    pub fn pending_plan(&self, index: &Index, store: &EndpointsStore, key: &ServiceKey) -> Plan {
        let service = index.services().get(&key.namespace, &key.name);
        let slices: Vec<Arc<EndpointSlice>> = index.mirrored_slices().for_service(key);
        let refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        self.plan(service.as_deref(), store, key, &refs)
    }
}

impl Handlers for MirroringController {
    fn queue(&self) -> &WorkQueue<ServiceKey> {
        &self.queue
    }

    fn slice_manager(&self) -> Option<&'static str> {
        Some(keys::MIRRORING_CONTROLLER)
    }

    /// A mirrored slice that someone else changed or deleted queues its service, as the
    /// generation tracker says.
    fn slice_changed(&self, old: Option<&EndpointSlice>, new: Option<&EndpointSlice>, _: bool) {
        // A slice without its service-name label names no service to sync.
        for key in tracker::on_slice_changed(&self.tracker, old, new)
            .into_iter()
            .flatten()
        {
            self.queue.add_after(key, self.batch_period);
        }
    }

    fn queue_name(&self) -> &'static str {
        super::QUEUE_MIRRORING
    }

    fn endpoints_changed(&self, old: Option<&Endpoints>, new: Option<&Endpoints>, _: bool) {
        let Some(any) = new.or(old) else {
            return;
        };
        if old.is_some_and(should_mirror) || new.is_some_and(should_mirror) {
            self.queue
                .add(ServiceKey::new(&any.meta.namespace, &any.meta.name));
        }
    }

    /// A Service matters when it has, or had, no selector.
    fn service_changed(&self, key: &ServiceKey, old: Option<&Service>, new: Option<&Service>) {
        let selectorless = |s: Option<&Service>| s.map(|s| s.selector.is_none());
        let queue = match (selectorless(old), selectorless(new)) {
            (None, Some(now)) | (Some(now), None) => now,
            (Some(before), Some(now)) => before != now,
            (None, None) => false,
        };
        if queue {
            self.queue.add(key.clone());
        }
    }

    /// Every Endpoints object delivered again.
    fn resync(&self, index: &Index) {
        let store = index.endpoints();
        for key in store.keys() {
            if let Some(endpoints) = store.get(&key) {
                self.endpoints_changed(Some(&endpoints), Some(&endpoints), true);
            }
        }
    }
}

impl Controller for MirroringController {
    type Prepared = Prepared;

    /// Everything of a sync that reads only: the plan.
    fn prepare(&self, cx: &Cluster<'_>, key: &ServiceKey) -> Prepared {
        let (index, store) = (cx.index, cx.index.endpoints());
        let service = index.services().get(&key.namespace, &key.name);
        let slices: Vec<Arc<EndpointSlice>> = index.mirrored_slices().for_service(key);
        let refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        let stale = match &service {
            Some(s) => {
                self.tracker
                    .stale_slices_for_uid(&key.namespace, &key.name, &s.meta.uid, &refs)
            }
            None => self.tracker.stale_slices(&key.namespace, &key.name, &refs),
        };
        if stale {
            return Prepared::Stale;
        }
        let plan = self.plan(service.as_deref(), store, key, &refs);
        let metrics =
            SliceSyncMetrics::of_mirroring(&refs, &plan, self.options.max_endpoints_per_subset);
        Prepared::Plan(plan, Box::new(metrics))
    }

    /// Applies a prepared sync and feeds its result back to the tracker and the queue. The caller
    /// feeds the writes back as the watch would deliver them.
    fn finish(
        &self,
        _: &Cluster<'_>,
        key: &ServiceKey,
        prepared: Prepared,
        sink: &dyn Sink,
        at: Duration,
        events: &mut Vec<(ServiceKey, Event)>,
    ) -> (SyncRecord, Option<String>) {
        let mut record = SyncRecord::new(at, key.clone(), MIRRORING_CONTROLLER);
        let error = match prepared {
            Prepared::Stale => {
                record.outcome = SyncOutcome::Stale;
                Some(STALE_MESSAGE.to_string())
            }
            Prepared::Plan(mut plan, metrics) => {
                let applied = record.apply_slice_plan(sink, &mut plan, *metrics);
                events.extend(plan.events.into_iter().map(|e| (key.clone(), e)));
                applied.error
            }
        };
        (record, error)
    }

    fn slice_tracker(&self) -> Option<&EndpointSliceTracker> {
        Some(&self.tracker)
    }
}

//! Prometheus metrics: kube-controller-manager's own for the controllers sliced replaces, client-go's
//! workqueue metrics for their queues, and sliced's own. Pure: fed by sync records and read from an
//! engine, with no I/O, no kube and no tokio.
//!
//! Cost: a sync is counted once per batch from its [`SyncRecord`] (atomic adds, a histogram
//! observation, and an O(1) update of upstream's metrics cache), off the engine's hot path; gauges
//! that the engine already keeps (queue depths and durations, object counts) are copied at scrape
//! time by [`Metrics::refresh`], in O(1) per queue and kind.
//!
//! Names: the exposition is Prometheus' text format 0.0.4 with upstream's exact names; see
//! `exposition` for why counters are written without prometheus-client's `_total` suffix.

mod exposition;
mod own;
mod service;
mod upstream;
mod workqueue;

use prometheus_client::registry::Registry;

use crate::engine::{
    ENDPOINTSLICE_CONTROLLER, Engine, MIRRORING_CONTROLLER, SERVICE_LB_CONTROLLER, SyncRecord,
};
use crate::sink::{Kind, Verb, WriteError};

pub use exposition::PlainCounter;
pub use own::DryRunMetrics;

use exposition::Exposition;
use own::OwnMetrics;
use service::ServiceControllerMetrics;
use upstream::{MirroringMetrics, SliceControllerMetrics};
use workqueue::WorkqueueMetrics;

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Encoding the exposition failed: a value could not be written (never expected).
#[derive(Debug, thiserror::Error)]
#[error("encoding the metrics failed")]
pub struct EncodeError;

/// Every metric sliced exposes. `Send + Sync`: share it in an `Arc`.
pub struct Metrics {
    registry: Registry,
    slices: SliceControllerMetrics,
    mirroring: MirroringMetrics,
    service: ServiceControllerMetrics,
    workqueue: WorkqueueMetrics,
    own: OwnMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut x = Exposition::default();
        let slices = SliceControllerMetrics::register(&mut x);
        let mirroring = MirroringMetrics::register(&mut x);
        let service = ServiceControllerMetrics::register(&mut x);
        let workqueue = WorkqueueMetrics::register(&mut x);
        let own = OwnMetrics::register(&mut x);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(x));
        Metrics {
            registry,
            slices,
            mirroring,
            service,
            workqueue,
            own,
        }
    }

    /// Counts a batch of syncs, as `Engine::sync_ready` returned them.
    pub fn observe_syncs(&self, records: &[SyncRecord]) {
        if records.is_empty() {
            return;
        }
        let of = |controller: &str| -> Vec<&SyncRecord> {
            records
                .iter()
                .filter(|r| r.controller == controller)
                .collect()
        };
        self.slices.observe(&of(ENDPOINTSLICE_CONTROLLER));
        self.mirroring.observe(&of(MIRRORING_CONTROLLER));
        self.service.observe(&of(SERVICE_LB_CONTROLLER));
        self.own.observe(records);
    }

    /// Counts one write the sink returned as failed, by [`WriteError::reason`]. Called by the sink,
    /// which alone sees every refusal, including writes it did not send.
    pub fn record_write_error(&self, kind: Kind, verb: Verb, error: &WriteError) {
        self.own
            .record_write_error(kind, verb.as_str(), error.reason());
    }

    /// A refused patch (the service controller's, of a Service).
    pub fn record_patch_error(&self, kind: Kind, error: &WriteError) {
        self.own.record_write_error(kind, "patch", error.reason());
    }

    /// Reads the gauges the engine keeps: queue figures and object counts. Call before `encode`.
    pub fn refresh(&self, engine: &Engine) {
        self.workqueue.refresh(&engine.queue_metrics());
        self.own.refresh(engine.object_counts());
        self.own
            .refresh_budget(engine.write_budget().qps(), &engine.batch_windows());
    }

    /// The exposition, in Prometheus' text format 0.0.4 ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, EncodeError> {
        let mut out = String::with_capacity(32 * 1024);
        prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)
            .map_err(|_| EncodeError)?;
        Ok(out)
    }

    /// Shadow mode's figures.
    pub fn dry_run(&self) -> &DryRunMetrics {
        &self.own.dry_run
    }

    /// Whether this instance holds the leader lease.
    pub fn set_leader(&self, leader: bool) {
        self.own.set_leader(leader);
    }

    /// The counter of watch events of `kind` (e.g. "pods"): keep it and `inc` it per event.
    pub fn watch_events(&self, kind: &'static str) -> PlainCounter {
        self.own.watch_events(kind)
    }

    /// The counter of watch restarts of `kind`.
    pub fn watch_restarts(&self, kind: &'static str) -> PlainCounter {
        self.own.watch_restarts(kind)
    }

    /// The process's resident memory, as the adapter reads it (`/proc/self/status`): exposed as
    /// `process_resident_memory_bytes` and, per pod, as `sliced_index_bytes_per_pod` at the next
    /// `refresh`.
    pub fn set_resident_bytes(&self, bytes: u64) {
        self.own.set_resident_bytes(bytes);
    }
}

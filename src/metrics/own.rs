//! sliced's own metrics: sync durations and writes of every controller, refused writes, the index's
//! size, shadow mode's differences, leadership and the watches.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::exposition::{Exposition, Lazy, PlainCounter};
use super::upstream::{Label1, Label2};
use crate::engine::{ObjectCounts, SyncRecord};
use crate::sink::{Kind, Verb};

type Label3 = [(&'static str, &'static str); 3];
type FloatGauge = Gauge<f64, AtomicU64>;

/// From 100 µs to 10 s: an incremental sync takes tens of microseconds, a cold start's syncs of
/// large services milliseconds, and a slow API server seconds.
fn sync_buckets() -> Histogram {
    Histogram::new([
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0, 10.0,
    ])
}

pub(super) struct OwnMetrics {
    sync_duration: Family<Label1, Histogram, fn() -> Histogram>,
    syncs: Family<Label2, PlainCounter>,
    writes: Family<Label3, PlainCounter>,
    write_errors: Family<Label3, PlainCounter>,
    index_objects: Family<Label1, Gauge>,
    bytes_per_pod: Lazy<FloatGauge>,
    resident_bytes: Lazy<Gauge>,
    leader: Lazy<Gauge>,
    watch_events: Family<Label1, PlainCounter>,
    watch_restarts: Family<Label1, PlainCounter>,
    write_qps_limit: Lazy<FloatGauge>,
    batch_window: Family<Label1, FloatGauge>,
    pub(super) dry_run: DryRunMetrics,
}

/// What shadow mode (`run --dry-run`) found: the writes sliced would make that the cluster does
/// not show.
pub struct DryRunMetrics {
    differences: Family<Label1, Gauge>,
    found: Family<Label2, PlainCounter>,
}

impl DryRunMetrics {
    /// Objects of `kind` that differ from what sliced would write, as of the last comparison.
    pub fn set_differences(&self, kind: Kind, n: usize) {
        self.differences
            .get_or_create(&[("kind", kind.as_str())])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// One write sliced would have made and upstream did not.
    pub fn record_difference(&self, kind: Kind, verb: Verb) {
        self.found
            .get_or_create(&[("kind", kind.as_str()), ("verb", verb.as_str())])
            .inc();
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl OwnMetrics {
    pub(super) fn register(x: &mut Exposition) -> Self {
        OwnMetrics {
            sync_duration: x.add(
                "sliced_sync_duration_seconds",
                "Time one sync of one key took, planning and writes, by controller",
                Family::new_with_constructor(sync_buckets as fn() -> Histogram),
            ),
            syncs: x.add(
                "sliced_syncs_total",
                "Syncs by controller and result (success, error or stale)",
                Family::default(),
            ),
            writes: x.add(
                "sliced_writes_total",
                "Writes the API server accepted, by controller, kind and verb",
                Family::default(),
            ),
            write_errors: x.add(
                "sliced_write_errors_total",
                "Writes the API server refused, or that were not sent, by kind, verb and reason",
                Family::default(),
            ),
            index_objects: x.add(
                "sliced_index_objects",
                "Objects the engine holds, by kind",
                Family::default(),
            ),
            bytes_per_pod: x.add(
                "sliced_index_bytes_per_pod",
                "Resident memory of the process per pod held: an upper bound of the index's cost per pod, which dominates it at scale",
                Lazy::<FloatGauge>::default(),
            ),
            resident_bytes: x.add(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                Lazy::<Gauge>::default(),
            ),
            leader: x.add(
                "sliced_leader",
                "1 while this instance holds the leader lease, else 0",
                Lazy::<Gauge>::default(),
            ),
            watch_events: x.add(
                "sliced_watch_events_total",
                "Watch events received, by kind",
                Family::default(),
            ),
            watch_restarts: x.add(
                "sliced_watch_restarts_total",
                "Watch restarts after the first list, once per outage (errors, streams the server ended early, expired resource versions), by kind",
                Family::default(),
            ),
            write_qps_limit: x.add(
                "sliced_write_qps_limit",
                "Writes per second allowed to the API server now: --kube-api-qps, or the step of --write-qps-steps the node count chose",
                Lazy::<FloatGauge>::default(),
            ),
            batch_window: x.add(
                "sliced_adaptive_batch_window_seconds",
                "The window a service that writes waits under an adaptive batch period (auto), by controller",
                Family::default(),
            ),
            dry_run: DryRunMetrics {
                differences: x.add(
                    "sliced_dry_run_differences",
                    "Objects that differ from what sliced would write, as of the last comparison, by kind",
                    Family::default(),
                ),
                found: x.add(
                    "sliced_dry_run_differences_found_total",
                    "Writes sliced would have made that the cluster did not show, by kind and verb",
                    Family::default(),
                ),
            },
        }
    }

    pub(super) fn observe(&self, records: &[SyncRecord]) {
        for r in records {
            let controller = r.controller;
            self.sync_duration
                .get_or_create(&[("controller", controller)])
                .observe(r.took.as_secs_f64());
            self.syncs
                .get_or_create(&[("controller", controller), ("result", r.outcome.as_str())])
                .inc();
            for w in &r.writes {
                let labels = [
                    ("controller", controller),
                    ("kind", w.object.kind().as_str()),
                    ("verb", w.verb.as_str()),
                ];
                self.writes.get_or_create(&labels).inc();
            }
        }
    }

    pub(super) fn record_write_error(&self, kind: Kind, verb: &'static str, reason: &'static str) {
        let labels = [("kind", kind.as_str()), ("verb", verb), ("reason", reason)];
        self.write_errors.get_or_create(&labels).inc();
    }

    pub(super) fn refresh(&self, counts: ObjectCounts) {
        for (kind, n) in [
            ("services", counts.services),
            ("pods", counts.pods),
            ("nodes", counts.nodes),
            ("endpointslices", counts.endpoint_slices),
            ("endpoints", counts.endpoints),
        ] {
            self.index_objects
                .get_or_create(&[("kind", kind)])
                .set(gauge_value(n));
        }
        // Shown once the adapter has read the resident size, and while pods are held.
        let resident = self.resident_bytes.peek().get();
        if resident > 0 && counts.pods > 0 {
            self.bytes_per_pod
                .get()
                .set(resident as f64 / counts.pods as f64);
        }
    }

    /// The write budget, shown once finite, and each adaptive batch window.
    pub(super) fn refresh_budget(&self, qps: f64, windows: &[(&'static str, std::time::Duration)]) {
        if qps.is_finite() {
            self.write_qps_limit.get().set(qps);
        }
        for (controller, window) in windows {
            self.batch_window
                .get_or_create(&[("controller", controller)])
                .set(window.as_secs_f64());
        }
    }

    pub(super) fn set_resident_bytes(&self, bytes: u64) {
        self.resident_bytes
            .get()
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    pub(super) fn set_leader(&self, leader: bool) {
        self.leader.get().set(i64::from(leader));
    }

    pub(super) fn watch_events(&self, kind: &'static str) -> PlainCounter {
        self.watch_events.get_or_create_owned(&[("kind", kind)])
    }

    pub(super) fn watch_restarts(&self, kind: &'static str) -> PlainCounter {
        self.watch_restarts.get_or_create_owned(&[("kind", kind)])
    }
}

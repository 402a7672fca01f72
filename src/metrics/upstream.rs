//! kube-controller-manager's own metrics of the EndpointSlice controller
//! (`endpoint_slice_controller_*`) and of the mirroring controller
//! (`endpoint_slice_mirroring_controller_*`): names, types, labels, buckets and meanings as
//! upstream's, fed by the sync records.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::exposition::{ALPHA, BETA, Exposition, Lazy, PlainCounter};
use crate::engine::{CacheEntry, SliceSyncMetrics, SyncOutcome, SyncRecord};
use crate::index::ServiceKey;
use crate::model::Name;

pub(super) type Label1 = [(&'static str, &'static str); 1];
pub(super) type Label2 = [(&'static str, &'static str); 2];
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Upstream's buckets of endpoints per sync: 2, 4, …, 32768.
fn per_sync_buckets() -> Lazy<Histogram> {
    Lazy::new(Histogram::new(exponential_buckets(2.0, 2.0, 15)))
}

/// client_golang's default buckets, which `endpointslices_changed_per_sync` keeps.
fn default_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// Upstream's metrics cache: each object's totals, and their sums kept by difference, so that an
/// update costs O(1) whatever the cluster's size.
#[derive(Default)]
struct Cache {
    entries: HashMap<ServiceKey, (CacheEntry, Option<&'static str>), ahash::RandomState>,
    endpoints: i64,
    slices: i64,
    desired_slices: i64,
    /// Services per trafficDistribution label. A label once seen stays, at 0, as upstream's.
    by_traffic_distribution: BTreeMap<&'static str, i64>,
}

fn signed(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Cache {
    /// Replaces (`Some`) or drops (`None`) the entry of `key`.
    fn update(&mut self, key: &ServiceKey, entry: Option<(CacheEntry, Option<&'static str>)>) {
        let old = match entry {
            Some(new) => self.entries.insert(key.clone(), new),
            None => self.entries.remove(key),
        };
        let (new_totals, new_td) = entry.unzip();
        let (old_totals, old_td) = old.unzip();
        let (new_totals, old_totals) = (
            new_totals.unwrap_or_default(),
            old_totals.unwrap_or_default(),
        );
        self.endpoints += signed(new_totals.endpoints) - signed(old_totals.endpoints);
        self.slices += signed(new_totals.slices) - signed(old_totals.slices);
        self.desired_slices +=
            signed(new_totals.desired_slices) - signed(old_totals.desired_slices);
        if let Some(td) = old_td.flatten() {
            *self.by_traffic_distribution.entry(td).or_default() -= 1;
        }
        if let Some(td) = new_td.flatten() {
            *self.by_traffic_distribution.entry(td).or_default() += 1;
        }
    }
}

/// `endpointslices_changed_per_sync`'s label: the trafficDistribution that drives hints.
fn traffic_distribution_label(td: Option<&Name>) -> &'static str {
    match td.map(|n| &**n) {
        Some("PreferClose") => "PreferClose",
        Some("PreferSameZone") => "PreferSameZone",
        Some("PreferSameNode") => "PreferSameNode",
        _ => "",
    }
}

/// `services_count_by_traffic_distribution`'s label: upstream names every other value
/// ImplementationSpecific, to bound the label's values.
fn traffic_distribution_count_label(td: Option<&Name>) -> Option<&'static str> {
    td.map(|n| match &**n {
        "PreferClose" => "PreferClose",
        _ => "ImplementationSpecific",
    })
}

/// The EndpointSlice controller's metrics.
pub(super) struct SliceControllerMetrics {
    added: Lazy<Histogram>,
    removed: Lazy<Histogram>,
    endpoints_desired: Lazy<Gauge>,
    num_slices: Lazy<Gauge>,
    desired_slices: Lazy<Gauge>,
    changes: Family<Label1, PlainCounter>,
    changed_per_sync: HistogramFamily<Label2>,
    syncs: Family<Label1, PlainCounter>,
    by_traffic_distribution: Family<Label1, Gauge>,
    cache: Mutex<Cache>,
}

impl SliceControllerMetrics {
    pub(super) fn register(x: &mut Exposition) -> Self {
        let per_sync = |x: &mut Exposition, name, help: &str| {
            x.add(name, format!("{BETA}{help}"), per_sync_buckets())
        };
        SliceControllerMetrics {
            added: per_sync(
                x,
                "endpoint_slice_controller_endpoints_added_per_sync",
                "Number of endpoints added on each Service sync",
            ),
            removed: per_sync(
                x,
                "endpoint_slice_controller_endpoints_removed_per_sync",
                "Number of endpoints removed on each Service sync",
            ),
            endpoints_desired: x.add(
                "endpoint_slice_controller_endpoints_desired",
                format!("{BETA}Number of endpoints desired"),
                Lazy::<Gauge>::default(),
            ),
            num_slices: x.add(
                "endpoint_slice_controller_num_endpoint_slices",
                format!("{BETA}Number of EndpointSlices"),
                Lazy::<Gauge>::default(),
            ),
            desired_slices: x.add(
                "endpoint_slice_controller_desired_endpoint_slices",
                format!(
                    "{BETA}Number of EndpointSlices that would exist with perfect endpoint allocation"
                ),
                Lazy::<Gauge>::default(),
            ),
            changes: x.add(
                "endpoint_slice_controller_changes",
                format!("{ALPHA}Number of EndpointSlice changes"),
                Family::default(),
            ),
            changed_per_sync: x.add(
                "endpoint_slice_controller_endpointslices_changed_per_sync",
                format!("{ALPHA}Number of EndpointSlices changed on each Service sync"),
                Family::new_with_constructor(default_buckets as fn() -> Histogram),
            ),
            syncs: x.add(
                "endpoint_slice_controller_syncs",
                format!("{ALPHA}Number of EndpointSlice syncs"),
                Family::default(),
            ),
            by_traffic_distribution: x.add(
                "endpoint_slice_controller_services_count_by_traffic_distribution",
                format!("{BETA}Number of Services using some specific trafficDistribution"),
                Family::default(),
            ),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// Counts the EndpointSlice controller's syncs among `records`.
    pub(super) fn observe(&self, records: &[&SyncRecord]) {
        if records.is_empty() {
            return;
        }
        let mut cache = self.cache.lock();
        for r in records {
            self.syncs
                .get_or_create(&[("result", r.outcome.as_str())])
                .inc();
            count_changes(&self.changes, r);
            if let Some(m) = &r.slice_metrics {
                self.observe_sync(m);
                let entry = m.cache.map(|e| {
                    (
                        e,
                        traffic_distribution_count_label(m.traffic_distribution.as_ref()),
                    )
                });
                cache.update(&r.service, entry);
            }
        }
        self.endpoints_desired.get().set(cache.endpoints);
        self.num_slices.get().set(cache.slices);
        self.desired_slices.get().set(cache.desired_slices);
        for (td, n) in &cache.by_traffic_distribution {
            self.by_traffic_distribution
                .get_or_create(&[("traffic_distribution", td)])
                .set(*n);
        }
    }

    fn observe_sync(&self, m: &SliceSyncMetrics) {
        let td = traffic_distribution_label(m.traffic_distribution.as_ref());
        for t in &m.per_type {
            self.added.get().observe(t.endpoints_added as f64);
            self.removed.get().observe(t.endpoints_removed as f64);
            if let Some(changed) = t.changed {
                self.changed_per_sync
                    .get_or_create(&[("topology", m.topology), ("traffic_distribution", td)])
                    .observe(changed as f64);
            }
        }
    }
}

/// `changes{operation}`: one per accepted write.
fn count_changes(changes: &Family<Label1, PlainCounter>, record: &SyncRecord) {
    for w in &record.writes {
        changes
            .get_or_create(&[("operation", w.verb.as_str())])
            .inc();
    }
}

/// The mirroring controller's metrics.
pub(super) struct MirroringMetrics {
    added: Lazy<Histogram>,
    updated: Lazy<Histogram>,
    removed: Lazy<Histogram>,
    skipped: Lazy<Histogram>,
    sync_duration: Lazy<Histogram>,
    endpoints_desired: Lazy<Gauge>,
    num_slices: Lazy<Gauge>,
    desired_slices: Lazy<Gauge>,
    changes: Family<Label1, PlainCounter>,
    cache: Mutex<Cache>,
}

impl MirroringMetrics {
    pub(super) fn register(x: &mut Exposition) -> Self {
        let per_sync = |x: &mut Exposition, name, help: &str| {
            x.add(name, format!("{ALPHA}{help}"), per_sync_buckets())
        };
        MirroringMetrics {
            added: per_sync(
                x,
                "endpoint_slice_mirroring_controller_endpoints_added_per_sync",
                "Number of endpoints added on each Endpoints sync",
            ),
            updated: per_sync(
                x,
                "endpoint_slice_mirroring_controller_endpoints_updated_per_sync",
                "Number of endpoints updated on each Endpoints sync",
            ),
            removed: per_sync(
                x,
                "endpoint_slice_mirroring_controller_endpoints_removed_per_sync",
                "Number of endpoints removed on each Endpoints sync",
            ),
            skipped: per_sync(
                x,
                "endpoint_slice_mirroring_controller_addresses_skipped_per_sync",
                "Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
            ),
            sync_duration: x.add(
                "endpoint_slice_mirroring_controller_endpoints_sync_duration",
                format!("{ALPHA}Duration of syncEndpoints() in seconds"),
                Lazy::new(Histogram::new(exponential_buckets(0.001, 2.0, 15))),
            ),
            endpoints_desired: x.add(
                "endpoint_slice_mirroring_controller_endpoints_desired",
                format!("{ALPHA}Number of endpoints desired"),
                Lazy::<Gauge>::default(),
            ),
            num_slices: x.add(
                "endpoint_slice_mirroring_controller_num_endpoint_slices",
                format!("{ALPHA}Number of EndpointSlices"),
                Lazy::<Gauge>::default(),
            ),
            desired_slices: x.add(
                "endpoint_slice_mirroring_controller_desired_endpoint_slices",
                format!(
                    "{ALPHA}Number of EndpointSlices that would exist with perfect endpoint allocation"
                ),
                Lazy::<Gauge>::default(),
            ),
            changes: x.add(
                "endpoint_slice_mirroring_controller_changes",
                format!("{ALPHA}Number of EndpointSlice changes"),
                Family::default(),
            ),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// Counts the mirroring controller's syncs among `records`.
    pub(super) fn observe(&self, records: &[&SyncRecord]) {
        if records.is_empty() {
            return;
        }
        let mut cache = self.cache.lock();
        for r in records {
            count_changes(&self.changes, r);
            // Upstream times every syncEndpoints, whatever its outcome, to the millisecond.
            self.sync_duration
                .get()
                .observe(r.took.as_millis() as f64 / 1000.0);
            let Some(m) = &r.slice_metrics else {
                continue;
            };
            if m.cache.is_some() && r.outcome != SyncOutcome::Stale {
                let sum = |f: fn(&crate::engine::TypeSyncMetrics) -> usize| {
                    m.per_type.iter().map(f).sum::<usize>() as f64
                };
                self.added.get().observe(sum(|t| t.endpoints_added));
                self.removed.get().observe(sum(|t| t.endpoints_removed));
                self.updated.get().observe(m.endpoints_updated as f64);
                self.skipped.get().observe(m.addresses_skipped as f64);
            }
            cache.update(&r.service, m.cache.map(|e| (e, None)));
        }
        self.endpoints_desired.get().set(cache.endpoints);
        self.num_slices.get().set(cache.slices);
        self.desired_slices.get().set(cache.desired_slices);
    }
}

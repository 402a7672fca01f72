//! kube-controller-manager's (cloud-controller-manager's) metrics of the service controller
//! (`service_controller_*`): names, types and buckets as upstream's, fed by the sync records.
//!
//! A node-sync pass here is one batch's `update_hosts` calls, the only calls node sync makes:
//! `nodesync_latency_seconds` observes their summed time, which is the pass's wall time with
//! upstream's one worker.

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::exposition::{ALPHA, Exposition, Lazy, PlainCounter};
use crate::engine::SyncRecord;

/// Upstream's buckets: 1 s doubling, 15 of them.
fn buckets() -> Lazy<Histogram> {
    Lazy::new(Histogram::new(exponential_buckets(1.0, 2.0, 15)))
}

pub(super) struct ServiceControllerMetrics {
    syncs: PlainCounter,
    errors: PlainCounter,
    node_sync: Lazy<Histogram>,
    host_update: Lazy<Histogram>,
}

impl ServiceControllerMetrics {
    pub(super) fn register(x: &mut Exposition) -> Self {
        ServiceControllerMetrics {
            syncs: x.add(
                "service_controller_loadbalancer_sync_total",
                format!("{ALPHA}A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster"),
                PlainCounter::default(),
            ),
            errors: x.add(
                "service_controller_nodesync_error_total",
                format!("{ALPHA}A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster"),
                PlainCounter::default(),
            ),
            node_sync: x.add(
                "service_controller_nodesync_latency_seconds",
                format!("{ALPHA}A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates."),
                buckets(),
            ),
            host_update: x.add(
                "service_controller_update_loadbalancer_host_latency_seconds",
                format!("{ALPHA}A metric measuring the latency for updating each load balancer hosts."),
                buckets(),
            ),
        }
    }

    /// Counts the node-sync calls among the service controller's `records`.
    pub(super) fn observe(&self, records: &[&SyncRecord]) {
        let mut pass = 0.0;
        let mut calls = 0;
        for update in records.iter().filter_map(|r| r.host_update.as_ref()) {
            calls += 1;
            self.syncs.inc();
            if !update.succeeded {
                self.errors.inc();
            }
            let seconds = update.took.as_secs_f64();
            self.host_update.get().observe(seconds);
            pass += seconds;
        }
        if calls > 0 {
            self.node_sync.get().observe(pass);
        }
    }
}

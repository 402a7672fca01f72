//! The cluster-wide state topology hints depend on: each zone's share of allocatable CPU, and the
//! hinted endpoint count per zone of every service that has hints.

use std::collections::HashMap;

use ahash::RandomState;

use super::allocation::OVERLOAD_FACTOR;
use crate::model::{AddressType, Name, Node, keys};
use crate::reconcile::TopologyChange;

/// Node CPU ratios per zone and per-service hint state. Upstream's `TopologyCache`, without the lock:
/// the owner serialises access.
#[derive(Clone, Debug)]
pub struct TopologyCache {
    /// Each zone's share of the CPU of ready worker nodes, sorted by zone. `None` when node
    /// information is insufficient (a node lacks a zone or CPU, or fewer than two zones). Empty
    /// before the first [`TopologyCache::set_nodes`], as upstream's freshly made cache is.
    ratios: Option<Vec<(Name, f64)>>,
    services: HashMap<String, ServiceHints, RandomState>,
}

#[derive(Clone, Debug, Default)]
struct ServiceHints {
    /// Upstream keeps this flag per service, not per address type: removing one type's hints clears
    /// it while another type's counts stay.
    populated: bool,
    /// Hinted endpoints per zone, sorted by zone, for each address type that has hints.
    by_type: Vec<(AddressType, Vec<(Name, usize)>)>,
}

impl Default for TopologyCache {
    fn default() -> Self {
        TopologyCache::new()
    }
}

impl TopologyCache {
    pub fn new() -> Self {
        TopologyCache {
            ratios: Some(Vec::new()),
            services: HashMap::default(),
        }
    }

    /// Recomputes the CPU ratios from the full node list (upstream `SetNodes`). Control-plane and
    /// not-ready nodes are ignored; any other node without a zone or CPU makes the information
    /// insufficient, so hints are refused everywhere rather than skewed.
    pub fn set_nodes<'a>(&mut self, nodes: impl IntoIterator<Item = &'a Node>) {
        let mut cpu_by_zone: Vec<(Name, i64)> = Vec::new();
        let mut total: i64 = 0;
        for node in nodes {
            let excluded = node.labels.contains_key(keys::LABEL_CONTROL_PLANE)
                || node.labels.contains_key(keys::LABEL_MASTER);
            if excluded || !node.ready {
                continue;
            }
            let cpu = node.allocatable_cpu_millis;
            let zone = match node.zone() {
                Some(zone) if cpu > 0 => zone,
                _ => {
                    self.ratios = None;
                    return;
                }
            };
            total = total.saturating_add(cpu);
            match cpu_by_zone.binary_search_by(|(z, _)| z.cmp(zone)) {
                Ok(i) => cpu_by_zone[i].1 = cpu_by_zone[i].1.saturating_add(cpu),
                Err(i) => cpu_by_zone.insert(i, (zone.clone(), cpu)),
            }
        }
        self.ratios = if total == 0 || cpu_by_zone.len() < 2 {
            None
        } else {
            Some(
                cpu_by_zone
                    .into_iter()
                    .map(|(zone, cpu)| (zone, cpu as f64 / total as f64))
                    .collect(),
            )
        };
    }

    /// Each zone's CPU share, sorted by zone; `None` when node information is insufficient.
    pub fn zone_ratios(&self) -> Option<&[(Name, f64)]> {
        self.ratios.as_deref()
    }

    /// The service has hints populated (for any address type).
    pub fn hints_populated(&self, service_key: &str) -> bool {
        self.services.get(service_key).is_some_and(|s| s.populated)
    }

    /// The hinted endpoints per zone last recorded for this service and address type.
    pub fn zone_counts(
        &self,
        service_key: &str,
        address_type: &AddressType,
    ) -> Option<&[(Name, usize)]> {
        let service = self.services.get(service_key)?;
        service
            .by_type
            .iter()
            .find(|(t, _)| t == address_type)
            .map(|(_, counts)| counts.as_slice())
    }

    /// Records the outcome of a sync. Removing hints that are not there is a no-op.
    pub fn apply(&mut self, service_key: &str, changes: &[TopologyChange]) {
        for change in changes {
            match change {
                TopologyChange::Populated {
                    address_type,
                    zone_counts,
                } => {
                    let service = self.services.entry(service_key.to_owned()).or_default();
                    service.populated = true;
                    let mut counts = zone_counts.clone();
                    counts.sort_by(|a, b| a.0.cmp(&b.0));
                    match service.by_type.iter_mut().find(|(t, _)| t == address_type) {
                        Some(entry) => entry.1 = counts,
                        None => service.by_type.push((address_type.clone(), counts)),
                    }
                }
                TopologyChange::Removed { address_type } => {
                    let Some(service) = self.services.get_mut(service_key) else {
                        continue;
                    };
                    service.populated = false;
                    service.by_type.retain(|(t, _)| t != address_type);
                    if service.by_type.is_empty() {
                        self.services.remove(service_key);
                    }
                }
            }
        }
    }

    /// Forgets everything about a deleted service.
    pub fn remove_service(&mut self, service_key: &str) {
        self.services.remove(service_key);
    }

    /// Services with hints where some zone now gets less than its minimum share under the current
    /// ratios (upstream `GetOverloadedServices`), sorted. Called after node changes to requeue them.
    pub fn overloaded_services(&self) -> Vec<String> {
        let ratios = self.ratios.as_deref().unwrap_or_default();
        let mut keys: Vec<String> = self
            .services
            .iter()
            .filter(|(_, s)| {
                s.by_type
                    .iter()
                    .any(|(_, counts)| overloaded(counts, ratios))
            })
            .map(|(key, _)| key.clone())
            .collect();
        keys.sort_unstable();
        keys
    }
}

/// Some zone has fewer hinted endpoints than ⌈total·ratio / 1.2⌉, or none at all.
fn overloaded(counts: &[(Name, usize)], ratios: &[(Name, f64)]) -> bool {
    if counts.is_empty() {
        return false;
    }
    if ratios.is_empty() {
        return true;
    }
    let total = counts.iter().map(|(_, n)| *n as f64).sum::<f64>();
    ratios.iter().any(|(zone, ratio)| {
        match counts.binary_search_by(|(z, _)| z.cmp(zone)) {
            // Same operation order as upstream so the ceiling lands on the same side.
            Ok(i) => (counts[i].1 as f64) < (total * ratio * OVERLOAD_FACTOR).ceil(),
            Err(_) => true,
        }
    })
}

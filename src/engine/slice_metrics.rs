//! What a sync of the EndpointSlice or mirroring controller did that upstream's metrics count, read
//! off its plan and the slices it started from, so that the metrics layer never recomputes a plan.

use smallvec::SmallVec;

use crate::model::{AddressType, EndpointPort, EndpointSlice, Name, Service};
use crate::reconcile::topology::{hints_enabled, traffic_distribution_usable};
use crate::reconcile::{Options, Plan};
use crate::sink::{ApplyOutcome, TypeStatus};

/// One sync's figures for upstream's EndpointSlice (or mirroring) controller metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SliceSyncMetrics {
    /// One entry per address type reconciled, in order (mirroring: one for the whole sync).
    pub per_type: SmallVec<[TypeSyncMetrics; 2]>,
    /// Mirroring: endpoints kept whose attributes changed.
    pub endpoints_updated: usize,
    /// Mirroring: addresses left out, invalid or over the per-subset cap.
    pub addresses_skipped: usize,
    /// The object's entry in upstream's metrics cache after this sync; `None` drops the entry
    /// (the service is gone, or the Endpoints no longer mirrored).
    pub cache: Option<CacheEntry>,
    /// `endpointslices_changed_per_sync`'s `topology` label: "Auto" or "Disabled".
    pub topology: &'static str,
    /// The service's trafficDistribution when it drives hints (upstream's `canUseTrafficDistribution`).
    pub traffic_distribution: Option<Name>,
}

/// One address type of a sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeSyncMetrics {
    /// Desired endpoints not found in any existing slice of a desired port group.
    pub endpoints_added: usize,
    /// Endpoints dropped from existing slices of port groups still desired.
    pub endpoints_removed: usize,
    /// Writes of this address type when every one succeeded; `None` when one failed or the
    /// namespace is terminating (upstream then observes nothing).
    pub changed: Option<usize>,
}

/// A service's (or mirrored Endpoints') totals in upstream's metrics cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheEntry {
    /// Desired endpoints, over its port groups.
    pub endpoints: usize,
    /// Slices after the sync: existing + created − deleted.
    pub slices: usize,
    /// Σ ⌈endpoints / max⌉ over its port groups; for the EndpointSlice controller at least 1 (the
    /// placeholder).
    pub desired_slices: usize,
}

impl SliceSyncMetrics {
    /// An EndpointSlice controller sync's figures, before its plan is applied. Upstream's cache
    /// keeps one address type per service (the last reconciled: kubernetes#126004); so does this.
    /// `incremental`: the plan is the incremental reconciler's, whose preconditions put every slice
    /// holding endpoints in one port group, so ports need not be compared.
    pub(super) fn of_service(
        service: &Service,
        existing: &[&EndpointSlice],
        plan: &Plan,
        options: &Options,
        incremental: bool,
    ) -> Self {
        let last = plan.per_type.last().and_then(|t| t.address_type.as_ref());
        let max = options.max_endpoints_per_slice.max(1);
        let grouping = if incremental {
            Grouping::Single
        } else {
            Grouping::ByPorts
        };
        SliceSyncMetrics {
            per_type: per_type(plan),
            cache: Some(cache_entry(existing, plan, last, max, grouping, true)),
            topology: if hints_enabled(&service.meta.annotations) {
                "Auto"
            } else {
                "Disabled"
            },
            traffic_distribution: traffic_distribution_usable(service, options)
                .then(|| service.traffic_distribution.clone())
                .flatten(),
            ..SliceSyncMetrics::default()
        }
    }

    /// A mirroring sync's figures, before its plan is applied. A plan that only deletes (the
    /// Endpoints is not mirrored) drops the cache entry.
    pub(super) fn of_mirroring(existing: &[&EndpointSlice], plan: &Plan, max: usize) -> Self {
        let mirrored = !plan.per_type.is_empty();
        SliceSyncMetrics {
            per_type: per_type(plan),
            endpoints_updated: plan.per_type.iter().map(|t| t.endpoints_updated).sum(),
            addresses_skipped: plan.addresses_skipped,
            cache: mirrored
                .then(|| cache_entry(existing, plan, None, max.max(1), Grouping::ByPorts, false)),
            topology: "Disabled",
            ..SliceSyncMetrics::default()
        }
    }

    /// A service that is gone: its cache entry goes.
    pub(super) fn deleted() -> Self {
        SliceSyncMetrics {
            topology: "Disabled",
            ..SliceSyncMetrics::default()
        }
    }

    /// Records which address types' writes all succeeded.
    pub(super) fn applied(&mut self, outcome: &ApplyOutcome) {
        for (t, o) in self.per_type.iter_mut().zip(&outcome.per_type) {
            t.changed = (o.status == TypeStatus::Completed).then_some(o.planned);
        }
    }
}

fn per_type(plan: &Plan) -> SmallVec<[TypeSyncMetrics; 2]> {
    plan.per_type
        .iter()
        .map(|t| TypeSyncMetrics {
            endpoints_added: t.endpoints_added,
            endpoints_removed: t.endpoints_removed,
            changed: None,
        })
        .collect()
}

/// Endpoints and slices per port group once `plan` is carried out: the existing slices it neither
/// updates nor deletes, plus those it writes; only of `address_type` when given. Each desired
/// endpoint sits in exactly one of them, so this is upstream's {endpoints, slices} per port map.
/// It runs on every sync, over every slice of the service: the loops are kept plain.
fn cache_entry(
    existing: &[&EndpointSlice],
    plan: &Plan,
    address_type: Option<&AddressType>,
    max: usize,
    grouping: Grouping,
    placeholder: bool,
) -> CacheEntry {
    let of_type = |s: &EndpointSlice| address_type.is_none_or(|t| s.address_type == *t);
    let mut rewritten = rewritten_positions(existing, plan);
    rewritten.sort_unstable();
    let mut rewritten = rewritten.into_iter().peekable();
    let mut groups = Groups {
        grouping,
        groups: SmallVec::new(),
    };
    for (i, slice) in existing.iter().enumerate() {
        // The positions are sorted: a cursor, not a search per slice.
        if rewritten.next_if_eq(&i).is_some() {
            while rewritten.next_if_eq(&i).is_some() {}
            continue;
        }
        if of_type(slice) {
            groups.add(slice);
        }
    }
    for t in &plan.per_type {
        for slice in t.creates.iter().chain(&t.updates) {
            if of_type(slice) {
                groups.add(slice);
            }
        }
    }
    let mut entry = CacheEntry::default();
    for (_, endpoints, slices) in &groups.groups {
        entry.endpoints += endpoints;
        entry.slices += slices;
        entry.desired_slices += endpoints.div_ceil(max);
    }
    if placeholder {
        entry.desired_slices = entry.desired_slices.max(1);
    }
    entry
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Grouping {
    /// Slices are grouped by their set of ports.
    ByPorts,
    /// Every slice holding endpoints is known to be of one port group. Empty slices add nothing
    /// but a slice, whatever their group, so all are counted as one group without reading ports.
    Single,
}

/// Port groups: ports, endpoints, slices.
struct Groups<'a> {
    grouping: Grouping,
    groups: SmallVec<[(&'a [EndpointPort], usize, usize); 4]>,
}

impl<'a> Groups<'a> {
    fn add(&mut self, slice: &'a EndpointSlice) {
        let n = slice.endpoints.len();
        let found = match self.grouping {
            Grouping::Single => self.groups.first_mut(),
            Grouping::ByPorts => self
                .groups
                .iter_mut()
                .find(|(p, _, _)| same_ports(p, &slice.ports)),
        };
        match found {
            Some((_, endpoints, slices)) => {
                *endpoints += n;
                *slices += 1;
            }
            None => self.groups.push((&slice.ports, n, 1)),
        }
    }
}

/// Positions in `existing` of the slices the plan updates or deletes. A write carries the name of
/// the slice it replaces, nearly always the same allocation: addresses are compared first, and the
/// text only when no address matches.
fn rewritten_positions(existing: &[&EndpointSlice], plan: &Plan) -> SmallVec<[usize; 8]> {
    let names = plan
        .per_type
        .iter()
        .flat_map(|t| t.updates.iter().chain(&t.deletes))
        .chain(&plan.unsupported_deletes)
        .map(|s| s.meta.name.as_str());
    let mut out = SmallVec::new();
    for name in names {
        let same_allocation = |s: &&EndpointSlice| {
            let other = s.meta.name.as_str();
            other.as_ptr() == name.as_ptr() && other.len() == name.len()
        };
        let found = existing
            .iter()
            .position(same_allocation)
            .or_else(|| existing.iter().position(|s| s.meta.name.as_str() == name));
        out.extend(found);
    }
    out
}

/// Upstream keys port groups by the set of ports, whatever their order.
fn same_ports(a: &[EndpointPort], b: &[EndpointPort]) -> bool {
    if a == b {
        return true;
    }
    if a.len() != b.len() {
        return false;
    }
    sorted(a) == sorted(b)
}

fn sorted(ports: &[EndpointPort]) -> SmallVec<[&EndpointPort; 4]> {
    let mut v: SmallVec<[&EndpointPort; 4]> = ports.iter().collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::model::{Address, Conditions, Endpoint, Meta, intern};
    use crate::reconcile::AddressTypePlan;

    fn port(name: &str, number: i32) -> EndpointPort {
        EndpointPort {
            name: Some(intern(name)),
            port: Some(number),
            protocol: None,
            app_protocol: None,
        }
    }

    fn slice(name: &str, t: AddressType, ports: Vec<EndpointPort>, n: usize) -> EndpointSlice {
        let endpoint = |i: usize| Endpoint {
            addresses: smallvec::smallvec![Address::Ip(IpAddr::V4(Ipv4Addr::from(i as u32)))],
            conditions: Conditions::default(),
            hostname: None,
            target_ref: None,
            node_name: None,
            zone: None,
            hints: None,
        };
        EndpointSlice {
            meta: Meta {
                name: intern(name),
                ..Meta::default()
            },
            generate_name: None,
            owner_references: Vec::new(),
            address_type: t,
            ports,
            endpoints: (0..n).map(|i| std::sync::Arc::new(endpoint(i))).collect(),
        }
    }

    #[test]
    fn port_groups_ignore_port_order() {
        let (a, b) = (port("a", 1), port("b", 2));
        assert!(same_ports(&[a.clone(), b.clone()], &[b.clone(), a.clone()]));
        assert!(!same_ports(
            std::slice::from_ref(&a),
            std::slice::from_ref(&b)
        ));
        assert!(!same_ports(std::slice::from_ref(&a), &[a.clone(), b]));
    }

    #[test]
    fn cache_entry_counts_the_slices_after_the_plan() {
        let v4 = AddressType::IPv4;
        let ports = vec![port("http", 80), port("grpc", 90)];
        let swapped = vec![port("grpc", 90), port("http", 80)];
        let kept = slice("kept", v4.clone(), ports.clone(), 100);
        let updated = slice("updated", v4.clone(), ports.clone(), 50);
        let deleted = slice("deleted", v4.clone(), vec![port("old", 1)], 7);
        let existing = [&kept, &updated, &deleted];
        let plan = Plan {
            per_type: vec![AddressTypePlan {
                address_type: Some(v4.clone()),
                creates: vec![slice("", v4.clone(), swapped, 30)],
                updates: vec![slice("updated", v4.clone(), ports, 60)],
                deletes: vec![deleted.clone()],
                ..AddressTypePlan::default()
            }],
            ..Plan::default()
        };
        let entry = cache_entry(&existing, &plan, Some(&v4), 100, Grouping::ByPorts, true);
        assert_eq!(
            entry,
            CacheEntry {
                endpoints: 190,
                slices: 3,
                desired_slices: 2,
            }
        );
        // Another address type's slices are not counted (upstream keeps one type per service).
        let entry = cache_entry(
            &existing,
            &plan,
            Some(&AddressType::IPv6),
            100,
            Grouping::ByPorts,
            true,
        );
        assert_eq!(
            entry,
            CacheEntry {
                endpoints: 0,
                slices: 0,
                desired_slices: 1,
            }
        );
        // A placeholder: one empty slice, which upstream desires too.
        let placeholder = Plan {
            per_type: vec![AddressTypePlan {
                creates: vec![slice("", v4.clone(), Vec::new(), 0)],
                ..AddressTypePlan::default()
            }],
            ..Plan::default()
        };
        let entry = cache_entry(&[], &placeholder, Some(&v4), 100, Grouping::ByPorts, true);
        assert_eq!((entry.slices, entry.desired_slices), (1, 1));
        // One port group with endpoints, and an empty slice of other ports: counting them as one
        // group, as the incremental path does, gives the same figures.
        let empty = slice("empty", v4.clone(), Vec::new(), 0);
        let one_group = [&kept, &updated, &empty];
        let no_writes = Plan::default();
        assert_eq!(
            cache_entry(
                &one_group,
                &no_writes,
                Some(&v4),
                100,
                Grouping::Single,
                true
            ),
            cache_entry(
                &one_group,
                &no_writes,
                Some(&v4),
                100,
                Grouping::ByPorts,
                true
            ),
        );
        // Mirroring has no placeholder.
        let entry = cache_entry(&[], &Plan::default(), None, 100, Grouping::ByPorts, false);
        assert_eq!(entry, CacheEntry::default());
    }
}

//! The EndpointSlice reconciler: one sync of one service, as upstream's `Reconcile` does it, returned
//! as a plan of writes instead of API calls.

mod desired;
mod incremental;
mod placement;

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use smallvec::SmallVec;

use super::hash_order;
use super::topology::{self, TopologyCache, TopologyInput};
use super::{AddressTypePlan, Options, Plan, TopologyChange};
use crate::model::{
    AddressType, ClusterIp, EndpointPort, EndpointSlice, IpFamily, Labels, Meta, Name, Node,
    OwnerReference, Pod, Service, Timestamp, intern, keys,
};
use desired::{Desired, desired_endpoints, port_key};
use placement::{SliceLabels, place};

pub use desired::{endpoint_ports, pod_has_endpoint};
pub use incremental::{IncrementalInput, reconcile_incremental};

/// Finds nodes by name.
pub trait NodeLookup: Sync {
    fn node(&self, name: &str) -> Option<&Node>;
}

impl<S: BuildHasher + Sync> NodeLookup for HashMap<Name, Node, S> {
    fn node(&self, name: &str) -> Option<&Node> {
        self.get(name)
    }
}

impl<S: BuildHasher + Sync> NodeLookup for hashbrown::HashMap<Name, std::sync::Arc<Node>, S> {
    fn node(&self, name: &str) -> Option<&Node> {
        self.get(name).map(|node| &**node)
    }
}

/// Everything one sync of one service reads.
pub struct SyncInput<'a> {
    pub service: &'a Service,
    /// The pods the service's selector matches, in a stable order.
    pub pods: &'a [&'a Pod],
    pub nodes: &'a dyn NodeLookup,
    /// The slices managed by this controller for this service, without those being deleted.
    pub slices: &'a [&'a EndpointSlice],
    /// The last-change-trigger-time to write; `None` removes the annotation.
    pub trigger_time: Option<Timestamp>,
    pub topology: &'a TopologyCache,
    pub options: &'a Options,
}

/// The address types a service's slices have: from `ipFamilies`, or for a legacy service without
/// them, the family of its cluster IP, or both for a headless one.
pub fn address_types(service: &Service) -> SmallVec<[AddressType; 2]> {
    let mut types: SmallVec<[AddressType; 2]> = SmallVec::new();
    for family in &service.ip_families {
        let t = AddressType::for_family(*family);
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.is_empty() {
        match &service.cluster_ip {
            ClusterIp::Ip(ip) => types.push(AddressType::for_family(IpFamily::of(ip))),
            ClusterIp::Headless | ClusterIp::Unset => {
                types.push(AddressType::IPv4);
                types.push(AddressType::IPv6);
            }
        }
    }
    types
}

/// Reconciles one service: the plan of writes that brings its slices in step with its pods.
pub fn reconcile(input: &SyncInput) -> Plan {
    let service = input.service;
    let mut plan = Plan {
        service_key: service.meta.key(),
        ..Plan::default()
    };
    let supported = address_types(service);
    let mut by_type: Vec<Vec<&EndpointSlice>> = vec![Vec::new(); supported.len()];
    for slice in input.slices {
        match supported.iter().position(|t| *t == slice.address_type) {
            Some(i) => by_type[i].push(slice),
            None => {
                let removed = TopologyChange::Removed {
                    address_type: slice.address_type.clone(),
                };
                if !plan.topology_changes.contains(&removed) {
                    plan.topology_changes.push(removed);
                }
                plan.unsupported_deletes.push((*slice).clone());
            }
        }
    }
    let labels = SliceLabels::of(service);
    for (address_type, existing) in supported.iter().zip(by_type) {
        reconcile_address_type(input, address_type, &existing, &labels, &mut plan);
    }
    plan
}

/// A new, empty slice of this service: the shape of every create and of the placeholder.
fn new_slice(
    service: &Service,
    address_type: &AddressType,
    ports: Vec<EndpointPort>,
    labels: &Labels,
) -> EndpointSlice {
    EndpointSlice {
        meta: Meta {
            namespace: service.meta.namespace.clone(),
            labels: labels.clone(),
            ..Meta::default()
        },
        generate_name: Some(Name::new(&format!("{}-", service.meta.name))),
        owner_references: vec![OwnerReference {
            api_version: intern("v1"),
            kind: intern("Service"),
            name: service.meta.name.clone(),
            uid: service.meta.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        address_type: address_type.clone(),
        ports,
        endpoints: Vec::new(),
    }
}

/// Upstream's placeholder comparison: namespace, labels, address type, ports and endpoints. Of the
/// metadata only namespace and labels count, so neither name, annotations nor owner references do: a
/// placeholder left by an older Service of the same name is kept.
fn placeholder_equal(a: &EndpointSlice, b: &EndpointSlice) -> bool {
    a.meta.namespace == b.meta.namespace
        && a.meta.labels == b.meta.labels
        && a.address_type == b.address_type
        && a.ports == b.ports
        && a.endpoints == b.endpoints
}

/// A service with no endpoints of this type keeps one empty slice, so that consumers can tell "no
/// endpoints" from "not yet reconciled". An identical one is left alone. `existing` counts every
/// slice of the type, owned or not.
fn placeholder_rule(
    service: &Service,
    address_type: &AddressType,
    existing: usize,
    labels: &SliceLabels<'_>,
    out: &mut AddressTypePlan,
) {
    if existing == out.deletes.len() && out.creates.is_empty() {
        let placeholder = new_slice(service, address_type, Vec::new(), labels.desired());
        if out.deletes.len() == 1 && placeholder_equal(&out.deletes[0], &placeholder) {
            out.deletes.clear();
        } else {
            out.creates.push(placeholder);
        }
    }
}

fn reconcile_address_type(
    input: &SyncInput,
    address_type: &AddressType,
    existing: &[&EndpointSlice],
    labels: &SliceLabels<'_>,
    plan: &mut Plan,
) {
    let service = input.service;
    let mut out = AddressTypePlan {
        address_type: Some(address_type.clone()),
        ..AddressTypePlan::default()
    };

    // Existing slices by port group; slices not owned by this service (an older service of the same
    // name) go.
    let mut existing_groups: Vec<(SmallVec<[EndpointPort; 4]>, Vec<&EndpointSlice>)> = Vec::new();
    for slice in existing {
        if !slice.is_owned_by(&service.meta.uid) {
            out.deletes.push((*slice).clone());
            continue;
        }
        let key = port_key(&slice.ports);
        match existing_groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(slice),
            None => existing_groups.push((key, vec![slice])),
        }
    }

    // Only IP address types have endpoints to place (and `address_types` yields no other).
    let mut desired = match address_type.family() {
        Some(family) => desired_endpoints(service, input.pods, input.nodes, family),
        None => Desired::default(),
    };
    plan.errors.append(&mut desired.errors);
    // The same pods for every address type: a pod is left out before its addresses are read.
    if plan.pods_on_missing_nodes.is_empty() {
        plan.pods_on_missing_nodes = std::mem::take(&mut desired.left_out);
    }

    let max = input.options.max_endpoints_per_slice.max(1);
    for group in &mut desired.groups {
        let slices = existing_groups
            .iter()
            .find(|(k, _)| *k == group.key)
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[]);
        // The ports are copied only into a slice that is made.
        let ports = &group.ports;
        let make = || new_slice(service, address_type, ports.clone(), labels.desired());
        let result = place(slices, &mut group.desired, max, labels, &make);
        out.endpoints_added += result.added;
        out.endpoints_removed += result.removed;
        out.creates.extend(result.creates);
        out.updates.extend(result.updates);
        out.deletes.extend(result.deletes);
    }
    // Port groups no longer desired go whole.
    for (key, slices) in &existing_groups {
        if !desired.groups.iter().any(|g| g.key == *key) {
            out.deletes.extend(slices.iter().map(|s| (*s).clone()));
        }
    }

    placeholder_rule(service, address_type, existing.len(), labels, &mut out);

    let changed: HashSet<&str, ahash::RandomState> = out
        .updates
        .iter()
        .chain(&out.deletes)
        .map(|s| s.meta.name.as_str())
        .collect();
    let unchanged: Vec<&EndpointSlice> = existing
        .iter()
        .copied()
        .filter(|s| !changed.contains(s.meta.name.as_str()))
        .collect();
    let topology_input = TopologyInput {
        service,
        service_key: &plan.service_key,
        address_type,
        options: input.options,
        cache: input.topology,
    };
    let hints = topology::apply_hints_after(
        &topology_input,
        &plan.topology_changes,
        &mut out.creates,
        &mut out.updates,
        &unchanged,
    );
    plan.events.extend(hints.events);
    plan.topology_changes.extend(hints.change);

    finish(service, existing, input.trigger_time, &mut out);
    plan.per_type.push(out);
}

/// The last steps of one address type, after placement and hints; shared with the incremental
/// path. `existing` must hold at least the slices that `out` updates.
fn finish(
    service: &Service,
    existing: &[&EndpointSlice],
    trigger_time: Option<Timestamp>,
    out: &mut AddressTypePlan,
) {
    drop_noop_updates(existing, out);
    recycle(service, out);
    if service.meta.deletion_timestamp.is_some() {
        // Creating while the garbage collector deletes would race it.
        out.creates.clear();
    }
    for slice in out.creates.iter_mut().chain(out.updates.iter_mut()) {
        // Upstream writes every slice's ports in its hash order, however they were before.
        hash_order::sort_slice_ports(&mut slice.ports);
        set_trigger_time(slice, trigger_time);
    }
}

/// Drops updates that would write exactly what the slice already holds. Upstream sends them when its
/// hint validation finds an existing slice invalid but recomputes the same hints (a self-hint for a
/// zone outside the allocation, or no hints where an endpoint has no zone): every sync then rewrites
/// the slice and wakes every watcher for nothing.
fn drop_noop_updates(existing: &[&EndpointSlice], out: &mut AddressTypePlan) {
    if out.updates.is_empty() {
        return;
    }
    let by_name: HashMap<&str, &EndpointSlice, ahash::RandomState> = existing
        .iter()
        .map(|s| (s.meta.name.as_str(), *s))
        .collect();
    out.updates.retain(|update| {
        !by_name.get(update.meta.name.as_str()).is_some_and(|old| {
            old.meta.labels == update.meta.labels
                && old.meta.annotations == update.meta.annotations
                && old.owner_references == update.owner_references
                && old.address_type == update.address_type
                && old.ports == update.ports
                && old.endpoints == update.endpoints
        })
    });
}

/// Turns delete + create pairs into updates of the slice that would be deleted: fewer writes, and
/// the slices end up tightly packed. The new content is sent whole, unconditionally.
fn recycle(service: &Service, out: &mut AddressTypePlan) {
    let mut i = 0;
    while i < out.deletes.len() && !out.creates.is_empty() {
        let old = &out.deletes[i];
        let owned = old.is_owned_by(&service.meta.uid);
        match out.creates.last() {
            Some(create) if owned && create.address_type == old.address_type => {
                let old = out.deletes.remove(i);
                if let Some(mut slice) = out.creates.pop() {
                    slice.meta.name = old.meta.name;
                    out.updates.push(slice);
                }
            }
            _ => i += 1,
        }
    }
}

/// Sets (or removes) the trigger-time annotation on every slice the plan creates or updates, as
/// the reconcile does: for a caller that learns the trigger time only once the plan is made.
pub fn set_plan_trigger_time(plan: &mut Plan, at: Option<Timestamp>) {
    for t in &mut plan.per_type {
        for slice in t.creates.iter_mut().chain(t.updates.iter_mut()) {
            set_trigger_time(slice, at);
        }
    }
}

fn set_trigger_time(slice: &mut EndpointSlice, at: Option<Timestamp>) {
    let annotations = &mut slice.meta.annotations;
    *annotations = match at {
        Some(t) => annotations.with(keys::ANNOTATION_TRIGGER_TIME, &format_rfc3339_nano(t)),
        None => annotations.without(keys::ANNOTATION_TRIGGER_TIME),
    };
}

/// Go's RFC3339Nano in UTC: fractional seconds only when non-zero, without trailing zeros.
pub fn format_rfc3339_nano(t: Timestamp) -> String {
    let secs = t.as_second();
    let nanos = t.subsec_nanosecond();
    let whole = Timestamp::from_second(secs).unwrap_or(t);
    let base = whole.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    if nanos == 0 {
        format!("{base}Z")
    } else {
        let frac = format!("{nanos:09}");
        format!("{base}.{}Z", frac.trim_end_matches('0'))
    }
}

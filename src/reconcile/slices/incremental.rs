//! The incremental reconcile: the plan of one sync computed from only the pods that changed since
//! the last sync, equal (same writes, same order, same objects) to what [`reconcile`] would return on
//! the same state, at a cost in the changed pods and the slices they touch instead of the whole
//! service.
//!
//! # Why it is exact
//!
//! If the last sync fully succeeded and nothing but the changed pods moved since, every unchanged
//! pod's endpoint already sits in exactly one slice with equal attributes. The full reconcile's step 1
//! therefore leaves every slice without a changed pod's endpoint unchanged; only the slices holding a
//! changed pod's old endpoint (found with `locate`) can be updated or emptied. What is still desired
//! after step 1 is exactly the changed pods' new endpoints not found in place, in pod name order (the
//! order the full reconcile pops them, as it gets pods sorted by name). Step 2 tops up exactly the
//! updated slices, fullest first; step 3 needs only the lengths of the unchanged slices. The tail
//! (hints stripping, no-op drop, recycling, the service-deletion rule, the trigger time) is the full
//! path's own.
//!
//! A service whose pods serve its ports several ways (named target ports, several templates) has a
//! port group per way. When every changed pod's old and new endpoints are of one group, every other
//! group's desired endpoints are exactly those its slices hold: the full reconcile places each
//! group apart, and writes nothing for those. So the plan is that one group's, placed as above,
//! and recycling pairs its own creates and deletes only.
//!
//! # The caller's contract
//!
//! - The last sync of this service made all its writes, its plan's only errors were pods left
//!   out for a missing node (`Plan::pods_on_missing_nodes`), and `slices` are those written
//!   objects (as the full reconcile gets them, in the same order).
//! - Since then, no event for the service, its slices or any node; only the pods in `changed`
//!   changed (were added, updated, deleted, or joined or left the selector). The pods the last
//!   sync left out and that did not change since are in `left_out`: the full reconcile reports
//!   each again, and they change nothing else.
//! - The full reconcile this stands for gets its pods sorted by name (as the index's member sets
//!   give them).
//! - `locate` tells where each pod's endpoint was after the last sync, per address type.
//!
//! Under that contract, no slice carries hints or a duplicate endpoint (the last sync stripped or
//! dropped them), and every unchanged pod with an endpoint is on a node that exists, its endpoint
//! exactly what the full reconcile would build now: it is kept as it is rather than rebuilt from
//! the pod. Hints are checked for the slices that are rewritten, not for the others, which would
//! cost a walk over every endpoint.
//!
//! # Preconditions checked (`None` when one fails: run the full reconcile)
//!
//! 1. The service is not being deleted (its last sync created nothing, so endpoints may be
//!    missing), has no topology-hints annotation that enables hints and no usable
//!    trafficDistribution, and the topology cache holds no hints state for it.
//! 2. The changes touch one port group: every service port has a numeric targetPort (or there are
//!    none), or, with named ones, every changed pod with an endpoint resolves to the same ports
//!    (when none has one: the slices its old endpoints are in, or when none is located, every
//!    slice holding endpoints, have the same ports).
//! 3. Every existing slice has one of the service's address types, is owned by the service and
//!    carries exactly the service's desired labels. It has the changed group's ports; or, with
//!    named target ports, another group's and endpoints; or, with numeric ones, no endpoints (the
//!    placeholder of a type without endpoints, which the full reconcile deletes whole and then
//!    keeps by the placeholder rule). With named target ports, an empty slice of another group
//!    stays when some pod still resolves to that group without an endpoint of its type, which
//!    only the full reconcile, reading every pod, can tell.
//! 4. `changed` is sorted by name without repeats, each pod under its own name. A changed pod on a
//!    missing node (unless the service publishes not-ready addresses) is left out, with the full
//!    reconcile's error; its ports still count for the group, as the full reconcile's grouping
//!    comes before the node is looked up. Each pod of `left_out` is still left out, and not
//!    among `changed`.
//! 5. `locate` is consistent with the slices it points at: each located endpoint is in that slice,
//!    of that type and of the changed group, and a rewritten slice holds no endpoint of a changed
//!    pod located elsewhere.
//! 6. Every endpoint of a rewritten slice (and of an unchanged slice that step 3 tops up) has no
//!    hints and names its pod.
//! 7. The changed port group still exists: an endpoint of an unchanged pod remains, or a changed
//!    pod has one. Without it the full reconcile deletes every slice of the group whatever it
//!    holds.
//!
//! The placeholder rule itself (all slices of a type deleted and nothing created) is the full
//! path's own code, applied to the exact counts, so it needs no precondition.
//!
//! [`reconcile`]: super::reconcile

use std::sync::Arc;

use smallvec::SmallVec;

use super::desired::{
    Candidate, candidate, is_same_endpoint, pod_has_endpoint, pod_zone, port_key, ports_with,
};
use super::placement::{SliceLabels, State, closest_to_full, rewrite};
use super::{NodeLookup, address_types, finish, new_slice, placeholder_rule};
use crate::model::{
    AddressType, Endpoint, EndpointPort, EndpointSlice, IpFamily, Labels, Name, Pod, Service,
    TargetPort, Timestamp,
};
use crate::reconcile::topology::{self, TopologyCache, TopologyInput};
use crate::reconcile::{AddressTypePlan, Options, Plan};

/// What an incremental sync of one service reads.
pub struct IncrementalInput<'a> {
    pub service: &'a Service,
    /// Pods whose state changed since the last sync that fully succeeded, by name: `Some(pod)` if it
    /// still exists and is selected, `None` if it was deleted or is no longer selected. Sorted by
    /// name (byte order, as `Name` sorts), each name once.
    pub changed: &'a [(Name, Option<&'a Pod>)],
    /// The pods the last sync left out for a missing node that have not changed since (none of
    /// them in `changed`).
    pub left_out: &'a [&'a Pod],
    pub nodes: &'a dyn NodeLookup,
    /// The service's managed slices, as `SyncInput::slices`, in the same order.
    pub slices: &'a [&'a EndpointSlice],
    /// Where a pod's endpoint of one address type was after the last sync: an index into `slices`.
    pub locate: &'a dyn Fn(&str, &AddressType) -> Option<usize>,
    /// The last-change-trigger-time to write; `None` removes the annotation.
    pub trigger_time: Option<Timestamp>,
    pub topology: &'a TopologyCache,
    pub options: &'a Options,
}

/// The ports of the one port group the changed pods touch. With numeric target ports every pod
/// has the same ports. With named ones, pods of different templates may resolve differently: then
/// every changed pod with an endpoint must agree on one group (the slices of any other stay as
/// they are); when none has an endpoint, the slices their old endpoints are in must, or when none
/// is located, every slice holding endpoints; else `None`.
fn changed_port_group(
    input: &IncrementalInput,
    types: &[AddressType],
) -> Option<Vec<EndpointPort>> {
    let (service, changed, slices) = (input.service, input.changed, input.slices);
    if service
        .ports
        .iter()
        .all(|p| matches!(p.target_port, TargetPort::Number(_)))
    {
        return Some(ports_with(service, &[]));
    }
    let mut group: Option<Vec<EndpointPort>> = None;
    let mut agree = |ports: Vec<EndpointPort>| match &group {
        None => {
            group = Some(ports);
            true
        }
        Some(g) => port_key(g) == port_key(&ports),
    };
    let mut pods_agree = false;
    for pod in changed.iter().filter_map(|(_, p)| *p) {
        if pod_has_endpoint(pod) {
            if !agree(ports_with(service, &pod.named_ports)) {
                return None;
            }
            pods_agree = true;
        }
    }
    if pods_agree {
        return group;
    }
    let mut located = false;
    for (name, _) in changed {
        for t in types {
            if let Some(slice) = (input.locate)(name, t).and_then(|i| slices.get(i)) {
                located = true;
                if !agree(slice.ports.clone()) {
                    return None;
                }
            }
        }
    }
    if !located {
        for slice in slices.iter().filter(|s| !s.endpoints.is_empty()) {
            if !agree(slice.ports.clone()) {
                return None;
            }
        }
    }
    group
}

/// The plan [`super::reconcile`] would return for this state, or `None` when a precondition (see the
/// module doc) does not hold and the full reconcile must run.
pub fn reconcile_incremental(input: &IncrementalInput) -> Option<Plan> {
    let service = input.service;
    let changed = input.changed;
    // A service being deleted gets no creates, so its last sync left endpoints unplaced.
    if service.meta.deletion_timestamp.is_some() {
        return None;
    }
    if topology::hints_enabled(&service.meta.annotations)
        || topology::traffic_distribution_usable(service, input.options)
    {
        return None;
    }
    if !changed
        .windows(2)
        .all(|w| w[0].0.as_str() < w[1].0.as_str())
    {
        return None;
    }
    if changed
        .iter()
        .any(|(name, pod)| pod.is_some_and(|pod| pod.meta.name != *name))
    {
        return None;
    }
    // Changed pods on a missing node are left out with the full reconcile's error, and so are
    // those left out before; these are all its errors (the contract), in its order: by name,
    // once per address type.
    let mut left_out: Vec<(&Name, String)> = Vec::new();
    for pod in changed.iter().filter_map(|(_, pod)| *pod) {
        if pod_has_endpoint(pod)
            && let Err(error) = pod_zone(service, pod, input.nodes)
        {
            left_out.push((&pod.meta.name, error));
        }
    }
    for pod in input.left_out {
        let changed_too = changed
            .binary_search_by(|(name, _)| name.as_str().cmp(pod.meta.name.as_str()))
            .is_ok();
        match pod_zone(service, pod, input.nodes) {
            Err(error) if pod_has_endpoint(pod) && !changed_too => {
                left_out.push((&pod.meta.name, error));
            }
            _ => return None,
        }
    }
    left_out.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));

    let service_key = service.meta.key();
    let types = address_types(service);
    // Any hints state makes the full reconcile record a removal or an event.
    if input.topology.hints_populated(&service_key)
        || types
            .iter()
            .any(|t| input.topology.zone_counts(&service_key, t).is_some())
    {
        return None;
    }

    let labels = SliceLabels::of(service);
    let ports = changed_port_group(input, &types)?;
    let key = port_key(&ports);
    let mut total_endpoints = 0;
    // Whether each slice is of the changed port group. Another group's slice holding endpoints
    // holds only unchanged pods' (checked below) and stays as it is. An empty one goes whole when
    // every pod serves the changed group's ports (numeric target ports): the placeholder of a type
    // without endpoints. With named ones, the full reconcile keeps an empty slice whose group some
    // pod still resolves to (a pod of the other family only, or on a missing node), which only
    // reading every pod can tell.
    let mut in_group: Vec<bool> = Vec::with_capacity(input.slices.len());
    let named_targets =
        (service.ports.iter()).any(|p| !matches!(p.target_port, TargetPort::Number(_)));
    for slice in input.slices {
        if !types.contains(&slice.address_type)
            || !slice.is_owned_by(&service.meta.uid)
            || slice.meta.labels != *labels.desired()
        {
            return None;
        }
        let member = slice.ports == ports || port_key(&slice.ports) == key;
        // With numeric target ports, a slice of other ports holding endpoints is not this
        // controller's last write.
        let other_kept = !member && !slice.endpoints.is_empty() && named_targets;
        let other_gone = !member && slice.endpoints.is_empty() && !named_targets;
        if !(member || other_kept || other_gone) {
            return None;
        }
        total_endpoints += if member { slice.endpoints.len() } else { 0 };
        in_group.push(member);
    }

    // Where each changed pod's endpoint is, per type: `located[c * types.len() + t]`.
    let mut located: Vec<Option<usize>> = Vec::with_capacity(changed.len() * types.len());
    for (name, _) in changed {
        for t in &types {
            let at = (input.locate)(name, t);
            // A changed pod whose endpoint was in another group's slice changes that group too.
            if let Some(i) = at
                && (input.slices.get(i).is_none_or(|s| s.address_type != *t)
                    || !in_group.get(i).copied().unwrap_or(false))
            {
                return None;
            }
            located.push(at);
        }
    }
    // The port group exists when some selected pod has an endpoint: an unchanged one (which has an
    // endpoint in place) or a changed one. Without it every slice goes, whatever it holds.
    let located_count = located.iter().filter(|l| l.is_some()).count();
    let group_exists = total_endpoints > located_count
        || changed.iter().any(|(_, p)| p.is_some_and(pod_has_endpoint));
    if !group_exists {
        return None;
    }

    let mut plan = Plan {
        service_key,
        pods_on_missing_nodes: left_out.iter().map(|(name, _)| (*name).clone()).collect(),
        ..Plan::default()
    };
    let shared = Shared {
        input,
        ports: &ports,
        in_group: &in_group,
        labels: labels.desired(),
        max: input.options.max_endpoints_per_slice.max(1),
        changed_tails: {
            let mut tails: SmallVec<[u64; 16]> =
                changed.iter().map(|(name, _)| name_tail(name)).collect();
            tails.sort_unstable();
            tails
        },
    };
    for (t, address_type) in types.iter().enumerate() {
        let family = address_type.family()?;
        let located_here: Vec<Option<usize>> = located
            .iter()
            .skip(t)
            .step_by(types.len())
            .copied()
            .collect();
        let mut out = shared.address_type(address_type, family, &located_here)?;
        placeholder_rule(service, address_type, out.of_type, &labels, &mut out.plan);
        let topology_input = TopologyInput {
            service,
            service_key: &plan.service_key,
            address_type,
            options: input.options,
            cache: input.topology,
        };
        // Unchanged slices carry no hints (the contract), so only the written ones are stripped.
        let hints = topology::apply_hints_after(
            &topology_input,
            &plan.topology_changes,
            &mut out.plan.creates,
            &mut out.plan.updates,
            &[],
        );
        if !hints.events.is_empty() || hints.change.is_some() {
            return None;
        }
        finish(service, &out.written, input.trigger_time, &mut out.plan);
        plan.per_type.push(out.plan);
        plan.errors
            .extend(left_out.iter().map(|(_, error)| error.clone()));
    }
    Some(plan)
}

/// What every address type reads.
struct Shared<'i, 'a> {
    input: &'i IncrementalInput<'a>,
    ports: &'i [EndpointPort],
    in_group: &'i [bool],
    labels: &'i Labels,
    max: usize,
    /// [`name_tail`] of each changed pod's name, sorted: most endpoints of a touched slice are
    /// told unchanged by it alone, without comparing names (which share long prefixes).
    changed_tails: SmallVec<[u64; 16]>,
}

/// A pod name's last 8 bytes and its length, as one number. Names of one service's pods differ
/// mostly at their end; two names with different tails differ.
fn name_tail(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut tail = [0u8; 8];
    let from = bytes.len().saturating_sub(8);
    tail[..bytes.len() - from].copy_from_slice(&bytes[from..]);
    u64::from_le_bytes(tail) ^ (bytes.len() as u64).rotate_right(8)
}

/// One address type's placement, before hints and the shared tail.
struct TypePlan<'a> {
    plan: AddressTypePlan,
    /// The existing slices updated or deleted: what the no-op drop compares with.
    written: Vec<&'a EndpointSlice>,
    /// How many slices of this type exist, for the placeholder rule.
    of_type: usize,
}

/// The desired endpoints not yet placed, in pod name order.
struct Pending<'a> {
    candidates: Vec<Candidate<'a>>,
    next: usize,
}

impl Pending<'_> {
    fn len(&self) -> usize {
        self.candidates.len() - self.next
    }

    /// Appends endpoints to `slice` up to `max`, as placement's fill does.
    fn fill(&mut self, slice: &mut EndpointSlice, max: usize) {
        while slice.endpoints.len() < max && self.next < self.candidates.len() {
            slice
                .endpoints
                .push(Arc::new(self.candidates[self.next].to_endpoint()));
            self.next += 1;
        }
    }
}

impl<'a> Shared<'_, 'a> {
    /// The desired endpoint of a pod for this family: none for a pod on a missing node, which
    /// the full reconcile leaves out (and reports).
    fn candidate(&self, pod: &'a Pod, family: IpFamily) -> Option<Candidate<'a>> {
        if !pod_has_endpoint(pod) {
            return None;
        }
        let service = self.input.service;
        let zone = pod_zone(service, pod, self.input.nodes).ok()?;
        candidate(service, pod, zone, family)
    }

    /// Steps 1 to 3 of placement for one address type, over the touched slices only.
    fn address_type(
        &self,
        address_type: &AddressType,
        family: IpFamily,
        located: &[Option<usize>],
    ) -> Option<TypePlan<'a>> {
        let input = self.input;
        let slices = input.slices;
        let changed = input.changed;

        // The changed pods' new endpoints; taken out when found in place.
        let mut fresh: Vec<Option<Candidate<'a>>> = Vec::with_capacity(changed.len());
        for (_, pod) in changed {
            fresh.push(pod.and_then(|pod| self.candidate(pod, family)));
        }
        let mut found = vec![false; changed.len()];

        let mut touched: SmallVec<[usize; 4]> = located.iter().flatten().copied().collect();
        touched.sort_unstable();
        touched.dedup();

        // 1. Keep what is still desired in each touched slice, in its place. An unchanged pod's
        // endpoint is what the last sync wrote (the contract), so it is kept as it is.
        let mut states: Vec<(usize, State)> = Vec::with_capacity(touched.len() + 1);
        let mut removed = 0;
        for &i in &touched {
            let slice = slices[i];
            let mut kept: Vec<Arc<Endpoint>> = Vec::with_capacity(slice.endpoints.len());
            let mut endpoint_updated = false;
            for ep in &slice.endpoints {
                if ep.hints.is_some() {
                    return None;
                }
                let name = ep.target_ref.as_ref()?.name.as_ref()?;
                let at = self
                    .changed_tails
                    .binary_search(&name_tail(name))
                    .ok()
                    .and_then(|_| {
                        changed
                            .binary_search_by(|(n, _)| n.as_str().cmp(name.as_str()))
                            .ok()
                    });
                match at {
                    Some(c) => {
                        if located[c] != Some(i) || found[c] {
                            return None;
                        }
                        found[c] = true;
                        if fresh[c].as_ref().is_some_and(|f| is_same_endpoint(f, ep))
                            && let Some(f) = fresh[c].take()
                        {
                            endpoint_updated |= !f.same_attributes(ep);
                            kept.push(f.endpoint_for(ep));
                        }
                    }
                    None => kept.push(ep.clone()),
                }
            }
            // Labels are the desired ones (checked), so nothing else makes a slice change.
            let state = if endpoint_updated || kept.len() != slice.endpoints.len() {
                removed += slice.endpoints.len() - kept.len();
                rewrite(slice, kept, self.labels)
            } else {
                State::Unchanged
            };
            states.push((i, state));
        }
        // Every located endpoint must have been where `locate` said.
        if located
            .iter()
            .zip(&found)
            .any(|(at, &found)| at.is_some() && !found)
        {
            return None;
        }

        let mut pending = Pending {
            candidates: fresh.into_iter().flatten().collect(),
            next: 0,
        };
        let added = pending.len();

        // 2. Top up the slices being updated, fullest first (a stable sort, as placement's).
        if pending.len() > 0 {
            let mut order: Vec<usize> = (0..states.len())
                .filter(|&s| matches!(states[s].1, State::Update(_)))
                .collect();
            order.sort_by_key(|&s| match &states[s].1 {
                State::Update(slice) => std::cmp::Reverse(slice.endpoints.len()),
                _ => std::cmp::Reverse(0),
            });
            for s in order {
                if let State::Update(slice) = &mut states[s].1 {
                    pending.fill(slice, self.max);
                }
                if pending.len() == 0 {
                    break;
                }
            }
        }

        // 3. A remainder smaller than a slice goes whole into the unchanged slice of this type it
        // leaves closest to full; everything else into new slices.
        let max = self.max;
        let mut creates = Vec::new();
        while pending.len() > 0 {
            let mut target = None;
            if pending.len() < max {
                let unchanged = slices
                    .iter()
                    .enumerate()
                    .filter(|(i, slice)| {
                        slice.address_type == *address_type
                            && self.in_group[*i]
                            && match states.binary_search_by_key(i, |(j, _)| *j) {
                                Ok(s) => matches!(states[s].1, State::Unchanged),
                                Err(_) => true,
                            }
                    })
                    .map(|(i, slice)| (i, slice.endpoints.len()));
                target = closest_to_full(pending.len(), max, unchanged);
            }
            match target {
                Some(i) => {
                    let slice = slices[i];
                    if slice.endpoints.iter().any(|e| e.hints.is_some()) {
                        return None;
                    }
                    let mut copy = slice.clone();
                    pending.fill(&mut copy, max);
                    let update = State::Update(Box::new(copy));
                    match states.binary_search_by_key(&i, |(j, _)| *j) {
                        Ok(s) => states[s].1 = update,
                        Err(s) => states.insert(s, (i, update)),
                    }
                }
                None => {
                    let mut slice = new_slice(
                        input.service,
                        address_type,
                        self.ports.to_vec(),
                        self.labels,
                    );
                    pending.fill(&mut slice, max);
                    creates.push(slice);
                }
            }
        }

        let mut plan = AddressTypePlan {
            address_type: Some(address_type.clone()),
            creates,
            endpoints_added: added,
            endpoints_removed: removed,
            ..AddressTypePlan::default()
        };
        let mut written = Vec::with_capacity(states.len());
        for (i, state) in states {
            match state {
                State::Unchanged => continue,
                State::Update(slice) => plan.updates.push(*slice),
                State::Delete => plan.deletes.push(slices[i].clone()),
            }
            written.push(slices[i]);
        }
        // Empty slices of another port group go whole, grouped by ports in order of first
        // appearance, as the full reconcile lists them; those holding endpoints stay.
        let mut others: Vec<(SmallVec<[EndpointPort; 4]>, Vec<usize>)> = Vec::new();
        let mut of_type = 0;
        for (i, slice) in slices.iter().enumerate() {
            if slice.address_type != *address_type {
                continue;
            }
            of_type += 1;
            if self.in_group[i] || !slice.endpoints.is_empty() {
                continue;
            }
            let key = port_key(&slice.ports);
            match others.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(i),
                None => others.push((key, vec![i])),
            }
        }
        for (_, group) in others {
            for i in group {
                plan.deletes.push(slices[i].clone());
                written.push(slices[i]);
            }
        }
        Some(TypePlan {
            plan,
            written,
            of_type,
        })
    }
}

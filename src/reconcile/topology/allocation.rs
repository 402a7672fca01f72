//! Topology-aware hints for the annotation path (upstream `AddHints`): give each zone a share of the
//! ready endpoints proportional to its CPU, hinting endpoints to their own zone first and moving
//! the surplus of over-served zones to under-served ones.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use smallvec::{SmallVec, smallvec};

use super::{
    MSG_HINTS_ENABLED, MSG_INSUFFICIENT_ENDPOINTS, MSG_INSUFFICIENT_NODE_INFO,
    MSG_MIN_EXCEEDS_OVERLOAD, MSG_NO_ALLOCATED_HINTS, MSG_NO_ZONE_SPECIFIED, MSG_NODES_IN_ONE_ZONE,
    REASON_HINTS_DISABLED, REASON_HINTS_ENABLED, TopologyInput, TopologyOutput, strip_hints,
    with_address_type,
};
use crate::model::{Endpoint, EndpointSlice, Hints, Name};
use crate::reconcile::{Event, TopologyChange};

/// 1 / (1 + overload threshold of 20 %): a zone may receive at most 20 % more traffic per endpoint
/// than its CPU share. Same value as upstream's constant expression, bit for bit.
pub(super) const OVERLOAD_FACTOR: f64 = 1.0 / (1.0 + 0.2);

/// Endpoints per zone, sorted by zone.
pub(super) type ZoneCounts = Vec<(Name, usize)>;

/// How many endpoints one zone should get.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Allocation {
    pub zone: Name,
    pub minimum: usize,
    pub maximum: usize,
    pub desired: f64,
}

/// Per-zone allocations for `ready` endpoints, sorted by zone, or the reason (an event message
/// without the address type) why hints cannot be given.
pub(super) fn allocations(
    ratios: Option<&[(Name, f64)]>,
    ready: usize,
) -> Result<Vec<Allocation>, String> {
    let Some(ratios) = ratios else {
        return Err(MSG_INSUFFICIENT_NODE_INFO.to_owned());
    };
    let zones = ratios.len();
    if zones < 2 {
        return Err(MSG_NODES_IN_ONE_ZONE.to_owned());
    }
    if zones > ready {
        return Err(format!(
            "{MSG_INSUFFICIENT_ENDPOINTS} ({ready} endpoints, {zones} zones)"
        ));
    }
    let mut out = Vec::with_capacity(zones);
    let mut min_total = 0usize;
    for (zone, ratio) in ratios {
        let desired = ratio * ready as f64;
        // Non-negative and at most `ready`, so the conversion is exact.
        let minimum = (desired * OVERLOAD_FACTOR).ceil() as usize;
        min_total += minimum;
        out.push(Allocation {
            zone: zone.clone(),
            minimum,
            maximum: 0,
            desired: desired.max(minimum as f64),
        });
    }
    if min_total > ready {
        return Err(format!(
            "{MSG_MIN_EXCEEDS_OVERLOAD} ({ready} endpoints, {zones} zones)"
        ));
    }
    for allocation in &mut out {
        allocation.maximum = allocation.minimum + ready - min_total;
    }
    Ok(out)
}

fn find<'a>(allocations: &'a [Allocation], zone: &str) -> Option<&'a Allocation> {
    allocations
        .binary_search_by(|a| a.zone.as_str().cmp(zone))
        .ok()
        .map(|i| &allocations[i])
}

fn ready_count(slices: impl IntoIterator<Item = impl Borrow<EndpointSlice>>) -> usize {
    slices
        .into_iter()
        .map(|s| s.borrow().endpoints.iter().filter(|e| e.is_ready()).count())
        .sum()
}

fn zone_hint(zone: Name) -> Option<Box<Hints>> {
    Some(Box::new(Hints {
        for_zones: smallvec![zone],
        for_nodes: SmallVec::new(),
    }))
}

/// The endpoint's zone, if it has a non-empty one.
fn own_zone(endpoint: &Endpoint) -> Option<&Name> {
    endpoint.zone.as_ref().filter(|z| !z.is_empty())
}

/// Hints per zone of an unchanged slice, or `None` when the slice must be rewritten: a ready
/// endpoint lacks zone hints or hints a zone without allocation, or keeping the slice would push a
/// zone past its maximum given what earlier slices already hold.
fn slice_hint_counts(
    slice: &EndpointSlice,
    allocated: &BTreeMap<Name, usize>,
    allocations: &[Allocation],
) -> Option<SmallVec<[(Name, usize); 4]>> {
    let mut counts: SmallVec<[(Name, usize); 4]> = SmallVec::new();
    for endpoint in slice.endpoints.iter().filter(|e| e.is_ready()) {
        let hints = endpoint
            .hints
            .as_deref()
            .filter(|h| !h.for_zones.is_empty())?;
        for zone in &hints.for_zones {
            find(allocations, zone)?;
            match counts.iter_mut().find(|(z, _)| z == zone) {
                Some(entry) => entry.1 += 1,
                None => counts.push((zone.clone(), 1)),
            }
        }
    }
    for (zone, n) in &counts {
        let already = allocated.get(zone).copied().unwrap_or(0);
        if n + already > find(allocations, zone)?.maximum {
            return None;
        }
    }
    Some(counts)
}

/// Upstream `AddHints` for one address type: on success the slices being written carry zone
/// hints and the change records the per-zone counts; on refusal every hint is stripped and the
/// change removes the service's hints.
pub(super) fn add_hints(
    input: &TopologyInput,
    populated_before: bool,
    creates: &mut [EndpointSlice],
    updates: &mut Vec<EndpointSlice>,
    unchanged: &[&EndpointSlice],
    out: &mut TopologyOutput,
) {
    let ready = ready_count(creates.iter())
        + ready_count(updates.iter())
        + ready_count(unchanged.iter().copied());
    let allocations = match allocations(input.cache.zone_ratios(), ready) {
        Ok(allocations) => allocations,
        Err(reason) => return refuse(input, &reason, creates, updates, unchanged, out),
    };

    // Keep unchanged slices whose hints still fit; the rest are rewritten with the slices being
    // written anyway. A sorted map keeps the stored counts and the redistribution deterministic.
    let mut allocated: BTreeMap<Name, usize> = BTreeMap::new();
    let mut still_unchanged: Vec<&EndpointSlice> = Vec::with_capacity(unchanged.len());
    for &slice in unchanged {
        match slice_hint_counts(slice, &allocated, &allocations) {
            Some(counts) => {
                for (zone, n) in counts {
                    *allocated.entry(zone).or_default() += n;
                }
                still_unchanged.push(slice);
            }
            None => updates.push(slice.clone()),
        }
    }

    // Start from same-zone hints. Not-ready endpoints are left as they are, as upstream does.
    let mut missing_zone = false;
    'hint: for slice in creates.iter_mut().chain(updates.iter_mut()) {
        for endpoint in slice.endpoints.iter_mut().filter(|e| e.is_ready()) {
            let Some(zone) = own_zone(endpoint).cloned() else {
                missing_zone = true;
                break 'hint;
            };
            *allocated.entry(zone.clone()).or_default() += 1;
            Endpoint::set_hints(endpoint, zone_hint(zone));
        }
    }
    if missing_zone {
        return refuse(
            input,
            MSG_NO_ZONE_SPECIFIED,
            creates,
            updates,
            &still_unchanged,
            out,
        );
    }

    let (mut giving, mut receiving) = giving_and_receiving(&allocations, &allocated);
    for (zone, diff) in redistribute(creates, updates, &mut giving, &mut receiving) {
        let count = allocated.entry(zone).or_default();
        *count = count.saturating_add_signed(diff);
    }

    if allocated.is_empty() {
        return refuse(
            input,
            MSG_NO_ALLOCATED_HINTS,
            creates,
            updates,
            &still_unchanged,
            out,
        );
    }
    out.change = Some(TopologyChange::Populated {
        address_type: input.address_type.clone(),
        zone_counts: allocated.into_iter().collect(),
    });
    if !populated_before {
        out.events.push(Event::normal(
            REASON_HINTS_ENABLED,
            with_address_type(MSG_HINTS_ENABLED, input.address_type),
        ));
    }
}

/// Hints cannot be given: warn, strip them everywhere and drop them from the cache.
fn refuse(
    input: &TopologyInput,
    reason: &str,
    creates: &mut [EndpointSlice],
    updates: &mut Vec<EndpointSlice>,
    unchanged: &[&EndpointSlice],
    out: &mut TopologyOutput,
) {
    out.events.push(Event::warning(
        REASON_HINTS_DISABLED,
        with_address_type(reason, input.address_type),
    ));
    out.change = Some(TopologyChange::Removed {
        address_type: input.address_type.clone(),
    });
    strip_hints(creates, updates, unchanged.iter().copied());
}

/// Whole endpoints each zone should hand over (giving) or take (receiving), sorted by zone. Moves one
/// endpoint at a time from the zone with the largest surplus to the one with the largest deficit,
/// until either side has less than half an endpoint left or both have less than one.
pub(super) fn giving_and_receiving(
    allocations: &[Allocation],
    allocated: &BTreeMap<Name, usize>,
) -> (ZoneCounts, ZoneCounts) {
    // (zone, exact surplus or deficit, whole endpoints assigned)
    let mut giving: Vec<(Name, f64, usize)> = Vec::new();
    let mut receiving: Vec<(Name, f64, usize)> = Vec::new();
    for allocation in allocations {
        let have = allocated.get(&allocation.zone).copied().unwrap_or(0) as f64;
        if have > allocation.desired {
            giving.push((allocation.zone.clone(), have - allocation.desired, 0));
        } else if have < allocation.desired {
            receiving.push((allocation.zone.clone(), allocation.desired - have, 0));
        }
    }
    while let (Some(g), Some(r)) = (most(&giving), most(&receiving)) {
        let (to_give, to_receive) = (giving[g].1, receiving[r].1);
        if (to_give < 1.0 && to_receive < 1.0) || to_give < 0.5 || to_receive < 0.5 {
            break;
        }
        giving[g].1 -= 1.0;
        giving[g].2 += 1;
        receiving[r].1 -= 1.0;
        receiving[r].2 += 1;
    }
    let whole = |v: Vec<(Name, f64, usize)>| {
        v.into_iter()
            .filter(|(_, _, n)| *n > 0)
            .map(|(zone, _, n)| (zone, n))
            .collect()
    };
    (whole(giving), whole(receiving))
}

/// Index of the largest positive amount; ties go to the first zone in name order (upstream picks
/// among ties by map order, i.e. at random).
fn most(zones: &[(Name, f64, usize)]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, (_, amount, _)) in zones.iter().enumerate() {
        if *amount > best.map_or(0.0, |(_, b)| b) {
            best = Some((i, *amount));
        }
    }
    best.map(|(i, _)| i)
}

/// Re-hints ready endpoints of giving zones, in slice order (creates, then updates), to the first
/// receiving zone in name order that still needs endpoints. Returns the net change per zone.
fn redistribute(
    creates: &mut [EndpointSlice],
    updates: &mut [EndpointSlice],
    giving: &mut [(Name, usize)],
    receiving: &mut [(Name, usize)],
) -> Vec<(Name, isize)> {
    let mut to_give: usize = giving.iter().map(|(_, n)| n).sum();
    let mut to_receive: usize = receiving.iter().map(|(_, n)| n).sum();
    let mut diffs: Vec<(Name, isize)> = Vec::new();
    let mut add = |zone: &Name, d: isize| match diffs.iter_mut().find(|(z, _)| z == zone) {
        Some(entry) => entry.1 += d,
        None => diffs.push((zone.clone(), d)),
    };
    for slice in creates.iter_mut().chain(updates.iter_mut()) {
        for endpoint in slice.endpoints.iter_mut().filter(|e| e.is_ready()) {
            if to_give == 0 || to_receive == 0 {
                return diffs;
            }
            let Some(zone) = own_zone(endpoint) else {
                continue;
            };
            let Some(giver) = giving.iter_mut().find(|(z, n)| z == zone && *n > 0) else {
                continue;
            };
            let Some(receiver) = receiving.iter_mut().find(|(_, n)| *n > 0) else {
                continue;
            };
            giver.1 -= 1;
            receiver.1 -= 1;
            to_give -= 1;
            to_receive -= 1;
            add(&giver.0, -1);
            add(&receiver.0, 1);
            Endpoint::set_hints(endpoint, zone_hint(receiver.0.clone()));
        }
    }
    diffs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intern;

    fn ratios(pairs: &[(&str, f64)]) -> Vec<(Name, f64)> {
        pairs.iter().map(|(z, r)| (intern(z), *r)).collect()
    }

    #[test]
    fn allocations_bounds() {
        let r = ratios(&[("a", 0.5), ("b", 0.5)]);
        let a = allocations(Some(&r), 12).unwrap();
        // desired 6, minimum ⌈6 / 1.2⌉ = 5, slack 12 − 10 = 2.
        assert_eq!((a[0].minimum, a[0].maximum, a[0].desired), (5, 7, 6.0));
        assert_eq!((a[1].minimum, a[1].maximum), (5, 7));
    }

    #[test]
    fn allocation_refusals() {
        assert_eq!(
            allocations(None, 10).unwrap_err(),
            MSG_INSUFFICIENT_NODE_INFO
        );
        assert_eq!(
            allocations(Some(&[]), 10).unwrap_err(),
            MSG_NODES_IN_ONE_ZONE
        );
        let r = ratios(&[("a", 0.3), ("b", 0.4), ("c", 0.3)]);
        assert_eq!(
            allocations(Some(&r), 2).unwrap_err(),
            "Insufficient number of endpoints (2 endpoints, 3 zones)"
        );
        // Issue 122437: ⌈(11/3)/1.2⌉ = 4 per zone, 12 > 11.
        let third = 1000.0 / 3000.0;
        let r = ratios(&[("a", third), ("b", third), ("c", third)]);
        assert_eq!(
            allocations(Some(&r), 11).unwrap_err(),
            "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (11 endpoints, 3 zones)"
        );
        assert!(allocations(Some(&r), 12).is_ok());
    }

    #[test]
    fn giving_and_receiving_stops_at_half_endpoints() {
        let r = ratios(&[("a", 0.35), ("b", 0.35), ("c", 0.30)]);
        let a = allocations(Some(&r), 10).unwrap();
        let allocated: BTreeMap<Name, usize> =
            [(intern("a"), 5), (intern("b"), 2), (intern("c"), 3)]
                .into_iter()
                .collect();
        let (giving, receiving) = giving_and_receiving(&a, &allocated);
        // a has 1.5 too many, b 1.5 too few: one moves, then both have 0.5 left and it stops.
        assert_eq!(giving, vec![(intern("a"), 1)]);
        assert_eq!(receiving, vec![(intern("b"), 1)]);
    }

    #[test]
    fn ties_go_to_first_zone_by_name() {
        let r = ratios(&[("a", 0.25), ("b", 0.25), ("c", 0.5)]);
        let a = allocations(Some(&r), 8).unwrap();
        let allocated: BTreeMap<Name, usize> =
            [(intern("a"), 2), (intern("b"), 2), (intern("c"), 4)]
                .into_iter()
                .collect();
        assert_eq!(giving_and_receiving(&a, &allocated), (vec![], vec![]));
        let allocated: BTreeMap<Name, usize> = [(intern("c"), 8)].into_iter().collect();
        let (giving, receiving) = giving_and_receiving(&a, &allocated);
        assert_eq!(giving, vec![(intern("c"), 4)]);
        assert_eq!(receiving, vec![(intern("a"), 2), (intern("b"), 2)]);
    }
}

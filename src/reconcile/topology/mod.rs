//! Topology-aware hints (the `topology-mode` annotation) and `trafficDistribution` hints.
//!
//! Runs once per address type after endpoints are placed: sets, redistributes or strips hints on the
//! slices being written, and rewrites unchanged slices whose hints are wrong. Pure: the cache is only
//! read here; the caller records the returned change with [`TopologyCache::apply`] after the sync.

mod allocation;
mod cache;
mod trafficdist;

#[cfg(test)]
mod tests;

pub use cache::TopologyCache;

use super::{Event, Options, TopologyChange};
use crate::model::{AddressType, Endpoint, EndpointSlice, Labels, Service, keys};

/// Event reasons, as upstream records them on the Service.
pub const REASON_HINTS_ENABLED: &str = "TopologyAwareHintsEnabled";
pub const REASON_HINTS_DISABLED: &str = "TopologyAwareHintsDisabled";

/// Event message stems; every event appends ", addressType: <type>".
pub const MSG_NO_ZONE_SPECIFIED: &str = "One or more endpoints do not have a zone specified";
pub const MSG_NO_ALLOCATED_HINTS: &str = "No hints allocated for zones";
pub const MSG_HINTS_ENABLED: &str = "Topology Aware Hints has been enabled";
pub const MSG_HINTS_DISABLED: &str = "Topology Aware Hints has been disabled";
pub const MSG_INSUFFICIENT_NODE_INFO: &str =
    "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes";
pub const MSG_NODES_IN_ONE_ZONE: &str = "Nodes only ready in one zone";
pub const MSG_INSUFFICIENT_ENDPOINTS: &str = "Insufficient number of endpoints";
pub const MSG_MIN_EXCEEDS_OVERLOAD: &str = "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold";

/// `spec.trafficDistribution` values.
pub const TD_PREFER_CLOSE: &str = "PreferClose";
pub const TD_PREFER_SAME_ZONE: &str = "PreferSameZone";
pub const TD_PREFER_SAME_NODE: &str = "PreferSameNode";

/// What [`apply_hints`] reads for one address type of one service.
#[derive(Clone, Copy, Debug)]
pub struct TopologyInput<'a> {
    pub service: &'a Service,
    /// "namespace/name".
    pub service_key: &'a str,
    pub address_type: &'a AddressType,
    pub options: &'a Options,
    pub cache: &'a TopologyCache,
}

#[derive(Debug, Default)]
pub struct TopologyOutput {
    /// Events to record on the Service, in order.
    pub events: Vec<Event>,
    /// How the cache must change for this service and address type, if at all.
    pub change: Option<TopologyChange>,
}

/// Sets, redistributes or strips hints on `creates` and `updates` in place, and appends to `updates`
/// a copy of every slice of `unchanged` that must be rewritten (names and resourceVersions kept).
///
/// Equivalent to [`apply_hints_after`] with no earlier changes: the cache is taken as the state before
/// this address type.
pub fn apply_hints(
    input: &TopologyInput,
    creates: &mut [EndpointSlice],
    updates: &mut Vec<EndpointSlice>,
    unchanged: &[&EndpointSlice],
) -> TopologyOutput {
    apply_hints_after(input, &[], creates, updates, unchanged)
}

/// [`apply_hints`] for a sync that already produced `earlier` changes for this service (other
/// address types, or removals for unsupported ones) that the cache does not reflect yet. Upstream
/// updates its cache as it goes, so whether "enabled"/"disabled" events fire depends on them: pass
/// the plan's changes so far to get one event per service, as upstream emits, instead of one per
/// address type.
pub fn apply_hints_after(
    input: &TopologyInput,
    earlier: &[TopologyChange],
    creates: &mut [EndpointSlice],
    updates: &mut Vec<EndpointSlice>,
    unchanged: &[&EndpointSlice],
) -> TopologyOutput {
    let mut out = TopologyOutput::default();
    let prior = PriorState::new(input, earlier);
    let service = input.service;

    if hints_enabled(&service.meta.annotations) {
        // The annotation wins over trafficDistribution, so nothing else applies.
        allocation::add_hints(
            input,
            prior.populated,
            creates,
            updates,
            unchanged,
            &mut out,
        );
        return out;
    }

    if prior.populated {
        out.events.push(Event::warning(
            REASON_HINTS_DISABLED,
            with_address_type(MSG_HINTS_DISABLED, input.address_type),
        ));
    }
    if prior.populated || prior.has_counts {
        out.change = Some(TopologyChange::Removed {
            address_type: input.address_type.clone(),
        });
    }

    match traffic_distribution(service, input.options) {
        // Hints from an earlier annotation are left for the heuristic to fix, which avoids copying
        // slices whose hints it would set again.
        Some(node_hints) => trafficdist::reconcile_hints(node_hints, creates, updates, unchanged),
        None => strip_hints(creates, updates, unchanged.iter().copied()),
    }
    out
}

/// The topology annotation asks for hints: the deprecated `topology-aware-hints` key decides when
/// present, whatever its value; otherwise `topology-mode`. Only "Auto" and "auto" enable.
pub fn hints_enabled(annotations: &Labels) -> bool {
    let value = annotations
        .get(keys::ANNOTATION_TOPOLOGY_AWARE_HINTS)
        .or_else(|| annotations.get(keys::ANNOTATION_TOPOLOGY_MODE));
    matches!(value.map(|v| v.as_str()), Some("Auto" | "auto"))
}

/// The service's trafficDistribution is valid here and not overridden by the topology annotation.
pub fn traffic_distribution_usable(service: &Service, options: &Options) -> bool {
    traffic_distribution(service, options).is_some()
}

/// `Some(node_hints)` when trafficDistribution drives the hints; `node_hints` for PreferSameNode.
fn traffic_distribution(service: &Service, options: &Options) -> Option<bool> {
    let node_hints = match service.traffic_distribution.as_deref()? {
        TD_PREFER_CLOSE => false,
        TD_PREFER_SAME_ZONE if options.prefer_same_traffic_distribution => false,
        TD_PREFER_SAME_NODE if options.prefer_same_traffic_distribution => true,
        _ => return None,
    };
    if hints_enabled(&service.meta.annotations) {
        return None;
    }
    Some(node_hints)
}

/// "<message>, addressType: <type>", the form of every topology event.
fn with_address_type(message: &str, address_type: &AddressType) -> String {
    format!("{message}, addressType: {address_type}")
}

/// Removes every hint from the slices being written, and queues a stripped copy of each unchanged
/// slice that still carries one.
fn strip_hints<'a>(
    creates: &mut [EndpointSlice],
    updates: &mut Vec<EndpointSlice>,
    unchanged: impl IntoIterator<Item = &'a EndpointSlice>,
) {
    for slice in creates.iter_mut().chain(updates.iter_mut()) {
        for endpoint in &mut slice.endpoints {
            Endpoint::set_hints(endpoint, None);
        }
    }
    for slice in unchanged {
        if slice.endpoints.iter().any(|e| e.hints.is_some()) {
            let mut copy = slice.clone();
            for endpoint in &mut copy.endpoints {
                Endpoint::set_hints(endpoint, None);
            }
            updates.push(copy);
        }
    }
}

/// The cache's view of this service before this address type: the cache plus the sync's earlier
/// changes.
struct PriorState {
    /// Hints populated for the service (any address type).
    populated: bool,
    /// Zone counts stored for this address type.
    has_counts: bool,
}

impl PriorState {
    fn new(input: &TopologyInput, earlier: &[TopologyChange]) -> PriorState {
        let mut state = PriorState {
            populated: input.cache.hints_populated(input.service_key),
            has_counts: input
                .cache
                .zone_counts(input.service_key, input.address_type)
                .is_some(),
        };
        for change in earlier {
            match change {
                TopologyChange::Populated { address_type, .. } => {
                    state.populated = true;
                    state.has_counts |= address_type == input.address_type;
                }
                // Upstream clears the service's populated flag whichever type is removed.
                TopologyChange::Removed { address_type } => {
                    state.populated = false;
                    state.has_counts &= address_type != input.address_type;
                }
            }
        }
        state
    }
}

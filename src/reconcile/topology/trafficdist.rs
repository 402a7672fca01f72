//! Hints for `spec.trafficDistribution` (PreferClose, PreferSameZone, PreferSameNode): every ready
//! endpoint is hinted to its own zone, and to its own node for PreferSameNode. No balancing.

use std::sync::Arc;

use smallvec::{SmallVec, smallvec};

use crate::model::{Endpoint, EndpointSlice, Hints};

/// Hints every slice being written and appends a copy of each unchanged slice whose hints are
/// missing or wrong, so slices that are already right are not rewritten.
pub(super) fn reconcile_hints(
    node_hints: bool,
    creates: &mut [EndpointSlice],
    updates: &mut Vec<EndpointSlice>,
    unchanged: &[&EndpointSlice],
) {
    for &slice in unchanged {
        if slice.endpoints.iter().any(|e| needs_update(e, node_hints)) {
            updates.push(slice.clone());
        }
    }
    for slice in creates.iter_mut().chain(updates.iter_mut()) {
        for endpoint in &mut slice.endpoints {
            set_hints(endpoint, node_hints);
        }
    }
}

/// A ready endpoint's hints differ from what [`set_hints`] would write. Not-ready endpoints never
/// need an update.
fn needs_update(endpoint: &Endpoint, node_hints: bool) -> bool {
    if !endpoint.is_ready() {
        return false;
    }
    let hints = endpoint.hints.as_deref();
    let zones_wrong = match &endpoint.zone {
        Some(zone) => hints.is_none_or(|h| h.for_zones.as_slice() != std::slice::from_ref(zone)),
        None => hints.is_some_and(|h| !h.for_zones.is_empty()),
    };
    let nodes_wrong = match endpoint.node_name.as_ref().filter(|_| node_hints) {
        Some(node) => hints.is_none_or(|h| h.for_nodes.as_slice() != std::slice::from_ref(node)),
        None => hints.is_some_and(|h| !h.for_nodes.is_empty()),
    };
    zones_wrong || nodes_wrong
}

/// Hints a ready endpoint to its own zone (and node, for PreferSameNode); no hints when it has
/// neither. Not-ready endpoints keep what they have.
fn set_hints(endpoint: &mut Arc<Endpoint>, node_hints: bool) {
    if !endpoint.is_ready() {
        return;
    }
    let for_zones: SmallVec<_> = endpoint.zone.iter().cloned().collect();
    let for_nodes: SmallVec<_> = match &endpoint.node_name {
        Some(node) if node_hints => smallvec![node.clone()],
        _ => SmallVec::new(),
    };
    let hints = if for_zones.is_empty() && for_nodes.is_empty() {
        None
    } else {
        Some(Box::new(Hints {
            for_zones,
            for_nodes,
        }))
    };
    Endpoint::set_hints(endpoint, hints);
}

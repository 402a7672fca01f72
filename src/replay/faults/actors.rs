//! Others at work on the objects the controllers manage: a person with kubectl, another tool, a
//! controller that crashed mid-write. Each act changes one managed EndpointSlice or Endpoints in the
//! API server and returns the watch events it causes. No act makes a slice hold more endpoints than
//! it did.

use std::sync::Arc;

use super::FaultCounts;
use crate::change::Change;
use crate::model::{EndpointSlice, Endpoints, Name, keys};
use crate::reconcile::endpoints::ANNOTATION_LEADER;
use crate::sim::Rng;
use crate::sink::memory::MemorySink;
use crate::sink::{Kind, Object};

fn is_managed_slice(slice: &EndpointSlice) -> bool {
    matches!(
        slice.managed_by().map(|m| m.as_str()),
        Some(keys::ENDPOINTSLICE_CONTROLLER | keys::MIRRORING_CONTROLLER)
    )
}

/// One act on a random managed object; nothing when there is none. `managed_endpoints` tells
/// the Endpoints the Endpoints controller writes (those of Services with a selector) from custom
/// ones, which are the user's.
pub(super) fn act(
    rng: &mut Rng,
    sink: &MemorySink,
    managed_endpoints: &dyn Fn(&Endpoints) -> bool,
    counts: &mut FaultCounts,
) -> Vec<Change> {
    let targets: Vec<Object> = sink
        .objects()
        .into_iter()
        .filter(|o| match o {
            Object::EndpointSlice(s) => is_managed_slice(s),
            Object::Endpoints(e) => {
                !e.meta.annotations.contains_key(ANNOTATION_LEADER) && managed_endpoints(e)
            }
        })
        .collect();
    if targets.is_empty() {
        return Vec::new();
    }
    match &targets[rng.below(targets.len())] {
        Object::EndpointSlice(slice) => act_on_slice(rng, sink, slice, counts),
        Object::Endpoints(endpoints) => act_on_endpoints(rng, sink, endpoints, counts),
    }
}

fn store(sink: &MemorySink, object: Object) -> Option<Change> {
    match sink.apply_external(object).ok()? {
        Object::EndpointSlice(s) => Some(Change::EndpointSlice(s)),
        Object::Endpoints(e) => Some(Change::Endpoints(e)),
    }
}

fn act_on_slice(
    rng: &mut Rng,
    sink: &MemorySink,
    slice: &Arc<EndpointSlice>,
    counts: &mut FaultCounts,
) -> Vec<Change> {
    let (namespace, name) = (slice.meta.namespace.clone(), slice.meta.name.clone());
    let deleted = || Change::EndpointSliceDeleted {
        namespace: namespace.clone(),
        name: name.clone(),
    };
    match rng.below(4) {
        // Deleted.
        0 => {
            counts.slices_deleted += 1;
            sink.remove_external(Kind::EndpointSlice, &namespace, &name)
                .map(|_| deleted())
                .into_iter()
                .collect()
        }
        // A copy of some of its endpoints in a new slice: a controller that crashed mid-write.
        1 => {
            counts.slices_duplicated += 1;
            let mut copy = EndpointSlice::clone(slice);
            let keep = rng.between(1, copy.endpoints.len().max(1) as u64) as usize;
            copy.endpoints.truncate(keep);
            copy.meta.name = Name::new(&format!("{name}-copy{}", rng.below(1000)));
            copy.meta.uid = Name::default();
            store(sink, Object::from(copy)).into_iter().collect()
        }
        // Deleted and created again under its name (`kubectl replace --force`): a new uid.
        2 => {
            counts.slices_recreated += 1;
            if sink
                .remove_external(Kind::EndpointSlice, &namespace, &name)
                .is_none()
            {
                return Vec::new();
            }
            let mut copy = EndpointSlice::clone(slice);
            copy.meta.uid = Name::default();
            std::iter::once(deleted())
                .chain(store(sink, Object::from(copy)))
                .collect()
        }
        // Edited in place.
        _ => {
            counts.slices_edited += 1;
            let mut edited = EndpointSlice::clone(slice);
            let n = edited.endpoints.len();
            match (rng.below(4), n) {
                (0, 1..) => {
                    edited.endpoints.remove(rng.below(n));
                }
                (1, 1..) => {
                    let ep = std::sync::Arc::make_mut(&mut edited.endpoints[rng.below(n)]);
                    ep.conditions.ready = Some(ep.conditions.ready != Some(true));
                }
                (2, 1..) => {
                    std::sync::Arc::make_mut(&mut edited.endpoints[rng.below(n)]).zone =
                        Some(Name::new("zone-elsewhere"));
                }
                _ => {
                    edited.meta.labels = edited.meta.labels.with("edited-by", "someone-else");
                }
            }
            store(sink, Object::from(edited)).into_iter().collect()
        }
    }
}

fn act_on_endpoints(
    rng: &mut Rng,
    sink: &MemorySink,
    endpoints: &Arc<Endpoints>,
    counts: &mut FaultCounts,
) -> Vec<Change> {
    let meta = &endpoints.meta;
    if rng.chance(0.3) {
        counts.endpoints_deleted += 1;
        return sink
            .remove_external(Kind::Endpoints, &meta.namespace, &meta.name)
            .map(|gone| Change::EndpointsDeleted {
                namespace: meta.namespace.clone(),
                name: meta.name.clone(),
                uid: gone.meta().uid.clone(),
            })
            .into_iter()
            .collect();
    }
    counts.endpoints_edited += 1;
    let mut edited = Endpoints::clone(endpoints);
    match edited.subsets.first_mut() {
        Some(subset) if !subset.addresses.is_empty() => {
            // A ready address moved to not ready.
            let i = rng.below(subset.addresses.len());
            let address = subset.addresses.remove(i);
            subset.not_ready_addresses.push(address);
        }
        Some(subset) => {
            subset.not_ready_addresses.clear();
        }
        None => {
            edited.meta.labels = edited.meta.labels.with("edited-by", "someone-else");
        }
    }
    store(sink, Object::from(edited)).into_iter().collect()
}

//! Placing one port group's desired endpoints into slices with the least churn: keep endpoints where
//! they are, top up slices that are being written anyway (fullest first), put a remainder that fits
//! into the one unchanged slice it fills best, and only then create slices.

use std::cell::OnceCell;
use std::sync::Arc;

use super::desired::DesiredSet;
use crate::model::{Endpoint, EndpointSlice, Labels, Name, Service, intern, keys};

/// What one port group needs.
pub(crate) struct GroupPlan {
    pub creates: Vec<EndpointSlice>,
    pub updates: Vec<EndpointSlice>,
    pub deletes: Vec<EndpointSlice>,
    pub added: usize,
    pub removed: usize,
}

/// What becomes of an existing slice.
pub(crate) enum State {
    Unchanged,
    Update(Box<EndpointSlice>),
    Delete,
}

/// An existing slice some of whose endpoints were dropped or changed: deleted when none is kept,
/// else rewritten with the kept ones (fresh from their pods) and the desired labels.
pub(crate) fn rewrite(slice: &EndpointSlice, kept: Vec<Arc<Endpoint>>, labels: &Labels) -> State {
    if kept.is_empty() {
        return State::Delete;
    }
    let mut copy = shell_of(slice);
    copy.endpoints = kept;
    copy.meta.labels = labels.clone();
    State::Update(Box::new(copy))
}

/// The labels a slice of this service must carry, built only when a slice is written or compared
/// whole: a sync that finds every slice right reads the service's labels in place.
pub(crate) struct SliceLabels<'a> {
    service: &'a Service,
    desired: OnceCell<Labels>,
}

impl<'a> SliceLabels<'a> {
    pub fn of(service: &'a Service) -> Self {
        SliceLabels {
            service,
            desired: OnceCell::new(),
        }
    }

    /// Service labels without the reserved keys, plus the reserved keys as the controller sets them.
    pub fn desired(&self) -> &Labels {
        self.desired.get_or_init(|| desired_labels(self.service))
    }

    /// Whether a slice's labels other than the reserved keys differ from the service's: the
    /// slice is then rewritten.
    fn differ_from_service(&self, slice: &EndpointSlice) -> bool {
        let own = slice
            .meta
            .labels
            .iter()
            .filter(|(k, _)| !is_reserved_label(k));
        let theirs = (self.service.meta.labels.iter()).filter(|(k, _)| !is_reserved_label(k));
        !own.eq(theirs)
    }
}

/// The controller's label keys and managed-by value, interned once rather than on every sync.
struct ReservedNames {
    service_name: Name,
    managed_by: Name,
    controller: Name,
    headless: Name,
}

static RESERVED: std::sync::LazyLock<ReservedNames> = std::sync::LazyLock::new(|| ReservedNames {
    service_name: intern(keys::LABEL_SERVICE_NAME),
    managed_by: intern(keys::LABEL_MANAGED_BY),
    controller: intern(keys::ENDPOINTSLICE_CONTROLLER),
    headless: intern(keys::LABEL_HEADLESS),
});

fn desired_labels(service: &Service) -> Labels {
    let reserved = &*RESERVED;
    let mut desired = (service.meta.labels)
        .filtered(|k| !is_reserved_label(k))
        .with_name(reserved.service_name.clone(), service.meta.name.clone())
        .with_name(reserved.managed_by.clone(), reserved.controller.clone());
    if service.is_headless() {
        desired = desired.with_name(reserved.headless.clone(), Name::default());
    }
    desired
}

pub(crate) fn is_reserved_label(key: &str) -> bool {
    use crate::model::keys::*;
    key == LABEL_SERVICE_NAME || key == LABEL_MANAGED_BY || key == LABEL_HEADLESS
}

/// Reconciles the existing slices of one port group (in lister order) with its desired endpoints.
/// `new_slice` makes an empty slice for this group.
pub(crate) fn place(
    existing: &[&EndpointSlice],
    desired: &mut DesiredSet<'_>,
    max_per_slice: usize,
    labels: &SliceLabels<'_>,
    new_slice: &dyn Fn() -> EndpointSlice,
) -> GroupPlan {
    let mut states: Vec<State> = Vec::with_capacity(existing.len());
    let mut removed = 0;

    // 1. Keep each existing endpoint that is still desired, in its place, with fresh attributes.
    for slice in existing {
        // The desired endpoints found here; built from their pods only if the slice changes.
        let mut kept: Vec<(u32, &Arc<Endpoint>)> = Vec::with_capacity(slice.endpoints.len());
        let mut endpoint_updated = false;
        for ep in &slice.endpoints {
            if let Some(index) = desired.take(ep) {
                if !desired.get(index).same_attributes(ep) {
                    endpoint_updated = true;
                }
                kept.push((index, ep));
            }
        }
        let relabel = labels.differ_from_service(slice);
        let state = if endpoint_updated || kept.len() != slice.endpoints.len() {
            removed += slice.endpoints.len() - kept.len();
            let kept = kept
                .iter()
                .map(|&(i, ep)| desired.get(i).endpoint_for(ep))
                .collect();
            rewrite(slice, kept, labels.desired())
        } else if relabel {
            let mut copy = (*slice).clone();
            copy.meta.labels = labels.desired().clone();
            State::Update(Box::new(copy))
        } else {
            State::Unchanged
        };
        states.push(state);
    }
    let added = desired.len();

    // 2. Top up the slices already being updated, fullest first.
    if !desired.is_empty() {
        let mut order: Vec<usize> = (0..states.len())
            .filter(|&i| matches!(states[i], State::Update(_)))
            .collect();
        order.sort_by_key(|&i| match &states[i] {
            State::Update(s) => std::cmp::Reverse(s.endpoints.len()),
            _ => std::cmp::Reverse(0),
        });
        for i in order {
            if let State::Update(s) = &mut states[i] {
                fill(s, desired, max_per_slice);
            }
            if desired.is_empty() {
                break;
            }
        }
    }

    // 3. Place the rest: a remainder smaller than a slice goes whole into the unchanged slice it
    // leaves closest to full; everything else goes into new slices.
    let mut creates = Vec::new();
    while !desired.is_empty() {
        let mut target = None;
        if desired.len() < max_per_slice {
            let unchanged = states
                .iter()
                .enumerate()
                .filter(|(_, state)| matches!(state, State::Unchanged))
                .map(|(i, _)| (i, existing[i].endpoints.len()));
            target = closest_to_full(desired.len(), max_per_slice, unchanged);
        }
        match target {
            Some(i) => {
                // Unchanged means its labels are already right; upstream leaves them as they are.
                let mut copy = existing[i].clone();
                fill(&mut copy, desired, max_per_slice);
                states[i] = State::Update(Box::new(copy));
            }
            None => {
                let mut slice = new_slice();
                fill(&mut slice, desired, max_per_slice);
                creates.push(slice);
            }
        }
    }

    let mut updates = Vec::new();
    let mut deletes = Vec::new();
    for (i, state) in states.into_iter().enumerate() {
        match state {
            State::Unchanged => {}
            State::Update(s) => updates.push(*s),
            State::Delete => deletes.push(existing[i].clone()),
        }
    }
    GroupPlan {
        creates,
        updates,
        deletes,
        added,
        removed,
    }
}

/// Upstream's home for a remainder of `remaining` endpoints: of the `(index, length)` candidates,
/// the slice it would leave closest to full, the first on a tie; `None` if it fits in none.
pub(crate) fn closest_to_full(
    remaining: usize,
    max: usize,
    candidates: impl IntoIterator<Item = (usize, usize)>,
) -> Option<usize> {
    let mut closest = max;
    let mut target = None;
    for (i, len) in candidates {
        let total = remaining + len;
        if total <= max && max - total < closest {
            closest = max - total;
            target = Some(i);
            if closest == 0 {
                break;
            }
        }
    }
    target
}

/// A copy of a slice without its endpoints, which are about to be replaced.
pub(crate) fn shell_of(slice: &EndpointSlice) -> EndpointSlice {
    EndpointSlice {
        meta: slice.meta.clone(),
        generate_name: slice.generate_name.clone(),
        owner_references: slice.owner_references.clone(),
        address_type: slice.address_type.clone(),
        ports: slice.ports.clone(),
        endpoints: Vec::new(),
    }
}

fn fill(slice: &mut EndpointSlice, desired: &mut DesiredSet<'_>, max: usize) {
    let room = max.saturating_sub(slice.endpoints.len()).min(desired.len());
    slice.endpoints.reserve_exact(room);
    while slice.endpoints.len() < max {
        match desired.pop() {
            Some(ep) => slice.endpoints.push(Arc::new(ep)),
            None => break,
        }
    }
}

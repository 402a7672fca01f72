//! From desired endpoints and existing mirrored slices to writes: one slice per (address type,
//! ports) key, kept when current, else rewritten whole under its name; surplus and stale slices
//! deleted; a create and a delete of one address type recycled into an update.

use std::sync::Arc;

use super::desired::{Group, port_key};
use super::{slice_annotations, slice_labels};
use crate::model::{
    AddressType, EndpointPort, EndpointSlice, Endpoints, Labels, Meta, Name, OwnerReference, intern,
};
use crate::reconcile::AddressTypePlan;

/// What a slice needs to become its key's desired endpoints.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    added: usize,
    updated: usize,
    removed: usize,
}

impl Totals {
    fn is_zero(&self) -> bool {
        self.added == 0 && self.updated == 0 && self.removed == 0
    }
}

/// What every slice of this Endpoints is written with.
struct Target<'a> {
    endpoints: &'a Endpoints,
    labels: Labels,
    annotations: Labels,
    max: usize,
}

impl Target<'_> {
    /// Labels, annotations and owner as a fresh write would set them. Upstream compares the slice's
    /// labels without its two reserved keys to the Endpoints' labels; comparing with the labels it
    /// would write is the same, but for an Endpoints that carries a reserved key itself, which
    /// upstream rewrites on every sync.
    fn metadata_current(&self, slice: &EndpointSlice) -> bool {
        slice.meta.labels == self.labels
            && slice.meta.annotations == self.annotations
            && self.owns(slice)
    }

    /// The slice belongs to this Endpoints and not to an older one of the same name.
    fn owns(&self, slice: &EndpointSlice) -> bool {
        let uid = &self.endpoints.meta.uid;
        if slice.owner_references.is_empty() {
            return uid.is_empty();
        }
        slice.owner_references.iter().any(|r| {
            r.uid == *uid && r.kind.as_str() == "Endpoints" && r.api_version.as_str() == "v1"
        })
    }

    /// The whole slice for `group`: named `name` to rewrite a slice, else to be created.
    fn slice(&self, group: &Group, name: Option<&Name>) -> EndpointSlice {
        let endpoints = self.endpoints;
        EndpointSlice {
            meta: Meta {
                namespace: endpoints.meta.namespace.clone(),
                name: name.cloned().unwrap_or_default(),
                labels: self.labels.clone(),
                annotations: self.annotations.clone(),
                ..Meta::default()
            },
            generate_name: name.is_none().then(|| generate_name(&endpoints.meta.name)),
            owner_references: vec![OwnerReference {
                api_version: intern("v1"),
                kind: intern("Endpoints"),
                name: endpoints.meta.name.clone(),
                uid: endpoints.meta.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
            address_type: group.address_type.clone(),
            ports: group.ports.clone(),
            endpoints: group
                .endpoints
                .iter()
                .take(self.max)
                .map(|e| Arc::new(e.clone()))
                .collect(),
        }
    }
}

/// `<name>-`, or the bare name when the dash would make the prefix too long for a name.
fn generate_name(name: &str) -> Name {
    const MAX_NAME: usize = 253;
    if name.len() < MAX_NAME {
        Name::new(&format!("{name}-"))
    } else {
        Name::new(name)
    }
}

/// Upstream's change count of one slice against its key's desired endpoints. An endpoint listed
/// twice counts as removed the second time, so that a slice with a duplicate is never current.
fn totals(slice: &EndpointSlice, group: &Group) -> Totals {
    let mut seen = vec![false; group.endpoints.len()];
    let mut matched = 0;
    let mut t = Totals::default();
    for ep in &slice.endpoints {
        match group.find(ep) {
            Some((i, want)) if !seen[i] => {
                seen[i] = true;
                matched += 1;
                if !want.same_attributes(ep) {
                    t.updated += 1;
                }
            }
            _ => t.removed += 1,
        }
    }
    t.added = group.endpoints.len().saturating_sub(matched);
    t
}

type Key = (AddressType, Vec<EndpointPort>);

/// The writes of a mirrored Endpoints. `existing` are its mirrored slices in a stable order.
pub(crate) fn plan_writes(
    endpoints: &Endpoints,
    groups: &[Group],
    existing: &[&EndpointSlice],
    max: usize,
) -> AddressTypePlan {
    let target = Target {
        endpoints,
        labels: slice_labels(endpoints),
        annotations: slice_annotations(endpoints),
        max,
    };
    let mut out = AddressTypePlan::default();

    let mut by_key: Vec<(Key, Vec<&EndpointSlice>, bool)> = Vec::new();
    for slice in existing {
        let key = (slice.address_type.clone(), port_key(&slice.ports));
        match by_key.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, list, _)) => list.push(slice),
            None => by_key.push((key, vec![slice], false)),
        }
    }

    for group in groups {
        let slices: &[&EndpointSlice] = match by_key
            .iter_mut()
            .find(|(k, _, _)| k.0 == group.address_type && k.1 == group.key)
        {
            Some((_, list, claimed)) => {
                *claimed = true;
                list
            }
            None => &[],
        };
        plan_key(&target, group, slices, &mut out);
    }
    // Keys no longer desired: other ports, or an address type that is not an IP family.
    for (_, slices, claimed) in &by_key {
        if !claimed {
            out.deletes.extend(slices.iter().map(|s| (*s).clone()));
        }
    }

    recycle(&mut out);
    if endpoints.meta.deletion_timestamp.is_some() {
        // The garbage collector is about to delete what would be created.
        out.creates.clear();
    }
    out
}

fn plan_key(target: &Target, group: &Group, slices: &[&EndpointSlice], out: &mut AddressTypePlan) {
    if group.endpoints.is_empty() {
        out.endpoints_removed += slices.iter().map(|s| s.endpoints.len()).sum::<usize>();
        out.deletes.extend(slices.iter().map(|s| (*s).clone()));
        return;
    }
    if slices.is_empty() {
        out.endpoints_added += group.endpoints.len();
        out.creates.push(target.slice(group, None));
        return;
    }
    // One slice per key. Upstream keeps the first in lister order, which is arbitrary; keeping one
    // that is already current, when there is one, saves its rewrite.
    let assessed: Vec<(Totals, bool)> = slices
        .iter()
        .map(|s| {
            let t = totals(s, group);
            (t, t.is_zero() && target.metadata_current(s))
        })
        .collect();
    let keep = assessed
        .iter()
        .position(|(_, current)| *current)
        .unwrap_or(0);
    for (i, slice) in slices.iter().enumerate() {
        if i != keep {
            out.deletes.push((*slice).clone());
        }
    }
    let (totals, current) = assessed[keep];
    out.endpoints_added += totals.added;
    out.endpoints_updated += totals.updated;
    out.endpoints_removed += totals.removed;
    if !current {
        // Sent whole and unconditionally, as upstream sends it: no resourceVersion, no UID.
        out.updates
            .push(target.slice(group, Some(&slices[keep].meta.name)));
    }
}

/// Pairs creates with deletes of the same address type, in order; each pair becomes an update of
/// the slice that would have been deleted. The address type of a slice cannot change.
fn recycle(out: &mut AddressTypePlan) {
    for address_type in [AddressType::IPv4, AddressType::IPv6] {
        loop {
            let create = out
                .creates
                .iter()
                .position(|s| s.address_type == address_type);
            let delete = out
                .deletes
                .iter()
                .position(|s| s.address_type == address_type);
            let (Some(c), Some(d)) = (create, delete) else {
                break;
            };
            let old = out.deletes.remove(d);
            let mut slice = out.creates.remove(c);
            slice.meta.name = old.meta.name;
            out.updates.push(slice);
        }
    }
}

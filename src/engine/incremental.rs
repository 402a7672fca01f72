//! What the engine remembers between syncs of a service so that the next one can be incremental:
//! which pods changed since the last successful sync, whether something forces a full sync, and in
//! which slice each pod's endpoint sits.
//!
//! The contract with `reconcile_incremental`: it may be used only when the last sync of the service
//! succeeded and, since then, nothing but the listed pods changed: no event of the Service itself,
//! no slice event that queued it (an edit by someone else), no failed sync. Each of those marks
//! the service for a full sync. A node change that can move a zone marks the pods on that node as
//! changed, in the services selecting them only.

use std::collections::{BTreeSet, HashMap, HashSet};

use ahash::RandomState;
use dashmap::{DashMap, DashSet};
use parking_lot::Mutex;

use crate::index::ServiceKey;
use crate::model::{AddressType, EndpointSlice, Name};
use crate::tracker::service_of_slice;

#[derive(Debug, Default)]
pub(super) struct Changes {
    pub full: bool,
    pub pods: BTreeSet<Name>,
}

#[derive(Default)]
pub(super) struct ChangeLog {
    pending: DashMap<ServiceKey, Changes, RandomState>,
    /// Nodes added, deleted or moved to another zone since the last batch.
    changed_nodes: Mutex<HashSet<Name, RandomState>>,
    /// Services whose last sync succeeded.
    synced: DashSet<ServiceKey, RandomState>,
}

impl ChangeLog {
    pub fn pod_changed(&self, key: &ServiceKey, pod: &Name) {
        self.pending
            .entry(key.clone())
            .or_default()
            .pods
            .insert(pod.clone());
    }

    pub fn force_full(&self, key: &ServiceKey) {
        self.pending.entry(key.clone()).or_default().full = true;
    }

    /// A node was added, deleted or moved zone: the endpoints of its pods may change.
    pub fn node_changed(&self, node: &Name) {
        self.changed_nodes.lock().insert(node.clone());
    }

    /// The nodes changed since the last call.
    pub fn take_changed_nodes(&self) -> HashSet<Name, RandomState> {
        std::mem::take(&mut *self.changed_nodes.lock())
    }

    /// The changes since the last sync, taken: a sync is about to start. A service whose last
    /// sync did not succeed needs a full sync.
    pub fn take(&self, key: &ServiceKey) -> Changes {
        let mut changes = self.pending.remove(key).map(|(_, c)| c).unwrap_or_default();
        if !self.synced.contains(key) {
            changes.full = true;
        }
        changes
    }

    pub fn synced(&self, key: &ServiceKey) {
        self.synced.insert(key.clone());
    }

    pub fn failed(&self, key: &ServiceKey) {
        self.synced.remove(key);
        self.force_full(key);
    }

    pub fn forget(&self, key: &ServiceKey) {
        self.pending.remove(key);
        self.synced.remove(key);
    }
}

/// Pod name -> the name of the slice holding its endpoint, per address type.
type Places = HashMap<AddressType, HashMap<Name, Name, RandomState>, RandomState>;

/// Per service: where each pod's endpoints are.
#[derive(Default)]
pub(super) struct Locator {
    by_service: DashMap<ServiceKey, Places, RandomState>,
}

/// The pods of a slice's endpoints, with their positions.
fn endpoint_pods(slice: &EndpointSlice) -> impl Iterator<Item = (usize, &Name)> {
    slice
        .endpoints
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i, e.target_ref.as_ref()?.name.as_ref()?)))
}

impl Locator {
    /// A slice was stored (replacing `old`, if any) or deleted (`new` is `None`).
    pub fn slice_changed(&self, old: Option<&EndpointSlice>, new: Option<&EndpointSlice>) {
        // An update in place mostly keeps each pod at its position: those need no bookkeeping.
        let same_slice = matches!((old, new), (Some(o), Some(n))
            if o.meta.name == n.meta.name && o.address_type == n.address_type);
        let kept = |i: usize, pod: &Name, other: Option<&EndpointSlice>| {
            same_slice
                && other
                    .and_then(|s| s.endpoints.get(i))
                    .and_then(|e| e.target_ref.as_ref())
                    .and_then(|t| t.name.as_ref())
                    == Some(pod)
        };
        if let Some(old) = old
            && let Ok(key) = service_of_slice(old)
            && let Some(mut map) = self.by_service.get_mut(&key)
            && let Some(places) = map.get_mut(&old.address_type)
        {
            for (i, pod) in endpoint_pods(old) {
                if !kept(i, pod, new) && places.get(pod) == Some(&old.meta.name) {
                    places.remove(pod);
                }
            }
        }
        if let Some(new) = new
            && let Ok(key) = service_of_slice(new)
        {
            let mut map = self.by_service.entry(key).or_default();
            let places = map.entry(new.address_type.clone()).or_default();
            for (i, pod) in endpoint_pods(new) {
                if !kept(i, pod, old) {
                    places.insert(pod.clone(), new.meta.name.clone());
                }
            }
        }
    }

    pub fn locate(&self, key: &ServiceKey, pod: &str, at: &AddressType) -> Option<Name> {
        let map = self.by_service.get(key)?;
        map.get(at)?.get(pod).cloned()
    }

    pub fn forget(&self, key: &ServiceKey) {
        self.by_service.remove(key);
    }
}

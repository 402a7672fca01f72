//! What the engine remembers between syncs of a service so that the next one can be incremental:
//! which pods changed since the last successful sync, whether something forces a full sync, and in
//! which slice each pod's endpoint sits.
//!
//! The contract with `reconcile_incremental`: it may be used only when the last sync of the service
//! succeeded and, since then, nothing but the listed pods changed: no event of the Service itself,
//! no slice event that queued it (an edit by someone else), no node change that can move a zone,
//! no failed sync. Each of those marks the service for a full sync.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use ahash::RandomState;
use dashmap::DashMap;

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
    /// Bumped on every node change that can move an endpoint's zone or node.
    node_epoch: AtomicU64,
    /// The node epoch at each service's last successful sync.
    synced_epoch: DashMap<ServiceKey, u64, RandomState>,
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

    pub fn nodes_changed(&self) {
        self.node_epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// The changes since the last sync, taken: a sync is about to start. A service never synced,
    /// or synced before the last node change, needs a full sync.
    pub fn take(&self, key: &ServiceKey) -> Changes {
        let mut changes = self.pending.remove(key).map(|(_, c)| c).unwrap_or_default();
        let epoch = self.node_epoch.load(Ordering::Relaxed);
        if self.synced_epoch.get(key).is_none_or(|e| *e != epoch) {
            changes.full = true;
        }
        changes
    }

    pub fn synced(&self, key: &ServiceKey) {
        let epoch = self.node_epoch.load(Ordering::Relaxed);
        self.synced_epoch.insert(key.clone(), epoch);
    }

    pub fn failed(&self, key: &ServiceKey) {
        self.synced_epoch.remove(key);
        self.force_full(key);
    }

    pub fn forget(&self, key: &ServiceKey) {
        self.pending.remove(key);
        self.synced_epoch.remove(key);
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

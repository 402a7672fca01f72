//! The EndpointSlices this controller manages, by name and grouped by service.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;

use super::ServiceKey;
use super::set::{Map, Seeded};
use super::store::Relist;
use crate::model::{EndpointSlice, Name, keys};

/// One namespace's slices. Both maps change under the namespace's lock, so a reader never sees a
/// slice in one and not the other.
#[derive(Debug, Default)]
struct Namespace {
    by_name: Map<Name, Arc<EndpointSlice>>,
    /// By the `kubernetes.io/service-name` label; slices without one are only in `by_name`.
    by_service: Map<Name, BTreeMap<Name, Arc<EndpointSlice>>>,
}

impl Namespace {
    fn insert(&mut self, slice: Arc<EndpointSlice>) -> Option<Arc<EndpointSlice>> {
        let old = self.remove(&slice.meta.name);
        if let Some(service) = slice.service_name() {
            self.by_service
                .entry(service.clone())
                .or_default()
                .insert(slice.meta.name.clone(), slice.clone());
        }
        self.by_name.insert(slice.meta.name.clone(), slice);
        old
    }

    fn remove(&mut self, name: &str) -> Option<Arc<EndpointSlice>> {
        let old = self.by_name.remove(name)?;
        if let Some(service) = old.service_name()
            && let Some(group) = self.by_service.get_mut(service)
        {
            group.remove(name);
            if group.is_empty() {
                self.by_service.remove(service);
            }
        }
        Some(old)
    }
}

/// Managed by this controller: the only slices it reads or writes.
pub fn is_managed(slice: &EndpointSlice) -> bool {
    slice.managed_by().map(|m| m.as_str()) == Some(keys::ENDPOINTSLICE_CONTROLLER)
}

/// The EndpointSlices managed by one controller. Slices being deleted are kept: the reconciler
/// decides what to do with them, and the slice handlers need them to compare versions.
#[derive(Debug)]
pub struct SliceStore {
    namespaces: DashMap<Name, Namespace, Seeded>,
    count: AtomicUsize,
    /// The managed-by label value of the slices kept.
    manager: &'static str,
}

impl Default for SliceStore {
    fn default() -> Self {
        SliceStore::for_manager(keys::ENDPOINTSLICE_CONTROLLER)
    }
}

impl SliceStore {
    /// The store of the EndpointSlice controller's slices.
    pub fn new() -> Self {
        SliceStore::default()
    }

    /// The store of the slices carrying this managed-by value.
    pub fn for_manager(manager: &'static str) -> Self {
        SliceStore {
            namespaces: DashMap::default(),
            count: AtomicUsize::new(0),
            manager,
        }
    }

    /// The managed-by value of the slices kept.
    pub fn manager(&self) -> &'static str {
        self.manager
    }

    /// Whether `slice` belongs here: it carries this store's managed-by value.
    pub fn keeps(&self, slice: &EndpointSlice) -> bool {
        slice.managed_by().map(|m| m.as_str()) == Some(self.manager)
    }

    /// Stores `slice` when this controller manages it; otherwise removes any stored slice of that
    /// name, as it is no longer ours. Returns the stored version it replaces or removes. A slice
    /// without a name (not yet created) is not stored.
    pub fn apply(&self, slice: impl Into<Arc<EndpointSlice>>) -> Option<Arc<EndpointSlice>> {
        let slice = slice.into();
        if slice.meta.name.is_empty() {
            return None;
        }
        if !self.keeps(&slice) {
            return self.delete(&slice.meta.namespace, &slice.meta.name);
        }
        let mut ns = self
            .namespaces
            .entry(slice.meta.namespace.clone())
            .or_default();
        let old = ns.insert(slice);
        if old.is_none() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        old
    }

    pub fn delete(&self, namespace: &str, name: &str) -> Option<Arc<EndpointSlice>> {
        let old = {
            let mut ns = self.namespaces.get_mut(namespace)?;
            ns.remove(name)?
        };
        self.count.fetch_sub(1, Ordering::Relaxed);
        // The guard is gone: taking the shard's write lock again cannot deadlock.
        self.namespaces
            .remove_if(namespace, |_, ns| ns.by_name.is_empty());
        Some(old)
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<EndpointSlice>> {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.by_name.get(name).cloned())
    }

    /// Every stored slice's namespace and name.
    pub fn keys(&self) -> Vec<(Name, Name)> {
        self.namespaces
            .iter()
            .flat_map(|ns| {
                let namespace = ns.key().clone();
                ns.by_name
                    .keys()
                    .map(move |name| (namespace.clone(), name.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The slices labelled for `service`, in name order: one consistent view.
    pub fn for_service(&self, service: &ServiceKey) -> Vec<Arc<EndpointSlice>> {
        self.namespaces
            .get(service.namespace.as_str())
            .and_then(|ns| {
                ns.by_service
                    .get(service.name.as_str())
                    .map(|g| g.values().cloned().collect())
            })
            .unwrap_or_default()
    }

    /// Replaces every slice with the managed ones of `slices` (a later duplicate wins). Both lists
    /// of the result are in namespace and name order. Readers may see part of the change before
    /// the whole of it.
    pub fn reset<I>(&self, slices: I) -> Relist<EndpointSlice>
    where
        I: IntoIterator,
        I::Item: Into<Arc<EndpointSlice>>,
    {
        let key = |s: &EndpointSlice| (s.meta.namespace.clone(), s.meta.name.clone());
        let mut incoming: Map<(Name, Name), Arc<EndpointSlice>> = Map::default();
        for slice in slices {
            let slice = slice.into();
            if self.keeps(&slice) && !slice.meta.name.is_empty() {
                incoming.insert(key(&slice), slice);
            }
        }
        let mut out = Relist::default();
        let gone: Vec<(Name, Name)> = self
            .namespaces
            .iter()
            .flat_map(|ns| {
                ns.by_name
                    .keys()
                    .map(|name| (ns.key().clone(), name.clone()))
                    .collect::<Vec<_>>()
            })
            .filter(|k| !incoming.contains_key(k))
            .collect();
        for (namespace, name) in gone {
            if let Some(old) = self.delete(&namespace, &name) {
                out.deleted.push(old);
            }
        }
        for ((namespace, name), slice) in incoming {
            let unchanged = self
                .get(&namespace, &name)
                .is_some_and(|old| *old == *slice);
            if !unchanged {
                let old = self.apply(slice.clone());
                out.applied.push((old, slice));
            }
        }
        out.deleted.sort_unstable_by_key(|s| key(s));
        out.applied.sort_unstable_by_key(|(_, s)| key(s));
        out
    }

    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

//! The Endpoints store.

use std::sync::Arc;

use ahash::RandomState;
use dashmap::DashMap;

use super::ServiceKey;
use crate::model::Endpoints;

/// Every Endpoints object the watch delivered, the controller's own and custom ones: read by the
/// Endpoints and the mirroring controllers. Keyed by namespace and name, as its Service is.
#[derive(Debug, Default)]
pub struct EndpointsStore(DashMap<ServiceKey, Arc<Endpoints>, RandomState>);

impl EndpointsStore {
    pub fn get(&self, key: &ServiceKey) -> Option<Arc<Endpoints>> {
        self.0.get(key).map(|e| Arc::clone(&e))
    }

    /// Stores `endpoints` unless `older` says it is older than the version held. Returns `None`
    /// when not stored, else the version it replaces.
    pub fn insert_unless(
        &self,
        endpoints: Arc<Endpoints>,
        older: impl FnOnce(&Endpoints, &Endpoints) -> bool,
    ) -> Option<Option<Arc<Endpoints>>> {
        use dashmap::mapref::entry::Entry;
        let key = ServiceKey::new(&endpoints.meta.namespace, &endpoints.meta.name);
        match self.0.entry(key) {
            Entry::Occupied(held) if older(&endpoints, held.get()) => None,
            Entry::Occupied(mut held) => Some(Some(held.insert(endpoints))),
            Entry::Vacant(slot) => {
                slot.insert(endpoints);
                Some(None)
            }
        }
    }

    pub fn remove(&self, key: &ServiceKey) -> Option<Arc<Endpoints>> {
        self.0.remove(key).map(|(_, e)| e)
    }

    /// Every key, sorted: queues fill in the same order on every run.
    pub fn keys(&self) -> Vec<ServiceKey> {
        let mut keys: Vec<ServiceKey> = self.0.iter().map(|e| e.key().clone()).collect();
        keys.sort_unstable();
        keys
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys of the objects `keep` accepts, sorted.
    pub fn keys_where(&self, keep: impl Fn(&Endpoints) -> bool) -> Vec<ServiceKey> {
        let mut keys: Vec<ServiceKey> = self
            .0
            .iter()
            .filter(|e| keep(e.value()))
            .map(|e| e.key().clone())
            .collect();
        keys.sort_unstable();
        keys
    }
}

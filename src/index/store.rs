//! The stores of the kinds no selector reads (nodes, Endpoints), and what a relist of any kind
//! reports.

use std::sync::Arc;

use ahash::RandomState;
use dashmap::DashMap;
use parking_lot::RwLock;

use super::ServiceKey;
use super::set::Map;
use crate::model::{Endpoints, Name, Node};

/// What a full relist changed: the events a watch would have delivered had it not been broken.
#[derive(Debug)]
pub struct Relist<T> {
    /// Objects that were stored and are absent from the new list (deletes).
    pub deleted: Vec<Arc<T>>,
    /// Objects new or different from the stored version, as (previous, stored) (adds and updates).
    /// Objects equal to the stored version keep it and are not listed.
    pub applied: Vec<(Option<Arc<T>>, Arc<T>)>,
}

impl<T> Default for Relist<T> {
    fn default() -> Self {
        Relist {
            deleted: Vec::new(),
            applied: Vec::new(),
        }
    }
}

impl<T> Relist<T> {
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty() && self.applied.is_empty()
    }
}

/// Nodes by name, as a sync reads them: one snapshot for the whole sync.
pub(crate) type NodeMap = Map<Name, Arc<Node>>;

/// Nodes by name, copy-on-write: a sync takes a snapshot (an `Arc` of the map) and reads it
/// without a lock; a change copies the map only while some sync still holds a snapshot, so loading
/// N nodes is O(N), not O(N²).
#[derive(Debug, Default)]
pub struct NodeStore {
    nodes: RwLock<Arc<NodeMap>>,
}

impl NodeStore {
    pub fn new() -> Self {
        NodeStore::default()
    }

    /// Stores `node`, returning the version it replaces. A node equal to the one stored (a
    /// heartbeat: nothing kept here moved) leaves the map untouched.
    pub fn apply(&self, node: impl Into<Arc<Node>>) -> Option<Arc<Node>> {
        let node = node.into();
        if let Some(old) = self.nodes.read().get(&node.name)
            && **old == *node
        {
            return Some(Arc::clone(old));
        }
        Arc::make_mut(&mut self.nodes.write()).insert(node.name.clone(), node)
    }

    pub fn delete(&self, name: &str) -> Option<Arc<Node>> {
        if !self.nodes.read().contains_key(name) {
            return None;
        }
        Arc::make_mut(&mut self.nodes.write()).remove(name)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.read().get(name).cloned()
    }

    /// The nodes as they are now, for one sync to read.
    pub(crate) fn snapshot(&self) -> Arc<NodeMap> {
        Arc::clone(&self.nodes.read())
    }

    /// Every node's name.
    pub fn names(&self) -> Vec<Name> {
        self.nodes.read().keys().cloned().collect()
    }

    /// Every node, in name order.
    pub fn list(&self) -> Vec<Arc<Node>> {
        let mut out: Vec<Arc<Node>> = self.nodes.read().values().cloned().collect();
        out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Replaces every node with `nodes` (a later duplicate wins). Both lists of the result are in
    /// name order.
    pub fn reset<I>(&self, nodes: I) -> Relist<Node>
    where
        I: IntoIterator,
        I::Item: Into<Arc<Node>>,
    {
        let mut incoming: Map<Name, Arc<Node>> = Map::default();
        for node in nodes {
            let node = node.into();
            incoming.insert(node.name.clone(), node);
        }
        let mut out = Relist::default();
        let mut guard = self.nodes.write();
        let stored = Arc::make_mut(&mut guard);
        let gone: Vec<Name> = stored
            .keys()
            .filter(|name| !incoming.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            if let Some(node) = stored.remove(&name) {
                out.deleted.push(node);
            }
        }
        for node in incoming.into_values() {
            let unchanged = stored.get(&node.name).is_some_and(|old| **old == *node);
            if !unchanged {
                let old = stored.insert(node.name.clone(), Arc::clone(&node));
                out.applied.push((old, node));
            }
        }
        drop(guard);
        out.deleted.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out.applied.sort_unstable_by(|a, b| a.1.name.cmp(&b.1.name));
        out
    }

    pub fn len(&self) -> usize {
        self.nodes.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.read().is_empty()
    }
}

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

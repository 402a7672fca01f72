//! The node store, and what a relist of any kind reports.

use std::sync::Arc;

use dashmap::DashMap;

use super::set::{Map, Seeded};
use crate::model::{Name, Node};

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

/// Nodes by name.
#[derive(Debug, Default)]
pub struct NodeStore {
    nodes: DashMap<Name, Arc<Node>, Seeded>,
}

impl NodeStore {
    pub fn new() -> Self {
        NodeStore::default()
    }

    /// Stores `node`, returning the version it replaces.
    pub fn apply(&self, node: impl Into<Arc<Node>>) -> Option<Arc<Node>> {
        let node = node.into();
        self.nodes.insert(node.name.clone(), node)
    }

    pub fn delete(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.remove(name).map(|(_, n)| n)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name).map(|n| n.clone())
    }

    /// Every node, in name order.
    pub fn list(&self) -> Vec<Arc<Node>> {
        let mut out: Vec<Arc<Node>> = self.nodes.iter().map(|e| e.value().clone()).collect();
        out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Replaces every node with `nodes` (a later duplicate wins). Both lists of the result are in
    /// name order. Readers may see part of the change before the whole of it.
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
        let gone: Vec<Name> = self
            .nodes
            .iter()
            .filter(|e| !incoming.contains_key(e.key()))
            .map(|e| e.key().clone())
            .collect();
        for name in gone {
            if let Some((_, node)) = self.nodes.remove(&name) {
                out.deleted.push(node);
            }
        }
        for node in incoming.into_values() {
            let unchanged = self.nodes.get(&node.name).is_some_and(|old| **old == *node);
            if !unchanged {
                let old = self.nodes.insert(node.name.clone(), node.clone());
                out.applied.push((old, node));
            }
        }
        out.deleted.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out.applied.sort_unstable_by(|a, b| a.1.name.cmp(&b.1.name));
        out
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

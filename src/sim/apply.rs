//! The oracle state: a snapshot that changes are applied to one by one, with no cleverness, for
//! comparing what the engine computes incrementally against.

use std::collections::HashMap;

use ahash::RandomState;

use crate::change::Change;
use crate::model::{Meta, Name, PodMeta};
use crate::snapshot::Snapshot;

/// What applying a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    Created,
    Replaced,
    Deleted,
    /// A delete of an object that does not exist: a trace that does this is inconsistent.
    Missing,
}

/// Applies `change` to `snapshot`: an object replaces the one with its key (namespace and name, or
/// name for nodes) or is appended; a delete removes it, moving the last object into its place, so
/// the order of a list is not kept.
pub fn apply(snapshot: &mut Snapshot, change: &Change) -> Applied {
    match change {
        Change::Service(s) => upsert(&mut snapshot.services, s, |o| &o.meta),
        Change::ServiceDeleted { namespace, name } => {
            remove(&mut snapshot.services, namespace, name, |o| &o.meta)
        }
        Change::Pod(p) => upsert(&mut snapshot.pods, p, |o| &o.meta),
        Change::PodDeleted { namespace, name } => {
            remove(&mut snapshot.pods, namespace, name, |o| &o.meta)
        }
        Change::Node(n) => match snapshot.nodes.iter().position(|o| o.name == n.name) {
            Some(i) => {
                snapshot.nodes[i] = n.clone();
                Applied::Replaced
            }
            None => {
                snapshot.nodes.push(n.clone());
                Applied::Created
            }
        },
        Change::NodeDeleted { name } => match snapshot.nodes.iter().position(|o| &o.name == name) {
            Some(i) => {
                snapshot.nodes.swap_remove(i);
                Applied::Deleted
            }
            None => Applied::Missing,
        },
        Change::Namespace(ns) => match snapshot.namespaces.iter().position(|o| o.name == ns.name) {
            Some(i) => {
                snapshot.namespaces[i] = ns.clone();
                Applied::Replaced
            }
            None => {
                snapshot.namespaces.push(ns.clone());
                Applied::Created
            }
        },
        Change::NamespaceDeleted { name } => {
            match snapshot.namespaces.iter().position(|o| &o.name == name) {
                Some(i) => {
                    snapshot.namespaces.swap_remove(i);
                    Applied::Deleted
                }
                None => Applied::Missing,
            }
        }
        Change::EndpointSlice(s) => upsert(&mut snapshot.endpoint_slices, s, |o| &o.meta),
        Change::EndpointSliceDeleted { namespace, name } => {
            remove(&mut snapshot.endpoint_slices, namespace, name, |o| &o.meta)
        }
        Change::Endpoints(e) => upsert(&mut snapshot.endpoints, e, |o| &o.meta),
        Change::EndpointsDeleted {
            namespace, name, ..
        } => remove(&mut snapshot.endpoints, namespace, name, |o| &o.meta),
    }
}

/// Metadata with a namespace and a name.
trait Keyed {
    fn namespace_and_name(&self) -> (&Name, &Name);
}

impl Keyed for Meta {
    fn namespace_and_name(&self) -> (&Name, &Name) {
        (&self.namespace, &self.name)
    }
}

impl Keyed for PodMeta {
    fn namespace_and_name(&self) -> (&Name, &Name) {
        (&self.namespace, &self.name)
    }
}

fn same_key(meta: &impl Keyed, namespace: &Name, name: &Name) -> bool {
    let (ns, n) = meta.namespace_and_name();
    n == name && ns == namespace
}

fn upsert<T: Clone, M: Keyed>(list: &mut Vec<T>, object: &T, meta: impl Fn(&T) -> &M) -> Applied {
    let (namespace, name) = meta(object).namespace_and_name();
    match list.iter().position(|o| same_key(meta(o), namespace, name)) {
        Some(i) => {
            list[i] = object.clone();
            Applied::Replaced
        }
        None => {
            list.push(object.clone());
            Applied::Created
        }
    }
}

fn remove<T, M: Keyed>(
    list: &mut Vec<T>,
    namespace: &Name,
    name: &Name,
    meta: impl Fn(&T) -> &M,
) -> Applied {
    match list.iter().position(|o| same_key(meta(o), namespace, name)) {
        Some(i) => {
            list.swap_remove(i);
            Applied::Deleted
        }
        None => Applied::Missing,
    }
}

/// Applies `changes` in order, exactly as `apply` one by one would (same lists, same order) when no
/// two pods share a key, but finds pods through an index: replaying a long trace on 100k pods with
/// `apply` alone is quadratic.
pub fn apply_all<'a>(snapshot: &mut Snapshot, changes: impl IntoIterator<Item = &'a Change>) {
    let mut index: HashMap<(Name, Name), usize, RandomState> = snapshot
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.meta.namespace.clone(), p.meta.name.clone()), i))
        .collect();
    for change in changes {
        match change {
            Change::Pod(pod) => {
                let key = (pod.meta.namespace.clone(), pod.meta.name.clone());
                match index.get(&key) {
                    Some(&i) => snapshot.pods[i] = pod.clone(),
                    None => {
                        index.insert(key, snapshot.pods.len());
                        snapshot.pods.push(pod.clone());
                    }
                }
            }
            Change::PodDeleted { namespace, name } => {
                let Some(i) = index.remove(&(namespace.clone(), name.clone())) else {
                    continue;
                };
                snapshot.pods.swap_remove(i);
                if let Some(moved) = snapshot.pods.get(i) {
                    index.insert((moved.meta.namespace.clone(), moved.meta.name.clone()), i);
                }
            }
            other => {
                apply(snapshot, other);
            }
        }
    }
}

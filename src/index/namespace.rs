//! Everything the index knows about one namespace, kept consistent under one lock: its pods and
//! services, the selector cache, pods by label pair, and each service's member pods.
//!
//! Selectors never reach across namespaces, so a namespace is the natural unit of consistency: a
//! pod or service event changes one namespace only, and every change here is made in full before
//! the lock is released.

use std::collections::BTreeMap;
use std::sync::Arc;

use smallvec::SmallVec;

use super::selector::SelectorCache;
use super::set::{Map, NameSet, Pair, PairRef};
use super::slots::{PodSlots, Removed, Slot};
use crate::model::{Labels, Name, Pod, Service};

#[derive(Debug)]
struct ServiceEntry {
    service: Arc<Service>,
    /// The slots of the pods the selector matches, in pod name order. Empty when there is no
    /// selector.
    members: BTreeMap<Name, Slot>,
}

#[derive(Debug, Default)]
pub(crate) struct Namespace {
    pods: PodSlots,
    services: Map<Name, ServiceEntry>,
    selectors: SelectorCache,
    /// The inverted pod label index: which pods carry each pair.
    pods_by_pair: Map<Pair, NameSet>,
}

/// The names of matched services: one or two for almost every pod.
type Matched = SmallVec<[Name; 4]>;

impl Namespace {
    pub(crate) fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.services.is_empty()
    }

    pub(crate) fn pod(&self, name: &str) -> Option<&Arc<Pod>> {
        self.pods.get(name)
    }

    pub(crate) fn pods(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.pods.iter()
    }

    pub(crate) fn pod_names(&self) -> Vec<Name> {
        self.pods.iter().map(|p| p.meta.name.clone()).collect()
    }

    pub(crate) fn service(&self, name: &str) -> Option<&Arc<Service>> {
        self.services.get(name).map(|e| &e.service)
    }

    pub(crate) fn services(&self) -> impl Iterator<Item = &Arc<Service>> {
        self.services.values().map(|e| &e.service)
    }

    pub(crate) fn service_names(&self) -> Vec<Name> {
        self.services.keys().cloned().collect()
    }

    /// The member pods of the service called `name`, in name order.
    pub(crate) fn members(&self, name: &str) -> Vec<Arc<Pod>> {
        self.services
            .get(name)
            .map(|e| {
                (e.members.values())
                    .filter_map(|&slot| self.pods.at(slot).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn with_members<R>(&self, name: &str, f: impl FnOnce(&[&Pod]) -> R) -> R {
        let pods: Vec<&Pod> = self
            .services
            .get(name)
            .map(|e| {
                // Sized up front: a filtered iterator gives no lower bound, and growing the
                // vector costs several allocations a sync.
                let mut pods = Vec::with_capacity(e.members.len());
                pods.extend(
                    (e.members.values()).filter_map(|&slot| self.pods.at(slot).map(|p| p.as_ref())),
                );
                pods
            })
            .unwrap_or_default();
        f(&pods)
    }

    pub(crate) fn member_count(&self, name: &str) -> usize {
        self.services.get(name).map_or(0, |e| e.members.len())
    }

    /// Calls `f` with each pod whose node is one of `nodes`, and the services selecting it.
    pub(crate) fn for_each_pod_on(
        &self,
        nodes: &std::collections::HashSet<Name, ahash::RandomState>,
        mut f: impl FnMut(&Name, &Arc<Service>),
    ) {
        for pod in self.pods.iter() {
            if pod.node_name.as_ref().is_some_and(|n| nodes.contains(n)) {
                self.for_each_match(&pod.meta.labels, |s| f(&pod.meta.name, s));
            }
        }
    }

    /// Calls `f` for each service whose selector matches `labels`, each once, in no set order.
    pub(crate) fn for_each_match(&self, labels: &Labels, f: impl FnMut(&Arc<Service>)) {
        self.selectors.for_each_match(labels, f);
    }

    fn matched(&self, labels: &Labels) -> Matched {
        let mut out = Matched::new();
        self.for_each_match(labels, |s| out.push(s.meta.name.clone()));
        out
    }

    /// Stores `pod` and updates the label index and the member sets of the services it joins or
    /// leaves. Returns the previous version and the stored one.
    pub(crate) fn apply_pod(&mut self, mut pod: Arc<Pod>) -> (Option<Arc<Pod>>, Arc<Pod>) {
        if let Some((slot, stored)) = self.pods.find_mut(pod.meta.name.as_str()) {
            // Share the stored name: the sets below hold it already, and a converted update
            // brings its own copy of the string.
            if let Some(p) = Arc::get_mut(&mut pod) {
                p.meta.name = stored.meta.name.clone();
            }
            // Every member set holds the slot: the commonest update, a status change, is done.
            let old = std::mem::replace(stored, Arc::clone(&pod));
            if old.meta.labels != pod.meta.labels {
                self.relabel(slot, &old, &pod);
            }
            return (Some(old), pod);
        }
        let slot = self.pods.insert(Arc::clone(&pod));
        let name = &pod.meta.name;
        for (k, v) in pod.meta.labels.iter() {
            index_pair(&mut self.pods_by_pair, k, v, name);
        }
        for service in self.matched(&pod.meta.labels) {
            if let Some(entry) = self.services.get_mut(&service) {
                entry.members.insert(name.clone(), slot);
            }
        }
        (None, pod)
    }

    /// Moves the pod in `slot` between label pairs and member sets after its labels changed.
    fn relabel(&mut self, slot: Slot, old: &Pod, pod: &Pod) {
        let (before, after, name) = (&old.meta.labels, &pod.meta.labels, &pod.meta.name);
        for (k, v) in before.iter().filter(|(k, v)| after.get(k) != Some(v)) {
            self.unindex_pair(k, v, name);
        }
        for (k, v) in after.iter().filter(|(k, v)| before.get(k) != Some(v)) {
            index_pair(&mut self.pods_by_pair, k, v, name);
        }
        let left = self.matched(before);
        let joined = self.matched(after);
        for service in left.iter().filter(|s| !joined.contains(s)) {
            if let Some(entry) = self.services.get_mut(service) {
                entry.members.remove(name);
            }
        }
        for service in joined.iter().filter(|s| !left.contains(s)) {
            if let Some(entry) = self.services.get_mut(service) {
                entry.members.insert(name.clone(), slot);
            }
        }
    }

    fn unindex_pair(&mut self, key: &Name, value: &Name, pod: &Name) {
        let pair = PairRef(key, value);
        if let Some(set) = self.pods_by_pair.get_mut(&pair) {
            set.remove(pod);
            if set.is_empty() {
                self.pods_by_pair.remove(&pair);
            }
        }
    }

    pub(crate) fn delete_pod(&mut self, name: &str) -> Option<Arc<Pod>> {
        let Removed { pod: old, moved } = self.pods.remove(name)?;
        let name = &old.meta.name;
        for (k, v) in old.meta.labels.iter() {
            self.unindex_pair(k, v, name);
        }
        for service in self.matched(&old.meta.labels) {
            if let Some(entry) = self.services.get_mut(&service) {
                entry.members.remove(name);
            }
        }
        // The last pod took the freed slot: its member sets follow it.
        if let Some((slot, moved)) = moved {
            for service in self.matched(&moved.meta.labels) {
                let member = (self.services.get_mut(&service))
                    .and_then(|entry| entry.members.get_mut(&moved.meta.name));
                if let Some(member) = member {
                    *member = slot;
                }
            }
        }
        Some(old)
    }

    /// Stores `service`, re-files it in the selector cache and, when its selector is new or changed,
    /// computes its members from the pod label index. Returns the previous version.
    pub(crate) fn apply_service(&mut self, service: Arc<Service>) -> Option<Arc<Service>> {
        self.selectors.insert(&service);
        let name = service.meta.name.as_str();
        if let Some(entry) = self.services.get_mut(name)
            && entry.service.selector == service.selector
        {
            return Some(std::mem::replace(&mut entry.service, service));
        }
        let members = match &service.selector {
            Some(selector) => self.select(selector),
            None => BTreeMap::new(),
        };
        let name = service.meta.name.clone();
        self.services
            .insert(name, ServiceEntry { service, members })
            .map(|e| e.service)
    }

    pub(crate) fn delete_service(&mut self, name: &str) -> Option<Arc<Service>> {
        let entry = self.services.remove(name)?;
        self.selectors.remove(&entry.service.meta.name);
        Some(entry.service)
    }

    /// The pods `selector` matches, found through its rarest pair rather than a scan.
    fn select(&self, selector: &Labels) -> BTreeMap<Name, Slot> {
        if selector.is_empty() {
            return (self.pods.iter().enumerate())
                .map(|(slot, p)| (p.meta.name.clone(), slot))
                .collect();
        }
        let mut rarest: Option<&NameSet> = None;
        for (k, v) in selector.iter() {
            match self.pods_by_pair.get(&PairRef(k, v)) {
                // No pod carries this pair, so none matches.
                None => return BTreeMap::new(),
                Some(set) if rarest.is_none_or(|r| set.len() < r.len()) => rarest = Some(set),
                Some(_) => {}
            }
        }
        let Some(candidates) = rarest else {
            return BTreeMap::new();
        };
        // Collected then sorted in bulk: denser B-tree nodes than inserting one by one.
        candidates
            .iter()
            .filter_map(|n| self.pods.find(n))
            .filter(|(_, p)| p.meta.labels.matches(selector))
            .map(|(slot, p)| (p.meta.name.clone(), slot))
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.pods.check_invariants();
        for pod in self.pods.iter() {
            let name = &pod.meta.name;
            for (k, v) in pod.meta.labels.iter() {
                let set = self.pods_by_pair.get(&PairRef(k, v));
                assert!(set.is_some_and(|s| s.iter().any(|n| n == name)));
            }
        }
        let indexed: usize = self.pods_by_pair.values().map(|s| s.len()).sum();
        let labels: usize = self.pods.iter().map(|p| p.meta.labels.len()).sum();
        assert_eq!(indexed, labels);
        for entry in self.services.values() {
            let expected: Vec<&Name> = match &entry.service.selector {
                None => Vec::new(),
                Some(sel) => {
                    let mut v: Vec<&Name> = (self.pods.iter())
                        .filter(|p| p.meta.labels.matches(sel))
                        .map(|p| &p.meta.name)
                        .collect();
                    v.sort();
                    v
                }
            };
            assert_eq!(entry.members.keys().collect::<Vec<_>>(), expected);
            for (n, &slot) in &entry.members {
                assert!(self.pods.at(slot).is_some_and(|p| &p.meta.name == n));
            }
        }
        let filed = self
            .services
            .values()
            .filter(|e| e.service.selector.is_some())
            .count();
        assert_eq!(self.selectors.len(), filed);
    }
}

/// Files `pod` under the pair `key=value`; the pair's names are cloned only when it is new.
fn index_pair(pods_by_pair: &mut Map<Pair, NameSet>, key: &Name, value: &Name, pod: &Name) {
    match pods_by_pair.get_mut(&PairRef(key, value)) {
        Some(set) => {
            set.insert(pod.clone());
        }
        None => {
            let mut set = NameSet::default();
            set.insert(pod.clone());
            pods_by_pair.insert((key.clone(), value.clone()), set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intern;

    fn pod(name: &str, labels: &[(&str, &str)]) -> Arc<Pod> {
        let mut p = Pod::default();
        p.meta.namespace = intern("ns");
        p.meta.name = Name::new(name);
        p.meta.labels = Labels::from_pairs(labels.iter().copied());
        Arc::new(p)
    }

    fn service(name: &str, selector: &[(&str, &str)]) -> Arc<Service> {
        let mut s = Service::default();
        s.meta.namespace = intern("ns");
        s.meta.name = intern(name);
        s.selector = Some(Labels::from_pairs(selector.iter().copied()));
        Arc::new(s)
    }

    fn member_names(ns: &Namespace, service: &str) -> Vec<String> {
        ns.members(service)
            .iter()
            .map(|p| p.meta.name.to_string())
            .collect()
    }

    #[test]
    fn members_follow_pods_and_services() {
        let mut ns = Namespace::default();
        ns.apply_pod(pod("b", &[("app", "web")]));
        ns.apply_service(service("web", &[("app", "web")]));
        ns.apply_pod(pod("a", &[("app", "web"), ("v", "1")]));
        ns.apply_pod(pod("c", &[("app", "db")]));
        assert_eq!(member_names(&ns, "web"), ["a", "b"]);
        ns.check_invariants();

        // Relabel: leaves web.
        ns.apply_pod(pod("a", &[("app", "db")]));
        assert_eq!(member_names(&ns, "web"), ["b"]);
        // A status update refreshes the stored version without moving it.
        let (old, new) = ns.apply_pod(pod("b", &[("app", "web")]));
        assert!(old.is_some());
        assert!(Arc::ptr_eq(&ns.members("web")[0], &new));
        // A selector change recomputes the members.
        ns.apply_service(service("web", &[("app", "db")]));
        assert_eq!(member_names(&ns, "web"), ["a", "c"]);
        ns.check_invariants();

        ns.delete_pod("a");
        assert_eq!(member_names(&ns, "web"), ["c"]);
        assert!(ns.delete_service("web").is_some());
        assert!(ns.members("web").is_empty());
        ns.delete_pod("b");
        ns.delete_pod("c");
        assert!(ns.is_empty());
        assert!(ns.pods_by_pair.is_empty());
    }

    #[test]
    fn an_update_shares_the_stored_name() {
        let mut ns = Namespace::default();
        let (_, first) = ns.apply_pod(pod("a", &[("x", "1")]));
        let (_, second) = ns.apply_pod(pod("a", &[("x", "2")]));
        assert!(std::ptr::eq(
            first.meta.name.as_str().as_ptr(),
            second.meta.name.as_str().as_ptr()
        ));
    }
}

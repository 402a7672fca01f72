//! The precompiled selector cache of one namespace: which services select a pod, found from the
//! pod's own label pairs instead of by testing every service of the namespace.
//!
//! Each service with a non-empty selector is filed under exactly one pair of its selector, the one
//! with the fewest services filed under it when the service arrives (the first such pair on a tie,
//! so the choice is deterministic for a given order of events). A pod can only match a service if
//! it carries that pair, so looking up each of the pod's pairs finds every candidate once; the rest
//! of the selector is then checked. Services whose selector is present but empty match every pod
//! and are kept apart. Services without a selector match nothing and are not filed at all.

use std::sync::Arc;

use smallvec::SmallVec;

use super::set::{Map, Pair, PairRef};
use crate::model::{Labels, Name, Service};

/// Where a filed service sits.
#[derive(Debug)]
enum Anchor {
    Pair(Pair),
    All,
}

#[derive(Debug, Default)]
pub(crate) struct SelectorCache {
    by_pair: Map<Pair, SmallVec<[Arc<Service>; 2]>>,
    match_all: Vec<Arc<Service>>,
    anchors: Map<Name, Anchor>,
}

impl SelectorCache {
    /// Files `service`, replacing any earlier version of it. A service without a selector is only
    /// removed.
    pub(crate) fn insert(&mut self, service: &Arc<Service>) {
        let name = &service.meta.name;
        // A resync or an edit that keeps the selector: the service stays where it is filed.
        if let Some(filed) = self.filed_mut(name)
            && filed.selector == service.selector
        {
            *filed = Arc::clone(service);
            return;
        }
        self.remove(name);
        let Some(selector) = &service.selector else {
            return;
        };
        // The pair with the fewest services so far keeps every bucket short, so a pod's lookup
        // verifies few candidates. `min_by_key` keeps the first of equal pairs.
        let anchor = selector
            .iter()
            .min_by_key(|&(k, v)| self.by_pair.get(&PairRef(k, v)).map_or(0, |b| b.len()))
            .map(|(k, v)| (k.clone(), v.clone()));
        match anchor {
            Some(pair) => {
                self.by_pair
                    .entry(pair.clone())
                    .or_default()
                    .push(service.clone());
                self.anchors.insert(name.clone(), Anchor::Pair(pair));
            }
            None => {
                self.match_all.push(service.clone());
                self.anchors.insert(name.clone(), Anchor::All);
            }
        }
    }

    fn filed_mut(&mut self, name: &Name) -> Option<&mut Arc<Service>> {
        let bucket = match self.anchors.get(name)? {
            Anchor::Pair(pair) => self.by_pair.get_mut(pair)?.as_mut_slice(),
            Anchor::All => self.match_all.as_mut_slice(),
        };
        bucket.iter_mut().find(|s| &s.meta.name == name)
    }

    /// Unfiles the service called `name`; false when it was not filed.
    pub(crate) fn remove(&mut self, name: &Name) -> bool {
        let Some(anchor) = self.anchors.remove(name) else {
            return false;
        };
        match anchor {
            Anchor::Pair(pair) => {
                if let Some(bucket) = self.by_pair.get_mut(&pair) {
                    bucket.retain(|s| &s.meta.name != name);
                    if bucket.is_empty() {
                        self.by_pair.remove(&pair);
                    }
                }
            }
            Anchor::All => self.match_all.retain(|s| &s.meta.name != name),
        }
        true
    }

    /// Calls `f` once for each filed service whose selector matches `labels`, in no set order.
    pub(crate) fn for_each_match(&self, labels: &Labels, mut f: impl FnMut(&Arc<Service>)) {
        if !self.by_pair.is_empty() {
            for (k, v) in labels.iter() {
                let Some(bucket) = self.by_pair.get(&PairRef(k, v)) else {
                    continue;
                };
                for service in bucket {
                    if service.selector.as_ref().is_some_and(|s| labels.matches(s)) {
                        f(service);
                    }
                }
            }
        }
        self.match_all.iter().for_each(f);
    }

    /// The number of filed services.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.anchors.len()
    }

    #[cfg(test)]
    fn bucket_len(&self, key: &str, value: &str) -> usize {
        self.by_pair
            .get(&(crate::model::intern(key), crate::model::intern(value)))
            .map_or(0, |b| b.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intern;

    fn service(name: &str, selector: Option<&[(&str, &str)]>) -> Arc<Service> {
        let mut s = Service::default();
        s.meta.namespace = intern("ns");
        s.meta.name = intern(name);
        s.selector = selector.map(|pairs| Labels::from_pairs(pairs.iter().copied()));
        Arc::new(s)
    }

    fn matches(cache: &SelectorCache, labels: &[(&str, &str)]) -> Vec<String> {
        let mut out = Vec::new();
        cache.for_each_match(&Labels::from_pairs(labels.iter().copied()), |s| {
            out.push(s.meta.name.to_string())
        });
        out.sort();
        out
    }

    #[test]
    fn files_under_the_least_used_pair_and_finds_by_any_pod_pair() {
        let mut cache = SelectorCache::default();
        cache.insert(&service("a", Some(&[("app", "web"), ("tier", "fe")])));
        cache.insert(&service("b", Some(&[("app", "web"), ("tier", "be")])));
        cache.insert(&service("c", Some(&[("app", "web"), ("tier", "fe")])));
        cache.insert(&service("d", Some(&[("app", "web"), ("tier", "fe")])));
        // a takes app=web, the first of two empty pairs; b and c prefer their empty tier pair; d
        // finds app=web and tier=fe at one service each and takes the first.
        assert_eq!(cache.bucket_len("app", "web"), 2);
        assert_eq!(cache.bucket_len("tier", "be"), 1);
        assert_eq!(cache.bucket_len("tier", "fe"), 1);
        assert_eq!(
            matches(&cache, &[("app", "web"), ("tier", "fe"), ("x", "y")]),
            ["a", "c", "d"]
        );
        assert_eq!(matches(&cache, &[("app", "web"), ("tier", "be")]), ["b"]);
        assert!(matches(&cache, &[("tier", "be")]).is_empty());
    }

    #[test]
    fn empty_selector_matches_all_and_none_matches_nothing() {
        let mut cache = SelectorCache::default();
        cache.insert(&service("all", Some(&[])));
        cache.insert(&service("none", None));
        assert_eq!(cache.len(), 1);
        assert_eq!(matches(&cache, &[]), ["all"]);
        assert_eq!(matches(&cache, &[("a", "b")]), ["all"]);
        assert!(cache.remove(&intern("all")));
        assert!(!cache.remove(&intern("none")));
        assert!(matches(&cache, &[("a", "b")]).is_empty());
    }

    #[test]
    fn reinsert_moves_the_service_and_remove_empties_buckets() {
        let mut cache = SelectorCache::default();
        cache.insert(&service("a", Some(&[("app", "v1")])));
        cache.insert(&service("a", Some(&[("app", "v2")])));
        assert_eq!(cache.len(), 1);
        assert!(matches(&cache, &[("app", "v1")]).is_empty());
        assert_eq!(matches(&cache, &[("app", "v2")]), ["a"]);
        cache.insert(&service("a", None));
        assert_eq!(cache.len(), 0);
        assert!(cache.by_pair.is_empty());
    }

    #[test]
    fn an_update_that_keeps_the_selector_replaces_the_filed_service() {
        let mut cache = SelectorCache::default();
        cache.insert(&service("a", Some(&[("app", "web")])));
        cache.insert(&service("all", Some(&[])));
        for name in ["a", "all"] {
            let mut edited = Service::clone(&service(name, Some(&[("app", "web")])));
            if name == "all" {
                edited.selector = Some(Labels::default());
            }
            edited.meta.resource_version = intern("7");
            cache.insert(&Arc::new(edited));
        }
        let mut versions = Vec::new();
        cache.for_each_match(&Labels::from_pairs([("app", "web")]), |s| {
            versions.push((s.meta.name.to_string(), s.meta.resource_version.to_string()))
        });
        versions.sort();
        assert_eq!(
            versions,
            [("a".into(), "7".into()), ("all".into(), "7".into())]
        );
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.bucket_len("app", "web"), 1);
    }
}

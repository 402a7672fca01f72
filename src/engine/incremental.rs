//! What the engine remembers between syncs of a service so that the next one can be incremental:
//! which pods changed since the last successful sync, whether something forces a full sync, and
//! which slices hold each pod's endpoint.
//!
//! The contract with `reconcile_incremental`: it may be used only when the last sync of the service
//! made all its writes and, since then, nothing but the listed pods changed; the pods it left out
//! for a missing node (its only possible error) are listed apart. Anything else marks the service
//! for a full sync: an event of the Service itself, a write that failed, a sync abandoned, and any
//! change to its managed slices other than the engine's own writes (an edit, deletion or creation
//! by someone else, a relist that finds them changed or gone, the garbage collector), whether or
//! not upstream's rules queue a sync for it. Queueing a sync and keeping this state valid are separate
//! questions. A node change that can move a zone marks the pods on that node as changed, in the
//! services selecting them only.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ahash::RandomState;
use dashmap::{DashMap, DashSet};
use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::index::ServiceKey;
use crate::model::{AddressType, EndpointSlice, Name};
use crate::tracker::service_of_slice;

#[derive(Debug, Default)]
pub(super) struct Changes {
    pub full: bool,
    /// The changed pods' names: in name order and each once when taken ([`ChangeLog::take`]).
    pub pods: Vec<Name>,
    /// The pods the last sync left out for a missing node, in name order: reported again by the
    /// next, changed or not.
    pub left_out: Vec<Name>,
    /// While pending, the length at which repeats are next folded: a pod that changes again and
    /// again before its service syncs costs an append, not a search, and cannot grow the list
    /// beyond twice the pods that changed.
    fold_at: usize,
}

impl Changes {
    fn push(&mut self, pod: &Name) {
        self.pods.push(pod.clone());
        if self.pods.len() >= self.fold_at.max(FOLD_FROM) {
            self.fold();
            self.fold_at = self.pods.len() * 2;
        }
    }

    fn fold(&mut self) {
        self.pods.sort_unstable();
        self.pods.dedup();
    }
}

/// The fewest appended names folded at once.
const FOLD_FROM: usize = 64;

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
        // Most services already have changes pending: no key is cloned for those.
        if let Some(mut changes) = self.pending.get_mut(key) {
            changes.push(pod);
            return;
        }
        self.pending.entry(key.clone()).or_default().push(pod);
    }

    /// The service's next sync must be full: what the last one left may have changed. Queues
    /// nothing.
    pub fn force_full(&self, key: &ServiceKey) {
        self.pending.entry(key.clone()).or_default().full = true;
    }

    /// The pods the sync that just succeeded left out for a missing node.
    pub fn left_out(&self, key: &ServiceKey, pods: Vec<Name>) {
        if !pods.is_empty() {
            self.pending.entry(key.clone()).or_default().left_out = pods;
        }
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
        changes.fold();
        if !self.synced.contains(key) {
            changes.full = true;
        }
        changes
    }

    /// Whether the service's last sync succeeded, so that its next one may be incremental.
    pub fn is_synced(&self, key: &ServiceKey) -> bool {
        self.synced.contains(key)
    }

    pub fn any_synced(&self) -> bool {
        !self.synced.is_empty()
    }

    pub fn synced(&self, key: &ServiceKey) {
        self.synced.insert(key.clone());
    }

    /// The sync failed or was abandoned: what it left is not what it planned.
    pub fn failed(&self, key: &ServiceKey) {
        self.synced.remove(key);
        self.force_full(key);
    }

    /// The service is gone, or has no endpoints to keep.
    pub fn forget(&self, key: &ServiceKey) {
        self.pending.remove(key);
        self.synced.remove(key);
    }
}

/// The slices holding an endpoint of one pod: normally one. More when a crash mid-write or
/// someone else left the pod in several slices; an incremental sync cannot place such a pod.
type Holders = SmallVec<[Name; 1]>;

/// Pod name -> the slices holding its endpoint, per address type.
type Places = HashMap<AddressType, HashMap<Name, Holders, RandomState>, RandomState>;

/// Where one pod's endpoint of one address type is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Located {
    Nowhere,
    In(Name),
    /// In more than one slice.
    Ambiguous,
}

/// Per service: which slices hold each pod's endpoints. A function of the stored slices alone,
/// whoever wrote them, so that it cannot drift from them: every stored, updated or deleted
/// managed slice passes through [`Locator::slice_changed`].
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
        .filter_map(|(i, e)| Some((i, pod_of(e)?)))
}

/// [`endpoint_pods`] but for those at positions `shared` says both slices hold the same endpoint.
fn endpoint_pods_unshared<'s>(
    slice: &'s EndpointSlice,
    shared: &'s impl Fn(usize) -> bool,
) -> impl Iterator<Item = (usize, &'s Name)> {
    slice
        .endpoints
        .iter()
        .enumerate()
        .filter(|(i, _)| !shared(*i))
        .filter_map(|(i, e)| Some((i, pod_of(e)?)))
}

fn pod_of(endpoint: &crate::model::Endpoint) -> Option<&Name> {
    endpoint.target_ref.as_ref()?.name.as_ref()
}

impl Locator {
    /// A slice was stored (replacing `old`, if any) or deleted (`new` is `None`).
    pub fn slice_changed(&self, old: Option<&EndpointSlice>, new: Option<&EndpointSlice>) {
        // An update in place mostly keeps each pod at its position: those need no bookkeeping.
        let same_slice = matches!((old, new), (Some(o), Some(n))
            if o.meta.name == n.meta.name
                && o.address_type == n.address_type
                && o.service_name() == n.service_name());
        let kept = |i: usize, pod: &Name, other: Option<&EndpointSlice>| {
            same_slice
                && other
                    .and_then(|s| s.endpoints.get(i))
                    .and_then(|e| pod_of(e))
                    == Some(pod)
        };
        // The same endpoint at the same position, as a rewrite keeps it: found without reading it.
        let shared = |i: usize| match (old, new) {
            (Some(o), Some(n)) if same_slice => o
                .endpoints
                .get(i)
                .zip(n.endpoints.get(i))
                .is_some_and(|(a, b)| Arc::ptr_eq(a, b)),
            _ => false,
        };
        if let Some(old) = old
            && let Ok(key) = service_of_slice(old)
        {
            // A pod that moved within the slice is still in it; the set is built only when some
            // pod left its position.
            let mut still_held: Option<HashSet<&Name, RandomState>> = None;
            if let Some(mut map) = self.by_service.get_mut(&key)
                && let Some(places) = map.get_mut(&old.address_type)
            {
                for (i, pod) in endpoint_pods_unshared(old, &shared) {
                    if kept(i, pod, new) {
                        continue;
                    }
                    if same_slice
                        && let Some(new) = new
                        && still_held
                            .get_or_insert_with(|| endpoint_pods(new).map(|(_, p)| p).collect())
                            .contains(pod)
                    {
                        continue;
                    }
                    if let Some(holders) = places.get_mut(pod) {
                        holders.retain(|s| *s != old.meta.name);
                        if holders.is_empty() {
                            places.remove(pod);
                        }
                    }
                }
                if places.is_empty() {
                    map.remove(&old.address_type);
                }
            }
            // The guard is gone: taking the shard's lock again cannot deadlock.
            self.by_service.remove_if(&key, |_, map| map.is_empty());
        }
        if let Some(new) = new
            && let Ok(key) = service_of_slice(new)
            && !new.endpoints.is_empty()
        {
            let mut map = self.by_service.entry(key).or_default();
            let places = map.entry(new.address_type.clone()).or_default();
            for (i, pod) in endpoint_pods_unshared(new, &shared) {
                if kept(i, pod, old) {
                    continue;
                }
                let holders = places.entry(pod.clone()).or_default();
                if !holders.contains(&new.meta.name) {
                    holders.push(new.meta.name.clone());
                }
            }
        }
    }

    pub fn locate(&self, key: &ServiceKey, pod: &str, at: &AddressType) -> Located {
        let Some(map) = self.by_service.get(key) else {
            return Located::Nowhere;
        };
        match map
            .get(at)
            .and_then(|places| places.get(pod))
            .map(|h| h.as_slice())
        {
            None | Some([]) => Located::Nowhere,
            Some([one]) => Located::In(one.clone()),
            Some(_) => Located::Ambiguous,
        }
    }

    /// The number of services with located endpoints.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_service.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, Labels, Meta, TargetRef, intern, keys};
    use std::sync::Arc;

    fn slice(name: &str, pods: &[&str]) -> EndpointSlice {
        EndpointSlice {
            meta: Meta {
                namespace: intern("default"),
                name: Name::new(name),
                labels: Labels::from_pairs([
                    (keys::LABEL_SERVICE_NAME, "web"),
                    (keys::LABEL_MANAGED_BY, keys::ENDPOINTSLICE_CONTROLLER),
                ]),
                ..Meta::default()
            },
            generate_name: None,
            owner_references: Vec::new(),
            address_type: AddressType::IPv4,
            ports: Vec::new(),
            endpoints: pods
                .iter()
                .map(|p| {
                    Arc::new(Endpoint {
                        addresses: SmallVec::new(),
                        conditions: Default::default(),
                        hostname: None,
                        target_ref: Some(TargetRef {
                            kind: None,
                            namespace: None,
                            name: Some(Name::new(p)),
                            uid: None,
                            api_version: None,
                            resource_version: None,
                        }),
                        node_name: None,
                        zone: None,
                        hints: None,
                    })
                })
                .collect(),
        }
    }

    fn at(locator: &Locator, pod: &str) -> Located {
        locator.locate(&ServiceKey::new("default", "web"), pod, &AddressType::IPv4)
    }

    #[test]
    fn a_pod_changing_again_and_again_is_taken_once_in_name_order() {
        let log = ChangeLog::default();
        let key = ServiceKey::new("default", "web");
        for round in 0..1_000 {
            for pod in ["c", "a", "b"] {
                log.pod_changed(&key, &Name::new(pod));
            }
            let held = log.pending.get(&key).map_or(0, |c| c.pods.len());
            assert!(held < 2 * FOLD_FROM, "round {round}: {held} names held");
        }
        log.pod_changed(&key, &Name::new("0"));
        let taken: Vec<String> = log.take(&key).pods.iter().map(|n| n.to_string()).collect();
        assert_eq!(taken, ["0", "a", "b", "c"]);
        assert!(log.take(&key).pods.is_empty());
    }

    #[test]
    fn a_pod_in_two_slices_is_ambiguous_until_one_lets_it_go() {
        let locator = Locator::default();
        let a = slice("a", &["p0", "p1"]);
        let b = slice("b", &["p1"]);
        locator.slice_changed(None, Some(&a));
        locator.slice_changed(None, Some(&b));
        assert_eq!(at(&locator, "p0"), Located::In(Name::new("a")));
        assert_eq!(at(&locator, "p1"), Located::Ambiguous);
        // The duplicate goes: the pod is still in `a`.
        locator.slice_changed(Some(&b), None);
        assert_eq!(at(&locator, "p1"), Located::In(Name::new("a")));
        assert_eq!(at(&locator, "p9"), Located::Nowhere);
    }

    #[test]
    fn a_pod_moved_within_a_slice_or_listed_twice_in_it_stays_located() {
        let locator = Locator::default();
        let twice = slice("a", &["p0", "p1", "p0"]);
        locator.slice_changed(None, Some(&twice));
        let moved = slice("a", &["p1", "p0"]);
        locator.slice_changed(Some(&twice), Some(&moved));
        assert_eq!(at(&locator, "p0"), Located::In(Name::new("a")));
        assert_eq!(at(&locator, "p1"), Located::In(Name::new("a")));
        let fewer = slice("a", &["p1"]);
        locator.slice_changed(Some(&moved), Some(&fewer));
        assert_eq!(at(&locator, "p0"), Located::Nowhere);
    }

    #[test]
    fn a_rewrite_sharing_most_endpoints_locates_each_pod_where_it_now_is() {
        let locator = Locator::default();
        let a = slice("a", &["p0", "p1", "p2", "p3"]);
        locator.slice_changed(None, Some(&a));
        // p1's endpoint replaced in place, p2's gone (p3 moves up), p9 added; p0 and p3 shared.
        let mut rewritten = slice("a", &["p0", "p1", "p3", "p9"]);
        rewritten.endpoints[0] = Arc::clone(&a.endpoints[0]);
        rewritten.endpoints[2] = Arc::clone(&a.endpoints[3]);
        locator.slice_changed(Some(&a), Some(&rewritten));
        for pod in ["p0", "p1", "p3", "p9"] {
            assert_eq!(at(&locator, pod), Located::In(Name::new("a")), "{pod}");
        }
        assert_eq!(at(&locator, "p2"), Located::Nowhere);
        // Moved to another slice: the shared endpoint object is no reason to keep it here.
        let b = slice("b", &["p3"]);
        let without = slice("a", &["p0", "p1", "p9"]);
        locator.slice_changed(None, Some(&b));
        locator.slice_changed(Some(&rewritten), Some(&without));
        assert_eq!(at(&locator, "p3"), Located::In(Name::new("b")));
    }

    #[test]
    fn nothing_is_kept_once_every_slice_is_gone() {
        let locator = Locator::default();
        let a = slice("a", &["p0", "p1"]);
        let b = slice("b", &["p2"]);
        locator.slice_changed(None, Some(&a));
        locator.slice_changed(None, Some(&b));
        let emptied = slice("a", &[]);
        locator.slice_changed(Some(&a), Some(&emptied));
        locator.slice_changed(Some(&b), None);
        locator.slice_changed(Some(&emptied), None);
        assert_eq!(locator.len(), 0);
    }
}

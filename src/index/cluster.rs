//! The index of a cluster: pods and services by namespace with the selector cache and member sets,
//! plus the node and slice stores. Every method takes `&self` and is safe to call from any thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use smallvec::SmallVec;

use super::ServiceKey;
use super::namespace::Namespace;
use super::projection::{PodProjection, pod_projection};
use super::set::Seeded;
use super::slices::SliceStore;
use super::store::{EndpointsStore, NodeStore, Relist};
use crate::model::{EndpointSlice, Labels, Name, Pod, Service, keys};

/// The services a pod lookup finds: one or two for almost every pod.
pub type ServiceKeys = SmallVec<[ServiceKey; 4]>;

/// Services, pods, nodes and managed EndpointSlices, indexed for the controller's questions: which
/// services select this pod, and which pods does this service select.
///
/// Pods and services are sharded by namespace (selectors never cross one). A namespace's objects,
/// selector cache and member sets change together under its shard's lock, so readers always see
/// them agree, and namespaces in other shards are not held up. At most one lock is held at a time,
/// so there is no lock order to break.
#[derive(Debug)]
pub struct Index {
    namespaces: DashMap<Name, Namespace, Seeded>,
    pod_count: AtomicUsize,
    service_count: AtomicUsize,
    nodes: NodeStore,
    slices: SliceStore,
    mirrored_slices: SliceStore,
    endpoints: EndpointsStore,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            namespaces: DashMap::default(),
            pod_count: AtomicUsize::new(0),
            service_count: AtomicUsize::new(0),
            nodes: NodeStore::default(),
            slices: SliceStore::for_manager(keys::ENDPOINTSLICE_CONTROLLER),
            mirrored_slices: SliceStore::for_manager(keys::MIRRORING_CONTROLLER),
            endpoints: EndpointsStore::default(),
        }
    }
}

impl Index {
    pub fn new() -> Self {
        Index::default()
    }

    pub fn pods(&self) -> Pods<'_> {
        Pods(self)
    }

    pub fn services(&self) -> Services<'_> {
        Services(self)
    }

    pub fn nodes(&self) -> &NodeStore {
        &self.nodes
    }

    /// The EndpointSlice controller's slices.
    pub fn slices(&self) -> &SliceStore {
        &self.slices
    }

    /// The mirroring controller's slices.
    pub fn mirrored_slices(&self) -> &SliceStore {
        &self.mirrored_slices
    }

    /// A stored slice, whichever controller manages it.
    pub fn slice(&self, namespace: &str, name: &str) -> Option<Arc<EndpointSlice>> {
        (self.slices.get(namespace, name)).or_else(|| self.mirrored_slices.get(namespace, name))
    }

    /// Every slice store, one per managed-by value kept: a stored slice goes to each, and each
    /// keeps it or lets it go.
    pub fn slice_stores(&self) -> [&SliceStore; 2] {
        [&self.slices, &self.mirrored_slices]
    }

    /// Every Endpoints object, the Endpoints controller's own and others'.
    pub fn endpoints(&self) -> &EndpointsStore {
        &self.endpoints
    }

    /// The services whose selector matches `labels` in `namespace`, sorted. Costs one lookup per
    /// label of the pod, whatever the number of services.
    pub fn services_for_pod(&self, namespace: &str, labels: &Labels) -> ServiceKeys {
        self.namespaces
            .get(namespace)
            .map(|ns| matching(&ns, labels))
            .unwrap_or_default()
    }

    /// The pods on any of `nodes`, each with a service selecting it: one walk over every pod,
    /// however many nodes changed.
    pub fn members_on_nodes(
        &self,
        nodes: &std::collections::HashSet<Name, ahash::RandomState>,
    ) -> Vec<(ServiceKey, Name)> {
        let mut out = Vec::new();
        for ns in self.namespaces.iter() {
            ns.for_each_pod_on(nodes, |pod, service| {
                out.push((ServiceKey::of(service), pod.clone()));
            });
        }
        out
    }

    /// Upstream's `GetServicesToUpdate`, sorted: the services matching the new labels; when the
    /// labels changed, their union with those matching the old labels if the pod changed too, and
    /// otherwise the symmetric difference (a service matched before and after sees no change).
    ///
    /// Empty old labels are upstream's nil map, which its `OldLabels != nil` check skips: the new
    /// matches alone are returned.
    pub fn services_to_update(&self, projection: &PodProjection) -> Vec<ServiceKey> {
        let Some(ns) = self.namespaces.get(projection.namespace.as_str()) else {
            return Vec::new();
        };
        let mut new = matching(&ns, &projection.labels);
        let old = match &projection.old_labels {
            Some(old) if !old.is_empty() => matching(&ns, old),
            _ => return new.into_vec(),
        };
        drop(ns);
        if projection.pod_changed {
            new.extend(old);
            new.sort_unstable();
            new.dedup();
            new.into_vec()
        } else {
            let mut out: Vec<ServiceKey> = new
                .iter()
                .filter(|k| old.binary_search(k).is_err())
                .chain(old.iter().filter(|k| new.binary_search(k).is_err()))
                .cloned()
                .collect();
            out.sort_unstable();
            out
        }
    }

    /// The pods `service` selects, in name order: one consistent view. Empty for an unknown or
    /// selector-less service.
    pub fn members(&self, service: &ServiceKey) -> Vec<Arc<Pod>> {
        self.namespaces
            .get(service.namespace.as_str())
            .map(|ns| ns.members(&service.name))
            .unwrap_or_default()
    }

    /// Calls `f` with the pods `service` selects, in name order, borrowed under the namespace's
    /// read lock: no reference count moves, however many pods. `f` must not touch the index (a
    /// nested lock of the same shard could wait on a queued writer for ever).
    pub fn with_members<R>(&self, service: &ServiceKey, f: impl FnOnce(&[&Pod]) -> R) -> R {
        match self.namespaces.get(service.namespace.as_str()) {
            Some(ns) => ns.with_members(&service.name, f),
            None => f(&[]),
        }
    }

    pub fn member_count(&self, service: &ServiceKey) -> usize {
        self.namespaces
            .get(service.namespace.as_str())
            .map_or(0, |ns| ns.member_count(&service.name))
    }

    fn apply<T: Kind>(&self, object: Arc<T>) -> (Option<Arc<T>>, Arc<T>) {
        let (old, new) = {
            let mut ns = self
                .namespaces
                .entry(object.namespace().clone())
                .or_default();
            T::apply(&mut ns, object)
        };
        if old.is_none() {
            T::counter(self).fetch_add(1, Ordering::Relaxed);
        }
        (old, new)
    }

    fn delete<T: Kind>(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        let old = {
            let mut ns = self.namespaces.get_mut(namespace)?;
            T::delete(&mut ns, name)?
        };
        T::counter(self).fetch_sub(1, Ordering::Relaxed);
        // The guard is gone: taking the shard's write lock again cannot deadlock.
        self.namespaces.remove_if(namespace, |_, ns| ns.is_empty());
        Some(old)
    }

    fn get<T: Kind>(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.namespaces
            .get(namespace)
            .and_then(|ns| T::get(&ns, name).cloned())
    }

    /// A relist: each namespace is brought to its new state under its lock, so readers see a
    /// namespace either before or after, but may see some namespaces done and others not yet.
    fn reset<T: Kind>(&self, objects: impl IntoIterator<Item = Arc<T>>) -> Relist<T> {
        let mut incoming: BTreeMap<Name, BTreeMap<Name, Arc<T>>> = BTreeMap::new();
        for object in objects {
            incoming
                .entry(object.namespace().clone())
                .or_default()
                .insert(object.name().clone(), object);
        }
        let mut out = Relist::default();
        let mut namespaces: Vec<Name> = self.namespaces.iter().map(|e| e.key().clone()).collect();
        namespaces.extend(incoming.keys().cloned());
        namespaces.sort_unstable();
        namespaces.dedup();
        for namespace in namespaces {
            let wanted = incoming.remove(&namespace).unwrap_or_default();
            {
                let mut ns = self.namespaces.entry(namespace.clone()).or_default();
                let mut gone = T::names(&ns);
                gone.retain(|n| !wanted.contains_key(n));
                gone.sort_unstable();
                for name in gone {
                    if let Some(old) = T::delete(&mut ns, &name) {
                        T::counter(self).fetch_sub(1, Ordering::Relaxed);
                        out.deleted.push(old);
                    }
                }
                for object in wanted.into_values() {
                    if T::get(&ns, object.name()).is_some_and(|old| **old == *object) {
                        continue;
                    }
                    let (old, new) = T::apply(&mut ns, object);
                    if old.is_none() {
                        T::counter(self).fetch_add(1, Ordering::Relaxed);
                    }
                    out.applied.push((old, new));
                }
            }
            self.namespaces.remove_if(&namespace, |_, ns| ns.is_empty());
        }
        out
    }
}

/// The keys of the services of `ns` matching `labels`, sorted.
fn matching(ns: &Namespace, labels: &Labels) -> ServiceKeys {
    let mut out = ServiceKeys::new();
    ns.for_each_match(labels, |s| out.push(ServiceKey::of(s)));
    out.sort_unstable();
    // No dedup needed: a service is filed under one pair, and a pod has each label key once.
    debug_assert!(out.windows(2).all(|w| w[0] != w[1]));
    out
}

/// What the generic store operations need of pods and services.
trait Kind: PartialEq + Sized {
    fn namespace(&self) -> &Name;
    fn name(&self) -> &Name;
    fn get<'a>(ns: &'a Namespace, name: &str) -> Option<&'a Arc<Self>>;
    fn names(ns: &Namespace) -> Vec<Name>;
    /// Returns the previous version and the stored one.
    fn apply(ns: &mut Namespace, object: Arc<Self>) -> (Option<Arc<Self>>, Arc<Self>);
    fn delete(ns: &mut Namespace, name: &str) -> Option<Arc<Self>>;
    fn counter(index: &Index) -> &AtomicUsize;
}

impl Kind for Pod {
    fn namespace(&self) -> &Name {
        &self.meta.namespace
    }
    fn name(&self) -> &Name {
        &self.meta.name
    }
    fn get<'a>(ns: &'a Namespace, name: &str) -> Option<&'a Arc<Self>> {
        ns.pod(name)
    }
    fn names(ns: &Namespace) -> Vec<Name> {
        ns.pod_names()
    }
    fn apply(ns: &mut Namespace, object: Arc<Self>) -> (Option<Arc<Self>>, Arc<Self>) {
        ns.apply_pod(object)
    }
    fn delete(ns: &mut Namespace, name: &str) -> Option<Arc<Self>> {
        ns.delete_pod(name)
    }
    fn counter(index: &Index) -> &AtomicUsize {
        &index.pod_count
    }
}

impl Kind for Service {
    fn namespace(&self) -> &Name {
        &self.meta.namespace
    }
    fn name(&self) -> &Name {
        &self.meta.name
    }
    fn get<'a>(ns: &'a Namespace, name: &str) -> Option<&'a Arc<Self>> {
        ns.service(name)
    }
    fn names(ns: &Namespace) -> Vec<Name> {
        ns.service_names()
    }
    fn apply(ns: &mut Namespace, object: Arc<Self>) -> (Option<Arc<Self>>, Arc<Self>) {
        (ns.apply_service(object.clone()), object)
    }
    fn delete(ns: &mut Namespace, name: &str) -> Option<Arc<Self>> {
        ns.delete_service(name)
    }
    fn counter(index: &Index) -> &AtomicUsize {
        &index.service_count
    }
}

/// The pod store of an [`Index`]: every change also updates the label index and member sets.
#[derive(Clone, Copy, Debug)]
pub struct Pods<'a>(&'a Index);

impl Pods<'_> {
    /// Stores `pod`, returning the version it replaces. A pod passed by value (not shared) lets the
    /// index reuse the stored copy of its name.
    pub fn apply(&self, pod: impl Into<Arc<Pod>>) -> Option<Arc<Pod>> {
        self.0.apply(pod.into()).0
    }

    /// Stores `pod` and projects the event, as the pod handler needs: the previous version, the
    /// stored one and the projection (`None` when no service needs a sync). Hand the pod over
    /// with no other owner: an update then shares the stored pod's name.
    pub fn apply_projected(
        &self,
        pod: impl Into<Arc<Pod>>,
    ) -> (Option<Arc<Pod>>, Arc<Pod>, Option<PodProjection>) {
        let (old, new) = self.0.apply(pod.into());
        let projection = pod_projection(old.as_deref(), Some(&new));
        (old, new, projection)
    }

    pub fn delete(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.0.delete(namespace, name)
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.0.get(namespace, name)
    }

    /// Replaces every pod with `pods` (a later duplicate wins). Both lists of the result are in
    /// namespace and name order.
    pub fn reset<I>(&self, pods: I) -> Relist<Pod>
    where
        I: IntoIterator,
        I::Item: Into<Arc<Pod>>,
    {
        self.0.reset(pods.into_iter().map(Into::into))
    }

    /// The pods of `namespace`, in no particular order.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Pod>> {
        match self.0.namespaces.get(namespace) {
            Some(ns) => ns.pods().cloned().collect(),
            None => Vec::new(),
        }
    }

    /// Every pod's namespace and name: what a relist compares with the listed pods.
    pub fn keys(&self) -> Vec<(Name, Name)> {
        self.0
            .namespaces
            .iter()
            .flat_map(|ns| {
                let namespace = ns.key().clone();
                ns.pod_names()
                    .into_iter()
                    .map(move |name| (namespace.clone(), name))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.pod_count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The service store of an [`Index`]: every change also updates the selector cache and, when the
/// selector changed, the service's members.
#[derive(Clone, Copy, Debug)]
pub struct Services<'a>(&'a Index);

impl Services<'_> {
    /// Stores `service`, returning the version it replaces.
    pub fn apply(&self, service: impl Into<Arc<Service>>) -> Option<Arc<Service>> {
        self.0.apply(service.into()).0
    }

    pub fn delete(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.0.delete(namespace, name)
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.0.get(namespace, name)
    }

    /// Every service's key, sorted: what a full resync queues.
    pub fn keys(&self) -> Vec<ServiceKey> {
        let mut out: Vec<ServiceKey> = self
            .0
            .namespaces
            .iter()
            .flat_map(|ns| {
                ns.service_names()
                    .into_iter()
                    .map(|name| ServiceKey {
                        namespace: ns.key().clone(),
                        name,
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Every service, in namespace and name order: each namespace read under one lock.
    pub fn list(&self) -> Vec<Arc<Service>> {
        let mut out: Vec<Arc<Service>> = self
            .0
            .namespaces
            .iter()
            .flat_map(|ns| ns.services().cloned().collect::<Vec<_>>())
            .collect();
        out.sort_unstable_by(|a, b| {
            (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name))
        });
        out
    }

    /// The services of `namespace`, in name order.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Service>> {
        let mut out: Vec<Arc<Service>> = match self.0.namespaces.get(namespace) {
            Some(ns) => ns.services().cloned().collect(),
            None => Vec::new(),
        };
        out.sort_unstable_by(|a, b| a.meta.name.cmp(&b.meta.name));
        out
    }

    /// Replaces every service with `services` (a later duplicate wins). Both lists of the result
    /// are in namespace and name order.
    pub fn reset<I>(&self, services: I) -> Relist<Service>
    where
        I: IntoIterator,
        I::Item: Into<Arc<Service>>,
    {
        self.0.reset(services.into_iter().map(Into::into))
    }

    pub fn len(&self) -> usize {
        self.0.service_count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
impl Index {
    pub(crate) fn check_invariants(&self) {
        let mut pods = 0;
        let mut services = 0;
        for ns in self.namespaces.iter() {
            assert!(!ns.is_empty(), "empty namespace {} kept", ns.key());
            ns.check_invariants();
            pods += ns.pod_names().len();
            services += ns.service_names().len();
        }
        assert_eq!(self.pods().len(), pods);
        assert_eq!(self.services().len(), services);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intern;
    use proptest::prelude::*;

    fn labels(pairs: &[(u8, u8)]) -> Labels {
        Labels::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (format!("k{k}"), format!("v{v}"))),
        )
    }

    proptest! {
        /// Whatever the events, the internal indexes agree with the stored objects, and emptied
        /// namespaces are dropped.
        #[test]
        fn invariants_hold(ops in prop::collection::vec(
            (0u8..5, 0u8..2, 0u8..8, prop::collection::vec((0u8..3, 0u8..2), 0..3)),
            1..60,
        )) {
            let index = Index::new();
            for (kind, ns, name, pairs) in ops {
                let ns = intern(&format!("ns{ns}"));
                match kind {
                    0 | 1 => {
                        let mut pod = Pod::default();
                        pod.meta.namespace = ns;
                        pod.meta.name = Name::new(&format!("p{name}"));
                        pod.meta.labels = labels(&pairs);
                        index.pods().apply(pod);
                    }
                    2 => {
                        index.pods().delete(&ns, &format!("p{name}"));
                    }
                    3 => {
                        let mut service = Service::default();
                        service.meta.namespace = ns;
                        service.meta.name = intern(&format!("s{}", name % 4));
                        service.selector = (name % 3 != 0).then(|| labels(&pairs));
                        index.services().apply(service);
                    }
                    _ => {
                        index.services().delete(&ns, &format!("s{}", name % 4));
                    }
                }
                index.check_invariants();
            }
        }
    }
}

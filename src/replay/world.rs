//! The API server of a replay, for the kinds the controllers read: it assigns resourceVersions,
//! bumps generations on spec changes, and garbage-collects the slices of deleted owners. It returns
//! the watch events each change produces; the replay decides when the engine sees them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::change::{Change, ChangeKind};
use crate::model::{Meta, Name, Node, Pod, PodMeta, ResourceVersion, Service, Timestamp, Uid};
use crate::sink::memory::MemorySink;
use crate::sink::{Kind, Object, ServiceChange, ServicePatch};

use super::Happening;

/// Objects of the kinds the controllers only read, as the API server holds them. Pods and
/// namespaces are kept only when something will list them (a relist or a restart).
pub(super) struct World {
    revision: u64,
    // Ordered maps: a list returns objects in the same order on every run.
    services: BTreeMap<(Name, Name), Service>,
    nodes: BTreeMap<Name, Node>,
    namespaces: BTreeMap<Name, bool>,
    pods: Option<BTreeMap<(Name, Name), Pod>>,
    /// Status patches that replaced a Service's addresses with other ones.
    pub(super) moved_addresses: u64,
    /// Virtual time zero, as a wall-clock time for creationTimestamps the steps do not give.
    epoch: Timestamp,
}

/// What one step did: the watch events it produced, and the owners whose dependents the garbage
/// collector is to delete.
#[derive(Default)]
pub(super) struct Applied {
    pub events: Vec<Change>,
    /// (namespace, owner uid).
    pub garbage: Vec<(Name, Name)>,
}

impl World {
    /// `keep_pods`: keep every pod, so that pods can be listed.
    pub(super) fn new(epoch: Timestamp, keep_pods: bool) -> World {
        World {
            revision: 0,
            services: BTreeMap::new(),
            nodes: BTreeMap::new(),
            namespaces: BTreeMap::new(),
            pods: keep_pods.then(BTreeMap::new),
            moved_addresses: 0,
            epoch,
        }
    }

    fn next_rv(&mut self) -> Name {
        self.revision += 1;
        Name::new(&self.revision.to_string())
    }

    /// Fills what the API server owns: a new resourceVersion, and for a new object a uid and a
    /// creationTimestamp unless the step gives them.
    fn stamp(&mut self, meta: &mut Meta, at: Duration) {
        meta.resource_version = self.next_rv();
        if meta.uid.is_empty() {
            meta.uid = Name::new(&format!("00000000-0000-4000-a000-{:012}", self.revision));
        }
        if meta.creation_timestamp.is_none() {
            let at = jiff::SignedDuration::try_from(at).unwrap_or_default();
            meta.creation_timestamp = self.epoch.checked_add(at).ok();
        }
    }

    /// [`Self::stamp`] for a pod.
    fn stamp_pod(&mut self, meta: &mut PodMeta, at: Duration) {
        let rv = self.next_rv();
        meta.set_resource_version(ResourceVersion::new(&rv));
        if meta.uid().is_empty() {
            let uid = format!("00000000-0000-4000-a000-{:012}", self.revision);
            meta.set_uid(Uid::new(&uid));
        }
        if meta.creation_timestamp().is_none() {
            let at = jiff::SignedDuration::try_from(at).unwrap_or_default();
            meta.set_creation_timestamp(self.epoch.checked_add(at).ok());
        }
    }

    /// The service controller's patch, as the API server applies it: the finalizers, or the
    /// ingress (through the status subresource; a patch of the Service itself leaves its status
    /// alone). A Service being deleted goes with its last finalizer.
    pub(super) fn patch_service(&mut self, patch: &ServicePatch) -> Applied {
        let mut applied = Applied::default();
        let key = (patch.namespace.clone(), patch.name.clone());
        let Some(old) = self.services.get(&key) else {
            return applied;
        };
        let mut service = old.clone();
        let lb = service.load_balancer.get_or_insert_with(Default::default);
        match &patch.change {
            ServiceChange::Finalizers(finalizers) => lb.finalizers = finalizers.clone(),
            ServiceChange::Ingress(ingress) if patch.status_subresource => {
                if !lb.ingress.is_empty() && !ingress.is_empty() && lb.ingress != *ingress {
                    self.moved_addresses += 1;
                }
                lb.ingress = ingress.clone();
            }
            ServiceChange::Ingress(_) => {}
        }
        if service.meta.deletion_timestamp.is_some() && lb.finalizers.is_empty() {
            self.services.remove(&key);
            applied.events.push(Change::ServiceDeleted {
                namespace: key.0.clone(),
                name: key.1,
            });
            applied.garbage.push((key.0, service.meta.uid.clone()));
            return applied;
        }
        if service == *old {
            return applied;
        }
        service.meta.resource_version = self.next_rv();
        self.services.insert(key, service.clone());
        applied.events.push(Change::Service(service));
        applied
    }

    /// LoadBalancer Services, and those with an address in their status.
    pub(super) fn load_balancers(&self) -> (usize, usize) {
        let lb = self
            .services
            .values()
            .filter(|s| s.service_type == crate::model::ServiceType::LoadBalancer);
        let (mut all, mut addressed) = (0, 0);
        for s in lb {
            all += 1;
            if s.load_balancer
                .as_ref()
                .is_some_and(|lb| !lb.ingress.is_empty())
            {
                addressed += 1;
            }
        }
        (all, addressed)
    }

    /// Whether a Service of this namespace and name exists, and has a selector.
    pub(super) fn service_selects(&self, namespace: &str, name: &str) -> Option<bool> {
        self.services
            .get(&(Name::from(namespace), Name::from(name)))
            .map(|s| s.selector.is_some())
    }

    /// Carries out what one step does against the API server: an object applied (created, or
    /// replacing the one of its kind, namespace and name), an object deleted, or a fault armed.
    pub(super) fn apply(
        &mut self,
        happening: &Happening,
        at: Duration,
        sink: &MemorySink,
    ) -> Applied {
        match happening {
            Happening::Change(change) if change.is_deletion() => self.delete_object(change, sink),
            Happening::Change(change) => self.apply_object(change, at, sink),
            Happening::Fault(fault) => {
                sink.fail_next(fault.verb, fault.kind, fault.error.clone(), fault.times);
                Applied::default()
            }
        }
    }

    fn apply_object(&mut self, change: &Change, at: Duration, sink: &MemorySink) -> Applied {
        let event = match change {
            Change::Service(service) => {
                let mut service = service.clone();
                let key = (service.meta.namespace.clone(), service.meta.name.clone());
                self.stamp(&mut service.meta, at);
                service.meta.generation = match self.services.get(&key) {
                    None => 1,
                    Some(old) => old.meta.generation + i64::from(!same_spec(old, &service)),
                };
                self.services.insert(key, service.clone());
                Some(Change::Service(service))
            }
            Change::Pod(pod) => {
                let mut pod = pod.clone();
                self.stamp_pod(&mut pod.meta, at);
                if let Some(pods) = &mut self.pods {
                    let key = (pod.meta.namespace.clone(), pod.meta.name.clone());
                    pods.insert(key, pod.clone());
                }
                Some(Change::Pod(pod))
            }
            Change::Node(node) => {
                self.nodes.insert(node.name.clone(), node.clone());
                Some(change.clone())
            }
            Change::Namespace(ns) => {
                sink.set_namespace_terminating(&ns.name, ns.terminating);
                self.namespaces.insert(ns.name.clone(), ns.terminating);
                Some(change.clone())
            }
            // An edit by someone else: the API server stores it, the watch delivers it.
            Change::EndpointSlice(slice) => {
                match sink.apply_external(Object::EndpointSlice(Arc::clone(slice))) {
                    Ok(Object::EndpointSlice(stored)) => Some(Change::EndpointSlice(stored)),
                    _ => None,
                }
            }
            Change::Endpoints(endpoints) => {
                match sink.apply_external(Object::Endpoints(Arc::clone(endpoints))) {
                    Ok(Object::Endpoints(stored)) => Some(Change::Endpoints(stored)),
                    _ => None,
                }
            }
            other => Some(other.clone()),
        };
        Applied {
            events: event.into_iter().collect(),
            garbage: Vec::new(),
        }
    }

    fn delete_object(&mut self, change: &Change, sink: &MemorySink) -> Applied {
        let mut applied = Applied::default();
        match change {
            Change::ServiceDeleted { namespace, name } => {
                let key = (namespace.clone(), name.clone());
                if let Some(service) = self.services.get_mut(&key)
                    && service.meta.deletion_timestamp.is_none()
                    && service
                        .load_balancer
                        .as_ref()
                        .is_some_and(|lb| !lb.finalizers.is_empty())
                {
                    // Held by a finalizer: marked, and deleted when the last one goes.
                    service.meta.deletion_timestamp = Some(self.epoch);
                    let mut service = service.clone();
                    service.meta.resource_version = self.next_rv();
                    self.services.insert(key, service.clone());
                    applied.events.push(Change::Service(service));
                    return applied;
                }
                let Some(service) = self.services.remove(&key) else {
                    return applied;
                };
                applied.events.push(change.clone());
                applied
                    .garbage
                    .push((namespace.clone(), service.meta.uid.clone()));
            }
            Change::EndpointSliceDeleted { namespace, name } => {
                if sink
                    .remove_external(Kind::EndpointSlice, namespace, name)
                    .is_some()
                {
                    applied.events.push(change.clone());
                }
            }
            Change::EndpointsDeleted {
                namespace, name, ..
            } => {
                if let Some(gone) = sink.remove_external(Kind::Endpoints, namespace, name) {
                    let uid = gone.meta().uid.clone();
                    applied.events.push(Change::EndpointsDeleted {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        uid: uid.clone(),
                    });
                    // Mirrored slices are owned by their Endpoints.
                    applied.garbage.push((namespace.clone(), uid));
                }
            }
            Change::PodDeleted { namespace, name } => {
                if let Some(pods) = &mut self.pods {
                    pods.remove(&(namespace.clone(), name.clone()));
                }
                applied.events.push(change.clone());
            }
            Change::NodeDeleted { name } => {
                self.nodes.remove(name);
                applied.events.push(change.clone());
            }
            Change::NamespaceDeleted { name } => {
                sink.set_namespace_terminating(name, false);
                self.namespaces.remove(name);
                applied.events.push(change.clone());
            }
            other => applied.events.push(other.clone()),
        }
        applied
    }

    /// Someone deletes the `pick`-th Service (modulo their number, in name order) and at once
    /// creates it again: the same spec, a new uid. `None` when there is no Service.
    pub(super) fn recreate_service(
        &mut self,
        pick: usize,
        at: Duration,
        sink: &MemorySink,
    ) -> Option<Applied> {
        let n = self.services.len();
        let (key, service) = self.services.iter().nth(pick.checked_rem(n)?)?;
        let (namespace, name) = key.clone();
        let mut again = service.clone();
        again.meta.uid = Name::default();
        again.meta.creation_timestamp = None;
        let mut applied = self.delete_object(&Change::ServiceDeleted { namespace, name }, sink);
        let created = self.apply_object(&Change::Service(again), at, sink);
        applied.events.extend(created.events);
        Some(applied)
    }

    /// The objects the controllers read as they are at the end, when pods are kept: moved out,
    /// not copied (100,000 pods cost a tenth of a second to copy and free again).
    pub(super) fn into_snapshot(self) -> Option<crate::snapshot::Snapshot> {
        let pods = self.pods?;
        Some(crate::snapshot::Snapshot {
            services: self.services.into_values().collect(),
            pods: pods.into_values().collect(),
            nodes: self.nodes.into_values().collect(),
            namespaces: self
                .namespaces
                .into_iter()
                .map(|(name, terminating)| crate::model::Namespace {
                    name,
                    terminating,
                    ..Default::default()
                })
                .collect(),
            ..crate::snapshot::Snapshot::default()
        })
    }

    /// Every object of `kind` as a list returns it, as watch events (applies).
    pub(super) fn list(&self, kind: ChangeKind, sink: &MemorySink) -> Vec<Change> {
        match kind {
            ChangeKind::Service => self
                .services
                .values()
                .map(|s| Change::Service(s.clone()))
                .collect(),
            ChangeKind::Pod => self
                .pods
                .iter()
                .flat_map(|pods| pods.values())
                .map(|p| Change::Pod(p.clone()))
                .collect(),
            ChangeKind::Node => self
                .nodes
                .values()
                .map(|n| Change::Node(n.clone()))
                .collect(),
            ChangeKind::Namespace => self
                .namespaces
                .iter()
                .map(|(name, &terminating)| {
                    Change::Namespace(crate::model::Namespace {
                        name: name.clone(),
                        terminating,
                        ..Default::default()
                    })
                })
                .collect(),
            ChangeKind::EndpointSlice | ChangeKind::Endpoints => sink
                .objects()
                .into_iter()
                .filter_map(|o| match o {
                    Object::EndpointSlice(s) if kind == ChangeKind::EndpointSlice => {
                        Some(Change::EndpointSlice(s))
                    }
                    Object::Endpoints(e) if kind == ChangeKind::Endpoints => {
                        Some(Change::Endpoints(e))
                    }
                    _ => None,
                })
                .collect(),
        }
    }
}

/// The garbage collector: the slices owned by a deleted object go too, and the watch tells the
/// engine. These are not the controllers' writes.
pub(super) fn collect_garbage(
    namespace: &Name,
    owner_uid: &Name,
    sink: &MemorySink,
) -> Vec<Change> {
    if owner_uid.is_empty() {
        return Vec::new();
    }
    let mut events = Vec::new();
    for object in sink.objects() {
        let Object::EndpointSlice(slice) = &object else {
            continue;
        };
        if slice.meta.namespace == *namespace
            && slice.owner_references.iter().any(|o| o.uid == *owner_uid)
            && sink
                .remove_external(Kind::EndpointSlice, namespace, &slice.meta.name)
                .is_some()
        {
            events.push(Change::EndpointSliceDeleted {
                namespace: namespace.clone(),
                name: slice.meta.name.clone(),
            });
        }
    }
    events
}

/// Equal but for metadata: the API server's rule for bumping a Service's generation.
fn same_spec(a: &Service, b: &Service) -> bool {
    let strip = |s: &Service| Service {
        meta: Meta::default(),
        ..s.clone()
    };
    strip(a) == strip(b)
}

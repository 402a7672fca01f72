//! The API server of a replay, for the kinds the controllers read: it assigns resourceVersions,
//! bumps generations on spec changes, and garbage-collects the slices of deleted Services.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ahash::RandomState;

use crate::change::Change;
use crate::engine::Engine;
use crate::model::{Meta, Name, PodMeta, ResourceVersion, Service, Timestamp, Uid};
use crate::sink::memory::MemorySink;
use crate::sink::{Kind, Object};

use super::Action;

/// Objects of the kinds the controllers only read, as the API server holds them.
pub(super) struct World {
    revision: u64,
    services: HashMap<(Name, Name), Service, RandomState>,
    /// Virtual time zero, as a wall-clock time for creationTimestamps the steps do not give.
    epoch: Timestamp,
}

impl World {
    pub(super) fn new(epoch: Timestamp) -> World {
        World {
            revision: 0,
            services: HashMap::default(),
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

    /// Carries out one step's action against the API server, and delivers the resulting watch
    /// events to the engine.
    pub(super) fn apply(
        &mut self,
        action: &Action,
        at: Duration,
        engine: &Engine,
        sink: &MemorySink,
    ) {
        match action {
            Action::Apply(change) => self.apply_object(change, at, engine, sink),
            Action::Delete(change) => self.delete_object(change, engine, sink),
            Action::Fail {
                verb,
                kind,
                error,
                times,
            } => sink.fail_next(*verb, *kind, error.clone(), *times),
        }
    }

    fn apply_object(&mut self, change: &Change, at: Duration, engine: &Engine, sink: &MemorySink) {
        match change {
            Change::Service(service) => {
                let mut service = service.clone();
                let key = (service.meta.namespace.clone(), service.meta.name.clone());
                self.stamp(&mut service.meta, at);
                service.meta.generation = match self.services.get(&key) {
                    None => 1,
                    Some(old) => old.meta.generation + i64::from(!same_spec(old, &service)),
                };
                self.services.insert(key, service.clone());
                engine.handle(&Change::Service(service));
            }
            Change::Pod(pod) => {
                let mut pod = pod.clone();
                self.stamp_pod(&mut pod.meta, at);
                engine.handle(&Change::Pod(pod));
            }
            Change::Namespace(ns) => {
                sink.set_namespace_terminating(&ns.name, ns.terminating);
                engine.handle(change);
            }
            Change::EndpointSlice(slice) => {
                // An edit by someone else: the API server stores it, the watch delivers it.
                if let Ok(Object::EndpointSlice(stored)) =
                    sink.apply_external(Object::EndpointSlice(Arc::clone(slice)))
                {
                    engine.handle(&Change::EndpointSlice(stored));
                }
            }
            Change::Endpoints(endpoints) => {
                if let Ok(Object::Endpoints(stored)) =
                    sink.apply_external(Object::Endpoints(Arc::clone(endpoints)))
                {
                    engine.handle(&Change::Endpoints(stored));
                }
            }
            other => engine.handle(other),
        }
    }

    fn delete_object(&mut self, change: &Change, engine: &Engine, sink: &MemorySink) {
        match change {
            Change::ServiceDeleted { namespace, name } => {
                let Some(service) = self.services.remove(&(namespace.clone(), name.clone())) else {
                    return;
                };
                engine.handle(change);
                collect_garbage(namespace, &service.meta.uid, engine, sink);
            }
            Change::EndpointSliceDeleted { namespace, name } => {
                if sink
                    .remove_external(Kind::EndpointSlice, namespace, name)
                    .is_some()
                {
                    engine.handle(change);
                }
            }
            Change::EndpointsDeleted {
                namespace, name, ..
            } => {
                if let Some(gone) = sink.remove_external(Kind::Endpoints, namespace, name) {
                    engine.handle(change);
                    // Mirrored slices are owned by their Endpoints.
                    collect_garbage(namespace, &gone.meta().uid, engine, sink);
                }
            }
            Change::NamespaceDeleted { name } => {
                sink.set_namespace_terminating(name, false);
                engine.handle(change);
            }
            other => engine.handle(other),
        }
    }
}

/// The garbage collector: the slices owned by a deleted object go too, and the watch tells the
/// engine. These are not the controllers' writes.
fn collect_garbage(namespace: &Name, owner_uid: &Name, engine: &Engine, sink: &MemorySink) {
    if owner_uid.is_empty() {
        return;
    }
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
            engine.handle(&Change::EndpointSliceDeleted {
                namespace: namespace.clone(),
                name: slice.meta.name.clone(),
            });
        }
    }
}

/// Equal but for metadata: the API server's rule for bumping a Service's generation.
fn same_spec(a: &Service, b: &Service) -> bool {
    let strip = |s: &Service| Service {
        meta: Meta::default(),
        ..s.clone()
    };
    strip(a) == strip(b)
}

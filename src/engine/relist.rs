//! Relists, and what the kube adapter reads from the engine: the objects it holds of one kind, and
//! single objects, for shadow mode's reports.

use std::collections::HashSet;
use std::sync::Arc;

use super::Engine;
use crate::change::{Change, ChangeKind};
use crate::index::ServiceKey;
use crate::model::{EndpointSlice, Endpoints, Name};

impl Engine {
    /// The namespace and name of every object of `kind` the engine holds (the namespace is empty
    /// for cluster-scoped kinds). Slices are those of every controller that runs: a slice kept by
    /// none was never stored, and deleting it is a no-op.
    pub fn stored_keys(&self, kind: ChangeKind) -> Vec<(Name, Name)> {
        match kind {
            ChangeKind::Service => self
                .index
                .services()
                .keys()
                .into_iter()
                .map(|k| (k.namespace, k.name))
                .collect(),
            ChangeKind::Pod => self.index.pods().keys(),
            ChangeKind::Node => self
                .index
                .nodes()
                .names()
                .into_iter()
                .map(|name| (Name::default(), name))
                .collect(),
            // Only the address-pool provider keeps namespaces (their labels). A namespace gone
            // takes its Services with it, and the service relist delivers their deletions.
            ChangeKind::Namespace => Vec::new(),
            ChangeKind::EndpointSlice => {
                let mut keys = self.index.slices().keys();
                keys.extend(self.index.mirrored_slices().keys());
                keys
            }
            ChangeKind::Endpoints => self
                .index
                .endpoints()
                .keys()
                .into_iter()
                .map(|k| (k.namespace, k.name))
                .collect(),
        }
    }

    /// A fresh full list of `kind` has been delivered (each listed object through
    /// [`Engine::handle`], as a watch's initial events): objects held but missing from it were
    /// deleted meanwhile, and go as if their deletion had been watched. Returns how many went.
    pub fn relisted(&self, kind: ChangeKind, listed: &HashSet<(Name, Name)>) -> usize {
        let mut gone: Vec<(Name, Name)> = self
            .stored_keys(kind)
            .into_iter()
            .filter(|key| !listed.contains(key))
            .collect();
        // In order: the same relist queues the same way on every run.
        gone.sort_unstable();
        for (namespace, name) in &gone {
            self.handle(Change::deleted(kind, namespace.clone(), name.clone()));
        }
        gone.len()
    }

    pub fn options(&self) -> &super::EngineOptions {
        &self.options
    }

    /// A stored slice of any controller that runs.
    pub fn stored_slice(&self, namespace: &str, name: &str) -> Option<Arc<EndpointSlice>> {
        self.index.slice(namespace, name)
    }

    pub fn stored_endpoints(&self, key: &ServiceKey) -> Option<Arc<Endpoints>> {
        self.index.endpoints().get(key)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::change::Change;
    use crate::controllers::Controllers;
    use crate::engine::{Engine, EngineOptions};
    use crate::index::ServiceKey;
    use crate::model::{Endpoints, Meta, Name, intern};
    use crate::queue::VirtualClock;

    fn endpoints(uid: &str) -> Change {
        Change::Endpoints(Arc::new(Endpoints {
            meta: Meta {
                namespace: intern("default"),
                name: intern("web"),
                uid: Name::new(uid),
                ..Meta::default()
            },
            ..Endpoints::default()
        }))
    }

    fn deleted(uid: &str) -> Change {
        Change::EndpointsDeleted {
            namespace: intern("default"),
            name: intern("web"),
            uid: Name::new(uid),
        }
    }

    #[test]
    fn a_late_deletion_of_an_older_endpoints_keeps_the_newer_one() {
        let engine = Engine::new(
            EngineOptions {
                controllers: Controllers::ALL,
                ..EngineOptions::default()
            },
            Arc::new(VirtualClock::new()),
        );
        let key = ServiceKey::new("default", "web");
        let held = |engine: &Engine| {
            engine
                .stored_endpoints(&key)
                .map(|e| e.meta.uid.to_string())
        };

        engine.handle(endpoints("new"));
        engine.handle(deleted("old"));
        assert_eq!(held(&engine).as_deref(), Some("new"));
        // Its own deletion, or one whose object is unknown (a relist), removes it.
        engine.handle(deleted("new"));
        assert_eq!(held(&engine), None);
        engine.handle(endpoints("newer"));
        engine.handle(deleted(""));
        assert_eq!(held(&engine), None);
    }

    /// The watch can deliver the create of an Endpoints after the engine has deleted it (its own
    /// create, then its own delete, both fed back at once): the object is back in the store until
    /// the watch tells of the delete. The engine's own delete queues no sync, so none meets it
    /// there and deletes again.
    #[test]
    fn an_endpoints_is_deleted_once_though_a_late_event_brings_it_back() {
        use crate::sink::memory::MemorySink;
        use crate::sink::{Kind, Object, Sink, Verb};

        let engine = Engine::new(
            EngineOptions {
                controllers: Controllers::ALL,
                ..EngineOptions::default()
            },
            Arc::new(VirtualClock::new()),
        );
        let sink = MemorySink::new(1);
        let Change::Endpoints(leftover) = endpoints("") else {
            unreachable!("endpoints() gives an Endpoints change")
        };
        let Ok(Object::Endpoints(created)) = sink.create(Object::Endpoints(leftover)) else {
            panic!("the memory sink refused a create");
        };
        let late = Change::Endpoints(Arc::clone(&created));
        engine.handle(late.clone());
        sink.take_writes();

        // Its Service is gone: the start-up check deletes it.
        engine.start();
        let endpoints_syncs = |records: Vec<crate::engine::SyncRecord>| {
            records
                .into_iter()
                .filter(|r| r.controller == crate::engine::ENDPOINTS_CONTROLLER)
                .collect::<Vec<_>>()
        };
        let first = endpoints_syncs(engine.sync_ready(&sink));
        assert_eq!(first.len(), 1, "{first:?}");
        let deletes: Vec<_> = sink
            .take_writes()
            .into_iter()
            .map(|w| (w.verb, w.sent.kind()))
            .collect();
        assert_eq!(deletes, [(Verb::Delete, Kind::Endpoints)]);

        engine.handle(late.clone());
        let again = endpoints_syncs(engine.sync_ready(&sink));
        assert!(again.is_empty(), "synced again: {again:?}");
        engine.handle(deleted(&created.meta.uid.to_string()));
        assert_eq!(
            engine.stored_endpoints(&ServiceKey::new("default", "web")),
            None
        );
    }
}

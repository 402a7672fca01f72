//! The watch delivers a version the engine has already replaced by its own write (whose answer it
//! took at once). The cache must not go back in time: a sync that then found it stale went back to
//! the queue with backoff, and under steady churn a service waited minutes for its write (the
//! long soak of `sliced run` never settled).

use std::sync::Arc;
use std::time::Duration;

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::model::{EndpointSlice, Endpoints, Name, Pod, ResourceVersion, Uid};
use sliced::queue::{Clock, VirtualClock};
use sliced::sim;
use sliced::sink::{Kind, MemorySink, Object, Verb};
use sliced::snapshot::Snapshot;

use crate::model;

struct Side {
    engine: Engine,
    clock: Arc<VirtualClock>,
    sink: MemorySink,
}

impl Side {
    fn new() -> Side {
        let clock = Arc::new(VirtualClock::new());
        Side {
            engine: Engine::new(
                EngineOptions {
                    controllers: Controllers::ALL,
                    check_invariants: true,
                    ..EngineOptions::default()
                },
                clock.clone() as Arc<dyn Clock>,
            ),
            clock,
            sink: MemorySink::new(11),
        }
    }

    /// Every sync ready now and later; the API server's answers are fed back, nothing else.
    fn drain(&self) {
        sliced::replay::drain(&self.engine, &self.clock, &self.sink);
    }

    fn endpoints(&self) -> Vec<Arc<Endpoints>> {
        self.sink
            .objects()
            .into_iter()
            .filter_map(|o| match o {
                Object::Endpoints(e) => Some(e),
                Object::EndpointSlice(_) => None,
            })
            .collect()
    }

    fn slices(&self) -> Vec<Arc<EndpointSlice>> {
        self.sink
            .objects()
            .into_iter()
            .filter_map(|o| o.slice_arc().cloned())
            .collect()
    }

    /// The API server's objects as they are now, as the watch would deliver them.
    fn watch_events(&self) -> Vec<Change> {
        let endpoints = self.endpoints().into_iter().map(Change::Endpoints);
        let slices = self.slices().into_iter().map(Change::EndpointSlice);
        endpoints.chain(slices).collect()
    }
}

fn new_pod(template: &Pod, ordinal: u8) -> Pod {
    let mut pod = template.clone();
    pod.meta.name = Name::new(&format!("web-late-{ordinal}"));
    pod.meta
        .set_uid(Uid::new(&format!("00000000-0000-4000-8888-{ordinal:012}")));
    pod.meta.set_resource_version(ResourceVersion::new(
        &(900 + u64::from(ordinal)).to_string(),
    ));
    pod.set_ips([std::net::IpAddr::from([10, 9, 0, ordinal])]);
    pod
}

#[test]
fn a_late_watch_event_of_a_replaced_version_is_not_taken() {
    let (side, scenario) = synced_service(20);
    let mut snapshot = Snapshot {
        services: vec![scenario.service.clone()],
        pods: scenario.pods.clone(),
        nodes: scenario.nodes.values().cloned().collect(),
        ..Snapshot::default()
    };
    let first_versions = side.watch_events();
    assert!(!first_versions.is_empty());

    // Each new pod is one more write of the Endpoints and of a slice. After each, the watch
    // catches up only with the versions of the first sync.
    for ordinal in 1..=4 {
        let pod = new_pod(&scenario.pods[0], ordinal);
        snapshot.pods.push(pod.clone());
        side.engine.handle(Change::Pod(pod));
        side.drain();
        for late in &first_versions {
            side.engine.handle(late.clone());
        }
        side.drain();
    }

    let stats = side.engine.stats();
    assert_eq!(stats.stale, 0, "syncs found the cache stale: {stats:?}");
    assert_eq!(
        stats.invariant_violations,
        0,
        "{:?}",
        side.engine.take_violations()
    );
    // The engine holds what the API server holds.
    for endpoints in side.endpoints() {
        let key = sliced::index::ServiceKey::new(&endpoints.meta.namespace, &endpoints.meta.name);
        let held = side
            .engine
            .stored_endpoints(&key)
            .map(|e| e.meta.resource_version.clone());
        assert_eq!(held, Some(endpoints.meta.resource_version.clone()));
    }
    for slice in side.slices() {
        let held = side
            .engine
            .stored_slice(&slice.meta.namespace, &slice.meta.name)
            .map(|s| s.meta.resource_version.clone());
        assert_eq!(held, Some(slice.meta.resource_version.clone()));
    }
    // And the API server holds every pod, as upstream's rules want it.
    let endpoints = side.endpoints();
    let refs: Vec<&Endpoints> = endpoints.iter().map(|e| e.as_ref()).collect();
    let differences = model::differences(
        &model::endpoints(&snapshot),
        &model::observed_endpoints(&refs),
    );
    assert!(differences.is_empty(), "{differences:#?}");
    let slices = side.slices();
    let refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
    let (observed, broken) = model::observed_slices(&refs, &snapshot.services, 100);
    assert!(broken.is_empty(), "{broken:?}");
    let differences = model::differences(&model::slices(&snapshot), &observed);
    assert!(differences.is_empty(), "{differences:#?}");
}

/// One service of `pods` pods synced by all three controllers, its objects on the API server.
fn synced_service(pods: usize) -> (Side, sim::ServiceScenario) {
    let scenario = sim::single_service(pods);
    let side = Side::new();
    for node in scenario.nodes.values() {
        side.engine.handle(Change::Node(node.clone()));
    }
    side.engine
        .handle(Change::Service(scenario.service.clone()));
    for pod in &scenario.pods {
        side.engine.handle(Change::Pod(pod.clone()));
    }
    side.drain();
    assert_eq!(side.endpoints().len(), 1);
    (side, scenario)
}

/// The Endpoints writes since the `from`th write: (verb, uid of the object sent).
fn endpoints_writes_since(side: &Side, from: usize) -> Vec<(Verb, String)> {
    side.sink.writes()[from..]
        .iter()
        .filter_map(|w| match &w.sent {
            Object::Endpoints(e) => Some((w.verb, e.meta.uid.to_string())),
            Object::EndpointSlice(_) => None,
        })
        .collect()
}

/// The API server deletes a Service's Endpoints with the Service, and tells of the two on two
/// watches, in either order. When the Endpoints' deletion comes first, the Service's follows a
/// moment later: a sync run at once would create Endpoints for a Service that is gone, then delete
/// them again.
#[test]
fn endpoints_deleted_with_their_service_are_not_recreated_in_between() {
    let (side, scenario) = synced_service(5);
    let from = side.sink.writes().len();
    let meta = &scenario.service.meta;
    let held = side.endpoints().remove(0);
    side.sink
        .remove_external(Kind::Endpoints, &meta.namespace, &meta.name);
    side.engine.handle(Change::EndpointsDeleted {
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: held.meta.uid.clone(),
    });
    // Whatever is ready now runs before the Service's deletion arrives.
    side.engine.sync_all_ready(&side.sink);
    side.clock.advance(Duration::from_millis(50));
    side.engine.handle(Change::ServiceDeleted {
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    });
    side.drain();
    assert_eq!(endpoints_writes_since(&side, from), []);
    assert!(side.endpoints().is_empty());
    assert_eq!(side.engine.stats().sync_errors, 0);
}

/// A Service deleted and created again under its name before the watch shows its old Endpoints
/// gone: the Endpoints are created (an update of the old object would be refused, NotFound), and
/// the old object's late deletion leaves the new one alone.
#[test]
fn a_recreated_service_gets_its_endpoints_created_before_the_watch_shows_the_old_ones_gone() {
    let (side, scenario) = synced_service(5);
    let from = side.sink.writes().len();
    let meta = &scenario.service.meta;
    let old = side.endpoints().remove(0);
    side.sink
        .remove_external(Kind::Endpoints, &meta.namespace, &meta.name);
    let mut recreated = scenario.service.clone();
    recreated.meta.uid = Name::new("00000000-0000-4000-9000-00000000beef");
    recreated.meta.resource_version = Name::new("7777");
    side.engine.handle(Change::ServiceDeleted {
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    });
    side.engine.handle(Change::Service(recreated));
    side.drain();
    let writes = endpoints_writes_since(&side, from);
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].0, Verb::Create, "{writes:?}");
    assert_eq!(side.engine.stats().sync_errors, 0, "a write was refused");
    let created = side.endpoints().remove(0);
    assert_ne!(created.meta.uid, old.meta.uid);
    assert_eq!(created.subsets, old.subsets);

    // The watch tells of the old object's deletion, late.
    let from = side.sink.writes().len();
    side.engine.handle(Change::EndpointsDeleted {
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: old.meta.uid.clone(),
    });
    side.drain();
    assert_eq!(endpoints_writes_since(&side, from), []);
    let key = sliced::index::ServiceKey::new(&meta.namespace, &meta.name);
    assert_eq!(
        side.engine
            .stored_endpoints(&key)
            .map(|e| e.meta.uid.clone()),
        Some(created.meta.uid.clone())
    );
    assert_eq!(side.engine.stats().sync_errors, 0);
}

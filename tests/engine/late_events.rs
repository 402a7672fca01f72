//! The watch delivers a version the engine has already replaced by its own write (whose answer it
//! took at once). The cache must not go back in time: a sync that then found it stale went back to
//! the queue with backoff, and under steady churn a service waited minutes for its write (the
//! long soak of `sliced run` never settled).

use std::sync::Arc;

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::model::{EndpointSlice, Endpoints, Name, Pod, ResourceVersion, Uid};
use sliced::queue::{Clock, VirtualClock};
use sliced::sim;
use sliced::sink::{MemorySink, Object};
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
    let scenario = sim::single_service(20);
    let mut snapshot = Snapshot {
        services: vec![scenario.service.clone()],
        pods: scenario.pods.clone(),
        nodes: scenario.nodes.values().cloned().collect(),
        ..Snapshot::default()
    };
    let side = Side::new();
    for node in &snapshot.nodes {
        side.engine.handle(Change::Node(node.clone()));
    }
    side.engine
        .handle(Change::Service(scenario.service.clone()));
    for pod in &snapshot.pods {
        side.engine.handle(Change::Pod(pod.clone()));
    }
    side.drain();
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

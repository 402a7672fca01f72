//! What holding the cluster costs, per pod, for pods shaped like real ones
//! (`fixtures/pods/deployment-pod.yaml`): sliced's index, fed as `sliced run`'s watches feed it
//! (JSON decoded into `WatchedPod`, converted to the compact model), against the baseline of
//! a kube-runtime reflector store holding the same pods as decoded API objects, as a controller
//! built on kube-runtime's reflector or client-go's informer keeps them. Both in one run, counted by
//! a global allocator. Run with `--nocapture` to see the figures.
//!
//! The bounds are loose (512 B per pod, 10x less than a reflector store without managedFields). The
//! figure is measured by `cargo bench --bench watch -- memory/index_20k_real_shaped` on the same
//! pods: 399 B per pod, against 61,922 B per pod in a reflector store (155x) and 26,522 B without
//! managedFields (67x), on 2026-11-25 (`perf/bench-watch.txt`).

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use kube::runtime::{reflector, watcher};
use sliced::change::Change;
use sliced::engine::{Engine, EngineOptions};
use sliced::kube::convert::{WatchedPod, pod_from_watched, service_from_k8s};
use sliced::queue::{Clock, VirtualClock};

use crate::counting_alloc::live;
use crate::real_pods::{self, decode, service};

const PODS: usize = 20_000;
const SERVICES: usize = 200;

#[test]
fn index_holds_real_pods_in_a_fraction_of_a_reflector_store() {
    let _alone = crate::alone();
    let events = real_pods::json_variants(PODS, SERVICES);
    let average_json = events.iter().map(Vec::len).sum::<usize>() / PODS;

    // The baselines: kube-runtime's reflector store of the decoded pods, as they come and with
    // managedFields dropped (kube-runtime's advice for large caches).
    let reflector = |strip: bool| {
        let before = live();
        let (store, mut writer) = reflector::store::<core::Pod>();
        for bytes in &events {
            let mut pod: core::Pod = decode(bytes);
            if strip {
                pod.metadata.managed_fields = None;
            }
            writer.apply_watcher_event(&watcher::Event::Apply(pod));
        }
        let bytes = live() - before;
        assert_eq!(store.state().len(), PODS);
        bytes
    };
    let reflector_bytes = reflector(false);
    let stripped_bytes = reflector(true);

    // sliced: the same events through the converter into the engine's index.
    let before = live();
    let engine = Engine::new(
        EngineOptions::default(),
        Arc::new(VirtualClock::new()) as Arc<dyn Clock>,
    );
    for i in 0..SERVICES {
        match service_from_k8s(&service(i)) {
            Ok(svc) => engine.handle(Change::Service(svc)),
            Err(e) => panic!("converting a service: {e}"),
        }
    }
    let services_bytes = live() - before;
    for bytes in &events {
        match pod_from_watched(&decode::<WatchedPod>(bytes)) {
            Ok(pod) => engine.handle(Change::Pod(pod)),
            Err(e) => panic!("converting a pod: {e}"),
        }
    }
    let index_bytes = live() - before - services_bytes;
    assert_eq!(engine.object_counts().pods, PODS);
    assert_eq!(
        engine
            .index()
            .member_count(&sliced::index::ServiceKey::new("shop", "svc-7")),
        PODS / SERVICES
    );

    let per_pod = |bytes: isize| bytes as f64 / PODS as f64;
    let ratio = |baseline: isize| baseline as f64 / index_bytes as f64;
    eprintln!(
        "{PODS} pods of {average_json} JSON bytes each: sliced's index {:.0} B/pod; reflector store {:.0} B/pod ({:.0}x more), without managedFields {:.0} B/pod ({:.0}x more)",
        per_pod(index_bytes),
        per_pod(reflector_bytes),
        ratio(reflector_bytes),
        per_pod(stripped_bytes),
        ratio(stripped_bytes),
    );
    // The index keeps what the controllers read of a pod; a reflector keeps all of it. Measured:
    // 399 B/pod and 67x (perf/bench-watch.txt); the bounds leave room for the model to grow.
    assert!(
        per_pod(index_bytes) < 512.0,
        "{:.0} B/pod",
        per_pod(index_bytes)
    );
    assert!(
        ratio(stripped_bytes) > 10.0,
        "only {:.1}x less than a reflector store without managedFields",
        ratio(stripped_bytes)
    );
}

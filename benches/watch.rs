//! A pod watch event, as `sliced run` takes it in: JSON decoded into `WatchedPod` (the fields the
//! controllers read), converted into the compact model, and the change applied to the engine's
//! index. The
//! baseline, in the same run, is what a controller on kube-runtime's reflector (or client-go's
//! informer) pays for the same event: the decode and a store update. Pods are shaped like
//! `fixtures/pods/deployment-pod.yaml`; each event flips one pod's readiness, as most pod events do.

#[path = "../tests/support/real_pods.rs"]
mod real_pods;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1 as core;
use kube::runtime::{reflector, watcher};

use sliced::change::Change;
use sliced::engine::{Engine, EngineOptions};
use sliced::kube::convert::{WatchedPod, pod_from_watched};
use sliced::queue::{Clock, VirtualClock};

use real_pods::decode;

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PODS: usize = 1_000;
const SERVICES: usize = 10;

/// Every pod twice, ready then not ready, each with a newer resourceVersion: cycling through them
/// makes every event a change.
fn events() -> Vec<Vec<u8>> {
    let template = real_pods::template();
    let mut out = Vec::with_capacity(2 * PODS);
    for ready in [true, false] {
        for i in 0..PODS {
            let mut pod = real_pods::variant(&template, i, SERVICES);
            real_pods::set_ready(&mut pod, ready);
            if !ready {
                pod.metadata.resource_version = Some((60_000_000 + i).to_string());
            }
            match serde_json::to_vec(&pod) {
                Ok(bytes) => out.push(bytes),
                Err(e) => panic!("serializing a pod: {e}"),
            }
        }
    }
    out
}

fn service(i: usize) -> sliced::model::Service {
    match sliced::kube::convert::service_from_k8s(&real_pods::service(i)) {
        Ok(svc) => svc,
        Err(e) => panic!("converting a service: {e}"),
    }
}

fn pod_event(c: &mut Criterion) {
    let events = events();
    let mut group = c.benchmark_group("watch_pod_event");
    group.throughput(Throughput::Elements(1));

    // The decode alone, into the full API type and into the watched cut.
    let mut next = 0;
    group.bench_function("decode_full_pod", |b| {
        b.iter(|| {
            next = (next + 1) % events.len();
            black_box(decode::<core::Pod>(&events[next]))
        })
    });
    group.bench_function("decode_watched_pod", |b| {
        b.iter(|| {
            next = (next + 1) % events.len();
            black_box(decode::<WatchedPod>(&events[next]))
        })
    });

    // The baseline: decode and update a reflector store, which keeps the whole object.
    let (store, mut writer) = reflector::store::<core::Pod>();
    for bytes in &events {
        writer.apply_watcher_event(&watcher::Event::Apply(decode::<core::Pod>(bytes)));
    }
    group.bench_function("reflector_store", |b| {
        b.iter(|| {
            next = (next + 1) % events.len();
            writer.apply_watcher_event(&watcher::Event::Apply(decode::<core::Pod>(&events[next])));
        })
    });
    drop((store, writer));

    // sliced: decode, convert, drop the API object, apply to the index (which queues the service).
    let engine = Engine::new(
        EngineOptions::default(),
        Arc::new(VirtualClock::new()) as Arc<dyn Clock>,
    );
    for i in 0..SERVICES {
        engine.handle(&Change::Service(service(i)));
    }
    let apply = |bytes: &[u8]| match pod_from_watched(&decode(bytes)) {
        Ok(pod) => engine.handle(&Change::Pod(pod)),
        Err(e) => panic!("converting a pod: {e}"),
    };
    events.iter().for_each(|e| apply(e));
    group.bench_function("sliced_index", |b| {
        b.iter(|| {
            next = (next + 1) % events.len();
            apply(&events[next]);
        })
    });
    group.finish();
}

criterion_group!(benches, pod_event);
criterion_main!(benches);

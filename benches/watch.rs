//! A pod watch event, as `sliced run` takes it in: JSON decoded into `WatchedPod` (the fields the
//! controllers read), converted into the compact model, and the change applied to the engine's
//! index; and the same events as protobuf, decoded in place (`decode_protobuf_pod`,
//! `sliced_index_protobuf`), and recorded for `sliced run --record-trace` (`record_pod_event`). The
//! baseline, in the same run, is what a controller on kube-runtime's reflector (or client-go's
//! informer) pays for the same event: the decode and a store update. Pods are shaped like
//! `fixtures/pods/deployment-pod.yaml`; each event flips one pod's readiness, as most pod events do.
//!
//! Also the figures the memory and end-to-end tests bound loosely (those tests keep generous bounds
//! for noisy machines; the figures quoted in perf/README.md come from here, `perf/bench-watch.txt`):
//!
//! - `memory/index_100k_synthetic`: the index's bytes per pod, 100,000 pods in 1,000 services (the
//!   setup of `tests/memory/index.rs`); the time is building that index.
//! - `memory/index_20k_real_shaped`: the index's bytes per real-shaped pod fed through the watch
//!   path, against a reflector store's (the setup of `tests/memory/watch.rs`); the time is feeding
//!   20,000 pod events.
//! - `memory/run_watch_caches_100k`: `sliced run` against the fake API server, 100,000 pods, 1,000
//!   services, 500 nodes, a standby replica: heap held per pod once every watch has listed (the setup
//!   of `tests/memory/run.rs`); the time is from start to caches synced.
//! - `run/pod_ready_to_slice_written`: `sliced run` against the fake API server, batch period 0: a
//!   pod's readiness flipped until its slice shows it, polled every 200 µs (the setup of
//!   `tests/adapter/run_e2e`'s `pod_ready_to_slice_written_at_batch_period_zero`).
//!
//! Bytes are live heap bytes as requested from the allocator (mimalloc here, the system's in the
//! tests), without the allocator's own overhead, counted only while a figure is being taken.

#[path = "../tests/support/fake_api/mod.rs"]
mod fake_api;
use fake_api::protobuf_objects;
#[path = "../tests/support/real_pods.rs"]
mod real_pods;
#[path = "../tests/support/run_harness.rs"]
mod run_harness;
#[path = "../tests/support/snapshot_reference.rs"]
mod snapshot_reference;

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1 as core;
use kube::runtime::{reflector, watcher};

use sliced::change::Change;
use sliced::engine::{Engine, EngineOptions};
use sliced::index::Index;
use sliced::kube::convert::{PodFields, WatchedPod, pod_from_fields, pod_from_watched};
use sliced::kube::protobuf;
use sliced::kube::trace_record::{Limits, RecordTrace, TraceRecorder};
use sliced::model::{Labels, Meta, Name, Pod, PodBuilder, PodPhase, Service, intern};
use sliced::queue::{Clock, VirtualClock};

use real_pods::decode;

// The binary's allocator, so that the bench measures what ships; live bytes are counted only while
// a memory figure is taken (one relaxed load per call otherwise).
#[global_allocator]
static GLOBAL: Counting = Counting;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to mimalloc unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Live bytes counted since counting started. Objects allocated before and freed while counting
/// make it lower, never higher: take figures over objects made while counting.
fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

fn counting(on: bool) {
    COUNTING.store(on, Ordering::SeqCst);
}

const PODS: usize = 1_000;
const SERVICES: usize = 10;

/// Every pod twice, ready then not ready, each with a newer resourceVersion: cycling through them
/// makes every event a change.
fn event_pods() -> Vec<core::Pod> {
    let template = real_pods::template();
    let mut out = Vec::with_capacity(2 * PODS);
    for ready in [true, false] {
        for i in 0..PODS {
            let mut pod = real_pods::variant(&template, i, SERVICES);
            real_pods::set_ready(&mut pod, ready);
            if !ready {
                pod.metadata.resource_version = Some((60_000_000 + i).to_string());
            }
            out.push(pod);
        }
    }
    out
}

/// The events as JSON: each pod's object.
fn events() -> Vec<Vec<u8>> {
    event_pods()
        .iter()
        .map(|pod| match serde_json::to_vec(pod) {
            Ok(bytes) => bytes,
            Err(e) => panic!("serializing a pod: {e}"),
        })
        .collect()
}

/// The events as protobuf: each a whole `WatchEvent` (a frame without its length), the pod
/// enveloped inside, as the API server sends them to client-go.
fn protobuf_events() -> Vec<Vec<u8>> {
    event_pods()
        .iter()
        .map(|pod| {
            let frame =
                protobuf_objects::watch_frame("MODIFIED", protobuf_objects::pod_object(pod));
            frame[4..].to_vec()
        })
        .collect()
}

/// A protobuf watch event's pod, in the fields the controllers read.
fn decode_protobuf(event: &[u8]) -> PodFields<'_> {
    let object = match protobuf::watch_event(event) {
        Ok(e) => e.object,
        Err(e) => panic!("a watch event: {e}"),
    };
    match protobuf::pod_object(object) {
        Ok(fields) => fields,
        Err(e) => panic!("a pod: {e}"),
    }
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
        engine.handle(Change::Service(service(i)));
    }
    let apply = |bytes: &[u8]| match pod_from_watched(&decode(bytes)) {
        Ok(pod) => engine.handle(Change::Pod(pod)),
        Err(e) => panic!("converting a pod: {e}"),
    };
    events.iter().for_each(|e| apply(e));
    group.bench_function("sliced_index", |b| {
        b.iter(|| {
            next = (next + 1) % events.len();
            apply(&events[next]);
        })
    });

    // The same events as protobuf: decoded in place into the fields read, the rest passed over.
    let protobuf_events = protobuf_events();
    group.bench_function("decode_protobuf_pod", |b| {
        b.iter(|| {
            next = (next + 1) % protobuf_events.len();
            black_box(decode_protobuf(&protobuf_events[next]));
        })
    });
    let apply_protobuf = |bytes: &[u8]| match pod_from_fields(&decode_protobuf(bytes)) {
        Ok(pod) => engine.handle(Change::Pod(pod)),
        Err(e) => panic!("converting a pod: {e}"),
    };
    protobuf_events.iter().for_each(|e| apply_protobuf(e));
    group.bench_function("sliced_index_protobuf", |b| {
        b.iter(|| {
            next = (next + 1) % protobuf_events.len();
            apply_protobuf(&protobuf_events[next]);
        })
    });

    // `sliced run --record-trace`: the event's line serialised into the recorder's buffer, the
    // file written a buffer at a time, rotated at 64 MiB with one file kept (each new file starts
    // with the state held: 1,000 pods here), so that a long run stays small on disk.
    let dir = std::env::temp_dir().join(format!("sliced-bench-record-{}", std::process::id()));
    let created = std::fs::create_dir_all(&dir).map_err(|e| e.to_string());
    let mut recorder = match created.and_then(|()| {
        TraceRecorder::create(&RecordTrace {
            path: dir.join("trace.yaml"),
            limits: Limits {
                max_size: 64 << 20,
                max_files: 1,
            },
        })
        .map_err(|e| e.to_string())
    }) {
        Ok(recorder) => recorder,
        Err(e) => panic!("a trace file in {}: {e}", dir.display()),
    };
    recorder.started(&engine);
    let changes: Vec<Change> = (events.iter())
        .map(|bytes| match pod_from_watched(&decode(bytes)) {
            Ok(pod) => Change::Pod(pod),
            Err(e) => panic!("converting a pod: {e}"),
        })
        .collect();
    group.bench_function("record_pod_event", |b| {
        b.iter(|| {
            next = (next + 1) % changes.len();
            recorder.change(&changes[next], &engine);
        })
    });
    recorder.finish();
    let _ = std::fs::remove_dir_all(&dir);
    group.finish();
}

/// Prints a figure once per run, however often criterion calls the routine.
fn print_once(done: &mut bool, line: impl FnOnce() -> String) {
    if !*done {
        *done = true;
        println!("{}", line());
    }
}

// --- memory/index_100k_synthetic: the pods of tests/memory/index.rs.

const SYN_NAMESPACES: usize = 10;
const SYN_SERVICES_PER_NS: usize = 100;
const SYN_PODS_PER_SERVICE: usize = 100;
const SYN_PODS: usize = SYN_NAMESPACES * SYN_SERVICES_PER_NS * SYN_PODS_PER_SERVICE;

fn synthetic_service(ns: usize, s: usize) -> Service {
    Service {
        meta: Meta {
            namespace: intern(&format!("ns-{ns}")),
            name: intern(&format!("svc-{s}")),
            ..Meta::default()
        },
        selector: Some(Labels::from_pairs([("app", format!("svc-{s}"))])),
        ..Service::default()
    }
}

fn synthetic_pod(ns: usize, s: usize, i: usize) -> Pod {
    let hash = format!("{:08x}", s * 7919 + 17);
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: intern(&format!("ns-{ns}")),
            name: Name::new(&format!("svc-{s}-{hash}-{i:05}")),
            uid: Name::new(&format!("{:08x}-0000-4000-8000-{:012x}", ns * 1000 + s, i)),
            resource_version: Name::new(&format!("{}", 1_000_000 + i)),
            labels: Labels::from_pairs([
                ("app", format!("svc-{s}")),
                ("pod-template-hash", hash),
                ("tier", ["web", "api", "db"][s % 3].to_owned()),
            ]),
            ..Meta::default()
        },
        node_name: Some(intern(&format!("node-{}", i % 50))),
        phase: PodPhase::Running,
        has_pod_ip: true,
        ips: [IpAddr::V4(Ipv4Addr::new(10, ns as u8, s as u8, i as u8))]
            .into_iter()
            .collect(),
        ready: true,
        ..PodBuilder::default()
    })
}

fn memory_index_synthetic(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(SYN_PODS as u64));
    let mut printed = false;
    group.bench_function("index_100k_synthetic", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                counting(true);
                let start = live();
                let pods: Vec<Arc<Pod>> = (0..SYN_NAMESPACES)
                    .flat_map(|ns| {
                        (0..SYN_SERVICES_PER_NS).flat_map(move |s| {
                            (0..SYN_PODS_PER_SERVICE).map(move |i| Arc::new(synthetic_pod(ns, s, i)))
                        })
                    })
                    .collect();
                let vec_bytes = (pods.capacity() * size_of::<Arc<Pod>>()) as isize;
                let pod_bytes = live() - start - vec_bytes;
                let services: Vec<Service> = (0..SYN_NAMESPACES)
                    .flat_map(|ns| (0..SYN_SERVICES_PER_NS).map(move |s| synthetic_service(ns, s)))
                    .collect();
                let before_index = live();
                let began = Instant::now();
                let index = Index::new();
                for s in services {
                    index.services().apply(s);
                }
                for p in &pods {
                    index.pods().apply(p.clone());
                }
                took += began.elapsed();
                let index_bytes = live() - before_index;
                assert_eq!(index.pods().len(), SYN_PODS);
                drop(pods);
                let total = live() - start;
                counting(false);
                let per_pod = |bytes: isize| bytes as f64 / SYN_PODS as f64;
                print_once(&mut printed, || {
                    format!(
                        "memory/index_100k_synthetic: pods {:.0} B each; index {:.0} B per pod without the pods, {:.0} B with them",
                        per_pod(pod_bytes),
                        per_pod(index_bytes),
                        per_pod(total)
                    )
                });
                drop(index);
            }
            took
        })
    });
    group.finish();
}

// --- memory/index_20k_real_shaped: the pods of tests/memory/watch.rs.

const REAL_PODS: usize = 20_000;
const REAL_SERVICES: usize = 200;

fn memory_index_real_shaped(c: &mut Criterion) {
    let events = real_pods::json_variants(REAL_PODS, REAL_SERVICES);
    let average_json = events.iter().map(Vec::len).sum::<usize>() / REAL_PODS;
    let mut group = c.benchmark_group("memory");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(REAL_PODS as u64));
    let mut printed = false;
    group.bench_function("index_20k_real_shaped", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                // The baselines, once: a reflector store as the pods come, and without managedFields.
                let reflector = |strip: bool| {
                    counting(true);
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
                    counting(false);
                    assert_eq!(store.state().len(), REAL_PODS);
                    bytes
                };
                let baselines = (!printed).then(|| (reflector(false), reflector(true)));

                counting(true);
                let before = live();
                let began = Instant::now();
                let engine = Engine::new(
                    EngineOptions::default(),
                    Arc::new(VirtualClock::new()) as Arc<dyn Clock>,
                );
                for i in 0..REAL_SERVICES {
                    engine.handle(Change::Service(service(i)));
                }
                let services_bytes = live() - before;
                for bytes in &events {
                    match pod_from_watched(&decode::<WatchedPod>(bytes)) {
                        Ok(pod) => engine.handle(Change::Pod(pod)),
                        Err(e) => panic!("converting a pod: {e}"),
                    }
                }
                took += began.elapsed();
                let index_bytes = live() - before - services_bytes;
                counting(false);
                assert_eq!(engine.object_counts().pods, REAL_PODS);
                if let Some((full, stripped)) = baselines {
                    let per_pod = |bytes: isize| bytes as f64 / REAL_PODS as f64;
                    let ratio = |baseline: isize| baseline as f64 / index_bytes as f64;
                    print_once(&mut printed, || {
                        format!(
                            "memory/index_20k_real_shaped: {REAL_PODS} pods of {average_json} JSON bytes each: sliced's index {:.0} B/pod; reflector store {:.0} B/pod ({:.0}x more), without managedFields {:.0} B/pod ({:.0}x more)",
                            per_pod(index_bytes),
                            per_pod(full),
                            ratio(full),
                            per_pod(stripped),
                            ratio(stripped)
                        )
                    });
                }
                drop(engine);
            }
            took
        })
    });
    group.finish();
}

// --- memory/run_watch_caches_100k: the cluster of tests/memory/run.rs.

const RUN_PODS: usize = 100_000;
const RUN_SERVICES: usize = 1_000;
const RUN_NODES: usize = 500;

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("a tokio runtime: {e}"),
    }
}

fn memory_run_watch_caches(c: &mut Criterion) {
    use run_harness::{lease, node, options, pod, service, start};
    use sliced::kube::run::RunOptions;

    let rt = runtime();
    let _entered = rt.enter();
    let fake = fake_api::FakeApiServer::new();
    let created = fake
        .create_many((0..RUN_NODES).map(|n| node(&format!("node-{n}"), &format!("zone-{}", n % 3))))
        .and_then(|_| {
            fake.create_many(
                (0..RUN_SERVICES)
                    .map(|s| service("default", &format!("svc-{s}"), &format!("app-{s}"))),
            )
        })
        .and_then(|_| {
            fake.create_many((0..RUN_PODS).map(|i| {
                let s = i % RUN_SERVICES;
                pod(
                    "default",
                    &format!("pod-{i}"),
                    &format!("app-{s}"),
                    &format!("node-{}", i % RUN_NODES),
                    &format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
                    true,
                )
            }))
        })
        .and_then(|_| {
            // Another replica holds the lease: this one fills its caches and writes nothing.
            fake.create(serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"namespace": "kube-system", "name": "sliced"},
                "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                         "renewTime": jiff::Timestamp::now().to_string()}
            }))
        });
    if let Err(e) = created {
        panic!("filling the fake API server: {e:?}");
    }

    let mut group = c.benchmark_group("memory");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(RUN_PODS as u64));
    let mut figures: Vec<f64> = Vec::new();
    group.bench_function("run_watch_caches_100k", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                counting(true);
                let before = live();
                let started = Instant::now();
                let running = start(
                    &fake,
                    RunOptions {
                        leader_election: Some(lease("me")),
                        page_size: 500,
                        ..options()
                    },
                );
                rt.block_on(async {
                    while !running.state.synced.load(Ordering::SeqCst) {
                        assert!(
                            started.elapsed() < Duration::from_secs(120),
                            "caches never synced"
                        );
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                });
                took += started.elapsed();
                // Let the watches' buffers drain.
                rt.block_on(tokio::time::sleep(Duration::from_millis(500)));
                let after = live();
                counting(false);
                assert_eq!(running.state.engine.index().pods().len(), RUN_PODS);
                assert_eq!(fake.writes("endpointslices"), 0);
                figures.push((after - before) as f64 / RUN_PODS as f64);
                if let Err(e) = rt.block_on(running.stop()) {
                    panic!("stopping: {e}");
                }
            }
            took
        })
    });
    group.finish();
    figures.sort_by(f64::total_cmp);
    if let (Some(low), Some(high)) = (figures.first(), figures.last()) {
        println!(
            "memory/run_watch_caches_100k: {} runs: watch caches {low:.0} to {high:.0} B per pod, median {:.0} B ({RUN_PODS} pods, {RUN_SERVICES} services, {RUN_NODES} nodes)",
            figures.len(),
            figures[figures.len() / 2]
        );
    }
}

// --- run/pod_ready_to_slice_written: the cluster of tests/adapter/run_e2e's small_cluster.

fn ready_in_slices(fake: &fake_api::FakeApiServer) -> usize {
    fake.list("endpointslices", "")
        .iter()
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "web")
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["conditions"]["ready"] == true)
        .count()
}

fn run_pod_ready(c: &mut Criterion) {
    use run_harness::{node, options, pod, service, settle, start};

    let rt = runtime();
    let _entered = rt.enter();
    let fake = fake_api::FakeApiServer::new();
    let mut objects = vec![
        node("n1", "zone-a"),
        node("n2", "zone-b"),
        service("default", "web", "web"),
    ];
    for (i, (node, ready)) in [("n1", true), ("n1", true), ("n2", true), ("n2", false)]
        .into_iter()
        .enumerate()
    {
        let ip = format!("10.0.0.{}", i + 1);
        objects.push(pod("default", &format!("web-{i}"), "web", node, &ip, ready));
    }
    for object in objects {
        if let Err(e) = fake.create(object) {
            panic!("filling the fake API server: {e:?}");
        }
    }
    let running = start(&fake, options());
    rt.block_on(settle(&fake, &running));

    let mut group = c.benchmark_group("run");
    group.sample_size(20);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(10));
    let mut ready = false;
    group.bench_function("pod_ready_to_slice_written", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    ready = !ready;
                    let started = Instant::now();
                    let Some(mut p) = fake.get("pods", "default", "web-3") else {
                        panic!("web-3 is gone");
                    };
                    p["status"]["conditions"][0]["status"] =
                        serde_json::Value::from(if ready { "True" } else { "False" });
                    if let Err(e) = fake.apply(p) {
                        panic!("flipping web-3: {e:?}");
                    }
                    let want = if ready { 4 } else { 3 };
                    while ready_in_slices(&fake) != want {
                        assert!(
                            started.elapsed() < Duration::from_secs(5),
                            "slice not written"
                        );
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                    took += started.elapsed();
                }
                took
            })
        })
    });
    group.finish();
    if let Err(e) = rt.block_on(running.stop()) {
        panic!("stopping: {e}");
    }
}

criterion_group! {
    name = benches;
    // What the binary ships with.
    config = {
        sliced::allocator::return_freed_pages_at_once();
        sliced::allocator::no_transparent_huge_pages();
        Criterion::default()
    };
    targets = pod_event, memory_index_synthetic, memory_index_real_shaped, memory_run_watch_caches, run_pod_ready
}
criterion_main!(benches);

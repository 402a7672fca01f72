//! The engine end to end: index, queue, parallel reconcile and the in-memory API server.
//! - cold start: every service of a generated cluster synced against slices that are already
//!   correct (must write nothing), by a restarted process with every controller (must write
//!   nothing), and against none (all creates), at 150,000 pods / 10,000 services and 1,000,000
//!   pods / 100,000 services;
//! - one pod becoming ready in a 5,000-pod service: pod event, queue, sync, write;
//! - steady churn: readiness flips of random pods through the whole engine, events per second.

use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::model::{Pod, ResourceVersion};
use sliced::queue::{Clock, VirtualClock};
use sliced::sim;
use sliced::sink::memory::MemorySink;
use sliced::snapshot::{Snapshot, load_stored};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn engine(controllers: Controllers) -> Engine {
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new());
    Engine::new(
        EngineOptions {
            controllers,
            ..EngineOptions::default()
        },
        clock,
    )
}

/// An engine that has seen every object of the snapshot (and so queued every service).
fn loaded(snapshot: &Snapshot) -> Engine {
    loaded_with(snapshot, Controllers::ENDPOINTSLICE)
}

fn loaded_with(snapshot: &Snapshot, controllers: Controllers) -> Engine {
    let engine = engine(controllers);
    snapshot.load_cluster_into(&engine);
    engine
}

/// A new process's engine, every controller running, its caches filled from lists: the snapshot
/// and every object the API server holds; then its start-up work.
fn restarted(snapshot: &Snapshot, sink: &MemorySink) -> Engine {
    let engine = loaded_with(snapshot, Controllers::ALL);
    load_stored(&engine, sink.objects());
    engine.start();
    engine
}

/// An in-memory API server that keeps no log of writes: benches never read it.
fn quiet_sink() -> MemorySink {
    let sink = MemorySink::new(1);
    sink.set_logging(false);
    sink
}

/// Syncs until nothing is ready, a batch at a time as `sliced run` does (each batch's records
/// dropped before the next); returns the number of writes.
fn drain(engine: &Engine, sink: &MemorySink) -> usize {
    let mut writes = 0;
    loop {
        let records = engine.sync_ready(sink);
        if records.is_empty() {
            return writes;
        }
        writes += records.iter().map(|r| r.writes.len()).sum::<usize>();
    }
}

fn requeue_all(engine: &Engine, snapshot: &Snapshot) {
    for service in &snapshot.services {
        engine.handle(Change::Service(service.clone()));
    }
}

fn cold_start(c: &mut Criterion, pods: usize, services: usize) {
    // Built on first use: a filtered run that skips these cases does not pay for the cluster.
    let snapshot: std::cell::OnceCell<Snapshot> = std::cell::OnceCell::new();
    let cluster = || snapshot.get_or_init(|| sim::cluster(pods, services, 1));
    let mut group = c.benchmark_group(format!("cold_start/{pods}_pods"));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(pods as u64));

    // Slices already correct: a restart over a settled cluster. One engine, synced once to write
    // the slices; each iteration queues every service again and must write nothing.
    group.bench_function("slices_correct", |b| {
        let snapshot = cluster();
        let engine = loaded(snapshot);
        let sink = quiet_sink();
        drain(&engine, &sink);
        b.iter(|| {
            requeue_all(&engine, snapshot);
            let writes = drain(&engine, &sink);
            assert_eq!(writes, 0, "a settled cluster needs no write");
        })
    });

    // A restarted process over a cluster every controller keeps correct: a new engine whose
    // caches are filled from lists (its trackers know nothing of earlier writes) syncs every
    // service of every controller and must write nothing. Timed: the syncs after the lists.
    group.bench_function("restart_all_controllers", |b| {
        let snapshot = cluster();
        let sink = quiet_sink();
        drain(&loaded_with(snapshot, Controllers::ALL), &sink);
        b.iter_batched(
            || restarted(snapshot, &sink),
            |engine| {
                let writes = drain(&engine, &sink);
                assert_eq!(writes, 0, "a restart over a correct cluster wrote");
                engine
            },
            BatchSize::PerIteration,
        )
    });

    group.bench_function("no_slices", |b| {
        let snapshot = cluster();
        b.iter_batched(
            || (loaded(snapshot), quiet_sink()),
            |(engine, sink)| {
                let writes = drain(&engine, &sink);
                assert!(writes >= services);
                (engine, sink)
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn cold_start_150k(c: &mut Criterion) {
    cold_start(c, 150_000, 10_000);
}

fn cold_start_1m(c: &mut Criterion) {
    cold_start(c, 1_000_000, 100_000);
}

/// Flips the readiness of `pod`, with a new resourceVersion as the API server would give.
fn flipped(pod: &Pod, rv: u64) -> Pod {
    let mut p = pod.clone();
    p.ready = !p.ready;
    p.meta
        .set_resource_version(ResourceVersion::new(&rv.to_string()));
    p
}

fn one_pod_ready(c: &mut Criterion) {
    let scenario = sim::single_service(5_000);
    let snapshot = Snapshot {
        services: vec![scenario.service.clone()],
        pods: scenario.pods.clone(),
        nodes: scenario.nodes.values().cloned().collect(),
        ..Snapshot::default()
    };
    let mut group = c.benchmark_group("one_pod_ready");
    group.throughput(Throughput::Elements(1));
    // The EndpointSlice controller alone, then with the Endpoints and mirroring controllers too:
    // one slice update, then also one Endpoints update. The Endpoints hold 1,000 of the 5,000
    // addresses, lowest first: the first pod's flips show in them.
    for (name, controllers, writes) in [
        ("5000_pod_service", Controllers::ENDPOINTSLICE, 1),
        ("5000_pod_service_all_controllers", Controllers::ALL, 2),
    ] {
        group.bench_function(name, |b| {
            let engine = loaded_with(&snapshot, controllers);
            let sink = quiet_sink();
            drain(&engine, &sink);
            let mut pod = scenario.pods[0].clone();
            let mut rv = 1_000u64;
            b.iter(|| {
                rv += 1;
                pod = flipped(&pod, rv);
                engine.handle(Change::Pod(pod.clone()));
                assert_eq!(drain(&engine, &sink), writes);
            })
        });
    }
    group.finish();
}

fn steady_churn(c: &mut Criterion) {
    let snapshot = sim::cluster(100_000, 1_000, 1);
    const EVENTS: usize = 10_000;
    let mut group = c.benchmark_group("steady_churn");
    group.sample_size(10);
    group.throughput(Throughput::Elements(EVENTS as u64));
    // The EndpointSlice controller alone, then with the Endpoints and mirroring controllers too.
    for (name, controllers) in [
        ("readiness_flips_100k_pods", Controllers::ENDPOINTSLICE),
        (
            "readiness_flips_100k_pods_all_controllers",
            Controllers::ALL,
        ),
    ] {
        let engine = loaded_with(&snapshot, controllers);
        let sink = quiet_sink();
        drain(&engine, &sink);
        let mut pods: Vec<Pod> = snapshot.pods.clone();
        let mut rv = 1_000u64;
        let mut next = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                // A stride through the pods spreads the events over many services, as real churn
                // does.
                for _ in 0..EVENTS {
                    next = (next + 7_919) % pods.len();
                    rv += 1;
                    pods[next] = flipped(&pods[next], rv);
                    engine.handle(Change::Pod(pods[next].clone()));
                }
                drain(&engine, &sink);
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // What the binary ships with.
    config = {
        sliced::allocator::return_freed_pages_at_once();
        sliced::allocator::no_transparent_huge_pages();
        Criterion::default()
    };
    targets = one_pod_ready, steady_churn, cold_start_150k, cold_start_1m
}
criterion_main!(benches);

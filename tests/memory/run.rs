//! The memory `sliced run` holds for its watch caches, per pod, measured with 100,000 pods served
//! by the fake API server: the heap this process holds once every watch has listed, less what it
//! held before `run` started (the fake's own store included there).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use sliced::kube::run::RunOptions;

use crate::counting_alloc;
use crate::fake_api::FakeApiServer;
use crate::run_harness::{lease, node, options, pod, service, start};

const PODS: usize = 100_000;
const SERVICES: usize = 1_000;
const NODES: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_caches_per_pod_at_100k_pods() {
    let _alone = crate::alone_async().await;
    let fake = FakeApiServer::new();
    fake.create_many((0..NODES).map(|n| node(&format!("node-{n}"), &format!("zone-{}", n % 3))))
        .unwrap();
    fake.create_many(
        (0..SERVICES).map(|s| service("default", &format!("svc-{s}"), &format!("app-{s}"))),
    )
    .unwrap();
    fake.create_many((0..PODS).map(|i| {
        let s = i % SERVICES;
        pod(
            "default",
            &format!("pod-{i}"),
            &format!("app-{s}"),
            &format!("node-{}", i % NODES),
            &format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
            true,
        )
    }))
    .unwrap();
    // Another replica holds the lease: this one fills its caches and writes nothing.
    fake.create(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"namespace": "kube-system", "name": "sliced"},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                 "renewTime": jiff::Timestamp::now().to_string()}
    }))
    .unwrap();

    let before = counting_alloc::live();
    let started = Instant::now();
    let running = start(
        &fake,
        RunOptions {
            leader_election: Some(lease("me")),
            page_size: 500,
            ..options()
        },
    );
    while !running.state.synced.load(Ordering::SeqCst) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "caches never synced"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let synced_in = started.elapsed();
    // Let the watches' buffers drain.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = counting_alloc::live();
    assert_eq!(running.state.engine.index().pods().len(), PODS);
    assert!(!running.state.gate.is_open());
    assert_eq!(fake.writes("endpointslices"), 0);

    let per_pod = (after - before) as f64 / PODS as f64;
    eprintln!(
        "watch caches: {per_pod:.0} bytes per pod ({:.1} MiB for {PODS} pods, {SERVICES} services, {NODES} nodes); lists and caches filled in {synced_in:?}",
        (after - before) as f64 / (1 << 20) as f64
    );
    // Measured: 318 B per pod (median of 23 runs, `cargo bench --bench watch --
    // memory/run_watch_caches_100k`, perf/bench-watch.txt); 600 B leaves room for noise.
    assert!(per_pod < 600.0, "{per_pod:.0} bytes per pod");
    running.stop().await.unwrap();
}

//! Writes in parallel: with a server that takes time to answer, the writes of different services
//! (and of one step of one sync) are in flight together, never more than the workers allow, and
//! the cluster ends as a reconcile of it would leave it. One worker keeps every write alone.

use std::time::{Duration, Instant};

use serde_json::Value;
use sliced::kube::run::RunOptions;

use super::set_ready;
use crate::fake_api::FakeApiServer;
use crate::run_harness::{assert_matches_reconcile, node, options, pod, service, settle, start};

/// `services` services of `pods` ready pods each, on two nodes.
fn services_cluster(services: usize, pods: usize) -> FakeApiServer {
    let fake = FakeApiServer::new();
    fake.create(node("n1", "zone-a")).unwrap();
    fake.create(node("n2", "zone-b")).unwrap();
    let mut objects = Vec::new();
    for s in 0..services {
        let name = format!("svc-{s}");
        objects.push(service("default", &name, &name));
        for p in 0..pods {
            let ip = format!("10.{}.{}.{}", 1 + s / 250, s % 250, 1 + p);
            let node = if p % 2 == 0 { "n1" } else { "n2" };
            objects.push(pod(
                "default",
                &format!("{name}-{p}"),
                &name,
                node,
                &ip,
                true,
            ));
        }
    }
    fake.create_many(objects).unwrap();
    fake
}

fn with_workers(workers: usize) -> RunOptions {
    let mut options = options();
    options.engine.workers = workers;
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_different_services_go_out_together_within_the_workers() {
    let fake = services_cluster(12, 3);
    let running = start(&fake, with_workers(4));
    settle(&fake, &running).await;
    fake.set_write_latency(Duration::from_millis(40));
    for s in 0..12 {
        set_ready(&fake, &format!("svc-{s}-0"), false);
    }
    settle(&fake, &running).await;
    assert_matches_reconcile(&fake);
    let most = fake.most_endpoint_writes_in_flight();
    assert!(
        (2..=4).contains(&most),
        "{most} writes in flight at once; expected more than one and at most the 4 workers"
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_sends_one_write_at_a_time() {
    let fake = services_cluster(6, 3);
    let running = start(&fake, with_workers(1));
    settle(&fake, &running).await;
    fake.set_write_latency(Duration::from_millis(10));
    for s in 0..6 {
        set_ready(&fake, &format!("svc-{s}-0"), false);
    }
    settle(&fake, &running).await;
    assert_matches_reconcile(&fake);
    assert_eq!(fake.most_endpoint_writes_in_flight(), 1);
    running.stop().await.unwrap();
}

/// A Deployment's rolling update (maxSurge and maxUnavailable 25%) of one service's `pods` pods:
/// in four rounds, a quarter of new pods is created not ready, made ready, and as many old pods
/// deleted.
async fn rolling_update(pods: usize, workers: usize, latency: Duration) -> RollingUpdate {
    let fake = FakeApiServer::new();
    let nodes = 20;
    for n in 0..nodes {
        fake.create(node(&format!("n{n}"), &format!("zone-{}", n % 3)))
            .unwrap();
    }
    fake.create(service("default", "web", "web")).unwrap();
    let ip = |generation: usize, i: usize| format!("10.{}.{}.{}", generation, i / 250, 1 + i % 250);
    let old: Vec<Value> = (0..pods)
        .map(|i| {
            let node = format!("n{}", i % nodes);
            pod(
                "default",
                &format!("web-a-{i}"),
                "web",
                &node,
                &ip(1, i),
                true,
            )
        })
        .collect();
    fake.create_many(old).unwrap();
    let running = start(&fake, with_workers(workers));
    settle(&fake, &running).await;
    fake.set_write_latency(latency);
    let written = || fake.writes("endpointslices") + fake.writes("endpoints");
    let before = written();

    let started = Instant::now();
    let quarter = pods.div_ceil(4);
    for round in 0..4 {
        let range = round * quarter..((round + 1) * quarter).min(pods);
        let new: Vec<Value> = range
            .clone()
            .map(|i| {
                let node = format!("n{}", i % nodes);
                pod(
                    "default",
                    &format!("web-b-{i}"),
                    "web",
                    &node,
                    &ip(2, i),
                    false,
                )
            })
            .collect();
        fake.create_many(new).unwrap();
        // The kubelet's turn: the pods start, and their readiness probes pass.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for i in range.clone() {
            set_ready(&fake, &format!("web-b-{i}"), true);
        }
        for i in range {
            fake.delete("pods", "default", &format!("web-a-{i}"))
                .unwrap();
        }
    }
    let changed = started.elapsed();
    // The last write the update caused: polled until the run is idle and the server quiet.
    let mut last = (written(), started.elapsed());
    let mut quiet_since = Instant::now();
    while !(running.state.engine.is_idle() && quiet_since.elapsed() > Duration::from_millis(500)) {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = written();
        if now != last.0 {
            last = (now, started.elapsed());
            quiet_since = Instant::now();
        }
    }
    settle(&fake, &running).await;
    assert_matches_reconcile(&fake);
    running.stop().await.unwrap();
    RollingUpdate {
        changed,
        written: last.1,
        writes: last.0 - before,
    }
}

/// Times from the first change of a rolling update.
struct RollingUpdate {
    /// Until the last pod change was made.
    changed: Duration,
    /// Until the last write of a slice or Endpoints it caused.
    written: Duration,
    writes: usize,
}

/// Issue 14's measure (`perf/rolling-update-writes.sh` runs it): the rolling update of a 5,000-pod
/// service (`SLICED_ROLLING_PODS`) against a server that answers each write 5 ms late, one write
/// at a time against five, in one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measure: run by perf/rolling-update-writes.sh"]
async fn rolling_update_of_a_large_service_serial_against_parallel() {
    let pods = std::env::var("SLICED_ROLLING_PODS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5_000);
    for (workers, latency) in [(1, 5), (5, 5), (1, 5), (5, 5), (1, 0), (5, 0)] {
        let latency = Duration::from_millis(latency);
        let update = rolling_update(pods, workers, latency).await;
        println!(
            "rolling update of {pods} pods, {latency:?} a write, {workers} worker(s): \
             changes made in {:.3} s, written in {:.3} s, {} writes",
            update.changed.as_secs_f64(),
            update.written.as_secs_f64(),
            update.writes
        );
    }
}

/// The measure above, small enough for every run: the cluster ends right either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_ends_right_with_one_worker_or_five() {
    for workers in [1, 5] {
        let update = rolling_update(400, workers, Duration::from_millis(1)).await;
        assert!(update.writes > 0);
    }
}

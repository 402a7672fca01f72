//! `sliced run` against a hostile or absent API server: a lease at the largest transitions count,
//! a server that accepts connections and never answers, a leader whose lease requests hang.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use sliced::kube::run::{RunError, RunOptions};

use super::small_cluster;
use crate::run_harness::{Running, lease, options, settle, start, start_with_client};

async fn gate_opens(running: &Running, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while !running.state.gate.is_open() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_at_the_largest_transitions_count_is_taken_over_without_overflow() {
    let fake = small_cluster();
    // Its holder is gone: it never renews, and the lease lasts one second.
    fake.create(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"namespace": "kube-system", "name": "sliced"},
        "spec": {
            "holderIdentity": "gone", "leaseDurationSeconds": 1,
            "leaseTransitions": i32::MAX,
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "renewTime": "2026-01-01T00:00:00.000000Z"
        }
    }))
    .unwrap();
    let running = start(
        &fake,
        RunOptions {
            leader_election: Some(lease("new")),
            ..options()
        },
    );
    assert!(
        gate_opens(&running, Duration::from_secs(10)).await,
        "the expired lease was never taken over: {:?}",
        fake.get("leases", "kube-system", "sliced")
    );
    let held = fake.get("leases", "kube-system", "sliced").unwrap();
    assert_eq!(held["spec"]["holderIdentity"], "new");
    assert_eq!(held["spec"]["leaseTransitions"], i32::MAX, "{held}");
    settle(&fake, &running).await;
    running.stop().await.unwrap();
}

/// A server that accepts every connection and never answers; counts the connections.
fn silent_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (url, connections)
}

fn client_for(url: &str) -> kube::Client {
    let config = kube::Config::new(url.parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_api_server_gets_requests_timed_out_and_a_prompt_stop() {
    let (url, connections) = silent_server();
    let running = start_with_client(
        client_for(&url),
        RunOptions {
            leader_election: Some(lease("me")),
            request_timeout: Duration::from_millis(300),
            ..options()
        },
    );
    // Five watches and the lease hold one request each; unanswered requests are given up and
    // sent again after a backoff, on new connections.
    let deadline = Instant::now() + Duration::from_secs(10);
    while connections.load(Ordering::SeqCst) < 12 {
        assert!(
            Instant::now() < deadline,
            "requests were not retried: {} connections",
            connections.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!running.state.gate.is_open());
    // It never held the lease: nothing to release, nothing to wait for.
    let asked = Instant::now();
    let stopped = running.stop_within(Duration::from_secs(2)).await;
    let summary = stopped
        .expect("run did not stop within 2 s")
        .expect("a clean stop");
    assert!(!summary.led);
    assert!(asked.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_requests_hang_stops_writing_within_its_renew_deadline() {
    let fake = small_cluster();
    let running = start(
        &fake,
        RunOptions {
            leader_election: Some(lease("me")),
            ..options()
        },
    );
    settle(&fake, &running).await;
    assert!(running.state.gate.is_open());
    fake.hang("/leases");
    let hung = Instant::now();
    let gate = running.state.gate.clone();
    // Renew deadline 2 s; then the release is bounded by one lease request (1 s).
    let ended = running.ends_within(Duration::from_secs(8)).await;
    assert!(!gate.is_open());
    match ended {
        Some(Err(RunError::Lease(_))) => {}
        other => panic!("expected the lease lost, got {other:?}"),
    }
    assert!(
        hung.elapsed() < Duration::from_secs(6),
        "{:?} from the hang to the end",
        hung.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_while_its_lease_requests_hang_stops_within_a_bound() {
    let fake = small_cluster();
    let running = start(
        &fake,
        RunOptions {
            leader_election: Some(lease("me")),
            ..options()
        },
    );
    settle(&fake, &running).await;
    fake.hang("/leases");
    let asked = Instant::now();
    // The release gets one lease request timeout (1 s here), then is left to expire.
    let stopped = running.stop_within(Duration::from_secs(4)).await;
    assert!(stopped.is_some(), "no stop within 4 s");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
}

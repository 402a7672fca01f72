//! `sliced_watch_restarts_total`: one restart per watch per outage of the API server, whether the
//! watch relists or resumes where it was.

use std::time::{Duration, Instant};

use crate::fake_api::FakeApiServer;
use crate::run_harness::{node, options, pod, service, settle, start_serving};

/// Resource, and the kind as the metric labels it.
const KINDS: [(&str, &str); 5] = [
    ("nodes", "Node"),
    ("services", "Service"),
    ("pods", "Pod"),
    ("endpointslices", "EndpointSlice"),
    ("endpoints", "Endpoints"),
];

async fn restarts(address: std::net::SocketAddr) -> Vec<f64> {
    let mut out = Vec::new();
    for (_, kind) in KINDS {
        let series = format!("sliced_watch_restarts_total{{kind=\"{kind}\"}}");
        out.push(super::scraped(address, &series).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watch_counts_one_restart_when_the_api_server_goes_away() {
    let fake = FakeApiServer::new();
    fake.create(node("n1", "zone-a")).unwrap();
    fake.create(service("default", "web", "web")).unwrap();
    fake.create(pod("default", "web-0", "web", "n1", "10.0.0.1", true))
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let running = start_serving(&fake, options(), Some(listener));
    settle(&fake, &running).await;
    assert_eq!(restarts(address).await, vec![0.0; KINDS.len()]);

    // The server goes away: every watch ends, and its next attempts to list fail for a while.
    for (resource, _) in KINDS {
        fake.fail_next("list", resource, 503, 2);
    }
    fake.expire_watches();
    let start = Instant::now();
    while restarts(address).await != vec![1.0; KINDS.len()] {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "restarts per kind {KINDS:?}: {:?}",
            restarts(address).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    settle(&fake, &running).await;
    assert_eq!(restarts(address).await, vec![1.0; KINDS.len()]);
    running.stop().await.unwrap();
}

/// Lists sent so far, per kind.
fn lists(fake: &FakeApiServer) -> Vec<usize> {
    KINDS.iter().map(|(r, _)| fake.count("list", r)).collect()
}

/// Waits until every kind's restarts read `want`.
async fn restarts_reach(address: std::net::SocketAddr, want: f64) {
    let start = Instant::now();
    while restarts(address).await != vec![want; KINDS.len()] {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "restarts per kind {KINDS:?}: {:?}, want {want} each",
            restarts(address).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A kube-apiserver restart that the watches ride out at the same resourceVersion: every stream
/// ends early, the resumes fail while the server is down, then resume where they were, with no
/// relist. Each outage is one restart per kind, the second too, though on quiet kinds no event
/// arrived between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watch_counts_a_restart_per_outage_when_it_resumes_without_a_relist() {
    let fake = FakeApiServer::new();
    fake.create(node("n1", "zone-a")).unwrap();
    fake.create(service("default", "web", "web")).unwrap();
    fake.create(pod("default", "web-0", "web", "n1", "10.0.0.1", true))
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let running = start_serving(&fake, options(), Some(listener));
    settle(&fake, &running).await;
    assert_eq!(restarts(address).await, vec![0.0; KINDS.len()]);
    let listed = lists(&fake);

    // The server goes away: its watches end, and the first attempts to watch again are refused.
    for (resource, _) in KINDS {
        fake.fail_next("watch", resource, 503, 2);
    }
    fake.drop_watches();
    // Meanwhile a pod comes: the resumed watch delivers it.
    fake.create(pod("default", "web-1", "web", "n1", "10.0.0.2", true))
        .unwrap();
    restarts_reach(address, 1.0).await;
    // The resumed watch may deliver the pod after the engine has been quiet a while (a loaded
    // machine): wait for it, or settling could end before there is anything to settle.
    let start = Instant::now();
    while running
        .state
        .engine
        .index()
        .pods()
        .get("default", "web-1")
        .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the resumed pod watch did not deliver web-1"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle(&fake, &running).await;
    super::assert_matches_reconcile(&fake);
    assert_eq!(super::ready_count(&super::slices_of(&fake, "web")), 2);

    // A second outage, cut and resumed at once (another server behind the same address), after
    // the watches worked again (the fake sends a bookmark every second).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fake.drop_watches();
    restarts_reach(address, 2.0).await;
    settle(&fake, &running).await;
    assert_eq!(
        lists(&fake),
        listed,
        "a watch relisted though it could resume"
    );
    assert_eq!(restarts(address).await, vec![2.0; KINDS.len()]);
    running.stop().await.unwrap();
}

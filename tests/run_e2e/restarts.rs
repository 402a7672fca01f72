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
        out.push(crate::scraped(address, &series).await);
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

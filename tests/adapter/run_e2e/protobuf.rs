//! The watches of pods, nodes, EndpointSlices and Endpoints ask for protobuf, and the fake API
//! server serves it (as the real one serves client-go's controllers); every other `run_e2e` test
//! runs over it. A server that answers in JSON is read as JSON.

use std::time::{Duration, Instant};

use super::{set_ready, slices_of, small_cluster};
use crate::fake_api::FakeApiServer;
use crate::run_harness::{assert_matches_reconcile, options, pod, settle, start};

/// Pods added, made ready, deleted; a node moved to another zone; a slice edited and an
/// Endpoints object deleted by someone else; the watches dropped and expired (a resume, and a
/// relist after a 410 in the middle of a protobuf stream).
async fn a_day_of_pods(fake: &FakeApiServer) {
    let running = start(fake, options());
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    set_ready(fake, "web-3", true);
    fake.delete("pods", "default", "web-0").unwrap();
    fake.create(pod("default", "web-9", "web", "n1", "10.0.0.9", false))
        .unwrap();
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    fake.drop_watches();
    set_ready(fake, "web-9", true);
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    // The node's new zone reaches the slices only through the node watch.
    let mut n2 = fake.get("nodes", "", "n2").unwrap();
    n2["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-c".into();
    fake.apply(n2).unwrap();
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    assert!(
        slices_of(fake, "web")[0]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["zone"] == "zone-c"),
        "the zone came through the node watch"
    );
    // Others' edit and deletion reach the engine only through the slice and Endpoints watches.
    // (An Endpoints object edited by others waits for the resync, as upstream's does.)
    let mut slice = slices_of(fake, "web").remove(0);
    slice["endpoints"] = serde_json::json!([]);
    fake.apply(slice).unwrap();
    fake.delete("endpoints", "default", "web").unwrap();
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    fake.expire_watches();
    fake.delete("pods", "default", "web-1").unwrap();
    // The relist after the 410 may deliver the deletion after the engine has been quiet a while
    // (a loaded machine): wait for it, or settling could end before there is anything to settle.
    let since = Instant::now();
    let index = running.state.engine.index();
    while index.pods().get("default", "web-1").is_some() {
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "the relisted pod watch did not deliver the deletion of web-1"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    assert_eq!(slices_of(fake, "web").len(), 1);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_nodes_slices_and_endpoints_are_watched_as_protobuf() {
    let fake = small_cluster();
    a_day_of_pods(&fake).await;
    // Of each kind: the first list, a resumed watch, a relist and its watch at least.
    for kind in ["pods", "nodes", "endpointslices", "endpoints"] {
        let answers = fake.protobuf_answers_of(kind);
        assert!(answers >= 4, "{answers} answers of {kind} as protobuf");
    }
    assert_eq!(
        fake.protobuf_answers_of("services"),
        0,
        "kube-rs reads JSON"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_in_json_is_read_as_json() {
    let fake = small_cluster();
    fake.serve_json_only();
    a_day_of_pods(&fake).await;
    assert_eq!(fake.protobuf_answers(), 0);
}

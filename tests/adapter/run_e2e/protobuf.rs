//! The pod watch asks for protobuf, and the fake API server serves it (as the real one serves
//! client-go's controllers); every other `run_e2e` test runs over it. A server that answers in JSON
//! is read as JSON.

use super::{set_ready, slices_of, small_cluster};
use crate::fake_api::FakeApiServer;
use crate::run_harness::{assert_matches_reconcile, options, pod, settle, start};

/// Pods added, made ready, deleted, and the watches dropped and expired (a resume, and a relist
/// after a 410 in the middle of a protobuf stream).
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
    fake.expire_watches();
    fake.delete("pods", "default", "web-1").unwrap();
    settle(fake, &running).await;
    assert_matches_reconcile(fake);
    assert_eq!(slices_of(fake, "web").len(), 1);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_watched_as_protobuf() {
    let fake = small_cluster();
    a_day_of_pods(&fake).await;
    // The first list, a resumed watch, a relist and its watch at least.
    assert!(
        fake.protobuf_answers() >= 4,
        "{} answers as protobuf",
        fake.protobuf_answers()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answers_in_json_is_read_as_json() {
    let fake = small_cluster();
    fake.serve_json_only();
    a_day_of_pods(&fake).await;
    assert_eq!(fake.protobuf_answers(), 0);
}

//! Deleting a Service: sliced sends at most one DELETE of its Endpoints, and none when it has seen
//! them go before its sync ran (kube-apiserver deletes a Service's Endpoints with it).

use std::time::{Duration, Instant};

use serde_json::json;
use sliced::index::ServiceKey;
use sliced::kube::run::RunOptions;

use super::{add_api_service, slices_of, small_cluster};
use crate::fake_api::{FakeApiServer, RequestRecord};
use crate::run_harness::{assert_matches_reconcile, lease, options, settle, settle_standby, start};

/// The requests that wrote (or tried to) the Endpoints `default/name`.
fn endpoints_writes(fake: &FakeApiServer, name: &str) -> Vec<RequestRecord> {
    fake.requests()
        .into_iter()
        .filter(|r| r.resource == "endpoints" && r.name == name)
        .filter(|r| !matches!(r.verb, "get" | "list" | "watch"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_the_api_server_left_behind_are_deleted_once() {
    let fake = small_cluster();
    add_api_service(&fake);
    fake.keep_endpoints_of_deleted_services();
    let running = start(&fake, options());
    settle(&fake, &running).await;
    let api_endpoints = fake.get("endpoints", "default", "api");
    fake.clear_requests();

    fake.delete("services", "default", "web").unwrap();
    // Not read here that the Endpoints stayed: sliced may delete them before this thread gets
    // the store's lock again. The DELETE's 200 says they were there when it came.
    settle(&fake, &running).await;
    let writes = endpoints_writes(&fake, "web");
    assert!(
        writes.len() == 1 && writes[0].verb == "delete" && writes[0].code == 200,
        "one DELETE of the Endpoints, and nothing else: {writes:?}"
    );
    assert!(fake.get("endpoints", "default", "web").is_none());
    assert!(slices_of(&fake, "web").is_empty());
    assert_eq!(fake.get("endpoints", "default", "api"), api_endpoints);
    assert_matches_reconcile(&fake);
    running.stop().await.unwrap();
}

/// A replica that does not lead sees the Service and its Endpoints go; when it takes over, the
/// sync of the deleted Service has nothing to delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_seen_gone_before_the_sync_get_no_delete() {
    let fake = small_cluster();
    add_api_service(&fake);
    let writer = start(&fake, options());
    settle(&fake, &writer).await;
    writer.stop().await.unwrap();

    // Someone else leads, for as long as it likes.
    fake.create(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"namespace": "kube-system", "name": "sliced"},
        "spec": {"holderIdentity": "another", "leaseDurationSeconds": 3600,
                 "renewTime": "2026-01-01T00:00:00.000000Z"}
    }))
    .unwrap();
    let standby = start(
        &fake,
        RunOptions {
            leader_election: Some(lease("standby")),
            ..options()
        },
    );
    settle_standby(&fake, &standby).await;
    assert!(!standby.state.gate.is_open());
    fake.clear_requests();

    fake.delete("services", "default", "web").unwrap();
    assert!(fake.get("endpoints", "default", "web").is_none());
    let engine = &standby.state.engine;
    let key = ServiceKey::new("default", "web");
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.index().services().get("default", "web").is_some()
        || engine.stored_endpoints(&key).is_some()
    {
        assert!(
            Instant::now() < deadline,
            "the standby never saw the deletions"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The leader goes; the standby takes over and syncs what it queued meanwhile.
    fake.delete("leases", "kube-system", "sliced").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !standby.state.gate.is_open() {
        assert!(Instant::now() < deadline, "the standby never took over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle(&fake, &standby).await;
    assert_eq!(endpoints_writes(&fake, "web"), []);
    assert!(fake.get("endpoints", "default", "web").is_none());
    assert_matches_reconcile(&fake);
    standby.stop().await.unwrap();
}

//! Switching over from kube-controller-manager: a cluster as kube-controller-manager 1.36 wrote it
//! (`fixtures/upstream-1.36/cluster.json`) gets no difference from a shadow and no write from
//! sliced; shadows started before or after churn settle to no difference.

use std::time::{Duration, Instant};

use serde_json::Value;
use sliced::kube::run::RunOptions;
use sliced::sink::Kind;

use crate::fake_api::FakeApiServer;
use crate::run_harness::{Running, options, settle, start};

/// Loads the fixture into the fake API server, uids kept (upstream's order of Endpoints subsets
/// hashes the pods' uids), and the terminating pod deleted again (a create clears deletion).
fn upstream_cluster() -> FakeApiServer {
    let text = std::fs::read_to_string("fixtures/upstream-1.36/cluster.json").unwrap();
    let list: Value = serde_json::from_str(&text).unwrap();
    let items = list["items"].as_array().unwrap();
    let fake = FakeApiServer::new();
    fake.keep_given_uids();
    // Owners and targets before the objects that refer to them.
    let rank = |o: &Value| match o["kind"].as_str() {
        Some("Node" | "Service" | "Pod") => 0,
        Some("Endpoints") => 1,
        _ => 2,
    };
    let mut ordered: Vec<&Value> = items.iter().collect();
    ordered.sort_by_key(|o| rank(o));
    for item in ordered {
        let mut object = item.clone();
        let meta = object["metadata"].as_object_mut().unwrap();
        for field in ["resourceVersion", "creationTimestamp", "generation"] {
            meta.remove(field);
        }
        fake.create(object).unwrap();
    }
    for item in items {
        let meta = &item["metadata"];
        if item["kind"] == "Pod" && meta["deletionTimestamp"].is_string() {
            let (namespace, name) = (meta["namespace"].as_str(), meta["name"].as_str());
            fake.delete("pods", namespace.unwrap(), name.unwrap())
                .unwrap();
        }
    }
    fake
}

fn shadow(fake: &FakeApiServer) -> Running {
    start(
        fake,
        RunOptions {
            dry_run: true,
            ..options()
        },
    )
}

fn differences(running: &Running) -> (usize, usize) {
    let summary = running.state.dry_run.as_ref().unwrap().summary();
    (
        summary.objects_of(Kind::EndpointSlice),
        summary.objects_of(Kind::Endpoints),
    )
}

/// Waits (at most `within`) for the shadow to report no difference; the differences left if not.
async fn settles_to_zero(running: &Running, within: Duration) -> (usize, usize) {
    let start = Instant::now();
    loop {
        let left = differences(running);
        if left == (0, 0) || start.elapsed() > within {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_kube_controller_manager_wrote_is_taken_over_with_no_write() {
    let fake = upstream_cluster();
    let writes_before = fake.writes("endpointslices") + fake.writes("endpoints");

    let looking = shadow(&fake);
    settle(&fake, &looking).await;
    assert_eq!(
        differences(&looking),
        (0, 0),
        "the shadow beside upstream: {:#?}",
        looking.state.engine.check_all()
    );
    looking.stop().await.unwrap();

    let live = start(&fake, options());
    settle(&fake, &live).await;
    let writes = fake.writes("endpointslices") + fake.writes("endpoints") - writes_before;
    let sent: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.verb != "get" && r.verb != "list" && r.verb != "watch")
        .map(|r| format!("{r:?}"))
        .collect();
    assert_eq!(writes, 0, "sliced taking over wrote: {sent:#?}");
    live.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadows_old_and_new_settle_to_no_difference_after_churn() {
    let fake = upstream_cluster();
    // Started at rest, it stays up through the churn below.
    let long_running = shadow(&fake);
    settle(&fake, &long_running).await;
    assert_eq!(differences(&long_running), (0, 0));

    // Churn, with sliced live as the writer: a pod not ready, a pod gone, a pod added, a Service
    // deleted with its Endpoints.
    let live = start(&fake, options());
    settle(&fake, &live).await;
    let mut pod = fake.get("pods", "ref-web", "api-03").unwrap();
    pod["status"]["conditions"] = serde_json::json!([{"type": "Ready", "status": "False"}]);
    fake.apply(pod).unwrap();
    fake.delete("pods", "ref-db", "cache-0").unwrap();
    let mut added = fake.get("pods", "ref-web", "dual-0").unwrap();
    added["metadata"]["name"] = Value::from("dual-extra");
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        added["metadata"].as_object_mut().unwrap().remove(field);
    }
    added["status"]["podIP"] = Value::from("10.244.16.250");
    added["status"]["podIPs"] =
        serde_json::json!([{"ip": "10.244.16.250"}, {"ip": "fd00:10:244::250"}]);
    fake.create(added).unwrap();
    fake.delete("services", "ref-db", "raft").unwrap();
    settle(&fake, &live).await;
    live.stop().await.unwrap();

    // The old shadow saw each change before the writer fixed it; once the cluster holds the fix,
    // its report empties within a batch period (0 here) and a margin for the watch.
    let left = settles_to_zero(&long_running, Duration::from_secs(2)).await;
    assert_eq!(left, (0, 0), "differences the long-running shadow keeps");
    long_running.stop().await.unwrap();

    let fresh = shadow(&fake);
    settle(&fake, &fresh).await;
    assert_eq!(
        differences(&fresh),
        (0, 0),
        "a fresh shadow after the churn"
    );
    fresh.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_service_costs_at_most_one_delete_of_its_endpoints() {
    let fake = upstream_cluster();
    let live = start(&fake, options());
    settle(&fake, &live).await;
    fake.clear_requests();
    for name in ["pg", "raft", "cache"] {
        fake.delete("services", "ref-db", name).unwrap();
    }
    settle(&fake, &live).await;
    let deletes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.verb == "delete" && r.resource == "endpoints")
        .collect();
    // The API server deleted each Endpoints with its Service; sliced deletes one only if its sync
    // ran before the watch showed that, and never twice.
    for name in ["pg", "raft", "cache"] {
        let n = deletes.iter().filter(|r| r.name == name).count();
        assert!(n <= 1, "{n} deletes of ref-db/{name}: {deletes:?}");
        assert!(fake.get("endpoints", "ref-db", name).is_none());
    }
    live.stop().await.unwrap();
}

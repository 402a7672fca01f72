//! `sliced run --record-trace`: a trace recorded against the fake API server replays, through
//! `sliced simulate --events`, the library's `replay` and `sliced tune --events`, to the same
//! EndpointSlices and Endpoints the run left in the fake, compared by content (slice names are
//! generated, and differ).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sliced::controllers::Controllers;
use sliced::engine::EngineOptions;
use sliced::kube::convert::object_to_json;
use sliced::kube::trace_file::load_trace_file;
use sliced::kube::trace_record::{Limits, RecordTrace};
use sliced::replay::{ReplayOptions, replay};
use sliced::sink::Object;

use super::set_ready;
use crate::fake_api::FakeApiServer;
use crate::run_harness::{self, node, options, pod, service, settle, start};

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sliced-record-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A pod whose container port 8080 is named `http`.
fn named_pod(namespace: &str, name: &str, app: &str, node: &str, ip: &str, ready: bool) -> Value {
    let mut p = pod(namespace, name, app, node, ip, ready);
    p["spec"]["containers"][0]["ports"][0]["name"] = json!("http");
    p
}

/// Nodes in two zones; `web` (numeric targetPort), `api` (targetPort named `http`), `db`
/// (headless); a Service without selector whose Endpoints someone wrote (mirrored), and a slice
/// another controller manages.
fn cluster() -> FakeApiServer {
    let fake = FakeApiServer::new();
    for (n, zone) in [("n1", "zone-a"), ("n2", "zone-b"), ("n3", "zone-b")] {
        fake.create(node(n, zone)).unwrap();
    }
    fake.create(service("default", "web", "web")).unwrap();
    let mut api = service("default", "api", "api");
    api["spec"]["ports"][0]["targetPort"] = json!("http");
    api["spec"]["clusterIP"] = json!("10.96.0.11");
    api["spec"]["clusterIPs"] = json!(["10.96.0.11"]);
    fake.create(api).unwrap();
    let mut db = service("default", "db", "db");
    db["spec"]["clusterIP"] = json!("None");
    db["spec"]["clusterIPs"] = json!(["None"]);
    fake.create(db).unwrap();
    let nodes = ["n1", "n2", "n3"];
    for i in 0..6 {
        let ip = format!("10.0.0.{}", i + 1);
        fake.create(pod(
            "default",
            &format!("web-{i}"),
            "web",
            nodes[i % 3],
            &ip,
            i != 4,
        ))
        .unwrap();
        let ip = format!("10.0.1.{}", i + 1);
        fake.create(named_pod(
            "default",
            &format!("api-{i}"),
            "api",
            nodes[i % 3],
            &ip,
            i != 1,
        ))
        .unwrap();
    }
    for (i, on) in nodes.into_iter().enumerate() {
        let ip = format!("10.0.2.{}", i + 1);
        let mut p = pod("default", &format!("db-{i}"), "db", on, &ip, true);
        p["spec"]["hostname"] = json!(format!("db-{i}"));
        p["spec"]["subdomain"] = json!("db");
        fake.create(p).unwrap();
    }
    let mut legacy = service("default", "legacy", "none");
    legacy["spec"].as_object_mut().unwrap().remove("selector");
    legacy["spec"]["clusterIP"] = json!("10.96.0.12");
    legacy["spec"]["clusterIPs"] = json!(["10.96.0.12"]);
    fake.create(legacy).unwrap();
    fake.create(json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"namespace": "default", "name": "legacy"},
        "subsets": [{"addresses": [{"ip": "192.168.0.1"}, {"ip": "192.168.0.2"}],
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]
    }))
    .unwrap();
    fake.create(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "legacy-external",
                     "labels": {"kubernetes.io/service-name": "legacy",
                                "endpointslice.kubernetes.io/managed-by": "example.com/other"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["192.168.9.9"], "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]
    }))
    .unwrap();
    fake
}

/// What changes once the run has settled: readiness both ways, a pod deleted and one added, a
/// label moved from one Service's pods to another's, a node deleted with its pods, a Service's
/// port edited.
async fn churn(fake: &FakeApiServer, running: &crate::run_harness::Running) {
    set_ready(fake, "web-4", true);
    set_ready(fake, "web-0", false);
    set_ready(fake, "api-1", true);
    fake.delete("pods", "default", "web-1").unwrap();
    fake.create(pod("default", "web-9", "web", "n1", "10.0.0.9", true))
        .unwrap();
    settle(fake, running).await;
    let mut moved = fake.get("pods", "default", "api-4").unwrap();
    moved["metadata"]["labels"]["app"] = json!("web");
    fake.apply(moved).unwrap();
    for p in ["web-2", "web-5", "api-2", "api-5", "db-2"] {
        // The pods of n3, as the pod garbage collector removes them after the node.
        if fake.get("pods", "default", p).unwrap()["spec"]["nodeName"] == "n3" {
            fake.delete("pods", "default", p).unwrap();
        }
    }
    fake.delete("nodes", "", "n3").unwrap();
    let mut web = fake.get("services", "default", "web").unwrap();
    web["spec"]["ports"] = json!([
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
        {"name": "admin", "port": 9000, "targetPort": 9000, "protocol": "TCP"}
    ]);
    fake.apply(web).unwrap();
    settle(fake, running).await;
}

/// Slices by service, address type, ports and manager, with their endpoints sorted; Endpoints by
/// name with their subsets. Names, resourceVersions and trigger times are left out.
fn content(objects: impl IntoIterator<Item = Value>) -> BTreeMap<String, Vec<String>> {
    let (endpoints, slices): (Vec<Value>, Vec<Value>) =
        (objects.into_iter()).partition(|o| o["kind"] == "Endpoints" || o.get("subsets").is_some());
    let mut out = run_harness::endpoints_by_service(&slices);
    for o in endpoints {
        let meta = &o["metadata"];
        let key = format!("Endpoints {}/{}", meta["namespace"], meta["name"]);
        out.entry(key).or_default().push(o["subsets"].to_string());
    }
    out
}

fn in_fake(fake: &FakeApiServer) -> BTreeMap<String, Vec<String>> {
    let mut objects = fake.list("endpointslices", "");
    for mut e in fake.list("endpoints", "") {
        e["kind"] = json!("Endpoints");
        objects.push(e);
    }
    content(objects)
}

fn replayed(objects: &[Object]) -> BTreeMap<String, Vec<String>> {
    content(objects.iter().map(|o| object_to_json(o).unwrap()))
}

fn sliced(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sliced {args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("sliced {args:?}: {e}"))
}

/// The run's controllers, as the replay runs them (`options()` runs all four; the service
/// controller has nothing to do without LoadBalancer Services).
fn replay_options(controllers: Controllers) -> ReplayOptions {
    ReplayOptions {
        engine: EngineOptions {
            controllers,
            workers: 2,
            check_invariants: true,
            ..EngineOptions::default()
        },
        ..ReplayOptions::default()
    }
}

async fn record(fake: &FakeApiServer, path: &Path, limits: Limits) {
    let mut opts = options();
    opts.record_trace = Some(RecordTrace {
        path: path.to_owned(),
        limits,
    });
    let running = start(fake, opts);
    settle(fake, &running).await;
    churn(fake, &running).await;
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_trace_replays_to_the_objects_the_run_left() {
    let dir = temp_dir("replay");
    let path = dir.join("trace.yaml");
    let fake = cluster();
    record(&fake, &path, Limits::default()).await;
    let want = in_fake(&fake);
    assert!(want.keys().any(|k| k.contains("\"api\"")), "{want:#?}");
    assert!(
        want.keys().any(|k| k.contains("example.com/other")),
        "{want:#?}"
    );
    assert!(
        want.keys().any(|k| k.contains("endpointslicemirroring")),
        "{want:#?}"
    );

    // No echo of sliced's own writes was recorded: the only slice applied is the foreign one,
    // the only Endpoints the hand-written one.
    let text = std::fs::read_to_string(&path).unwrap();
    let applied = |kind: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("\"kind\":\"{kind}\"")) && l.contains("\"apply\""))
            .count()
    };
    assert_eq!(applied("EndpointSlice"), 1, "{text}");
    assert_eq!(applied("Endpoints"), 1, "{text}");
    assert!(
        text.lines().all(|l| l.starts_with("- {\"at\":\"")),
        "{text}"
    );

    // The library's replay, with the run's controllers.
    let steps = load_trace_file(&path).unwrap().steps;
    let result = replay(&steps, &replay_options(Controllers::ALL));
    assert_eq!(result.stats.invariant_violations, 0);
    assert_eq!(replayed(&result.objects), want);

    // `sliced simulate --events`, as a user runs it.
    let path_text = path.to_str().unwrap();
    let out = sliced(&["simulate", "--events", path_text, "-o", "json"]);
    let objects = out["objects"].as_array().unwrap().clone();
    assert_eq!(content(objects), want);

    // `sliced tune --events` replays it with the EndpointSlice controller alone: the same
    // writes and syncs as the library's replay under tune's settings, and that replay leaves
    // the run's slices.
    let tune = sliced(&[
        "tune",
        "--events",
        path_text,
        "--batch-period",
        "0s",
        "-o",
        "json",
    ]);
    let row = &tune["settings"][0];
    let mut options = replay_options(Controllers::ENDPOINTSLICE);
    options.engine.check_invariants = false;
    options.engine.mirroring.max_endpoints_per_subset = 1000;
    let alone = replay(&steps, &options);
    let slice_writes = alone
        .writes
        .iter()
        .filter(|w| matches!(w.object, Object::EndpointSlice(_)))
        .count();
    assert!(slice_writes > 0);
    assert_eq!(row["writes"], json!(slice_writes), "{tune}");
    assert_eq!(row["syncs"], json!(alone.stats.syncs), "{tune}");
    let slices_only = |m: &BTreeMap<String, Vec<String>>| -> BTreeMap<String, Vec<String>> {
        m.iter()
            .filter(|(k, _)| {
                k.contains("endpointslice-controller.k8s.io") || k.contains("example.com")
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(slices_only(&replayed(&alone.objects)), slices_only(&want));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rotated_file_replays_alone_and_only_so_many_are_kept() {
    let dir = temp_dir("rotate");
    let path = dir.join("trace.yaml");
    let fake = cluster();
    let limits = Limits {
        max_size: 8 << 10,
        max_files: 3,
    };
    record(&fake, &path, limits).await;
    let rotated = |n: usize| dir.join(format!("trace.yaml.{n}"));
    assert!(rotated(1).exists() && rotated(2).exists(), "no rotation");
    assert!(!rotated(3).exists(), "more than three files kept");
    let names = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(names, 3);

    // The newest file alone: the state it starts with, then the steps since.
    let steps = load_trace_file(&path).unwrap().steps;
    let result = replay(&steps, &replay_options(Controllers::ALL));
    assert_eq!(result.stats.invariant_violations, 0);
    assert_eq!(replayed(&result.objects), in_fake(&fake));
    // And the one before it: it replays alone too (to the state of its own end).
    let older = load_trace_file(rotated(1)).unwrap().steps;
    assert!(!older.is_empty());
    let _ = replay(&older, &replay_options(Controllers::ALL));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Watches that come back after their history is gone relist: the deletions the relist finds
/// (only as absence) are recorded, and the replay still ends where the run did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_a_relist_finds_are_recorded() {
    let dir = temp_dir("relist");
    let path = dir.join("trace.yaml");
    let fake = FakeApiServer::builder().history_window(20).build();
    fake.create(node("n1", "zone-a")).unwrap();
    fake.create(service("default", "web", "web")).unwrap();
    for i in 0..4 {
        let ip = format!("10.0.0.{}", i + 1);
        fake.create(pod("default", &format!("web-{i}"), "web", "n1", &ip, true))
            .unwrap();
    }
    let mut opts = options();
    opts.record_trace = Some(RecordTrace {
        path: path.clone(),
        limits: Limits::default(),
    });
    let running = start(&fake, opts);
    settle(&fake, &running).await;
    fake.expire_watches();
    while fake.open_watches() > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    fake.delete("pods", "default", "web-0").unwrap();
    for i in 0..30 {
        set_ready(&fake, "web-1", i % 2 == 1);
    }
    settle(&fake, &running).await;
    running.stop().await.unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(r#""delete":{"kind":"Pod","namespace":"default","name":"web-0"}"#),
        "{text}"
    );
    let steps = load_trace_file(&path).unwrap().steps;
    let result = replay(&steps, &replay_options(Controllers::ALL));
    assert_eq!(replayed(&result.objects), in_fake(&fake));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace file that cannot be created stops `sliced run` at once, naming it (exit 2), before
/// it connects to anything.
#[test]
fn a_trace_that_cannot_be_created_is_refused_at_start() {
    let file = "/nonexistent-dir-of-sliced/trace.yaml";
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(["run", "--leader-elect=false", "--metrics-bind-address", ""])
        .args(["--kubeconfig", "/nonexistent-dir-of-sliced/kubeconfig"])
        .args(["--record-trace", file])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(file) && stderr.contains("--record-trace"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

//! `sliced simulate --events`: traces replayed in virtual time, checked against upstream's queue
//! semantics (batch period, slice-event delay, backoff, retry budget, token bucket) and the
//! tracker (own writes ignored, edits and deletions by others repaired).

mod durations;
mod limits;
mod load_balancers;
mod lost_endpoints;
mod messages;

use std::process::Command;

use serde_json::Value;

/// Writes `text` to a file called `name` in a directory of its own (per process, test group and
/// content), for the binary to read.
fn trace_file(group: &str, name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "sliced-{group}-{}-{:x}",
        std::process::id(),
        fxhash(text)
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write");
    file
}

/// Runs the trace through the EndpointSlice controller alone, unless `args` names controllers:
/// most tests here are about its queue.
fn simulate(events: &str, args: &[&str]) -> Value {
    let only_slices: &[&str] = if args.contains(&"--controllers") {
        &[]
    } else {
        &["--controllers", "endpointslice"]
    };
    let dir = std::env::temp_dir().join(format!("sliced-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(format!("{:x}.yaml", fxhash(events)));
    std::fs::write(&file, events).expect("write events");
    let flags: Vec<&str> = match args.iter().position(|a| *a == UNSETTLED) {
        Some(i) => args[..i]
            .iter()
            .chain(args.iter().skip(i + 2))
            .copied()
            .collect(),
        None => args.to_vec(),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(["simulate", "-o", "json", "--check-invariants", "--events"])
        .arg(&file)
        .args(only_slices)
        .args(&flags)
        .output()
        .expect("run sliced");
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    // After every sync that succeeded, a full reconcile of the engine's view writes nothing.
    let invariant = &out["summary"]["invariant"];
    assert!(invariant["checks"].is_u64(), "not checked: {invariant}");
    assert_eq!(invariant["violations"], 0, "{invariant}");
    // Once the queues drained, every service holds what a full reconcile gives, unless the test
    // says which may not (a key dropped after its retries, a namespace being terminated).
    let unsettled: Vec<&str> = invariant["unsettled"]
        .as_array()
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let allowed = args
        .iter()
        .position(|a| *a == UNSETTLED)
        .and_then(|i| args.get(i + 1));
    assert!(
        unsettled
            .iter()
            .all(|u| allowed.is_some_and(|a| u.contains(a))),
        "unsettled: {unsettled:?}"
    );
    out
}

/// Not a flag of `sliced`: `[UNSETTLED, "ns/name"]` in a test's arguments names the one service
/// that may be left unsettled once the queues drain.
const UNSETTLED: &str = "--test-may-leave-unsettled";

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A node, a service `web` and `pods` ready pods, all at time 0.
fn cluster(pods: usize) -> String {
    let mut s = String::from(
        "- at: 0s
  apply: {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {topology.kubernetes.io/zone: z1}}, status: {conditions: [{type: Ready, status: 'True'}]}}
- at: 0s
  apply:
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default, uid: svc-uid-1, creationTimestamp: '2026-01-01T00:00:00Z'}
    spec: {selector: {app: web}, clusterIP: 10.96.0.10, ipFamilies: [IPv4], ports: [{name: http, port: 80, targetPort: 8080}]}
",
    );
    for i in 0..pods {
        s.push_str(&pod_step("0s", i, true));
    }
    s
}

fn pod_step(at: &str, i: usize, ready: bool) -> String {
    format!(
        "- at: {at}
  apply:
    apiVersion: v1
    kind: Pod
    metadata: {{name: web-{i}, namespace: default, uid: pod-uid-{i}, labels: {{app: web}}}}
    spec: {{nodeName: n1, containers: [{{name: c, image: x}}]}}
    status: {{phase: Running, podIP: 10.0.0.{ip}, podIPs: [{{ip: 10.0.0.{ip}}}], conditions: [{{type: Ready, status: '{r}'}}]}}
",
        ip = i + 1,
        r = if ready { "True" } else { "False" }
    )
}

fn syncs_of<'a>(out: &'a Value, service: &str) -> Vec<&'a Value> {
    out["syncs"]
        .as_array()
        .map(|s| s.iter().filter(|x| x["service"] == service).collect())
        .unwrap_or_default()
}

fn at(v: &Value) -> f64 {
    v["at"].as_f64().unwrap_or(f64::NAN)
}

fn verbs(out: &Value) -> Vec<(f64, String)> {
    out["writes"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|x| (at(x), x["verb"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn ready_count(out: &Value) -> usize {
    out["objects"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter(|x| x["kind"] == "EndpointSlice")
                .flat_map(|x| x["endpoints"].as_array().cloned().unwrap_or_default())
                .filter(|e| e["conditions"]["ready"] == true)
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_new_service_gets_its_slice_at_once_and_a_pod_change_after_the_batch_period() {
    let events = format!("{}{}", cluster(2), pod_step("10s", 0, false));
    let out = simulate(&events, &["--batch-period", "500ms"]);
    // The service add syncs at 0 without delay; the pod events at 0 are folded into it or follow
    // at 0.5s; the readiness change at 10s syncs at 10.5s.
    assert_eq!(verbs(&out).first(), Some(&(0.0, "create".to_string())));
    let updates: Vec<f64> = verbs(&out)
        .into_iter()
        .filter(|(_, v)| v == "update")
        .map(|(t, _)| t)
        .collect();
    assert_eq!(updates, vec![10.5]);
    assert_eq!(ready_count(&out), 1);
    assert!(
        syncs_of(&out, "default/web")
            .iter()
            .all(|s| s["result"] == "success")
    );
}

#[test]
fn events_in_one_batch_window_collapse_into_one_sync() {
    let mut events = cluster(0);
    for (i, t) in ["5s", "5.2s", "5.4s", "5.9s"].iter().enumerate() {
        events.push_str(&pod_step(t, i, true));
    }
    let out = simulate(&events, &["--batch-period", "1s"]);
    let times: Vec<f64> = syncs_of(&out, "default/web")
        .iter()
        .map(|s| at(s))
        .collect();
    // t=0: the service add; t=6: one sync for all four pods (first event at 5s + 1s).
    assert_eq!(times, vec![0.0, 6.0]);
    assert_eq!(ready_count(&out), 4);
}

#[test]
fn failed_writes_back_off_exponentially_then_succeed() {
    let events = format!(
        "- at: 0s\n  fail: {{verb: create, kind: EndpointSlice, status: 500, reason: InternalError, times: 3}}\n{}",
        cluster(1)
    );
    let out = simulate(&events, &[]);
    let syncs = syncs_of(&out, "default/web");
    let summary: Vec<(f64, &str)> = syncs
        .iter()
        .map(|s| (at(s), s["result"].as_str().unwrap_or("")))
        .collect();
    // Retries after 1 s, then 2 s more, then 4 s more.
    assert_eq!(
        summary,
        vec![
            (0.0, "error"),
            (1.0, "error"),
            (3.0, "error"),
            (7.0, "success")
        ]
    );
    assert!(
        syncs[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("failed to create EndpointSlice")
    );
    assert_eq!(verbs(&out), vec![(7.0, "create".to_string())]);
}

#[test]
fn a_service_is_dropped_after_fifteen_retries() {
    let events = format!(
        "- at: 0s\n  fail: {{verb: create, kind: EndpointSlice, status: 503, times: 100}}\n{}",
        cluster(1)
    );
    // Dropped after its retries, the service keeps no slice until its next event.
    let out = simulate(&events, &[UNSETTLED, "default/web"]);
    let syncs = syncs_of(&out, "default/web");
    // The first sync and 15 retries, then the key is forgotten.
    assert_eq!(syncs.len(), 16);
    let last = at(syncs[15]);
    // 1+2+4+...+512 + 5*1000 seconds after the first.
    assert_eq!(last, 1023.0 + 5000.0);
    assert_eq!(out["summary"]["dropped"], 1);
    assert!(out["writes"].as_array().is_some_and(|w| w.is_empty()));
}

#[test]
fn the_token_bucket_spaces_retries_of_many_services() {
    let mut events = String::from(
        "- at: 0s\n  fail: {verb: create, kind: EndpointSlice, status: 500, times: 150}\n",
    );
    for i in 0..150 {
        events.push_str(&format!(
            "- at: 0s\n  apply: {{apiVersion: v1, kind: Service, metadata: {{name: s{i}, namespace: default, uid: u{i}}}, spec: {{selector: {{app: s{i}}}, clusterIP: 10.96.1.{}, ipFamilies: [IPv4]}}}}\n",
            i % 250 + 1
        ));
    }
    let out = simulate(&events, &["--until", "2s"]);
    let mut retries: Vec<f64> = out["syncs"]
        .as_array()
        .map(|s| s.iter().map(at).filter(|t| *t > 0.0).collect())
        .unwrap_or_default();
    retries.sort_by(f64::total_cmp);
    // The delay is max(1 s backoff, token wait). 100 tokens of burst; the other 50 wait for tokens
    // at 10 per second (0.1 s, 0.2 s, ... 5 s): 10 of them are due by 1 s as well, 10 more by 2 s.
    assert_eq!(retries.iter().filter(|t| **t == 1.0).count(), 110);
    assert!(retries.iter().all(|t| *t <= 2.0));
    assert_eq!(retries.len(), 120);
    assert!(retries.contains(&1.1) && retries.contains(&2.0));
}

#[test]
fn own_writes_do_not_trigger_syncs_but_edits_by_others_are_repaired() {
    let out = simulate(&cluster(2), &[]);
    let slice = out["objects"][0].clone();
    let name = slice["metadata"]["name"]
        .as_str()
        .expect("slice name")
        .to_string();
    assert_eq!(
        syncs_of(&out, "default/web").len(),
        1,
        "only the service add syncs"
    );

    // Someone empties the slice: the controller restores it one second later (slice events wait
    // max(1s, batch period)).
    let mut edited = slice.clone();
    edited["endpoints"] = Value::Array(vec![]);
    let events = format!(
        "{}- at: 5s\n  apply: {}\n",
        cluster(2),
        serde_json::to_string(&edited).expect("json")
    );
    let out = simulate(&events, &[]);
    let writes = verbs(&out);
    assert_eq!(writes.last(), Some(&(6.0, "update".to_string())));
    assert_eq!(ready_count(&out), 2);

    // Someone deletes it: recreated one second later.
    let events = format!(
        "{}- at: 5s\n  delete: {{kind: EndpointSlice, namespace: default, name: {name}}}\n",
        cluster(2)
    );
    let out = simulate(&events, &[]);
    assert_eq!(verbs(&out).last(), Some(&(6.0, "create".to_string())));
    assert_eq!(ready_count(&out), 2);
}

#[test]
fn deleting_a_service_leaves_cleanup_to_the_garbage_collector() {
    let events = format!(
        "{}- at: 3s\n  delete: {{kind: Service, namespace: default, name: web}}\n",
        cluster(1)
    );
    let out = simulate(&events, &[]);
    // One create; the slices go with the service, without a delete by the controller.
    assert_eq!(verbs(&out), vec![(0.0, "create".to_string())]);
    assert!(out["objects"].as_array().is_some_and(|o| o.is_empty()));
}

#[test]
fn a_terminating_namespace_drops_creates_without_error() {
    let events = format!(
        "- at: 0s\n  fail: {{verb: create, kind: EndpointSlice, status: 403, reason: NamespaceTerminating, times: 1}}\n{}",
        cluster(1)
    );
    // The create was dropped, as upstream drops it: nothing is due until the namespace goes.
    let out = simulate(&events, &[UNSETTLED, "default/web"]);
    let syncs = syncs_of(&out, "default/web");
    assert_eq!(syncs.len(), 1);
    assert_eq!(syncs[0]["result"], "success");
    assert!(out["writes"].as_array().is_some_and(|w| w.is_empty()));
}

#[test]
fn until_stops_the_replay() {
    let events = format!("{}{}", cluster(1), pod_step("100s", 0, false));
    let out = simulate(&events, &["--until", "50s"]);
    assert!(verbs(&out).iter().all(|(t, _)| *t <= 50.0));
    assert_eq!(ready_count(&out), 1);
    assert!(
        out["summary"]["ended_at"]
            .as_f64()
            .is_some_and(|t| t <= 50.0)
    );
}

#[test]
fn malformed_events_exit_2_naming_the_step() {
    let dir = std::env::temp_dir().join(format!("sliced-replay-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for (text, want) in [
        ("- at: soon\n  apply: {}\n", "step 1: at"),
        ("- at: 1s\n", "step 1"),
        (
            "- at: 0s\n  apply: {apiVersion: v1, kind: Pod, metadata: {name: p}, status: {podIP: 1.2.3.999}}\n",
            "step 1",
        ),
        (
            "- at: 0s\n  fail: {verb: patch, kind: EndpointSlice, status: 500}\n",
            "fail.verb",
        ),
    ] {
        let file = dir.join(format!("{:x}.yaml", fxhash(text)));
        std::fs::write(&file, text).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
            .args(["simulate", "-o", "json", "--events"])
            .arg(&file)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && !err.contains("panicked"),
            "{text}: {err}"
        );
    }
}

fn endpoints_writes(out: &Value) -> Vec<(f64, String, Value)> {
    out["writes"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter(|x| x["object"]["kind"] == "Endpoints")
                .map(|x| {
                    (
                        at(x),
                        x["verb"].as_str().unwrap_or("").to_string(),
                        x["object"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn controller_syncs<'a>(out: &'a Value, controller: &str) -> Vec<&'a Value> {
    out["syncs"]
        .as_array()
        .map(|s| s.iter().filter(|x| x["controller"] == controller).collect())
        .unwrap_or_default()
}

#[test]
fn the_endpoints_controller_follows_pods_and_deletes_with_its_service() {
    let events = format!(
        "{}{}- at: 20s\n  delete: {{kind: Service, namespace: default, name: web}}\n",
        cluster(2),
        pod_step("10s", 0, false)
    );
    let out = simulate(&events, &["--controllers", "endpoints"]);
    let writes = endpoints_writes(&out);
    let verbs: Vec<(f64, &str)> = writes.iter().map(|(t, v, _)| (*t, v.as_str())).collect();
    assert_eq!(verbs, [(0.0, "create"), (10.0, "update"), (20.0, "delete")]);
    let created = &writes[0].2;
    assert_eq!(
        created["subsets"][0]["addresses"].as_array().map(Vec::len),
        Some(2)
    );
    let updated = &writes[1].2;
    assert_eq!(updated["subsets"][0]["addresses"][0]["ip"], "10.0.0.2");
    assert_eq!(
        updated["subsets"][0]["notReadyAddresses"][0]["ip"],
        "10.0.0.1"
    );
    // The EndpointSlice controller did not run.
    assert!(controller_syncs(&out, "endpointslice").is_empty());
    assert!(out["objects"].as_array().is_some_and(|o| o.is_empty()));
}

#[test]
fn one_pod_event_syncs_every_controller_once() {
    let events = format!("{}{}", cluster(3), pod_step("10s", 1, false));
    let out = simulate(&events, &["--controllers", "all"]);
    let at_ten = |c: &str| {
        controller_syncs(&out, c)
            .iter()
            .filter(|s| at(s) == 10.0)
            .count()
    };
    assert_eq!(at_ten("endpointslice"), 1);
    assert_eq!(at_ten("endpoints"), 1);
    let kinds: Vec<String> = out["writes"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter(|x| at(x) == 10.0)
                .map(|x| x["object"]["kind"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(kinds, ["EndpointSlice", "Endpoints"]);
}

#[test]
fn leftover_endpoints_are_deleted_at_start_but_leader_records_stay() {
    let events = "- at: 0s
  apply: {apiVersion: v1, kind: Endpoints, metadata: {name: gone, namespace: default}, subsets: [{addresses: [{ip: 10.0.0.9}], ports: [{port: 80}]}]}
- at: 0s
  apply: {apiVersion: v1, kind: Endpoints, metadata: {name: lock, namespace: kube-system, annotations: {control-plane.alpha.kubernetes.io/leader: '{}'}}}
";
    let out = simulate(events, &["--controllers", "endpoints"]);
    let writes = endpoints_writes(&out);
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].1, "delete");
    assert_eq!(writes[0].2["metadata"]["name"], "gone");
    let names: Vec<&str> = out["objects"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter_map(|x| x["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["lock"]);
}

#[test]
fn endpoints_deleted_by_someone_else_are_recreated() {
    let events = format!(
        "{}- at: 5s\n  delete: {{kind: Endpoints, namespace: default, name: web}}\n",
        cluster(1)
    );
    let out = simulate(&events, &["--controllers", "endpoints"]);
    let verbs: Vec<(f64, String)> = endpoints_writes(&out)
        .into_iter()
        .map(|(t, v, _)| (t, v))
        .collect();
    // A second after the deletion, not at once as upstream: the deletion may be the API
    // server's, with a Service deletion that its watch tells of a moment later (README,
    // "Deliberate differences").
    assert_eq!(
        verbs,
        [(0.0, "create".to_string()), (6.0, "create".to_string())]
    );
}

#[test]
fn a_failed_endpoints_write_backs_off_from_five_milliseconds() {
    let events = format!(
        "- at: 0s\n  fail: {{verb: create, kind: Endpoints, status: 500, reason: InternalError, times: 2}}\n{}",
        cluster(1)
    );
    let out = simulate(&events, &["--controllers", "endpoints"]);
    let results: Vec<(f64, String)> = controller_syncs(&out, "endpoints")
        .iter()
        .map(|s| (at(s), s["result"].as_str().unwrap_or("").to_string()))
        .collect();
    // client-go's default controller rate limiter: 5 ms, then 10 ms.
    assert_eq!(
        results,
        [
            (0.0, "error".to_string()),
            (0.005, "error".to_string()),
            (0.015, "success".to_string())
        ]
    );
    assert_eq!(endpoints_writes(&out).len(), 1);
}

const CUSTOM: &str = "- at: 0s
  apply: {apiVersion: v1, kind: Service, metadata: {name: db, namespace: default, uid: svc-db}, spec: {clusterIP: 10.96.0.20, ports: [{port: 5432}]}}
- at: 0s
  apply: {apiVersion: v1, kind: Endpoints, metadata: {name: db, namespace: default, uid: ep-db, labels: {team: data}}, subsets: [{addresses: [{ip: 192.168.1.10}, {ip: not-an-ip}], ports: [{port: 5432}]}]}
";

fn mirrored_slices(out: &Value) -> Vec<&Value> {
    out["objects"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter(|x| {
                    x["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
                        == "endpointslicemirroring-controller.k8s.io"
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn custom_endpoints_are_mirrored_with_invalid_addresses_skipped() {
    let out = simulate(CUSTOM, &["--controllers", "mirroring"]);
    let slices = mirrored_slices(&out);
    assert_eq!(slices.len(), 1, "{out:#}");
    let slice = slices[0];
    assert_eq!(slice["metadata"]["labels"]["team"], "data");
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "db"
    );
    assert_eq!(slice["metadata"]["ownerReferences"][0]["kind"], "Endpoints");
    assert_eq!(slice["endpoints"][0]["addresses"][0], "192.168.1.10");
    assert_eq!(slice["endpoints"].as_array().map(Vec::len), Some(1));
    let warned = out["events"]
        .as_array()
        .is_some_and(|e| e.iter().any(|x| x["reason"] == "InvalidIPAddress"));
    assert!(warned, "{:#}", out["events"]);
    assert!(
        controller_syncs(&out, "mirroring")
            .iter()
            .all(|s| s["result"] == "success")
    );
}

#[test]
fn mirrored_slices_follow_their_endpoints_and_go_when_the_service_gets_a_selector() {
    let events = format!(
        "{CUSTOM}- at: 5s
  apply: {{apiVersion: v1, kind: Endpoints, metadata: {{name: db, namespace: default, uid: ep-db, labels: {{team: data}}}}, subsets: [{{addresses: [{{ip: 192.168.1.11}}], ports: [{{port: 5432}}]}}]}}
- at: 10s
  apply: {{apiVersion: v1, kind: Service, metadata: {{name: db, namespace: default, uid: svc-db}}, spec: {{selector: {{app: db}}, clusterIP: 10.96.0.20, ports: [{{port: 5432}}]}}}}
"
    );
    let out = simulate(&events, &["--controllers", "mirroring"]);
    let writes: Vec<(f64, String)> = out["writes"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|x| (at(x), x["verb"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        writes,
        [
            (0.0, "create".to_string()),
            (5.0, "update".to_string()),
            (10.0, "delete".to_string())
        ]
    );
    assert!(mirrored_slices(&out).is_empty());
}

#[test]
fn a_mirrored_slice_edited_by_someone_else_is_put_back() {
    let out = simulate(CUSTOM, &["--controllers", "mirroring"]);
    let slice = mirrored_slices(&out)[0].clone();
    let name = slice["metadata"]["name"].as_str().unwrap_or("").to_string();
    let edit = format!(
        "{CUSTOM}- at: 3s
  apply:
    apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {{name: {name}, namespace: default, labels: {{kubernetes.io/service-name: db, endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io}}}}
    addressType: IPv4
    endpoints: [{{addresses: [10.9.9.9]}}]
"
    );
    let out = simulate(&edit, &["--controllers", "mirroring"]);
    let repaired = mirrored_slices(&out);
    assert_eq!(repaired.len(), 1);
    assert_eq!(repaired[0]["endpoints"][0]["addresses"][0], "192.168.1.10");
    let last = out["writes"].as_array().and_then(|w| w.last()).cloned();
    assert_eq!(last.map(|w| at(&w)), Some(3.0));
}

/// A recording cut short by a crash (`run --record-trace`) replays to its last whole line, with a
/// warning naming the line left out.
#[test]
fn a_recording_cut_off_mid_line_replays_its_whole_lines() {
    let line =
        |at: &str, object: Value| format!("- {}\n", serde_json::json!({"at": at, "apply": object}));
    let pod = |i: usize| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("web-{i}"), "namespace": "default", "uid": format!("pod-uid-{i}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running", "podIP": format!("10.0.0.{}", i + 1),
                "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let mut whole = line(
        "0s",
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    whole.push_str(&line(
        "0s",
        serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid-1"},
        "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ports": [{"port": 80}]}}),
    ));
    whole.push_str(&line("1s", pod(0)));
    whole.push_str(&line("2s", pod(1)));
    let third = line("3s", pod(2));
    let cut = format!("{whole}{}", &third[..third.len() / 2]);
    let run = |text: &str| {
        let file = trace_file("cut-off", "recorded.yaml", text);
        Command::new(env!("CARGO_BIN_EXE_sliced"))
            .args(["simulate", "-o", "json", "--check-invariants", "--events"])
            .arg(&file)
            .output()
            .expect("run sliced")
    };
    let (from_whole, from_cut) = (run(&whole), run(&cut));
    let stderr = String::from_utf8_lossy(&from_cut.stderr);
    assert_eq!(from_cut.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("recorded.yaml: line 5 is cut off") && stderr.contains("left out"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&from_whole.stderr).contains("cut off"));
    let objects = |out: &std::process::Output| {
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
        assert_eq!(v["summary"]["invariant"]["violations"], 0, "{v}");
        v["objects"].clone()
    };
    let replayed = objects(&from_cut);
    assert_eq!(replayed, objects(&from_whole));
    assert!(replayed.to_string().contains("10.0.0.2"), "{replayed}");
    assert!(!replayed.to_string().contains("10.0.0.3"), "{replayed}");
}

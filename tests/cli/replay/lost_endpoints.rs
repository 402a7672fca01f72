//! Endpoints the incremental path once lost or kept stale after ordinary events: each case failed
//! before the engine invalidated its incremental state on every change to the managed slices that
//! was not its own write.

use super::{cluster, pod_step, simulate, syncs_of, verbs};
use serde_json::Value;

/// A managed slice of `web` named `name`, holding the endpoints of `pods` exactly as the
/// controller writes them for [`cluster`]'s pods, so that a controller starting over it has
/// nothing to write.
fn managed_slice(at: &str, name: &str, pods: impl IntoIterator<Item = usize>) -> String {
    let endpoints: String = pods
        .into_iter()
        .map(|i| {
            format!(
                "      - {{addresses: ['10.0.0.{ip}'], conditions: {{ready: true, serving: true, terminating: false}}, nodeName: n1, zone: z1, targetRef: {{kind: Pod, namespace: default, name: web-{i}, uid: pod-uid-{i}}}}}\n",
                ip = i + 1
            )
        })
        .collect();
    format!(
        "- at: {at}
  apply:
    apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata:
      name: {name}
      namespace: default
      generateName: web-
      labels: {{kubernetes.io/service-name: web, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}}
      ownerReferences: [{{apiVersion: v1, kind: Service, name: web, uid: svc-uid-1, controller: true, blockOwnerDeletion: true}}]
    addressType: IPv4
    ports: [{{name: http, port: 8080, protocol: TCP}}]
    endpoints:
{endpoints}"
    )
}

/// Per slice left at the end: its name and its endpoints as (pod, ready).
fn final_slices(out: &Value) -> Vec<(String, Vec<(String, bool)>)> {
    out["objects"]
        .as_array()
        .map(|objects| {
            objects
                .iter()
                .filter(|o| o["kind"] == "EndpointSlice")
                .map(|o| {
                    let endpoints = o["endpoints"]
                        .as_array()
                        .map(|e| {
                            e.iter()
                                .map(|e| {
                                    (
                                        e["targetRef"]["name"].as_str().unwrap_or("").to_string(),
                                        e["conditions"]["ready"] == true,
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                    (name, endpoints)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every endpoint of every slice, sorted: (pod, ready).
fn all_endpoints(out: &Value) -> Vec<(String, bool)> {
    let mut all: Vec<(String, bool)> = final_slices(out).into_iter().flat_map(|(_, e)| e).collect();
    all.sort();
    all
}

fn ready_pods(pods: impl IntoIterator<Item = usize>) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = pods
        .into_iter()
        .map(|i| (format!("web-{i}"), true))
        .collect();
    v.sort();
    v
}

/// The first defect: sliced starts over a correct cluster (so it never wrote nor tracked
/// the slice), someone deletes the slice (nothing is queued, as upstream), then an 11th pod comes.
/// The next sync must put all 11 endpoints back, not only the new one.
#[test]
fn an_untracked_slice_deleted_by_someone_else_is_rebuilt_whole_by_the_next_sync() {
    let events = format!(
        "{}{}- at: 5s\n  delete: {{kind: EndpointSlice, namespace: default, name: web-abcde}}\n{}",
        cluster(10),
        managed_slice("0s", "web-abcde", 0..10),
        pod_step("10s", 10, true),
    );
    let out = simulate(&events, &[]);
    // Nothing to write at the start, nothing queued by the deletion of an untracked slice.
    let writes = verbs(&out);
    assert_eq!(writes, vec![(10.0, "create".to_string())]);
    assert_eq!(
        out["writes"][0]["object"]["endpoints"]
            .as_array()
            .map(Vec::len),
        Some(11)
    );
    assert_eq!(all_endpoints(&out), ready_pods(0..11));
}

/// The second defect: one endpoint listed in two managed slices (a crash mid-write). sliced
/// deletes the duplicate; deleting the pod afterwards must remove its endpoint.
#[test]
fn a_pod_once_in_two_slices_is_removed_when_it_goes() {
    let events = format!(
        "{}{}{}- at: 5s\n  delete: {{kind: Pod, namespace: default, name: web-9}}\n",
        cluster(10),
        managed_slice("0s", "web-abcde", 0..10),
        managed_slice("0s", "web-dupli", [9]),
    );
    let out = simulate(&events, &[]);
    assert_eq!(
        verbs(&out),
        vec![(0.0, "delete".to_string()), (5.0, "update".to_string())]
    );
    assert_eq!(all_endpoints(&out), ready_pods(0..9));
}

/// The same cluster: the pod turning not ready must show once, not ready, not twice.
#[test]
fn a_pod_once_in_two_slices_turns_not_ready_once() {
    let events = format!(
        "{}{}{}{}",
        cluster(10),
        managed_slice("0s", "web-abcde", 0..10),
        managed_slice("0s", "web-dupli", [9]),
        pod_step("5s", 9, false),
    );
    let out = simulate(&events, &[]);
    let mut expected = ready_pods(0..9);
    expected.push(("web-9".to_string(), false));
    expected.sort();
    assert_eq!(all_endpoints(&out), expected);
}

/// Duplicates that arrive later, while the engine already holds the pod in one slice: a slice
/// created by someone else with the same endpoint. The sync it queues removes the duplicate, and
/// the pod's later deletion is still written.
#[test]
fn a_duplicate_created_later_by_someone_else_does_not_hide_the_pod() {
    let events = format!(
        "{}{}{}- at: 10s\n  delete: {{kind: Pod, namespace: default, name: web-3}}\n",
        cluster(5),
        managed_slice("0s", "web-abcde", 0..5),
        managed_slice("3s", "web-dupli", [3]),
    );
    let out = simulate(&events, &[]);
    assert_eq!(all_endpoints(&out), ready_pods([0, 1, 2, 4]));
    assert_eq!(final_slices(&out).len(), 1);
}

/// An untracked slice edited by someone else: the tracker queues its service a second later, and a
/// pod event in between must already see the edit.
#[test]
fn an_untracked_slice_edited_by_someone_else_is_not_trusted() {
    let events = format!(
        "{}{}{}{}",
        cluster(6),
        managed_slice("0s", "web-abcde", 0..6),
        managed_slice("2s", "web-abcde", 0..3),
        pod_step("2s", 6, true),
    );
    let out = simulate(&events, &[]);
    assert_eq!(all_endpoints(&out), ready_pods(0..7));
}

/// A create refused because the namespace is terminating ends the sync as a success (no retry, as
/// upstream), but what it left is not what it planned: the next sync must not build on it.
#[test]
fn a_sync_abandoned_in_a_terminating_namespace_is_not_built_upon() {
    let events = format!(
        "{}- at: 5s\n  fail: {{verb: create, kind: EndpointSlice, status: 403, reason: NamespaceTerminating, times: 1}}\n{}{}",
        cluster(1),
        pod_step("5s", 1, true),
        pod_step("10s", 2, true),
    );
    let out = simulate(&events, &["--max-endpoints-per-slice", "1"]);
    let results: Vec<(f64, String)> = syncs_of(&out, "default/web")
        .iter()
        .map(|s| {
            (
                s["at"].as_f64().unwrap_or(f64::NAN),
                s["result"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    // No retry of the abandoned sync at 5s: the next sync is the pod event's at 10s.
    assert_eq!(
        results,
        vec![
            (0.0, "success".to_string()),
            (5.0, "success".to_string()),
            (10.0, "success".to_string())
        ]
    );
    assert_eq!(all_endpoints(&out), ready_pods(0..3));
}

/// A sync whose second create fails wrote half its plan; its retry must place what is missing.
#[test]
fn a_sync_that_failed_half_way_is_retried_in_full() {
    let events = format!(
        "{}- at: 5s\n  fail: {{verb: create, kind: EndpointSlice, status: 500, times: 1}}\n{}{}{}",
        cluster(1),
        pod_step("5s", 1, true),
        pod_step("5s", 2, true),
        pod_step("20s", 3, true),
    );
    let out = simulate(&events, &["--max-endpoints-per-slice", "1"]);
    assert_eq!(all_endpoints(&out), ready_pods(0..4));
    assert!(final_slices(&out).iter().all(|(_, e)| e.len() == 1));
}

/// After its Service is deleted, changes of its former pods queue nothing for it.
#[test]
fn pods_of_a_deleted_service_queue_nothing() {
    let events = format!(
        "{}- at: 5s\n  delete: {{kind: Service, namespace: default, name: web}}\n{}{}- at: 30s\n  delete: {{kind: Pod, namespace: default, name: web-0}}\n",
        cluster(3),
        pod_step("20s", 1, false),
        pod_step("25s", 7, true),
    );
    let out = simulate(&events, &["--controllers", "all"]);
    let late: Vec<&Value> = out["syncs"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|s| s["at"].as_f64().is_some_and(|t| t >= 20.0))
                .collect()
        })
        .unwrap_or_default();
    assert!(late.is_empty(), "syncs after the service went: {late:?}");
}

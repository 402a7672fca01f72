//! The pod watch decodes into `WatchedPod`, which keeps only the fields the controllers read. For
//! every pod in the fixtures, the real-shaped one included, it must convert to exactly the model
//! pod that the full k8s-openapi `Pod` converts to, errors included.

use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};
use sliced::kube::convert::{WatchedPod, pod_from_k8s, pod_from_watched};

use crate::real_pods;

fn same_conversion(text: &str, origin: &str) {
    let full: core::Pod = match serde_json::from_str(text) {
        Ok(p) => p,
        Err(e) => panic!("{origin}: {e}"),
    };
    let watched: WatchedPod = match serde_json::from_str(text) {
        Ok(p) => p,
        Err(e) => panic!("{origin}: the watched form does not decode: {e}"),
    };
    assert_eq!(pod_from_watched(&watched), pod_from_k8s(&full), "{origin}");
}

pub fn fixture_pods() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(docs) = serde_saphyr::from_multiple::<Value>(&text) else {
            continue;
        };
        for doc in docs {
            let items = match doc.get("kind").and_then(Value::as_str) {
                Some("List") => doc
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                _ => vec![doc],
            };
            for item in items {
                if item.get("kind").and_then(Value::as_str) == Some("Pod") {
                    out.push((path.display().to_string(), item));
                }
            }
        }
    }
    out
}

#[test]
fn every_fixture_pod_converts_the_same_from_its_watched_form() {
    let pods = fixture_pods();
    assert!(pods.len() > 100, "only {} fixture pods found", pods.len());
    for (origin, pod) in &pods {
        same_conversion(&pod.to_string(), origin);
    }
}

#[test]
fn a_real_shaped_pod_converts_the_same_ready_or_not() {
    let template = real_pods::template();
    for ready in [true, false] {
        let mut pod = real_pods::variant(&template, 42, 10);
        real_pods::set_ready(&mut pod, ready);
        let text = match serde_json::to_string(&pod) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        same_conversion(&text, "fixtures/pods/deployment-pod.yaml");
    }
}

#[test]
fn sidecars_hostnames_and_bad_fields_agree() {
    let cases = [
        // A sidecar's named port counts; a plain init container's does not.
        json!({"metadata": {"name": "p", "namespace": "ns"},
               "spec": {"hostname": "h", "subdomain": "s", "nodeName": "n",
                        "containers": [{"name": "a", "ports": [{"name": "http", "containerPort": 80}]}],
                        "initContainers": [
                            {"name": "side", "restartPolicy": "Always", "ports": [{"name": "m", "containerPort": 9}]},
                            {"name": "init", "ports": [{"name": "x", "containerPort": 7}]}]},
               "status": {"phase": "Running", "podIP": "10.0.0.1",
                          "conditions": [{"type": "Ready", "status": "True",
                                          "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}),
        // Nulls where the API server may write them.
        json!({"metadata": {"name": "p", "labels": null, "deletionTimestamp": null},
               "spec": {"containers": null}, "status": {"podIPs": null}}),
        // Errors name the same field.
        json!({"metadata": {"name": "p"}, "status": {"phase": "Running", "podIP": "10.0.0.300"}}),
        json!({"metadata": {"name": "p"}, "status": {"phase": "Sleeping"}}),
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 0}]}]}}),
        json!({"metadata": {"namespace": "ns"}}),
    ];
    for (i, case) in cases.iter().enumerate() {
        same_conversion(&case.to_string(), &format!("case {i}"));
    }
}

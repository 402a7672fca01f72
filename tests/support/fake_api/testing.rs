//! Helpers for tests that drive code against the fake: status assertions,
//! timed stream reads, and minimal valid objects.

use std::fmt::Debug;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::core::Status;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Asserts an API error's code and reason; returns its Status.
pub fn expect_status<T: Debug>(r: Result<T, kube::Error>, code: u16, reason: &str) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) if s.code == code && s.reason == reason => s,
        other => panic!("expected {code} {reason}, got {other:?}"),
    }
}

/// Next item of a stream, panicking if none comes within `secs` or it ended.
pub async fn next_within<S: Stream + Unpin>(stream: &mut S, secs: u64) -> S::Item {
    let item = tokio::time::timeout(Duration::from_secs(secs), stream.next()).await;
    item.unwrap_or_else(|_| panic!("no item within {secs} s"))
        .expect("stream open")
}

/// A minimal Pod with one container.
pub fn pod_json(ns: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    })
}

/// A ready IPv4 EndpointSlice of service `svc` with one endpoint per IP and port 80.
pub fn slice_json(ns: &str, name: &str, ips: &[&str]) -> Value {
    let endpoints: Vec<Value> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "namespace": ns, "name": name,
            "labels": {"kubernetes.io/service-name": "svc"},
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 80}],
    })
}

/// JSON into a typed object, panicking on a mismatch.
pub fn typed<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("JSON fits the type")
}

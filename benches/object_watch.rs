//! A watch event's EndpointSlice, Endpoints object or node, as `sliced run` reads them: JSON
//! decoded into k8s-openapi's type (what kube-rs does) against protobuf decoded in place
//! (`src/kube/protobuf/`), each converted into the model by the same rules. The slice is shaped
//! as sliced writes them (its own writes come back): 100 endpoints with target references, nodes
//! and zones, taken from the largest slice kube-controller-manager wrote in
//! `fixtures/upstream-1.36/cluster.json`; the Endpoints object is the largest one there; the node
//! is one of those, with what a kubelet reports beside (conditions, addresses, system info, 40
//! images).

#[path = "../tests/support/protobuf_objects.rs"]
mod protobuf_objects;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use sliced::kube::convert::{
    ConvertError, endpoint_slice_from_k8s, endpoints_from_k8s, node_from_k8s,
};
use sliced::kube::protobuf;

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CLUSTER: &str = include_str!("../fixtures/upstream-1.36/cluster.json");

/// The largest upstream slice, its endpoints repeated to 100 with their own addresses and pods.
fn slice() -> discovery::EndpointSlice {
    let list: Value = serde_json::from_str(CLUSTER).unwrap_or_default();
    let mut slice: discovery::EndpointSlice = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["kind"] == "EndpointSlice" && i["addressType"] == "IPv4")
        .filter_map(|i| serde_json::from_value(i.clone()).ok())
        .max_by_key(|s: &discovery::EndpointSlice| s.endpoints.len())
        .unwrap_or_default();
    let template = slice.endpoints.first().cloned().unwrap_or_default();
    slice.endpoints = (0..100)
        .map(|i| {
            let mut e = template.clone();
            e.addresses = vec![format!("10.1.{}.{}", i / 250, i % 250 + 1)];
            if let Some(r) = e.target_ref.as_mut() {
                r.name = Some(format!("web-7d4b9c8f6d-{i:05}"));
                r.uid = Some(format!("6d1f0c1e-0000-4000-8000-{i:012}"));
            }
            e
        })
        .collect();
    slice
}

/// One object's watch event read both ways, each converted into the model by `convert`: its JSON
/// decoded into k8s-openapi's type (`json_{case}`), and its protobuf decoded in place by `decode`
/// (`protobuf_{case}`). Prints both sizes.
fn json_against_protobuf<K, M>(
    c: &mut Criterion,
    group: &str,
    case: &str,
    object: &K,
    protobuf: Vec<u8>,
    decode: fn(&[u8]) -> Result<K, ConvertError>,
    convert: fn(&K) -> Result<M, ConvertError>,
) where
    K: Serialize + DeserializeOwned,
{
    let json = serde_json::to_vec(object).unwrap_or_default();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    g.bench_function(format!("json_{case}"), |b| {
        b.iter(|| {
            let decoded: K = serde_json::from_slice(black_box(&json)).expect("its own JSON");
            convert(&decoded).expect("converts")
        })
    });
    g.bench_function(format!("protobuf_{case}"), |b| {
        b.iter(|| {
            let decoded = decode(black_box(&protobuf)).expect("decodes");
            convert(&decoded).expect("converts")
        })
    });
    g.finish();
    println!(
        "{group}/{case}: {} bytes as JSON, {} as protobuf",
        json.len(),
        protobuf.len()
    );
}

fn slice_event(c: &mut Criterion) {
    let slice = slice();
    assert_eq!(slice.endpoints.len(), 100);
    let pb = protobuf_objects::endpoint_slice_object(&slice);
    json_against_protobuf(
        c,
        "slice_event",
        "100_endpoints",
        &slice,
        pb,
        protobuf::endpoint_slice_object,
        endpoint_slice_from_k8s,
    );
}

fn endpoints_event(c: &mut Criterion) {
    let list: Value = serde_json::from_str(CLUSTER).unwrap_or_default();
    let endpoints: core::Endpoints = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["kind"] == "Endpoints")
        .filter_map(|i| serde_json::from_value(i.clone()).ok())
        .max_by_key(|e: &core::Endpoints| serde_json::to_vec(e).map_or(0, |v| v.len()))
        .unwrap_or_default();
    let addresses: usize = endpoints
        .subsets
        .iter()
        .flatten()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum();
    println!("the largest upstream Endpoints object: {addresses} ready addresses");
    let pb = protobuf_objects::endpoints_object(&endpoints);
    json_against_protobuf(
        c,
        "endpoints_event",
        "largest_upstream",
        &endpoints,
        pb,
        protobuf::endpoints_object,
        endpoints_from_k8s,
    );
}

/// An upstream node with the status a real kubelet reports.
fn node() -> core::Node {
    let list: Value = serde_json::from_str(CLUSTER).unwrap_or_default();
    let mut node: Value = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["kind"] == "Node")
        .cloned()
        .unwrap_or_default();
    let condition = |kind: &str, status: &str, reason: &str| {
        serde_json::json!({"type": kind, "status": status, "reason": reason,
            "message": format!("kubelet reports {reason}"),
            "lastHeartbeatTime": "2026-11-27T08:00:00Z",
            "lastTransitionTime": "2026-11-20T08:00:00Z"})
    };
    node["status"]["conditions"] = serde_json::json!([
        condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        condition("PIDPressure", "False", "KubeletHasSufficientPID"),
        condition("Ready", "True", "KubeletReady"),
    ]);
    node["status"]["addresses"] = serde_json::json!([
        {"type": "InternalIP", "address": "192.168.0.10"},
        {"type": "Hostname", "address": "node-00.eu-west-1.compute.internal"}]);
    node["status"]["nodeInfo"] = serde_json::json!({
        "machineID": "ec2d7b2e3f6c4b1d9a0e8f7c6b5a4d3e", "systemUUID": "ec2d7b2e-3f6c-4b1d-9a0e-8f7c6b5a4d3e",
        "bootID": "1c9f0b6e-2d4a-4e8b-9f3c-7a6d5e4c3b2a", "kernelVersion": "6.1.112-124.190.amzn2023.x86_64",
        "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://1.7.22",
        "kubeletVersion": "v1.36.0", "kubeProxyVersion": "v1.36.0",
        "operatingSystem": "linux", "architecture": "amd64"});
    node["status"]["images"] = (0..40)
        .map(|i| {
            serde_json::json!({"names": [
                format!("registry.example.com/team-{i}/service@sha256:{:064x}", i),
                format!("registry.example.com/team-{i}/service:v1.{i}.0")],
                "sizeBytes": 50_000_000 + i * 1_000_000})
        })
        .collect();
    serde_json::from_value(node).unwrap_or_default()
}

fn node_event(c: &mut Criterion) {
    let node = node();
    let pb = protobuf_objects::node_object(&node);
    json_against_protobuf(
        c,
        "node_event",
        "kubelet_status",
        &node,
        pb,
        protobuf::node_object,
        node_from_k8s,
    );
}

criterion_group!(benches, slice_event, endpoints_event, node_event);
criterion_main!(benches);

//! A node decoded from protobuf (`src/kube/protobuf/node.rs`) converts to exactly the model node
//! its JSON form converts to, errors included: every node of the upstream cluster
//! (`fixtures/upstream-1.36/cluster.json`) and edge cases, each encoded by prost from upstream's
//! messages with the fields a kubelet reports. Malformed bytes are errors, never panics.

use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};
use sliced::kube::convert::node_from_k8s;
use sliced::kube::protobuf;

use crate::protobuf_objects;
use crate::upstream::objects_of_kind;

fn upstream_nodes() -> Vec<core::Node> {
    objects_of_kind("Node")
}

fn assert_same_conversion(node: &core::Node, case: &str) {
    let bytes = protobuf_objects::node_object(node);
    let decoded = protobuf::node_object(&bytes).and_then(|n| node_from_k8s(&n));
    assert_eq!(decoded, node_from_k8s(node), "{case}");
}

#[test]
fn every_upstream_node_converts_the_same_from_protobuf() {
    let all = upstream_nodes();
    assert_eq!(all.len(), 20);
    for node in &all {
        let name = node.metadata.name.clone().unwrap_or_default();
        assert_same_conversion(node, &name);
    }
}

#[test]
fn edge_cases_convert_the_same_from_protobuf() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 12] = [
        ("not ready", |n| {
            n["status"]["conditions"][0]["status"] = json!("False");
        }),
        ("readiness unknown, other conditions first", |n| {
            n["status"]["conditions"] = json!([
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "True"},
                {"type": "Ready", "status": "Unknown"}]);
        }),
        ("ready after a pressure condition", |n| {
            n["status"]["conditions"] = json!([
                {"type": "PIDPressure", "status": "True"},
                {"type": "Ready", "status": "True"}]);
        }),
        ("no conditions", |n| {
            n["status"].as_object_mut().unwrap().remove("conditions");
        }),
        ("no status", |n| {
            n.as_object_mut().unwrap().remove("status");
        }),
        ("millicores", |n| {
            n["status"]["allocatable"]["cpu"] = json!("3500m");
        }),
        ("an unreadable quantity", |n| {
            n["status"]["allocatable"]["cpu"] = json!("lots");
        }),
        ("capacity but nothing allocatable", |n| {
            n["status"].as_object_mut().unwrap().remove("allocatable");
        }),
        ("no labels, a provider, images and volumes", |n| {
            n["metadata"].as_object_mut().unwrap().remove("labels");
            n["spec"]["providerID"] = json!("aws:///eu-west-1a/i-0abc");
            n["spec"]["podCIDRs"] = json!(["10.244.1.0/24", "fd00:1::/64"]);
            n["status"]["images"] = json!([{"names": ["registry.k8s.io/pause:3.10"],
                "sizeBytes": 320368}]);
            n["status"]["volumesInUse"] = json!(["kubernetes.io/csi/ebs^vol-1"]);
        }),
        (
            "taints, the autoscaler's among them, and being deleted",
            |n| {
                n["metadata"]["deletionTimestamp"] = json!("2026-11-27T10:00:00Z");
                n["spec"]["taints"] = json!([
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                {"key": "ToBeDeletedByClusterAutoscaler", "value": "1732700000",
                    "effect": "NoSchedule"}]);
            },
        ),
        ("a taint that only resembles the autoscaler's", |n| {
            n["spec"]["taints"] = json!([
                {"key": "ToBeDeletedByClusterAutoscaler-not", "effect": "NoSchedule"}]);
        }),
        ("no name", |n| {
            n["metadata"].as_object_mut().unwrap().remove("name");
        }),
    ];
    let original = serde_json::to_value(&upstream_nodes()[0]).unwrap();
    for (case, edit) in cases {
        let mut value = original.clone();
        edit(&mut value);
        let edited: core::Node = serde_json::from_value(value).unwrap();
        assert_same_conversion(&edited, case);
    }
}

#[test]
fn malformed_bytes_are_errors_not_panics() {
    let node = &upstream_nodes()[0];
    let bytes = protobuf_objects::node_object(node);
    assert!(protobuf::node_object(&bytes).is_ok());
    crate::damaged::each_damaged(&bytes, |damaged| {
        let _ = protobuf::node_object(damaged).and_then(|n| node_from_k8s(&n));
    });
    let pod = protobuf_objects::enveloped("v1", "Pod", Vec::new());
    let e = protobuf::node_object(&pod).unwrap_err();
    assert!(e.to_string().contains("Node"), "{e}");
}

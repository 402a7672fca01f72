//! An Endpoints object decoded from protobuf (`src/kube/protobuf/endpoints.rs`) converts to exactly
//! the model object its JSON form converts to, errors included: every Endpoints object
//! kube-controller-manager wrote (`fixtures/upstream-1.36/cluster.json`) and edge cases, each
//! encoded by prost from upstream's messages. Malformed bytes are errors, never panics.

use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};
use sliced::kube::convert::endpoints_from_k8s;
use sliced::kube::protobuf;

use crate::protobuf_objects;
use crate::upstream::{objects_of_kind, whole_seconds};

fn upstream_endpoints() -> Vec<core::Endpoints> {
    objects_of_kind("Endpoints")
}

fn assert_same_conversion(endpoints: &core::Endpoints, case: &str) {
    let mut whole = endpoints.clone();
    whole_seconds(&mut whole.metadata);
    let bytes = protobuf_objects::endpoints_object(endpoints);
    let decoded = protobuf::endpoints_object(&bytes).and_then(|e| endpoints_from_k8s(&e));
    assert_eq!(decoded, endpoints_from_k8s(&whole), "{case}");
}

#[test]
fn every_upstream_endpoints_object_converts_the_same_from_protobuf() {
    let all = upstream_endpoints();
    assert_eq!(all.len(), 10);
    assert!(all.iter().any(|e| e.subsets.is_some()));
    for endpoints in &all {
        let name = endpoints.metadata.name.clone().unwrap_or_default();
        assert_same_conversion(endpoints, &name);
    }
}

#[test]
fn edge_cases_convert_the_same_from_protobuf() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 8] = [
        ("not-ready addresses with hostnames", |e| {
            e["subsets"][0]["notReadyAddresses"] = json!([{"ip": "10.0.0.9", "hostname": "h",
                "nodeName": "n", "targetRef": {"kind": "Pod", "namespace": "x", "name": "p",
                "uid": "u", "resourceVersion": "7"}}]);
        }),
        ("an address without a target", |e| {
            e["subsets"][0]["addresses"] = json!([{"ip": "10.0.0.8"}]);
        }),
        ("ports of every protocol, named and not", |e| {
            e["subsets"][0]["ports"] = json!([{"name": "a", "port": 1, "protocol": "UDP",
                "appProtocol": "x"}, {"port": 2}, {"port": 3, "protocol": "SCTP"}]);
        }),
        ("two subsets", |e| {
            let first = e["subsets"][0].clone();
            let mut second = first.clone();
            second["ports"] = json!([{"port": 9000, "protocol": "TCP"}]);
            e["subsets"] = json!([first, second]);
        }),
        ("no subsets", |e| {
            e.as_object_mut().unwrap().remove("subsets");
        }),
        ("labels and the over-capacity annotation", |e| {
            e["metadata"]["labels"] = json!({"a": "b"});
            e["metadata"]["annotations"] =
                json!({"endpoints.kubernetes.io/over-capacity": "truncated"});
        }),
        ("an address that is not an IP", |e| {
            e["subsets"][0]["addresses"] = json!([{"ip": "010.000.000.001"}]);
        }),
        ("no name", |e| {
            e["metadata"].as_object_mut().unwrap().remove("name");
        }),
    ];
    let endpoints = upstream_endpoints()
        .into_iter()
        .find(|e| {
            e.subsets
                .iter()
                .flatten()
                .any(|s| s.addresses.is_some() && s.ports.is_some())
        })
        .unwrap();
    let original = serde_json::to_value(&endpoints).unwrap();
    for (case, edit) in cases {
        let mut value = original.clone();
        edit(&mut value);
        let edited: core::Endpoints = serde_json::from_value(value).unwrap();
        assert_same_conversion(&edited, case);
    }
}

#[test]
fn malformed_bytes_are_errors_not_panics() {
    let all = upstream_endpoints();
    let endpoints = all
        .iter()
        .max_by_key(|e| serde_json::to_string(e).unwrap().len())
        .unwrap();
    let bytes = protobuf_objects::endpoints_object(endpoints);
    assert!(protobuf::endpoints_object(&bytes).is_ok());
    // Cut short or a byte flipped: an error or an object, never a panic, decoding or converting.
    crate::damaged::each_damaged(&bytes, |damaged| {
        let _ = protobuf::endpoints_object(damaged).and_then(|e| endpoints_from_k8s(&e));
    });
    let slice = protobuf_objects::enveloped("discovery.k8s.io/v1", "EndpointSlice", Vec::new());
    let e = protobuf::endpoints_object(&slice).unwrap_err();
    assert!(e.to_string().contains("Endpoints"), "{e}");
}

//! An EndpointSlice decoded from protobuf (`src/kube/protobuf/slice.rs`) converts to exactly the
//! model slice its JSON form converts to, errors included: every slice kube-controller-manager
//! wrote (`fixtures/upstream-1.36/cluster.json`) and edge cases, each encoded by prost from
//! upstream's messages. Malformed bytes are errors, never panics.

use k8s_openapi::api::discovery::v1 as discovery;
use serde_json::{Value, json};
use sliced::kube::convert::endpoint_slice_from_k8s;
use sliced::kube::protobuf;

use crate::protobuf_objects;
use crate::upstream::{objects_of_kind, whole_seconds};

fn upstream_slices() -> Vec<discovery::EndpointSlice> {
    objects_of_kind("EndpointSlice")
}

fn assert_same_conversion(slice: &discovery::EndpointSlice, case: &str) {
    let mut whole = slice.clone();
    whole_seconds(&mut whole.metadata);
    let bytes = protobuf_objects::endpoint_slice_object(slice);
    let decoded = protobuf::endpoint_slice_object(&bytes);
    let decoded = decoded.and_then(|s| endpoint_slice_from_k8s(&s));
    assert_eq!(decoded, endpoint_slice_from_k8s(&whole), "{case}");
}

#[test]
fn every_upstream_slice_converts_the_same_from_protobuf() {
    let slices = upstream_slices();
    assert_eq!(slices.len(), 23);
    for slice in &slices {
        let name = slice.metadata.name.clone().unwrap_or_default();
        assert_same_conversion(slice, &name);
    }
}

/// Each case edits the first upstream slice with endpoints; the edit must convert alike.
#[test]
fn edge_cases_convert_the_same_from_protobuf() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 16] = [
        ("no conditions", |s| {
            s["endpoints"][0]
                .as_object_mut()
                .unwrap()
                .remove("conditions");
        }),
        ("conditions each set apart", |s| {
            s["endpoints"][0]["conditions"] = json!({"ready": false, "terminating": true});
        }),
        ("hints for zones and nodes", |s| {
            s["endpoints"][0]["hints"] =
                json!({"forZones": [{"name": "a"}, {"name": "b"}], "forNodes": [{"name": "n"}]});
        }),
        ("a hostname and a deprecated topology", |s| {
            s["endpoints"][0]["hostname"] = json!("web-0");
            s["endpoints"][0]["deprecatedTopology"] = json!({"kubernetes.io/hostname": "n"});
        }),
        ("a full target reference", |s| {
            s["endpoints"][0]["targetRef"] = json!({"kind": "Pod", "namespace": "x", "name": "p",
                "uid": "6d1f0c1e-0000-4000-8000-000000000001", "apiVersion": "v1",
                "resourceVersion": "42", "fieldPath": "spec"});
        }),
        ("no node and no zone", |s| {
            let e = s["endpoints"][0].as_object_mut().unwrap();
            e.remove("nodeName");
            e.remove("zone");
        }),
        ("ports with every field and none", |s| {
            s["ports"] = json!([{"name": "http", "protocol": "TCP", "port": 80,
                "appProtocol": "kubernetes.io/h2c"}, {}, {"port": 53, "protocol": "UDP"}]);
        }),
        ("no ports", |s| {
            s.as_object_mut().unwrap().remove("ports");
        }),
        ("labels, annotations and owners", |s| {
            s["metadata"]["labels"]["extra"] = json!("");
            s["metadata"]["annotations"] = json!({"a": "b", "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"});
            s["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Service",
                "name": "s", "uid": "u", "controller": true, "blockOwnerDeletion": false}]);
        }),
        ("being deleted, with a generation", |s| {
            s["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:09Z");
            s["metadata"]["generation"] = json!(7);
        }),
        ("a generated name only", |s| {
            let m = s["metadata"].as_object_mut().unwrap();
            m.remove("name");
            m.insert("generateName".into(), json!("web-"));
        }),
        ("no name at all", |s| {
            s["metadata"].as_object_mut().unwrap().remove("name");
        }),
        ("FQDN addresses", |s| {
            s["addressType"] = json!("FQDN");
            s["endpoints"][0]["addresses"] = json!(["a.example.com"]);
        }),
        ("an IPv6 slice", |s| {
            s["addressType"] = json!("IPv6");
            s["endpoints"][0]["addresses"] = json!(["fd00::1", "fd00::2"]);
        }),
        ("an address of the other family", |s| {
            s["endpoints"][0]["addresses"] = json!(["fd00::1"]);
        }),
        ("no endpoints", |s| s["endpoints"] = json!([])),
    ];
    let slice = upstream_slices()
        .into_iter()
        .find(|s| !s.endpoints.is_empty())
        .unwrap();
    let original = serde_json::to_value(&slice).unwrap();
    for (case, edit) in cases {
        let mut value = original.clone();
        edit(&mut value);
        let edited: discovery::EndpointSlice = serde_json::from_value(value).unwrap();
        assert_same_conversion(&edited, case);
    }
}

#[test]
fn malformed_bytes_are_errors_not_panics() {
    let slices = upstream_slices();
    let slice = slices.iter().max_by_key(|s| s.endpoints.len()).unwrap();
    let bytes = protobuf_objects::endpoint_slice_object(slice);
    assert!(protobuf::endpoint_slice_object(&bytes).is_ok());
    // Cut short or a byte flipped: an error or a slice, never a panic, decoding or converting.
    crate::damaged::each_damaged(&bytes, |damaged| {
        let _ = protobuf::endpoint_slice_object(damaged).and_then(|s| endpoint_slice_from_k8s(&s));
    });
    let pod = protobuf_objects::enveloped("v1", "Pod", Vec::new());
    let e = protobuf::endpoint_slice_object(&pod).unwrap_err();
    assert!(e.to_string().contains("EndpointSlice"), "{e}");
}

//! `ObjectJson`, the written objects serialized straight from the model, against the reference
//! it stands for: k8s-openapi's types built by `object_to_k8s`, serialized. Both must make the
//! same serializer calls, so the text is compared through two serializers: serde_json (compact
//! and pretty) and serde-saphyr (YAML).

use std::sync::Arc;

use serde_json::json;
use sliced::kube::convert::{
    ObjectJson, endpoint_slice_from_k8s, endpoints_from_k8s, object_to_k8s,
};
use sliced::kube::manifest::load_str;
use sliced::sink::Object;

fn assert_prints_as_reference(what: &str, object: &Object) {
    let reference = object_to_k8s(object);
    let view = ObjectJson(object);
    assert_eq!(
        serde_json::to_string(&view).unwrap(),
        serde_json::to_string(&reference).unwrap(),
        "{what}: JSON"
    );
    assert_eq!(
        serde_json::to_string_pretty(&view).unwrap(),
        serde_json::to_string_pretty(&reference).unwrap(),
        "{what}: pretty JSON"
    );
    assert_eq!(
        serde_saphyr::to_string(&view).unwrap(),
        serde_saphyr::to_string(&reference).unwrap(),
        "{what}: YAML"
    );
}

/// kube-controller-manager's own slices and Endpoints, as read from the API server.
#[test]
fn upstream_objects_print_as_the_reference() {
    const CLUSTER: &str = include_str!("../../fixtures/upstream-1.36/cluster.json");
    let loaded = load_str("cluster.json", CLUSTER).unwrap();
    let slices = &loaded.objects.endpoint_slices;
    let endpoints = &loaded.objects.endpoints;
    assert_eq!((slices.len(), endpoints.len()), (23, 10));
    for slice in slices {
        let what = format!("slice {}", slice.meta.name);
        assert_prints_as_reference(&what, &Object::EndpointSlice(Arc::new(slice.clone())));
    }
    for e in endpoints {
        let what = format!("endpoints {}", e.meta.name);
        assert_prints_as_reference(&what, &Object::Endpoints(Arc::new(e.clone())));
    }
}

/// Every optional field set, and every one left out.
#[test]
fn every_field_set_or_left_out_prints_as_the_reference() {
    let full_slice = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abc", "generateName": "web-", "namespace": "default",
            "uid": "6f1c3c1e-4d2a-4b8e-9f00-0123456789ab", "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "deletionTimestamp": "2026-11-02T10:00:00Z",
            "labels": {"z": "last", "a": "first \"quoted\"", "kubernetes.io/service-name": "web"},
            "annotations": {"note": "two\nlines"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u-1",
                 "controller": true, "blockOwnerDeletion": true},
                {"apiVersion": "v1", "kind": "Service", "name": "other", "uid": "u-2"}
            ]
        },
        "addressType": "IPv6",
        "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"},
            {"port": 53, "protocol": "UDP"},
            {"name": "none"}
        ],
        "endpoints": [
            {"addresses": ["2001:db8::1"],
             "conditions": {"ready": true, "serving": false, "terminating": true},
             "hostname": "web-0", "nodeName": "node-a", "zone": "zone-a",
             "hints": {"forZones": [{"name": "zone-a"}, {"name": "zone-b"}],
                       "forNodes": [{"name": "node-a"}]},
             "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-0",
                           "uid": "not-a-uuid", "apiVersion": "v1", "resourceVersion": "7"}},
            {"addresses": ["2001:db8::2"], "conditions": {},
             "hints": {"forZones": [{"name": "zone-a"}]}},
            {"addresses": ["2001:db8::3"], "conditions": {"ready": false},
             "targetRef": {"name": "web-2", "uid": "6F1C3C1E-4D2A-4B8E-9F00-0123456789AB"}}
        ]
    });
    let bare_slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "b"}, "addressType": "FQDN", "endpoints": []
    });
    let fqdn_slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "f"}, "addressType": "FQDN",
        "endpoints": [{"addresses": ["db.example.com", "\"odd\""]}]
    });
    for (what, text) in [
        ("full slice", full_slice),
        ("bare slice", bare_slice),
        ("FQDN slice", fqdn_slice),
    ] {
        let k8s = serde_json::from_value(text).unwrap();
        let slice = endpoint_slice_from_k8s(&k8s).unwrap();
        assert_prints_as_reference(what, &Object::EndpointSlice(Arc::new(slice)));
    }

    let full_endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "annotations": {"endpoints.kubernetes.io/last-change-trigger-time":
                                     "2026-11-01T10:00:00Z"}},
        "subsets": [
            {"addresses": [{"ip": "10.0.0.1", "hostname": "web-0", "nodeName": "node-a",
                            "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "default",
                                          "uid": "6f1c3c1e-4d2a-4b8e-9f00-0123456789ab"}}],
             "notReadyAddresses": [{"ip": "10.0.0.2"}],
             "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "h2c"},
                       {"port": 81}]},
            {"notReadyAddresses": [{"ip": "not an ip"}]},
            {"ports": [{"port": 82, "protocol": "SCTP"}]}
        ]
    });
    let bare_endpoints =
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "b"}});
    for (what, text) in [
        ("full Endpoints", full_endpoints),
        ("bare Endpoints", bare_endpoints),
    ] {
        let k8s = serde_json::from_value(text).unwrap();
        let endpoints = endpoints_from_k8s(&k8s).unwrap();
        assert_prints_as_reference(what, &Object::Endpoints(Arc::new(endpoints)));
    }
}

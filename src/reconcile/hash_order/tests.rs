//! The prints and hashes against Go's own.
#![cfg(test)]

use std::sync::Arc;

use super::*;
use crate::model::{Protocol, Uid, intern};

// Prints and hashes made by go-spew (DeepHashObject's settings) and Go's fnv.New128a() over
// structs with upstream's field order and package names.
#[test]
fn prints_and_hashes_are_go_spew_and_fnv128a() {
    let port = EndpointsPort {
        name: Some(intern("https")),
        port: 8443,
        protocol: Some(Protocol::Tcp),
        app_protocol: Some(intern("kubernetes.io/h2c")),
    };
    assert_eq!(
        print_endpoints_port(&port).as_str(),
        "(v1.EndpointPort){Name:(string)https Port:(int32)8443 Protocol:(v1.Protocol)TCP AppProtocol:(*string)kubernetes.io/h2c}"
    );
    assert_eq!(
        endpoints_port_hash(&port),
        0xf39f05385df1c5146bde870d0bd7c0e6
    );

    let slice_port = EndpointPort {
        name: Some(intern("http")),
        port: Some(53),
        protocol: Some(Protocol::Udp),
        app_protocol: None,
    };
    assert_eq!(
        print_slice_port(&slice_port).as_str(),
        "(v1.EndpointPort){Name:(*string)http Protocol:(*v1.Protocol)UDP Port:(*int32)53 AppProtocol:(*string)<nil>}"
    );
    assert_eq!(
        slice_port_hash(&slice_port),
        0xb86ad2b9cc5020b12db2e867e72c9d73
    );
    let unset = EndpointPort {
        name: None,
        port: None,
        protocol: None,
        app_protocol: None,
    };
    assert_eq!(slice_port_hash(&unset), 0xad866eb7cd5162a9e20434ebd9deeacd);

    let subset = EndpointSubset {
        addresses: vec![
            Arc::new(EndpointAddress {
                ip: Address::Ip("10.0.0.1".parse().unwrap()),
                hostname: Some(intern("db-0")),
                node_name: Some(intern("node-a")),
                target_ref: Some(TargetRef {
                    kind: Some(intern("Pod")),
                    namespace: Some(intern("ns")),
                    name: Some(intern("db-0")),
                    uid: Some(Uid::new("u-1")),
                    api_version: None,
                    resource_version: None,
                }),
            }),
            Arc::new(EndpointAddress {
                ip: Address::Ip("fd00::1".parse().unwrap()),
                hostname: None,
                node_name: Some(intern("")),
                target_ref: None,
            }),
        ],
        not_ready_addresses: Vec::new(),
        ports: vec![EndpointsPort {
            name: None,
            port: 80,
            protocol: Some(Protocol::Tcp),
            app_protocol: None,
        }],
    };
    assert_eq!(
        print_subset(&subset).as_str(),
        "(v1.EndpointSubset){Addresses:([]v1.EndpointAddress)[{IP:(string)10.0.0.1 Hostname:(string)db-0 NodeName:(*string)node-a TargetRef:(*v1.ObjectReference){Kind:(string)Pod Namespace:(string)ns Name:(string)db-0 UID:(types.UID)u-1 APIVersion:(string) ResourceVersion:(string) FieldPath:(string)}} {IP:(string)fd00::1 Hostname:(string) NodeName:(*string) TargetRef:(*v1.ObjectReference)<nil>}] NotReadyAddresses:([]v1.EndpointAddress)<nil> Ports:([]v1.EndpointPort)[{Name:(string) Port:(int32)80 Protocol:(v1.Protocol)TCP AppProtocol:(*string)<nil>}]}"
    );
    assert_eq!(subset_hash(&subset), 0xce59a5d9ddfd08be08084d18e50eb39f);
}

/// `tests/vectors/go_hash.json`: objects, their go-spew prints and FNV-1a hashes, made by Go
/// (see its README).
fn vectors() -> serde_json::Value {
    serde_json::from_str(include_str!("../../../tests/vectors/go_hash.json")).unwrap()
}

fn go_hash(v: &serde_json::Value) -> u128 {
    u128::from_str_radix(v.as_str().unwrap(), 16).unwrap()
}

/// The model of the vector's object; `None` when sliced refuses it (a port out of range),
/// so it can never be printed.
fn endpoints_of(subsets: Vec<serde_json::Value>) -> Option<crate::model::Endpoints> {
    let object = serde_json::json!({
        "metadata": {"name": "v", "namespace": "v"},
        "subsets": subsets,
    });
    crate::kube::convert::endpoints_from_k8s(&serde_json::from_value(object).unwrap()).ok()
}

fn slice_ports_of(ports: Vec<serde_json::Value>) -> Option<Vec<EndpointPort>> {
    let object = serde_json::json!({
        "metadata": {"name": "v", "namespace": "v"},
        "addressType": "IPv4",
        "endpoints": [],
        "ports": ports,
    });
    let k8s = serde_json::from_value(object).unwrap();
    crate::kube::convert::endpoint_slice_from_k8s(&k8s)
        .ok()
        .map(|s| s.ports)
}

/// A slice port whose protocol is set to "": the API server refuses it (not TCP, UDP or
/// SCTP) and the model cannot hold it, so such vectors are skipped.
fn has_empty_slice_protocol(objects: &serde_json::Value) -> bool {
    objects.to_string().contains("\"protocol\":\"\"")
}

/// Vectors the model cannot hold as given are skipped: a `fieldPath` (the model keeps none, no
/// controller sets one), or an IP in a non-canonical text (`fd00::0`; sliced keeps IPs as
/// addresses and writes them canonical, as pods report them).
fn unrepresentable(subset: &serde_json::Value) -> bool {
    let non_canonical = ["addresses", "notReadyAddresses"].iter().any(|list| {
        subset[list].as_array().is_some_and(|a| {
            a.iter().any(|address| {
                let text = address["ip"].as_str().unwrap_or("");
                text.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.to_string() != text)
            })
        })
    });
    non_canonical || subset.to_string().contains("fieldPath")
}

#[test]
fn every_go_vector_prints_and_hashes_the_same() {
    let v = vectors();
    let mut checked = 0;
    for case in v["core_ports"].as_array().unwrap() {
        let Some(e) = endpoints_of(vec![
            serde_json::json!({"addresses": [{"ip": "10.0.0.1"}], "ports": [case["object"]]}),
        ]) else {
            continue;
        };
        let port = &e.subsets[0].ports[0];
        assert_eq!(print_endpoints_port(port).as_str(), case["spew"], "{case}");
        assert_eq!(
            endpoints_port_hash(port),
            go_hash(&case["fnv128a"]),
            "{case}"
        );
        checked += 1;
    }
    for case in v["slice_ports"].as_array().unwrap() {
        if has_empty_slice_protocol(&case["object"]) {
            continue;
        }
        let Some(ports) = slice_ports_of(vec![case["object"].clone()]) else {
            continue;
        };
        let port = &ports[0];
        assert_eq!(print_slice_port(port).as_str(), case["spew"], "{case}");
        assert_eq!(slice_port_hash(port), go_hash(&case["fnv128a"]), "{case}");
        checked += 1;
    }
    for case in v["subsets"].as_array().unwrap() {
        if unrepresentable(&case["object"]) {
            continue;
        }
        let Some(e) = endpoints_of(vec![case["object"].clone()]) else {
            continue;
        };
        assert_eq!(print_subset(&e.subsets[0]).as_str(), case["spew"], "{case}");
        assert_eq!(
            subset_hash(&e.subsets[0]),
            go_hash(&case["fnv128a"]),
            "{case}"
        );
        checked += 1;
    }
    // Most vectors are valid objects; the rest hold ports out of range, which sliced refuses.
    assert!(checked > 300, "{checked} vectors checked");
}

/// Resumed after any address, at the state pushed for it, a subset's hash is still Go's: what a
/// sync reuses from a subset remembered is the state a full print passes through.
#[test]
fn a_hash_resumed_after_any_address_is_gos() {
    let v = vectors();
    let mut resumed = 0;
    for case in v["subsets"].as_array().unwrap() {
        if unrepresentable(&case["object"]) {
            continue;
        }
        let Some(e) = endpoints_of(vec![case["object"].clone()]) else {
            continue;
        };
        let s = &e.subsets[0];
        let want = go_hash(&case["fnv128a"]);
        let (ready, not_ready) = (s.addresses.len(), s.not_ready_addresses.len());
        let fields = |list: &'static str, from: usize| {
            let list = if list == "ready" {
                &s.addresses
            } else {
                &s.not_ready_addresses
            };
            list[from..].iter().map(AddressFields::from)
        };
        let mut states = Vec::new();
        let full = subset_fields_hash_resumed(
            Resume::Start,
            0,
            (ready, fields("ready", 0)),
            (not_ready, fields("not_ready", 0)),
            &s.ports,
            &mut states,
        );
        assert_eq!(full, want, "{case}");
        assert_eq!(states.len(), ready + not_ready, "{case}");
        for (at, &state) in states.iter().enumerate() {
            let (from, ready_from, not_ready_from) = if at < ready {
                (Resume::Ready(at + 1), at + 1, 0)
            } else {
                (Resume::NotReady(at + 1 - ready), ready, at + 1 - ready)
            };
            let mut later = Vec::new();
            let hash = subset_fields_hash_resumed(
                from,
                state,
                (ready, fields("ready", ready_from)),
                (not_ready, fields("not_ready", not_ready_from)),
                &s.ports,
                &mut later,
            );
            assert_eq!(hash, want, "{case} resumed after address {at}");
            assert_eq!(later, states[at + 1..], "{case} resumed after address {at}");
            resumed += 1;
        }
    }
    assert!(resumed > 100, "{resumed} resumptions checked");
}

#[test]
fn sorting_gives_gos_order() {
    let v = vectors();
    let order = |case: &serde_json::Value| -> Vec<usize> {
        case["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect()
    };
    for case in v["sorted"]["core_ports"].as_array().unwrap() {
        let objects = case["objects"].as_array().unwrap().clone();
        let Some(e) = endpoints_of(vec![
            serde_json::json!({"addresses": [{"ip": "10.0.0.1"}], "ports": objects}),
        ]) else {
            continue;
        };
        let given = e.subsets[0].ports.clone();
        let mut sorted = given.clone();
        sort_endpoints_ports(&mut sorted);
        let want: Vec<EndpointsPort> = order(case).iter().map(|&i| given[i].clone()).collect();
        assert_eq!(sorted, want, "{case}");
    }
    for case in v["sorted"]["slice_ports"].as_array().unwrap() {
        if has_empty_slice_protocol(&case["objects"]) {
            continue;
        }
        let Some(given) = slice_ports_of(case["objects"].as_array().unwrap().clone()) else {
            continue;
        };
        let mut sorted = given.clone();
        sort_slice_ports(&mut sorted);
        let want: Vec<EndpointPort> = order(case).iter().map(|&i| given[i].clone()).collect();
        assert_eq!(sorted, want, "{case}");
    }
    for case in v["sorted"]["subsets"].as_array().unwrap() {
        let objects = case["objects"].as_array().unwrap().clone();
        if objects.iter().any(unrepresentable) {
            continue;
        }
        let Some(e) = endpoints_of(objects) else {
            continue;
        };
        let given = e.subsets;
        let mut sorted = given.clone();
        sort_subsets(&mut sorted);
        let want: Vec<EndpointSubset> = order(case).iter().map(|&i| given[i].clone()).collect();
        assert_eq!(sorted, want, "{case}");
    }
}

#[test]
fn fnv128a_of_nothing_is_the_offset_basis() {
    assert_eq!(fnv128a(b""), FNV128_OFFSET);
    // Go: fnv.New128a() over "a".
    assert_eq!(fnv128a(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
}

//! Taking over from kube-controller-manager, and handing back, with zero writes: the objects
//! kube-controller-manager 1.36 wrote on a real API server (`fixtures/upstream-1.36/cluster.json`:
//! single-port, multi-port, multi-protocol, two port sets, dual-stack, PreferSameZone and
//! PreferSameNode, topology-aware hints, headless, publishNotReadyAddresses, a terminating pod, a
//! mirrored Endpoints, and a service over the Endpoints capacity) are what sliced would write.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use sliced::kube::convert::object_to_json;
use sliced::kube::manifest;
use sliced::model::keys;
use sliced::reconcile::Options;
use sliced::sink::{Kind, Verb};
use sliced::snapshot::{Controllers, Snapshot, reconcile_snapshot_with};

const CLUSTER: &str = "fixtures/upstream-1.36/cluster.json";

fn cluster() -> Snapshot {
    manifest::load_file(CLUSTER)
        .unwrap_or_else(|e| panic!("{e}"))
        .objects
}

fn raw_items() -> Vec<Value> {
    let text = std::fs::read_to_string(CLUSTER).unwrap();
    let list: Value = serde_json::from_str(&text).unwrap();
    list["items"].as_array().unwrap().clone()
}

/// Objects a controller wrote: Endpoints with the Endpoints controller's label, and slices managed
/// by the EndpointSlice or mirroring controller.
fn controller_written(item: &Value) -> bool {
    let labels = &item["metadata"]["labels"];
    match item["kind"].as_str() {
        Some("Endpoints") => labels[keys::LABEL_ENDPOINTS_MANAGED_BY] == keys::ENDPOINTS_CONTROLLER,
        Some("EndpointSlice") => labels[keys::LABEL_MANAGED_BY].is_string(),
        _ => false,
    }
}

/// The object with every map's keys sorted (field order is the encoder's, not the object's).
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// What differs by nature between two writers: identity, server-set metadata, and the trigger
/// time (when the writer saw the change).
fn comparable(mut object: Value) -> Value {
    let meta = object["metadata"].as_object_mut().unwrap();
    for field in [
        "name",
        "generateName",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        meta.remove(field);
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.remove(keys::ANNOTATION_TRIGGER_TIME);
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
    canonical(&object)
}

fn service_of(slice: &Value) -> String {
    format!(
        "{}/{}",
        slice["metadata"]["namespace"].as_str().unwrap(),
        slice["metadata"]["labels"][keys::LABEL_SERVICE_NAME]
            .as_str()
            .unwrap()
    )
}

/// A service's slices of one address type: everything but the endpoints, which upstream spreads
/// over slices in pod order, so those are compared as one multiset.
#[derive(Debug, PartialEq)]
struct SliceGroup {
    shells: BTreeSet<String>,
    endpoints: BTreeMap<String, usize>,
}

fn slice_groups<'a>(slices: impl Iterator<Item = &'a Value>) -> BTreeMap<String, SliceGroup> {
    let mut groups: BTreeMap<String, SliceGroup> = BTreeMap::new();
    for slice in slices {
        let slice = comparable(slice.clone());
        let key = format!("{} {}", service_of(&slice), slice["addressType"]);
        let group = groups.entry(key).or_insert_with(|| SliceGroup {
            shells: BTreeSet::new(),
            endpoints: BTreeMap::new(),
        });
        let mut shell = slice.clone();
        let endpoints = shell
            .as_object_mut()
            .unwrap()
            .remove("endpoints")
            .unwrap_or(json!([]));
        group.shells.insert(shell.to_string());
        for e in endpoints.as_array().unwrap() {
            *group.endpoints.entry(e.to_string()).or_default() += 1;
        }
    }
    groups
}

#[test]
fn sliced_over_a_cluster_kube_controller_manager_wrote_writes_nothing() {
    let result = reconcile_snapshot_with(&cluster(), &Options::default(), Controllers::ALL, 0);
    let writes: Vec<String> = result
        .writes
        .iter()
        .map(|w| {
            let m = w.sent.meta();
            format!(
                "{} {} {}/{}",
                w.verb.as_str(),
                w.sent.kind(),
                m.namespace,
                m.name
            )
        })
        .collect();
    assert!(writes.is_empty(), "writes at take-over: {writes:#?}");
    assert!(result.errors.is_empty(), "{:?}", result.errors);
}

#[test]
fn from_scratch_sliced_writes_what_kube_controller_manager_wrote() {
    let items = raw_items();
    let (upstream, inputs): (Vec<Value>, Vec<Value>) =
        items.into_iter().partition(controller_written);
    assert_eq!(
        upstream.iter().filter(|o| o["kind"] == "Endpoints").count(),
        9,
        "the fixture's controller-written Endpoints"
    );
    assert_eq!(
        upstream
            .iter()
            .filter(|o| o["kind"] == "EndpointSlice")
            .count(),
        23
    );
    let list = json!({"apiVersion": "v1", "kind": "List", "items": inputs});
    let snapshot = manifest::load_str("inputs", &list.to_string())
        .unwrap_or_else(|e| panic!("{e}"))
        .objects;
    let result = reconcile_snapshot_with(&snapshot, &Options::default(), Controllers::ALL, 0);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert!(
        result.writes.iter().all(|w| w.verb == Verb::Create),
        "only creates from scratch"
    );
    let written: Vec<Value> = result
        .writes
        .iter()
        .map(|w| object_to_json(&w.sent).unwrap())
        .collect();

    // Endpoints: byte for byte, subsets, addresses and ports in upstream's order.
    let by_name = |objects: &[Value]| -> BTreeMap<String, Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == "Endpoints")
            .map(|o| {
                let m = &o["metadata"];
                (
                    format!(
                        "{}/{}",
                        m["namespace"].as_str().unwrap(),
                        m["name"].as_str().unwrap()
                    ),
                    comparable(o.clone()),
                )
            })
            .collect()
    };
    let ours = by_name(&written);
    let theirs = by_name(&upstream);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>()
    );
    for (name, want) in &theirs {
        let got = &ours[name];
        assert_eq!(
            serde_json::to_string_pretty(got).unwrap(),
            serde_json::to_string_pretty(want).unwrap(),
            "Endpoints {name}"
        );
    }

    // EndpointSlices: per service and address type, the same slices but for which endpoints share
    // one (upstream fills slices in pod order).
    let slices =
        |objects: &[Value]| slice_groups(objects.iter().filter(|o| o["kind"] == "EndpointSlice"));
    let ours = slices(&written);
    let theirs = slices(&upstream);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>()
    );
    for (key, want) in &theirs {
        assert_eq!(&ours[key], want, "EndpointSlices of {key}");
    }
    let slice_count = |objects: &[Value]| {
        objects
            .iter()
            .filter(|o| o["kind"] == "EndpointSlice")
            .count()
    };
    assert_eq!(slice_count(&written), slice_count(&upstream));
}

#[test]
fn objects_sliced_does_not_write_are_printed_as_given() {
    // The mirroring controller's input: a user's Endpoints, IPs as the user wrote them.
    let manifest = manifest::load_str(
        "user.yaml",
        "apiVersion: v1\nkind: Endpoints\nmetadata: {name: legacy, namespace: db}\n\
         subsets:\n- addresses: [{ip: 010.000.000.001}]\n  ports: [{port: 1433}]\n",
    )
    .unwrap();
    let given = &manifest.given[&(
        Kind::Endpoints,
        sliced::model::Name::new("db"),
        sliced::model::Name::new("legacy"),
    )]
        .to_value()
        .unwrap();
    assert_eq!(given["subsets"][0]["addresses"][0]["ip"], "010.000.000.001");
    assert_eq!(given["kind"], "Endpoints");
}

//! The JSON fast path (items decoded straight into the model, in parallel) and the YAML item path
//! (items cut by line, parsed alone) against the whole-file value path (every document read into
//! a value tree first): one List, written as JSON and as YAML, must load the same objects,
//! warnings, objects as given and first error. The
//! objects are kube-controller-manager's own (`fixtures/upstream-1.36/cluster.json`), and each
//! case below changes one item the way a hand-edited or odd dump does.

use serde_json::{Value, json};
use sliced::kube::manifest::{LoadError, Manifest, load_str, load_str_whole};

use super::upstream_items as items;

fn list(items: &[Value]) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// Loads `document` as JSON (the JSON path) and as YAML (the YAML item path).
fn both(document: &Value) -> (Result<Manifest, LoadError>, Result<Manifest, LoadError>) {
    let json = serde_json::to_string_pretty(document).unwrap();
    let yaml = serde_saphyr::to_string(document).unwrap();
    (load_str("f", &json), load_str("f", &yaml))
}

/// The JSON path and the YAML item path each load what the whole-file value path loads.
fn assert_same(case: &str, document: &Value) {
    let (json, yaml) = both(document);
    let whole = || load_str_whole("f", &serde_saphyr::to_string(document).unwrap());
    super::assert_alike(&format!("{case} (JSON)"), json, whole());
    super::assert_alike(&format!("{case} (YAML)"), yaml, whole());
}

#[test]
fn a_cluster_dump_loads_alike_as_json_and_as_yaml() {
    let items = items();
    assert_same("the cluster", &list(&items));
    let loaded = load_str("f", &serde_json::to_string(&list(&items)).unwrap()).unwrap();
    assert_eq!(loaded.objects.pods.len(), 1083);
    assert_eq!(loaded.objects.endpoint_slices.len(), 23);
}

/// Each case edits the first item of a kind; the edit must load alike both ways.
#[test]
fn odd_and_malformed_items_load_alike_as_json_and_as_yaml() {
    type Edit = fn(&mut Value);
    let cases: [(&str, &str, Edit); 23] = [
        // A field no controller reads is not checked, on either path (as the watch decodes).
        ("pod resources malformed", "Pod", |p| {
            p["spec"]["containers"][0]["resources"] = json!("lots")
        }),
        ("pod ip not an ip", "Pod", |p| {
            p["status"]["podIP"] = json!("10.0.0.300")
        }),
        ("pod ips not a list", "Pod", |p| {
            p["status"]["podIPs"] = json!("x")
        }),
        ("pod port out of range", "Pod", |p| {
            p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 70000}])
        }),
        ("pod port null", "Pod", |p| {
            p["spec"]["containers"][0]["ports"] = json!([{"name": "x", "containerPort": null}])
        }),
        ("pod without kind", "Pod", |p| {
            p.as_object_mut().unwrap().remove("kind");
        }),
        ("pod kind empty", "Pod", |p| p["kind"] = json!("")),
        ("pod kind a number", "Pod", |p| p["kind"] = json!(5)),
        ("pod of another apiVersion", "Pod", |p| {
            p["apiVersion"] = json!("v2")
        }),
        ("pod without a name", "Pod", |p| {
            p["metadata"].as_object_mut().unwrap().remove("name");
        }),
        ("pod label with escapes", "Pod", |p| {
            p["metadata"]["labels"]["quote\"d"] = json!("tab\there")
        }),
        ("pod name with escapes", "Pod", |p| {
            p["metadata"]["name"] = json!("p\u{e9}\\d")
        }),
        ("pod kind with an escape", "Pod", |p| {
            p["kind"] = json!("P\u{6f}d")
        }),
        ("pod creation time malformed", "Pod", |p| {
            p["metadata"]["creationTimestamp"] = json!("yesterday")
        }),
        ("another kind", "Pod", |p| p["kind"] = json!("ConfigMap")),
        (
            "a nested List",
            "Pod",
            |p| *p = json!({"apiVersion": "v1", "kind": "List", "items": [p.clone()]}),
        ),
        ("a null item", "Pod", |p| *p = Value::Null),
        ("a number item", "Node", |p| *p = json!(3)),
        ("service type unknown", "Service", |s| {
            s["spec"]["type"] = json!("Magic")
        }),
        ("service port a string", "Service", |s| {
            s["spec"]["ports"][0]["port"] = json!("80")
        }),
        ("slice address type unknown", "EndpointSlice", |s| {
            s["addressType"] = json!("IPv5")
        }),
        ("endpoints address not an ip", "Endpoints", |e| {
            e["subsets"][0]["addresses"][0]["ip"] = json!("010.000.000.001")
        }),
        ("node without a name", "Node", |n| {
            n["metadata"].as_object_mut().unwrap().remove("name");
        }),
    ];
    for (case, kind, edit) in cases {
        let mut items = items();
        let at = items.iter().position(|i| i["kind"] == kind).unwrap();
        edit(&mut items[at]);
        assert_same(case, &list(&items));
    }
}

/// Items of a typed list take its kind when they have none, on both paths.
#[test]
fn a_typed_list_lends_its_kind_alike() {
    let pods: Vec<Value> = items()
        .into_iter()
        .filter(|i| i["kind"] == "Pod")
        .take(20)
        .map(|mut p| {
            let object = p.as_object_mut().unwrap();
            object.remove("kind");
            object.remove("apiVersion");
            p
        })
        .collect();
    let document = json!({"apiVersion": "v1", "kind": "PodList", "items": pods});
    assert_same("a PodList", &document);
    let (fast, _) = both(&document);
    assert_eq!(fast.unwrap().objects.pods.len(), 20);
}

/// Several JSON documents, one of them a List, and JSON's own stream forms.
#[test]
fn several_documents_load_alike() {
    let items = items();
    let (first, rest) = items.split_at(100);
    let json = format!(
        "{}\n{}\n",
        serde_json::to_string(&list(first)).unwrap(),
        serde_json::to_string(&list(rest)).unwrap()
    );
    let yaml = format!(
        "{}---\n{}",
        serde_saphyr::to_string(&list(first)).unwrap(),
        serde_saphyr::to_string(&list(rest)).unwrap()
    );
    let (fast, values) = (load_str("f", &json).unwrap(), load_str("f", &yaml).unwrap());
    assert_eq!(fast.objects.pods, values.objects.pods);
    assert_eq!(fast.objects.services, values.objects.services);
    assert_eq!(fast.warnings, values.warnings);
    // A bare array of objects, as some tools print.
    let array = serde_json::to_string(&items[..50]).unwrap();
    let as_list = serde_json::to_string(&list(&items[..50])).unwrap();
    assert_eq!(
        load_str("f", &array).unwrap().objects.pods,
        load_str("f", &as_list).unwrap().objects.pods
    );
}

/// A file large enough that its mapped pages are let go behind the decoding (past 16 MB, and
/// more items than one parallel chunk) loads what its text loads.
#[test]
fn a_large_mapped_file_loads_as_its_text() {
    let text = serde_json::to_string_pretty(&super::upstream_copies(15)).unwrap();
    let from_text = load_str("f", &text).unwrap();
    assert_eq!(from_text.objects.pods.len(), 15 * 1083);
    super::assert_file_loads_as_text(&text, "json", &from_text);
}

/// An item naming its kind or apiVersion twice: the fast path reads no further than the first of
/// each, so the typed decoding must refuse the repeat and leave the item to the value path, which
/// takes the last (as Go's decoder does). Either way the file loads alike.
#[test]
fn an_item_repeating_its_kind_or_api_version_loads_alike() {
    let items = items();
    let first = |kind: &str| {
        let at = items.iter().position(|i| i["kind"] == kind).unwrap();
        serde_json::to_string(&items[at]).unwrap()
    };
    // Each item's text with `extra` added as its last fields.
    let cases = [
        (
            "a pod later called a Service",
            "Pod",
            r#""kind": "Service""#,
        ),
        ("a pod later called a Pod again", "Pod", r#""kind": "Pod""#),
        (
            "a pod of a later apiVersion",
            "Pod",
            r#""apiVersion": "v2""#,
        ),
        ("a pod whose kind is later null", "Pod", r#""kind": null"#),
        (
            "a service later called a Pod",
            "Service",
            r#""kind": "Pod""#,
        ),
        (
            "a slice of a later apiVersion",
            "EndpointSlice",
            r#""apiVersion": "discovery.k8s.io/v1beta1""#,
        ),
    ];
    for (case, kind, extra) in cases {
        let item = first(kind);
        let item = format!("{},{extra}}}", item.strip_suffix('}').unwrap());
        let rest: Vec<String> = items[..40]
            .iter()
            .map(|i| serde_json::to_string(i).unwrap())
            .collect();
        let text = format!(
            r#"{{"apiVersion": "v1", "kind": "List", "items": [{item}, {}]}}"#,
            rest.join(", ")
        );
        super::assert_alike(case, load_str("f", &text), load_str_whole("f", &text));
    }
}

/// The items are cut on a thread of their own and taken in before the List names its kind, which
/// kubectl prints after them: a repeated `items` (the last counts), `items` in an object that is
/// no List, an item the fast path cannot take past the first batch of a typed list, and a later
/// document that is no JSON all load as the whole-file value path loads them.
#[test]
fn items_taken_in_before_the_list_names_its_kind_load_alike() {
    let pods: Vec<Value> = items().into_iter().filter(|i| i["kind"] == "Pod").collect();
    let text = |v: &Value| serde_json::to_string(v).unwrap();
    let joined = |items: &[Value]| items.iter().map(text).collect::<Vec<_>>().join(",");

    let repeated = format!(
        r#"{{"apiVersion":"v1","items":[{}],"items":[{}],"kind":"List"}}"#,
        joined(&pods[..5]),
        joined(&pods[5..8])
    );
    let not_a_list = format!(
        r#"{{"apiVersion":"v1","items":[{}],"kind":"Pod","metadata":{{"name":"p"}}}}"#,
        joined(&pods[..3])
    );
    // Past the first batch of cut items, some without a kind, which the PodList lends them.
    let mut typed: Vec<Value> = pods.iter().cycle().take(2_600).cloned().collect();
    for (i, pod) in typed.iter_mut().enumerate() {
        pod["metadata"]["name"] = json!(format!("pod-{i}"));
        if i % 700 == 400 {
            pod.as_object_mut().unwrap().remove("kind");
        }
    }
    let typed = format!(
        r#"{{"apiVersion":"v1","items":[{}],"kind":"PodList"}}"#,
        joined(&typed)
    );
    let then_broken = format!("{}\n{{\"kind\": ", text(&list(&pods[..50])));
    for (case, text) in [
        ("a repeated items", repeated),
        ("items of an object that is no List", not_a_list),
        ("a typed list past its first batch", typed),
        ("a List, then a document cut short", then_broken),
    ] {
        super::assert_alike(case, load_str("f", &text), load_str_whole("f", &text));
    }
}

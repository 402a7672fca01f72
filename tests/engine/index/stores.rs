//! Store operations: apply, delete, get, reset, len, for every kind.

use std::sync::Arc;

use sliced::index::{Index, NodeStore, SliceStore};
use sliced::model::{AddressType, EndpointSlice, Meta, Node, Pod, intern, keys};

use super::common::{key, keys_of, labels, meta, names, pod, service};

#[test]
fn service_key_displays_and_orders() {
    assert_eq!(key("ns", "web").to_string(), "ns/web");
    assert!(key("a", "z") < key("b", "a"));
    assert!(key("a", "a") < key("a", "b"));
}

#[test]
fn pod_store_apply_delete_get() {
    let index = Index::new();
    let pods = index.pods();
    assert!(pods.apply(pod("ns", "a", &[("app", "x")])).is_none());
    let old = pods.apply(pod("ns", "a", &[("app", "y")]));
    assert_eq!(
        old.map(|p| p.meta.labels.clone()),
        Some(labels(&[("app", "x")]))
    );
    assert_eq!(pods.len(), 1);
    let stored = pods.get("ns", "a").map(|p| p.meta.labels.clone());
    assert_eq!(stored, Some(labels(&[("app", "y")])));
    assert!(pods.get("other", "a").is_none());
    assert!(pods.delete("ns", "b").is_none());
    assert!(pods.delete("other", "a").is_none());
    assert!(pods.delete("ns", "a").is_some());
    assert!(pods.is_empty());
    assert!(pods.get("ns", "a").is_none());
}

#[test]
fn service_store_apply_delete_get_keys() {
    let index = Index::new();
    let services = index.services();
    assert!(services.apply(service("b", "s", None)).is_none());
    assert!(services.apply(service("a", "s", Some(&[]))).is_none());
    assert!(services.apply(service("a", "s", Some(&[]))).is_some());
    assert_eq!(services.len(), 2);
    assert_eq!(keys_of(&services.keys()), ["a/s", "b/s"]);
    assert!(services.get("a", "s").is_some());
    assert!(services.delete("a", "s").is_some());
    assert!(services.delete("a", "s").is_none());
    assert_eq!(services.len(), 1);
}

fn app(p: &Pod) -> String {
    let value = p.meta.labels.get("app").map_or("", |v| v.as_str());
    format!("{}={value}", p.meta.key())
}

#[test]
fn pod_reset_reports_deletes_and_changes_only() {
    let index = Index::new();
    let pods = index.pods();
    pods.apply(pod("n1", "keep", &[("app", "x")]));
    pods.apply(pod("n1", "change", &[("app", "x")]));
    pods.apply(pod("n1", "gone", &[("app", "x")]));
    pods.apply(pod("n2", "gone-ns", &[]));
    let kept = pods.get("n1", "keep").unwrap_or_default();

    let relist = pods.reset([
        pod("n1", "keep", &[("app", "x")]),
        pod("n1", "change", &[("app", "old")]),
        // A later duplicate wins.
        pod("n1", "change", &[("app", "y")]),
        pod("n3", "new", &[]),
    ]);
    let deleted: Vec<String> = relist.deleted.iter().map(|p| p.meta.key()).collect();
    assert_eq!(deleted, ["n1/gone", "n2/gone-ns"]);
    let applied: Vec<(Option<String>, String)> = relist
        .applied
        .iter()
        .map(|(old, new)| (old.as_deref().map(app), app(new)))
        .collect();
    assert_eq!(
        applied,
        [
            (Some("n1/change=x".to_owned()), "n1/change=y".to_owned()),
            (None, "n3/new=".to_owned()),
        ]
    );
    // An unchanged pod keeps its stored version.
    assert!(Arc::ptr_eq(
        &kept,
        &pods.get("n1", "keep").unwrap_or_default()
    ));
    assert_eq!(pods.len(), 3);
    assert_eq!(pods.reset(Vec::<Pod>::new()).deleted.len(), 3);
    assert!(pods.is_empty());
}

#[test]
fn service_reset_recomputes_members() {
    let index = Index::new();
    index.pods().apply(pod("ns", "a", &[("app", "x")]));
    index.pods().apply(pod("ns", "b", &[("app", "y")]));
    index
        .services()
        .apply(service("ns", "s", Some(&[("app", "x")])));
    let list = || {
        [
            service("ns", "s", Some(&[("app", "y")])),
            service("ns", "t", None),
        ]
    };
    let relist = index.services().reset(list());
    assert!(relist.deleted.is_empty());
    assert_eq!(relist.applied.len(), 2);
    assert_eq!(names(&index.members(&key("ns", "s"))), ["b"]);
    assert!(index.members(&key("ns", "t")).is_empty());
    assert!(index.services().reset(list()).is_empty());
}

#[test]
fn node_store_apply_delete_get_reset() {
    let nodes = NodeStore::new();
    let node = |name: &str, ready: bool| Node {
        name: intern(name),
        ready,
        ..Node::default()
    };
    let node_names =
        |list: &[Arc<Node>]| -> Vec<String> { list.iter().map(|n| n.name.to_string()).collect() };
    assert!(nodes.apply(node("b", true)).is_none());
    assert!(nodes.apply(node("a", true)).is_none());
    assert_eq!(nodes.apply(node("a", false)).map(|n| n.ready), Some(true));
    assert_eq!(nodes.len(), 2);
    assert_eq!(node_names(&nodes.list()), ["a", "b"]);

    let relist = nodes.reset([node("a", false), node("c", true)]);
    assert_eq!(node_names(&relist.deleted), ["b"]);
    assert_eq!(relist.applied.len(), 1);
    assert!(relist.applied[0].0.is_none());
    assert!(nodes.delete("a").is_some());
    assert!(nodes.get("a").is_none());
    assert_eq!(nodes.len(), 1);
}

fn slice(ns: &str, name: &str, service: Option<&str>, managed: bool) -> EndpointSlice {
    let manager = if managed {
        keys::ENDPOINTSLICE_CONTROLLER
    } else {
        "someone-else"
    };
    let mut pairs = vec![(keys::LABEL_MANAGED_BY, manager)];
    pairs.extend(service.map(|s| (keys::LABEL_SERVICE_NAME, s)));
    EndpointSlice {
        meta: Meta {
            labels: labels(&pairs),
            ..meta(ns, name)
        },
        generate_name: None,
        owner_references: Vec::new(),
        address_type: AddressType::IPv4,
        ports: Vec::new(),
        endpoints: Vec::new(),
    }
}

#[test]
fn slice_store_keeps_managed_slices_grouped_by_service() {
    let slices = SliceStore::new();
    assert!(
        slices
            .apply(slice("ns", "web-2", Some("web"), true))
            .is_none()
    );
    assert!(
        slices
            .apply(slice("ns", "web-1", Some("web"), true))
            .is_none()
    );
    assert!(
        slices
            .apply(slice("ns", "db-1", Some("db"), true))
            .is_none()
    );
    assert!(slices.apply(slice("ns", "orphan", None, true)).is_none());
    assert!(
        slices
            .apply(slice("ns", "theirs", Some("web"), false))
            .is_none()
    );
    assert!(slices.apply(slice("ns", "", Some("web"), true)).is_none());
    assert_eq!(slices.len(), 4);
    let group = |s: &str| -> Vec<String> {
        let list = slices.for_service(&key("ns", s));
        list.iter().map(|s| s.meta.name.to_string()).collect()
    };
    assert_eq!(group("web"), ["web-1", "web-2"]);
    assert_eq!(group("db"), ["db-1"]);

    // Relabelled for another service: it moves group.
    assert!(
        slices
            .apply(slice("ns", "web-2", Some("db"), true))
            .is_some()
    );
    assert_eq!(group("web"), ["web-1"]);
    assert_eq!(group("db"), ["db-1", "web-2"]);
    // No longer ours: removed, and the previous version returned for the handler.
    assert!(
        slices
            .apply(slice("ns", "web-1", Some("web"), false))
            .is_some()
    );
    assert!(group("web").is_empty());
    assert!(slices.get("ns", "web-1").is_none());
    assert_eq!(slices.len(), 3);

    let relist = slices.reset([
        slice("ns", "db-1", Some("db"), true),
        slice("ns", "x", Some("web"), true),
        slice("ns", "y", Some("web"), false),
    ]);
    let deleted: Vec<String> = relist
        .deleted
        .iter()
        .map(|s| s.meta.name.to_string())
        .collect();
    assert_eq!(deleted, ["orphan", "web-2"]);
    assert_eq!(relist.applied.len(), 1);
    assert_eq!(group("web"), ["x"]);
    assert!(slices.delete("ns", "x").is_some());
    assert!(slices.delete("ns", "db-1").is_some());
    assert!(slices.is_empty());
}

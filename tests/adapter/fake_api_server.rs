//! Tests of the fake API server itself, driven only through real
//! `kube::Api` / kube-runtime calls, never by poking its internals.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use crate::fake_api::FakeApiServer;
use crate::fake_api::testing::{expect_status, next_within, pod_json, slice_json, typed};
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, ResourceExt,
    VersionMatch, WatchEvent, WatchParams,
};
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

type Slice = EndpointSlice;

fn pod(ns: &str, name: &str, labels: Value) -> Pod {
    typed(pod_json(ns, name, labels))
}

fn slice(ns: &str, name: &str, ips: &[&str]) -> Slice {
    typed(slice_json(ns, name, ips))
}

fn pp() -> PostParams {
    PostParams::default()
}

fn lp() -> ListParams {
    ListParams::default()
}

fn dp() -> DeleteParams {
    DeleteParams::default()
}

fn rv<K: ResourceExt>(obj: &K) -> u64 {
    obj.resource_version().unwrap().parse().unwrap()
}

async fn patch<K>(api: &Api<K>, name: &str, v: Value) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    let params = PatchParams::default();
    api.patch(name, &params, &Patch::Merge(v)).await.unwrap()
}

/// Deletes and returns the object the server answered with.
async fn delete<K>(api: &Api<K>, name: &str, params: DeleteParams) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    let answer = api.delete(name, &params).await.unwrap();
    answer.left().expect("the object, not a Status")
}

async fn names<K>(api: &Api<K>, params: ListParams) -> String
where
    K: Clone + DeserializeOwned + Debug + ResourceExt,
{
    let list = api.list(&params).await.unwrap();
    let names: Vec<String> = list.iter().map(ResourceExt::name_any).collect();
    names.join(",")
}

async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    next_within(stream, 5).await
}

async fn next_event<S>(stream: &mut S) -> Event<Slice>
where
    S: Stream<Item = Result<Event<Slice>, watcher::Error>> + Unpin,
{
    next(stream).await.expect("no watcher error")
}

async fn next_raw<S>(stream: &mut S) -> WatchEvent<Slice>
where
    S: Stream<Item = Result<WatchEvent<Slice>, kube::Error>> + Unpin,
{
    next(stream).await.expect("no watch error")
}

#[tokio::test]
async fn paging_is_consistent_at_the_first_pages_rv_while_writes_happen() {
    let server = FakeApiServer::new();
    let pods = (0..1234).map(|i| pod_json("pg", &format!("p-{i:04}"), json!({})));
    server.create_many(pods).unwrap();
    let api: Api<Pod> = Api::namespaced(server.client(), "pg");

    let first = api.list(&lp().limit(100)).await.unwrap();
    assert_eq!(first.items.len(), 100);
    let at = first.metadata.resource_version.clone().unwrap();
    let key = |p: &Pod| (p.name_any(), rv(p));
    let mut seen: Vec<(String, u64)> = first.iter().map(key).collect();
    let mut token = first.metadata.continue_.clone();

    // Writes ahead of the walk: a delete, a create, an update.
    server.delete("pods", "pg", "p-0500").unwrap();
    server.create(pod("pg", "p-0600a", json!({}))).unwrap();
    let mut changed: Pod = server.get_as("pods", "pg", "p-0700").unwrap();
    changed.labels_mut().insert("moved".into(), "yes".into());
    server.replace(&changed).unwrap();

    let mut pages = 1;
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api.list(&lp().limit(100).continue_token(&t)).await.unwrap();
        assert_eq!(page.metadata.resource_version.as_ref(), Some(&at));
        seen.extend(page.iter().map(key));
        token = page.metadata.continue_.clone();
        pages += 1;
    }
    assert_eq!((pages, seen.len()), (13, 1234), "the state at the first rv");
    assert!(seen.iter().any(|(n, _)| n == "p-0500"));
    assert!(!seen.iter().any(|(n, _)| n == "p-0600a"));
    let at_n: u64 = at.parse().unwrap();
    assert!(seen.iter().all(|(_, r)| *r <= at_n));

    let now = api.list(&lp()).await.unwrap();
    assert_eq!(now.items.len(), 1234);
    assert!(now.iter().any(|p| p.name_any() == "p-0600a"));
    assert!(now.metadata.continue_.unwrap_or_default().is_empty());

    // Exact reads at an old rv; "too large" ones time out as upstream's do.
    let exact = lp().at(&at).matching(VersionMatch::Exact);
    let exact = api.list(&exact).await.unwrap();
    assert!(exact.iter().any(|p| p.name_any() == "p-0500"));
    let future = (server.resource_version() + 10).to_string();
    let later = lp().at(&future).matching(VersionMatch::NotOlderThan);
    expect_status(api.list(&later).await, 504, "Timeout");
}

#[tokio::test]
async fn watch_window_and_compaction_expire_separately() {
    let server = FakeApiServer::builder()
        .history_window(10)
        .compaction_window(40)
        .build();
    let pods = (0..30).map(|i| pod_json("old", &format!("p{i:02}"), json!({})));
    server.create_many(pods).unwrap();
    let api: Api<Pod> = Api::namespaced(server.client(), "old");
    let first = api.list(&lp().limit(5)).await.unwrap();
    let at = first.metadata.resource_version.unwrap();
    let token = first.metadata.continue_.unwrap();
    let more = |from: usize| {
        for i in from..from + 20 {
            server
                .create(pod("old", &format!("q{i:02}"), json!({})))
                .unwrap();
        }
    };
    more(0);
    // Past the watch cache but not compacted: watches expire, paging goes on.
    let mut w = api
        .watch(&WatchParams::default(), &at)
        .await
        .unwrap()
        .boxed();
    let ev = next(&mut w).await.unwrap();
    assert!(
        matches!(ev, WatchEvent::Error(ref e) if e.code == 410),
        "{ev:?}"
    );
    let second = api
        .list(&lp().limit(5).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.metadata.resource_version, Some(at));
    more(20);
    more(40);
    let third = api.list(&lp().limit(5).continue_token(&token)).await;
    let err = expect_status(third, 410, "Expired");
    assert!(
        err.message
            .starts_with("The provided continue parameter is too old")
    );
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = FakeApiServer::new();
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "web"})),
        ("c", json!({"app": "db", "tier": "back"})),
        ("d", json!({})),
    ] {
        server.create(pod("sel", name, labels)).unwrap();
    }
    server
        .create(pod("other", "e", json!({"app": "web"})))
        .unwrap();
    let api: Api<Pod> = Api::namespaced(server.client(), "sel");
    for (selector, want) in [
        ("app=web", "a,b"),
        ("app==web,tier=front", "a"),
        ("app!=web", "c,d"),
        ("app in (web, db)", "a,b,c"),
        ("app notin (web)", "c,d"),
        ("tier", "a,c"),
        ("!tier", "b,d"),
    ] {
        assert_eq!(names(&api, lp().labels(selector)).await, want, "{selector}");
    }
    assert_eq!(names(&api, lp().fields("metadata.name=c")).await, "c");
    assert_eq!(names(&api, lp().fields("metadata.name!=c")).await, "a,b,d");
    let all: Api<Pod> = Api::all(server.client());
    let other = lp().labels("app=web").fields("metadata.namespace=other");
    assert_eq!(names(&all, other).await, "e");
    let bad = api.list(&lp().fields("spec.bogus=1")).await;
    expect_status(bad, 400, "BadRequest");
    expect_status(
        api.list(&lp().labels("app in (web")).await,
        400,
        "BadRequest",
    );
}

#[tokio::test]
async fn create_update_conflict_noop_and_generation() {
    let server = FakeApiServer::new();
    server.ensure_namespace("ns");
    let api: Api<Slice> = Api::namespaced(server.client(), "ns");
    let mut s = slice("ns", "", &["10.0.0.1"]);
    s.metadata.name = None;
    s.metadata.generate_name = Some("svc-".into());
    let created = api.create(&pp(), &s).await.unwrap();
    let name = created.name_any();
    assert!(name.starts_with("svc-") && name.len() == 9, "{name}");
    let alphabet = "bcdfghjklmnpqrstvwxz2456789";
    assert!(name[4..].chars().all(|c| alphabet.contains(c)));
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.uid().unwrap().len(), 36);
    assert!(created.metadata.creation_timestamp.is_some());
    let port = &created.ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"), "defaulted");

    // Creating with an rv fails in storage; without one, the name clashes.
    let err = expect_status(api.create(&pp(), &created).await, 500, "Unknown");
    assert!(err.message.contains("resourceVersion should not be set"));
    let mut again = created.clone();
    again.metadata.resource_version = None;
    expect_status(api.create(&pp(), &again).await, 409, "AlreadyExists");

    // A no-op replace keeps the rv and writes nothing.
    let before = server.resource_version();
    let same = api.replace(&name, &pp(), &created).await.unwrap();
    assert_eq!(same.resource_version(), created.resource_version());
    assert_eq!(server.resource_version(), before);

    // Annotations: new rv, same generation. Labels, endpoints: generation + 1.
    let mut a = same.clone();
    a.annotations_mut().insert("note".into(), "x".into());
    let a = api.replace(&name, &pp(), &a).await.unwrap();
    assert!(rv(&a) > rv(&same));
    assert_eq!(a.metadata.generation, Some(1));
    let mut l = a.clone();
    l.labels_mut().insert("extra".into(), "1".into());
    let l = api.replace(&name, &pp(), &l).await.unwrap();
    assert_eq!(l.metadata.generation, Some(2));
    let mut e = l.clone();
    e.endpoints[0].addresses = vec!["10.0.0.2".into()];
    let e = api.replace(&name, &pp(), &e).await.unwrap();
    assert_eq!(e.metadata.generation, Some(3));

    let stale = expect_status(api.replace(&name, &pp(), &l).await, 409, "Conflict");
    let want = format!(
        "Operation cannot be fulfilled on endpointslices.discovery.k8s.io \"{name}\": \
         the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(stale.message, want);

    let mut t = e.clone();
    t.address_type = "IPv6".into();
    expect_status(api.replace(&name, &pp(), &t).await, 422, "Invalid");

    let p = patch(&api, &name, json!({"metadata": {"labels": {"m": "1"}}})).await;
    assert_eq!(
        (p.labels()["m"].as_str(), p.metadata.generation),
        ("1", Some(4))
    );
    let smp = Patch::Strategic(json!({"metadata": {"annotations": {"s": "2"}}}));
    let p = api
        .patch(&name, &PatchParams::default(), &smp)
        .await
        .unwrap();
    assert_eq!(p.annotations()["s"], "2");

    let missing = expect_status(api.get("nope").await, 404, "NotFound");
    let want = "endpointslices.discovery.k8s.io \"nope\" not found";
    assert_eq!(missing.message, want);
    let nope = slice("ns", "nope", &[]);
    expect_status(api.replace("nope", &pp(), &nope).await, 404, "NotFound");
}

#[tokio::test]
async fn service_generation_allocation_and_status_subresource() {
    let server = FakeApiServer::new();
    let api: Api<Service> = Api::namespaced(server.client(), "default");
    let svc = json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
    });
    let svc: Service = typed(svc);
    let created = api.create(&pp(), &svc).await.unwrap();
    let spec = created.spec.clone().unwrap();
    assert!(spec.cluster_ip.as_deref().unwrap().starts_with("10.96."));
    assert_eq!(spec.ip_families.unwrap(), ["IPv4"]);
    assert_eq!(created.metadata.generation, Some(1));

    // Status is ignored on the main resource and written through /status.
    let mut s = created.clone();
    let lb = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
    s.status = typed(lb);
    let main = api.replace("web", &pp(), &s).await.unwrap();
    assert_eq!(main.resource_version(), created.resource_version());
    let st = api.replace_status("web", &pp(), &s).await.unwrap();
    let ingress = st.status.unwrap().load_balancer.unwrap().ingress.unwrap();
    assert_eq!(ingress[0].ip.as_deref(), Some("1.2.3.4"));
    assert_eq!(st.metadata.generation, Some(1));

    // A spec change that leaves clusterIP out keeps the allocated one.
    let mut changed = api.get("web").await.unwrap();
    let sp = changed.spec.as_mut().unwrap();
    (sp.cluster_ip, sp.cluster_ips) = (None, None);
    sp.ports.as_mut().unwrap()[0].port = 81;
    let changed = api.replace("web", &pp(), &changed).await.unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(changed.spec.unwrap().cluster_ip, spec.cluster_ip);
}

#[tokio::test]
async fn deletes_preconditions_finalizers_and_graceful_pods() {
    let server = FakeApiServer::new();
    server.create(slice("ns", "s1", &["10.0.0.1"])).unwrap();
    let api: Api<Slice> = Api::namespaced(server.client(), "ns");
    let uid = api.get("s1").await.unwrap().uid().unwrap();
    let with_uid = |uid: &str| DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        ..dp()
    };
    let err = expect_status(api.delete("s1", &with_uid("x")).await, 409, "Conflict");
    let want = format!("Precondition failed: UID in precondition: x, UID in object meta: {uid}");
    assert!(err.message.ends_with(&want), "{}", err.message);
    let answer = api.delete("s1", &with_uid(&uid)).await.unwrap();
    let status = answer.right().expect("slices answer with a Status");
    assert_eq!(status.details.unwrap().uid, uid);
    expect_status(api.delete("s1", &dp()).await, 404, "NotFound");

    // A finalizer holds the object until it is removed.
    let mut held = slice("ns", "held", &["10.0.0.1"]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&pp(), &held).await.unwrap();
    let marked = delete(&api, "held", dp()).await;
    assert!(marked.metadata.deletion_timestamp.is_some());
    patch(&api, "held", json!({"metadata": {"finalizers": null}})).await;
    expect_status(api.get("held").await, 404, "NotFound");

    // A scheduled pod is deleted gracefully; grace 0 finishes it.
    let mut p = pod_json("ns", "p", json!({}));
    p["spec"]["nodeName"] = json!("node-1");
    server.create(p).unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "ns");
    let going = delete(&pods, "p", dp()).await;
    assert!(going.metadata.deletion_timestamp.is_some());
    assert_eq!(going.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get("p").await.is_ok());
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..dp()
    };
    let last = delete(&pods, "p", now).await;
    assert!(rv(&last) > rv(&going));
    expect_status(pods.get("p").await, 404, "NotFound");
}

#[tokio::test]
async fn namespaces_missing_and_terminating() {
    let server = FakeApiServer::new();
    let nss: Api<Namespace> = Api::all(server.client());
    let system = names(&nss, lp()).await;
    assert_eq!(system, "default,kube-node-lease,kube-public,kube-system");
    let api: Api<Slice> = Api::namespaced(server.client(), "nope");
    let created = api.create(&pp(), &slice("nope", "s", &[])).await;
    let err = expect_status(created, 404, "NotFound");
    assert_eq!(err.message, "namespaces \"nope\" not found");

    server
        .create(slice("doomed", "keep", &["10.0.0.1"]))
        .unwrap();
    let ns = delete(&nss, "doomed", dp()).await;
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let api: Api<Slice> = Api::namespaced(server.client(), "doomed");
    let created = api.create(&pp(), &slice("doomed", "s", &[])).await;
    let err = expect_status(created, 403, "Forbidden");
    let want = "endpointslices.discovery.k8s.io \"s\" is forbidden: \
                unable to create new content in namespace doomed because it is being terminated";
    assert_eq!(err.message, want);
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].reason, "NamespaceTerminating");
    assert_eq!(causes[0].field, "metadata.namespace");
    // Existing content can still be updated while terminating.
    patch(&api, "keep", json!({"metadata": {"labels": {"x": "y"}}})).await;
    server.finish_namespace("doomed");
    expect_status(nss.get("doomed").await, 404, "NotFound");
    assert!(server.list("endpointslices", "doomed").is_empty());
}

#[tokio::test]
async fn leases_need_a_resource_version() {
    let server = FakeApiServer::new();
    let api: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease = json!({
        "metadata": {"name": "sliced"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    });
    let lease: Lease = typed(lease);
    let created = api.create(&pp(), &lease).await.unwrap();
    let got = api.get("sliced").await.unwrap();
    assert_eq!(got.resource_version(), created.resource_version());
    let mut next = got.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = api.replace("sliced", &pp(), &next).await.unwrap();
    assert!(rv(&replaced) > rv(&got));
    expect_status(api.replace("sliced", &pp(), &next).await, 409, "Conflict");
    let mut blind = replaced.clone();
    blind.metadata.resource_version = None;
    expect_status(api.replace("sliced", &pp(), &blind).await, 422, "Invalid");
}

#[tokio::test]
async fn injected_faults_and_request_log() {
    let server = FakeApiServer::new();
    server.create(slice("ns", "s", &["10.0.0.1"])).unwrap();
    let api: Api<Slice> = Api::namespaced(server.client(), "ns");
    server.fail_next("update", "endpointslices", 500, 1);
    server.fail_next("update", "endpointslices", 409, 1);
    let s = api.get("s").await.unwrap();
    let mut changed = s.clone();
    changed.endpoints.clear();
    let first = api.replace("s", &pp(), &changed).await;
    expect_status(first, 500, "InternalError");
    expect_status(api.replace("s", &pp(), &changed).await, 409, "Conflict");
    let stored: Slice = server.get_as("endpointslices", "ns", "s").unwrap();
    assert_eq!(stored.resource_version(), s.resource_version());
    api.replace("s", &pp(), &changed).await.unwrap();
    assert_eq!(server.count("update", "endpointslices"), 3);
    assert_eq!(server.count("get", "endpointslices.discovery.k8s.io"), 1);
    assert_eq!(server.writes("endpointslices"), 3);
    let codes: Vec<u16> = server.requests().iter().map(|r| r.code).collect();
    assert_eq!(codes, [200, 500, 409, 200]);
}

#[tokio::test]
async fn watcher_sees_adds_updates_deletes_and_selector_exits() {
    let server = FakeApiServer::new();
    server.create(slice("ns", "pre", &["10.0.0.1"])).unwrap();
    let api: Api<Slice> = Api::namespaced(server.client(), "ns");
    let config = watcher::Config::default();
    let mut stream = watcher::watcher(api.clone(), config).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    let ev = next_event(&mut stream).await;
    assert!(matches!(ev, Event::InitApply(s) if s.name_any() == "pre"));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));

    api.create(&pp(), &slice("ns", "new", &["10.0.0.2"]))
        .await
        .unwrap();
    let ev = next_event(&mut stream).await;
    assert!(matches!(ev, Event::Apply(s) if s.name_any() == "new"));
    assert_eq!(server.open_watches(), 1);
    patch(&api, "new", json!({"metadata": {"labels": {"x": "1"}}})).await;
    let ev = next_event(&mut stream).await;
    assert!(matches!(ev, Event::Apply(s) if s.labels().contains_key("x")));
    let before = server.resource_version();
    api.delete("new", &dp()).await.unwrap();
    match next_event(&mut stream).await {
        Event::Delete(s) => assert_eq!(rv(&s), before + 1, "at the deletion's rv"),
        other => panic!("expected a delete, got {other:?}"),
    }

    // With a selector, entering it is ADDED and leaving it DELETED.
    let from = server.resource_version().to_string();
    let params = WatchParams::default().labels("x=1");
    let mut raw = api.watch(&params, &from).await.unwrap().boxed();
    patch(&api, "pre", json!({"metadata": {"labels": {"x": "1"}}})).await;
    patch(&api, "pre", json!({"metadata": {"labels": {"x": "2"}}})).await;
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match next_raw(&mut raw).await {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Deleted(s) => {
                assert_eq!(s.labels()["x"], "1", "the old object");
                assert_eq!(rv(&s), server.resource_version(), "at the new rv");
                kinds.push("DELETED");
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "DELETED"]);
    drop((stream, raw));
    assert_eq!(server.open_watches(), 0, "dropped streams close watches");
}

#[tokio::test]
async fn bookmarks_periodic_and_on_demand_and_timeouts() {
    let every = Duration::from_millis(100);
    let server = FakeApiServer::builder().bookmark_interval(every).build();
    let api: Api<Slice> = Api::namespaced(server.client(), "default");
    let at = server.resource_version().to_string();
    let mut w = api
        .watch(&WatchParams::default(), &at)
        .await
        .unwrap()
        .boxed();
    let ev = next_raw(&mut w).await;
    let ok = matches!(ev, WatchEvent::Bookmark(ref b) if b.metadata.resource_version == at);
    assert!(ok, "{ev:?}");

    let hour = Duration::from_secs(3600);
    let slow = FakeApiServer::builder().bookmark_interval(hour).build();
    let api: Api<Slice> = Api::namespaced(slow.client(), "default");
    let at = slow.resource_version().to_string();
    let params = WatchParams::default().timeout(1);
    let mut w = api.watch(&params, &at).await.unwrap().boxed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    slow.send_bookmarks();
    let ev = next_raw(&mut w).await;
    assert!(matches!(ev, WatchEvent::Bookmark(_)), "{ev:?}");
    let started = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(5), w.try_next()).await;
    assert!(end.unwrap().unwrap().is_none(), "timeoutSeconds ends it");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn expired_watch_makes_the_watcher_relist() {
    let server = FakeApiServer::new();
    server.create(slice("ns", "a", &["10.0.0.1"])).unwrap();
    let api: Api<Slice> = Api::namespaced(server.client(), "ns");

    // A watch from a compacted rv gets one ERROR 410 event, then ends.
    let old = server.resource_version().to_string();
    server.expire_watches();
    let mut raw = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match next_raw(&mut raw).await {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            let want = format!("too old resource version: {old} (");
            assert!(e.message.starts_with(&want), "{}", e.message);
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    assert!(raw.try_next().await.unwrap().is_none());

    let config = watcher::Config::default();
    let mut stream = watcher::watcher(api.clone(), config).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(_)));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));
    api.create(&pp(), &slice("ns", "b", &["10.0.0.2"]))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut stream).await, Event::Apply(_)));

    server.expire_watches();
    server.create(slice("ns", "c", &["10.0.0.3"])).unwrap();
    let err = next(&mut stream).await;
    let gone = matches!(err, Err(watcher::Error::WatchError(ref s)) if s.code == 410);
    assert!(gone, "{err:?}");
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    let mut names = Vec::new();
    loop {
        match next_event(&mut stream).await {
            Event::InitApply(s) => names.push(s.name_any()),
            Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["a", "b", "c"]);
}

#[tokio::test]
async fn streaming_list_watcher() {
    let server = FakeApiServer::new();
    server.create(slice("ns", "a", &["10.0.0.1"])).unwrap();
    let api: Api<Slice> = Api::namespaced(server.client(), "ns");
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher::watcher(api, config).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(_)));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));
}

#[tokio::test]
async fn event_recorder_creates_then_patches_a_series() {
    use kube::Resource;
    use kube::runtime::events::{Event as Note, EventType, Recorder, Reporter};
    let server = FakeApiServer::new();
    let reporter = Reporter {
        controller: "sliced".into(),
        instance: None,
    };
    let recorder = Recorder::new(server.client(), reporter);
    let svc = json!({"metadata": {"name": "web", "namespace": "default"}});
    let svc: Service = typed(svc);
    let note = Note {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("slices written".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = svc.object_ref(&());
    recorder.publish(&note, &reference).await.unwrap();
    recorder.publish(&note, &reference).await.unwrap();
    let events = server.list("events.events.k8s.io", "default");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["series"]["count"], 2);
    let verbs = server.requests().iter().map(|r| r.verb).collect::<Vec<_>>();
    assert_eq!(verbs, ["create", "patch"]);
}

#[tokio::test]
async fn odds_and_ends_of_http_semantics() {
    use k8s_openapi::api::core::v1::Endpoints;
    let server = FakeApiServer::new();
    server.create(slice("default", "a", &["10.0.0.1"])).unwrap();
    // A watch without an rv starts with the current state as ADDED.
    let slices: Api<Slice> = Api::default_namespaced(server.client());
    let mut w = slices
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next_raw(&mut w).await, WatchEvent::Added(s) if s.name_any() == "a"));

    // HTTP creates reset status that has a subresource.
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let mut p = pod("default", "p", json!({}));
    p.status = typed(json!({"phase": "Running"}));
    let created = pods.create(&pp(), &p).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));

    // Direct writes set status only when they carry one.
    server.create(pod("default", "d", json!({}))).unwrap();
    let mut d: Pod = server.get_as("pods", "default", "d").unwrap();
    assert_eq!(d.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    d.status = typed(json!({"phase": "Running"}));
    server.replace(&d).unwrap();
    d.status = None;
    assert_eq!(server.apply(&d).unwrap()["status"]["phase"], "Running");

    // Dry runs change nothing; Endpoints may be created by PUT.
    let dry = PostParams {
        dry_run: true,
        ..pp()
    };
    pods.create(&dry, &pod("default", "dry", json!({})))
        .await
        .unwrap();
    expect_status(pods.get("dry").await, 404, "NotFound");
    let eps: Api<Endpoints> = Api::default_namespaced(server.client());
    let ep = json!({"metadata": {"name": "web"}, "subsets": [{"ports": [{"port": 80}]}]});
    let ep: Endpoints = typed(ep);
    let made = eps.replace("web", &pp(), &ep).await.unwrap();
    let subsets = made.subsets.unwrap();
    let port = &subsets[0].ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));

    // Services and pods answer DELETE with the object, at the deletion's rv.
    let gone = delete(&pods, "p", dp()).await;
    assert_eq!(rv(&gone), server.resource_version());
    assert_eq!(server.count("delete", "pods"), 1);
}

/// A minimal Service to own things.
fn owner_service(ns: &str, name: &str) -> Service {
    typed(json!({"metadata": {"namespace": ns, "name": name}, "spec": {"ports": [{"port": 80}]}}))
}

/// An owner reference to `svc`, blocking its foreground deletion as controllers' do.
fn owned_by(svc: &Service) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "name": svc.name_any(),
           "uid": svc.uid().unwrap(), "controller": false, "blockOwnerDeletion": true})
}

fn with_owners(mut s: Slice, owners: &[&Service]) -> Slice {
    let refs: Vec<Value> = owners.iter().map(|o| owned_by(o)).collect();
    s.metadata.owner_references = Some(typed(json!(refs)));
    s
}

fn owner_uids(s: &Slice) -> Vec<String> {
    s.owner_references().iter().map(|r| r.uid.clone()).collect()
}

#[tokio::test]
async fn garbage_collector_deletes_dependents_whose_owners_are_all_gone() {
    let server = FakeApiServer::new();
    let services: Api<Service> = Api::namespaced(server.client(), "gc");
    server.ensure_namespace("gc");
    let a = services
        .create(&pp(), &owner_service("gc", "a"))
        .await
        .unwrap();
    let b = services
        .create(&pp(), &owner_service("gc", "b"))
        .await
        .unwrap();
    let slices: Api<Slice> = Api::namespaced(server.client(), "gc");
    for (name, owners) in [
        ("only-a", vec![&a]),
        ("a-and-b", vec![&a, &b]),
        ("free", vec![]),
    ] {
        let s = with_owners(slice("gc", name, &["10.0.0.1"]), &owners);
        slices.create(&pp(), &s).await.unwrap();
    }
    // The same name and uid in another namespace is not the owner.
    let elsewhere = with_owners(slice("other", "stray", &[]), &[&a]);
    server.create(&elsewhere).unwrap();
    assert!(
        server.get("endpointslices", "other", "stray").is_none(),
        "its owner is absent"
    );

    let from = server.resource_version().to_string();
    let mut w = slices
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    let gone = delete(&services, "a", dp()).await;
    // Collected already when the owner's DELETE returns (the fake's collector is synchronous).
    expect_status(slices.get("only-a").await, 404, "NotFound");
    let kept = slices.get("a-and-b").await.unwrap();
    assert_eq!(
        owner_uids(&kept),
        [b.uid().unwrap()],
        "only the live owner is left"
    );
    assert_eq!(kept.metadata.generation, Some(1), "metadata only");
    assert!(slices.get("free").await.is_ok());

    // Each of the collector's writes is a change of its own, after the owner's deletion.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match next_raw(&mut w).await {
            WatchEvent::Deleted(s) => seen.push(("DELETED", s.name_any(), rv(&s))),
            WatchEvent::Modified(s) => seen.push(("MODIFIED", s.name_any(), rv(&s))),
            other => panic!("unexpected {other:?}"),
        }
    }
    seen.sort();
    assert_eq!((seen[0].0, seen[0].1.as_str()), ("DELETED", "only-a"));
    assert_eq!((seen[1].0, seen[1].1.as_str()), ("MODIFIED", "a-and-b"));
    assert!(seen[0].2 > rv(&gone) && seen[1].2 > rv(&gone) && seen[0].2 != seen[1].2);

    // The last owner gone, the dependent goes; one made for a gone owner goes at once.
    delete(&services, "b", dp()).await;
    expect_status(slices.get("a-and-b").await, 404, "NotFound");
    let late = with_owners(slice("gc", "late", &[]), &[&b]);
    slices.create(&pp(), &late).await.unwrap();
    expect_status(slices.get("late").await, 404, "NotFound");
    assert_eq!(names(&slices, lp()).await, "free");
    // The collector's requests are not the client's.
    assert_eq!(server.count("delete", "endpointslices"), 0);
}

#[tokio::test]
async fn a_lagging_collector_catches_up_even_after_the_owners_name_is_reused() {
    let server = FakeApiServer::builder().garbage_collection(false).build();
    let services: Api<Service> = Api::default_namespaced(server.client());
    let slices: Api<Slice> = Api::default_namespaced(server.client());
    let old = services
        .create(&pp(), &owner_service("default", "web"))
        .await
        .unwrap();
    let s = with_owners(slice("default", "s", &[]), &[&old]);
    slices.create(&pp(), &s).await.unwrap();
    delete(&services, "web", dp()).await;
    let new = services
        .create(&pp(), &owner_service("default", "web"))
        .await
        .unwrap();
    let t = with_owners(slice("default", "t", &[]), &[&new]);
    slices.create(&pp(), &t).await.unwrap();
    assert_eq!(names(&slices, lp()).await, "s,t", "nothing collected yet");
    server.collect_garbage();
    // The same name under another uid is not the owner.
    assert_eq!(names(&slices, lp()).await, "t");
}

#[tokio::test]
async fn orphan_and_foreground_propagation() {
    let server = FakeApiServer::new();
    server.ensure_namespace("gc");
    let services: Api<Service> = Api::namespaced(server.client(), "gc");
    let slices: Api<Slice> = Api::namespaced(server.client(), "gc");
    let pods: Api<Pod> = Api::namespaced(server.client(), "gc");

    // Orphan: the owner goes, the dependent stays and forgets it.
    let o = services
        .create(&pp(), &owner_service("gc", "o"))
        .await
        .unwrap();
    slices
        .create(&pp(), &with_owners(slice("gc", "kept", &[]), &[&o]))
        .await
        .unwrap();
    services.delete("o", &DeleteParams::orphan()).await.unwrap();
    expect_status(services.get("o").await, 404, "NotFound");
    assert!(
        slices
            .get("kept")
            .await
            .unwrap()
            .metadata
            .owner_references
            .is_none()
    );

    // Foreground: the owner waits, finalizer held, until its blocking dependent is gone; here a
    // scheduled pod, which terminates gracefully until the kubelet's grace-0 delete.
    let f = services
        .create(&pp(), &owner_service("gc", "f"))
        .await
        .unwrap();
    let mut p = pod_json("gc", "p", json!({}));
    p["spec"]["nodeName"] = json!("node-1");
    p["metadata"]["ownerReferences"] = json!([owned_by(&f)]);
    server.create(p).unwrap();
    let waiting = delete(&services, "f", DeleteParams::foreground()).await;
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(waiting.finalizers(), ["foregroundDeletion"]);
    let terminating = pods.get("p").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(services.get("f").await.is_ok(), "held by its dependent");
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..dp()
    };
    delete(&pods, "p", now).await;
    expect_status(services.get("f").await, 404, "NotFound");

    // Checked before the object is looked up.
    let bad = json!({"propagationPolicy": "Sideways"});
    let err = server
        .delete_with("services", "gc", "none", bad)
        .unwrap_err();
    assert_eq!((err.code, err.reason), (422, "Invalid"));
    assert!(err.message.starts_with("DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\""), "{}", err.message);
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
    kib.unwrap_or(0.0) / 1024.0
}

fn big_pod(i: usize) -> Value {
    let ns = format!("ns-{}", i % 50);
    let mut p = pod_json(
        &ns,
        &format!("pod-{i:06}"),
        json!({"app": format!("a{}", i % 1000)}),
    );
    p["spec"]["nodeName"] = json!(format!("node-{}", i % 500));
    let ip = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
    let ready = json!([{"type": "Ready", "status": "True"}]);
    p["status"] = json!({"phase": "Running", "podIP": ip, "conditions": ready});
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_pods() {
    let server = FakeApiServer::new();
    let rss0 = rss_mib();
    let t = Instant::now();
    assert_eq!(
        server.create_many((0..100_000).map(big_pod)).unwrap(),
        100_000
    );
    let load = t.elapsed();
    let rss = rss_mib() - rss0;

    let api: Api<Pod> = Api::all(server.client());
    let t = Instant::now();
    let page = api.list(&lp().limit(500)).await.unwrap();
    let first_page = t.elapsed();
    assert_eq!(page.items.len(), 500);

    let t = Instant::now();
    let mut seen: BTreeSet<String> = page.iter().map(ResourceExt::name_any).collect();
    let mut token = page.metadata.continue_.clone();
    while let Some(tok) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&lp().limit(500).continue_token(&tok))
            .await
            .unwrap();
        seen.extend(page.iter().map(ResourceExt::name_any));
        token = page.metadata.continue_.clone();
    }
    let walk = t.elapsed();
    assert_eq!(seen.len(), 100_000);

    let t = Instant::now();
    let selected = api.list(&lp().labels("app=a7")).await.unwrap();
    let select = t.elapsed();
    assert_eq!(selected.items.len(), 100);
    println!(
        "100k pods: load {load:?} (+{rss:.0} MiB RSS), first page of 500 {first_page:?}, \
         paged walk of all {walk:?}, label-selected list {select:?}"
    );
}

//! Tests of the fake API server itself, driven only through real
//! `kube::Api` / kube-runtime calls, never by poking its internals.

#[path = "support/fake_api/mod.rs"]
mod fake_api;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fake_api::FakeApiServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, ResourceExt,
    VersionMatch, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

fn pod_json(ns: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    })
}

fn pod(ns: &str, name: &str, labels: Value) -> Pod {
    serde_json::from_value(pod_json(ns, name, labels)).unwrap()
}

fn slice(ns: &str, name: &str, svc: &str, ips: &[&str]) -> EndpointSlice {
    let endpoints: Vec<Value> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": ns, "name": name, "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 80}],
    }))
    .unwrap()
}

fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn rv<K: ResourceExt>(obj: &K) -> u64 {
    obj.resource_version().unwrap().parse().unwrap()
}

/// Next watcher event within 5 s, panicking on an error or the end.
async fn next_event<S>(stream: &mut S) -> Event<EndpointSlice>
where
    S: futures::Stream<Item = Result<Event<EndpointSlice>, watcher::Error>> + Unpin,
{
    let item = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    item.expect("an event within 5 s")
        .expect("stream open")
        .expect("no error")
}

#[tokio::test]
async fn paging_is_consistent_at_the_first_pages_rv_while_writes_happen() {
    let server = FakeApiServer::new();
    let pods =
        (0..1234).map(|i| pod_json("paging", &format!("p-{i:04}"), json!({"i": i.to_string()})));
    server.create_many(pods).unwrap();
    let api: Api<Pod> = Api::namespaced(server.client(), "paging");

    let first = api.list(&ListParams::default().limit(100)).await.unwrap();
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();
    let mut seen: Vec<(String, String)> = first
        .iter()
        .map(|p| (p.name_any(), p.resource_version().unwrap()))
        .collect();
    let mut token = first.metadata.continue_.clone();
    assert_eq!(first.items.len(), 100);

    // Writes during the walk: deletions ahead, creations ahead, an update ahead.
    server.delete("pods", "paging", "p-0500").unwrap();
    server.create(pod("paging", "p-0600a", json!({}))).unwrap();
    let mut changed = server.get_as::<Pod>("pods", "paging", "p-0700").unwrap();
    changed.labels_mut().insert("moved".into(), "yes".into());
    server.replace(&changed).unwrap();

    let mut pages = 1;
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(100).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot_rv.as_str())
        );
        seen.extend(
            page.iter()
                .map(|p| (p.name_any(), p.resource_version().unwrap())),
        );
        token = page.metadata.continue_.clone();
        pages += 1;
    }
    assert_eq!(pages, 13);
    assert_eq!(
        seen.len(),
        1234,
        "the walk sees the state at the first page's rv"
    );
    assert!(seen.iter().any(|(n, _)| n == "p-0500"));
    assert!(!seen.iter().any(|(n, _)| n == "p-0600a"));
    let p700 = seen.iter().find(|(n, _)| n == "p-0700").unwrap();
    assert!(p700.1.parse::<u64>().unwrap() <= snapshot_rv.parse().unwrap());

    let now = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(now.items.len(), 1234);
    assert!(now.iter().any(|p| p.name_any() == "p-0600a"));
    assert!(now.metadata.continue_.as_deref().unwrap_or("").is_empty());

    // Exact reads at an old rv, and "too large" ones.
    let exact = api
        .list(
            &ListParams::default()
                .at(&snapshot_rv)
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert!(exact.iter().any(|p| p.name_any() == "p-0500"));
    let future = (server.resource_version() + 10).to_string();
    let too_large = api_error(
        api.list(
            &ListParams::default()
                .at(&future)
                .matching(VersionMatch::NotOlderThan),
        )
        .await,
    );
    assert_eq!(
        (too_large.code, too_large.reason.as_str()),
        (504, "Timeout")
    );
}

#[tokio::test]
async fn continue_token_older_than_the_history_is_expired() {
    let server = FakeApiServer::builder().history_window(10).build();
    server
        .create_many((0..30).map(|i| pod_json("old", &format!("p{i:02}"), json!({}))))
        .unwrap();
    let api: Api<Pod> = Api::namespaced(server.client(), "old");
    let first = api.list(&ListParams::default().limit(5)).await.unwrap();
    for i in 0..20 {
        server
            .create(pod("old", &format!("q{i:02}"), json!({})))
            .unwrap();
    }
    let token = first.metadata.continue_.unwrap();
    let err = api_error(
        api.list(&ListParams::default().limit(5).continue_token(&token))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
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
    let names = |lp: ListParams| {
        let api = api.clone();
        async move {
            api.list(&lp)
                .await
                .unwrap()
                .iter()
                .map(ResourceExt::name_any)
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    assert_eq!(names(ListParams::default().labels("app=web")).await, "a,b");
    assert_eq!(
        names(ListParams::default().labels("app==web,tier=front")).await,
        "a"
    );
    assert_eq!(names(ListParams::default().labels("app!=web")).await, "c,d");
    assert_eq!(
        names(ListParams::default().labels("app in (web, db)")).await,
        "a,b,c"
    );
    assert_eq!(
        names(ListParams::default().labels("app notin (web)")).await,
        "c,d"
    );
    assert_eq!(names(ListParams::default().labels("tier")).await, "a,c");
    assert_eq!(names(ListParams::default().labels("!tier")).await, "b,d");
    assert_eq!(
        names(ListParams::default().fields("metadata.name=c")).await,
        "c"
    );
    assert_eq!(
        names(ListParams::default().fields("metadata.name!=c")).await,
        "a,b,d"
    );
    let all: Api<Pod> = Api::all(server.client());
    let web = all
        .list(
            &ListParams::default()
                .labels("app=web")
                .fields("metadata.namespace=other"),
        )
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    let bad = api_error(
        api.list(&ListParams::default().fields("spec.bogus=1"))
            .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (400, "BadRequest"));
    let bad = api_error(api.list(&ListParams::default().labels("app in (web")).await);
    assert_eq!(bad.code, 400);
}

#[tokio::test]
async fn create_update_conflict_noop_and_generation() {
    let server = FakeApiServer::new();
    server.ensure_namespace("ns");
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");
    let mut s = slice("ns", "", "svc", &["10.0.0.1"]);
    s.metadata.name = None;
    s.metadata.generate_name = Some("svc-".into());
    let created = api.create(&PostParams::default(), &s).await.unwrap();
    let name = created.name_any();
    assert!(name.starts_with("svc-") && name.len() == 9, "{name}");
    assert!(
        name[4..]
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.metadata.uid.as_ref().unwrap().len(), 36);
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(
        created.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );

    let dup = api_error(api.create(&PostParams::default(), &created).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    // A no-op replace keeps the rv and makes no event.
    let before = server.resource_version();
    let same = api
        .replace(&name, &PostParams::default(), &created)
        .await
        .unwrap();
    assert_eq!(same.resource_version(), created.resource_version());
    assert_eq!(server.resource_version(), before);

    // Annotations alone: new rv, same generation. Labels or endpoints: generation + 1.
    let mut a = same.clone();
    a.annotations_mut().insert("note".into(), "x".into());
    let a = api
        .replace(&name, &PostParams::default(), &a)
        .await
        .unwrap();
    assert!(rv(&a) > rv(&same));
    assert_eq!(a.metadata.generation, Some(1));
    let mut l = a.clone();
    l.labels_mut().insert("extra".into(), "1".into());
    let l = api
        .replace(&name, &PostParams::default(), &l)
        .await
        .unwrap();
    assert_eq!(l.metadata.generation, Some(2));
    let mut e = l.clone();
    e.endpoints[0].addresses = vec!["10.0.0.2".into()];
    let e = api
        .replace(&name, &PostParams::default(), &e)
        .await
        .unwrap();
    assert_eq!(e.metadata.generation, Some(3));

    // Stale rv: 409 Conflict with the server's wording.
    let stale = api_error(api.replace(&name, &PostParams::default(), &l).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        stale.message,
        format!(
            "Operation cannot be fulfilled on endpointslices.discovery.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );

    // addressType is immutable.
    let mut t = e.clone();
    t.address_type = "IPv6".into();
    let inv = api_error(api.replace(&name, &PostParams::default(), &t).await);
    assert_eq!((inv.code, inv.reason.as_str()), (422, "Invalid"));

    // Merge and strategic merge patches.
    let p = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.labels().get("m").map(String::as_str), Some("1"));
    assert_eq!(p.metadata.generation, Some(4));
    let p = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"annotations": {"s": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.annotations().get("s").map(String::as_str), Some("2"));

    let missing = api_error(api.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        missing.message,
        "endpointslices.discovery.k8s.io \"nope\" not found"
    );
    let missing = api_error(
        api.replace(
            "nope",
            &PostParams::default(),
            &slice("ns", "nope", "s", &[]),
        )
        .await,
    );
    assert_eq!(missing.code, 404);
}

#[tokio::test]
async fn service_generation_allocation_and_status_subresource() {
    let server = FakeApiServer::new();
    server.ensure_namespace("ns");
    let api: Api<Service> = Api::namespaced(server.client(), "ns");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &svc).await.unwrap();
    let spec = created.spec.clone().unwrap();
    assert!(spec.cluster_ip.as_deref().unwrap().starts_with("10.96."));
    assert_eq!(spec.ip_families.unwrap(), vec!["IPv4".to_string()]);
    assert_eq!(created.metadata.generation, Some(1));

    // Status is ignored on the main resource and written through /status.
    let mut s = created.clone();
    s.status =
        serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}})).unwrap();
    let main = api
        .replace("web", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(main.resource_version(), created.resource_version());
    let st = api
        .replace_status("web", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(
        st.status.unwrap().load_balancer.unwrap().ingress.unwrap()[0]
            .ip
            .as_deref(),
        Some("1.2.3.4")
    );
    assert_eq!(st.metadata.generation, Some(1));

    // A spec change that leaves clusterIP out keeps the allocated one.
    let mut changed = api.get("web").await.unwrap();
    let sp = changed.spec.as_mut().unwrap();
    sp.cluster_ip = None;
    sp.cluster_ips = None;
    sp.ports.as_mut().unwrap()[0].port = 81;
    let changed = api
        .replace("web", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(changed.spec.unwrap().cluster_ip, spec.cluster_ip);
}

#[tokio::test]
async fn deletes_preconditions_finalizers_and_graceful_pods() {
    let server = FakeApiServer::new();
    server
        .create(slice("ns", "s1", "svc", &["10.0.0.1"]))
        .unwrap();
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");
    let s1 = api.get("s1").await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-it".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = api_error(api.delete("s1", &wrong).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message.contains(&format!(
            "Precondition failed: UID in precondition: not-it, UID in object meta: {}",
            s1.uid().unwrap()
        )),
        "{}",
        err.message
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: s1.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let status = api
        .delete("s1", &right)
        .await
        .unwrap()
        .right()
        .expect("slices answer with a Status");
    assert_eq!(status.details.unwrap().uid, s1.uid().unwrap());
    let gone = api_error(api.delete("s1", &DeleteParams::default()).await);
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));

    // A finalizer holds the object until it is removed.
    let mut held = slice("ns", "held", "svc", &["10.0.0.1"]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let marked = api
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("held").await).code, 404);

    // A scheduled pod is deleted gracefully; grace 0 finishes it.
    let mut p = pod_json("ns", "p", json!({}));
    p["spec"]["nodeName"] = json!("node-1");
    server.create(p).unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "ns");
    let terminating = pods
        .delete("p", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get("p").await.is_ok());
    let last = pods
        .delete(
            "p",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(rv(&last) > rv(&terminating));
    assert_eq!(api_error(pods.get("p").await).code, 404);
}

#[tokio::test]
async fn namespaces_missing_and_terminating() {
    let server = FakeApiServer::new();
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "nope");
    let err = api_error(
        api.create(&PostParams::default(), &slice("nope", "s", "svc", &[]))
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (404, "NotFound", "namespaces \"nope\" not found")
    );

    server
        .create(slice("doomed", "keep", "svc", &["10.0.0.1"]))
        .unwrap();
    let nss: Api<Namespace> = Api::all(server.client());
    let ns = nss
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "doomed");
    let err = api_error(
        api.create(&PostParams::default(), &slice("doomed", "s", "svc", &[]))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "endpointslices.discovery.k8s.io \"s\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].reason, "NamespaceTerminating");
    assert_eq!(causes[0].field, "metadata.namespace");
    // Updates of existing content still work while terminating.
    api.patch(
        "keep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    server.finish_namespace("doomed");
    assert_eq!(api_error(nss.get("doomed").await).code, 404);
    assert!(server.list("endpointslices", "doomed").is_empty());
}

#[tokio::test]
async fn leases_need_a_resource_version() {
    let server = FakeApiServer::new();
    server.ensure_namespace("kube-system");
    let api: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("sliced".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let got = api.get("sliced").await.unwrap();
    assert_eq!(got.resource_version(), created.resource_version());
    let mut next = got.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = api
        .replace("sliced", &PostParams::default(), &next)
        .await
        .unwrap();
    assert!(rv(&replaced) > rv(&got));
    let stale = api_error(api.replace("sliced", &PostParams::default(), &next).await);
    assert_eq!(stale.code, 409);
    let mut unconditional = replaced.clone();
    unconditional.metadata.resource_version = None;
    let inv = api_error(
        api.replace("sliced", &PostParams::default(), &unconditional)
            .await,
    );
    assert_eq!((inv.code, inv.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn injected_faults_and_request_log() {
    let server = FakeApiServer::new();
    server
        .create(slice("ns", "s", "svc", &["10.0.0.1"]))
        .unwrap();
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");
    server.fail_next("update", "endpointslices", 500, 1);
    server.fail_next("update", "endpointslices", 409, 1);
    let s = api.get("s").await.unwrap();
    let mut changed = s.clone();
    changed.endpoints.clear();
    let e1 = api_error(api.replace("s", &PostParams::default(), &changed).await);
    assert_eq!((e1.code, e1.reason.as_str()), (500, "InternalError"));
    let e2 = api_error(api.replace("s", &PostParams::default(), &changed).await);
    assert_eq!((e2.code, e2.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        server
            .get_as::<EndpointSlice>("endpointslices", "ns", "s")
            .unwrap()
            .resource_version(),
        s.resource_version()
    );
    api.replace("s", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(server.count("update", "endpointslices"), 3);
    assert_eq!(server.count("get", "endpointslices.discovery.k8s.io"), 1);
    assert_eq!(server.writes("endpointslices"), 3);
    let codes: Vec<u16> = server.requests().iter().map(|r| r.code).collect();
    assert_eq!(codes, vec![200, 500, 409, 200]);
}

#[tokio::test]
async fn watcher_sees_adds_updates_deletes_and_selector_exits() {
    let server = FakeApiServer::new();
    server
        .create(slice("ns", "pre", "svc", &["10.0.0.1"]))
        .unwrap();
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(s) if s.name_any() == "pre"));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));

    api.create(
        &PostParams::default(),
        &slice("ns", "new", "svc", &["10.0.0.2"]),
    )
    .await
    .unwrap();
    assert!(matches!(next_event(&mut stream).await, Event::Apply(s) if s.name_any() == "new"));
    assert_eq!(server.open_watches(), 1);
    api.patch(
        "new",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    assert!(
        matches!(next_event(&mut stream).await, Event::Apply(s) if s.labels().contains_key("x"))
    );
    let before = server.resource_version();
    api.delete("new", &DeleteParams::default()).await.unwrap();
    match next_event(&mut stream).await {
        Event::Delete(s) => assert_eq!(rv(&s), before + 1, "DELETED carries the deletion's rv"),
        other => panic!("expected a delete, got {other:?}"),
    }

    // A raw watch with a selector: leaving it is DELETED, entering is ADDED.
    let from = server.resource_version().to_string();
    let mut raw = api
        .watch(&WatchParams::default().labels("x=1"), &from)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "pre",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "pre",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "2"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), raw.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Deleted(s) => {
                assert_eq!(
                    s.labels().get("x").map(String::as_str),
                    Some("1"),
                    "the old object"
                );
                kinds.push("DELETED")
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "DELETED"]);
    drop((stream, raw));
    assert_eq!(
        server.open_watches(),
        0,
        "dropped streams are closed watches"
    );
}

#[tokio::test]
async fn bookmarks_periodic_and_on_demand_and_timeouts() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .build();
    server.ensure_namespace("ns");
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");
    let at = server.resource_version().to_string();
    let mut w = api
        .watch(&WatchParams::default(), &at)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, WatchEvent::Bookmark(ref b) if b.metadata.resource_version == at),
        "{ev:?}"
    );

    let slow = FakeApiServer::builder()
        .bookmark_interval(Duration::from_secs(3600))
        .build();
    slow.ensure_namespace("ns");
    let api: Api<EndpointSlice> = Api::namespaced(slow.client(), "ns");
    let at = slow.resource_version().to_string();
    let mut w = api
        .watch(&WatchParams::default().timeout(1), &at)
        .await
        .unwrap()
        .boxed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    slow.send_bookmarks();
    let ev = tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Bookmark(_)), "{ev:?}");
    let started = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(5), w.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "timeoutSeconds closes the stream");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn expired_watch_makes_the_watcher_relist() {
    let server = FakeApiServer::new();
    server
        .create(slice("ns", "a", "svc", &["10.0.0.1"]))
        .unwrap();
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");

    // A watch from a compacted rv gets one ERROR 410 event.
    let old = server.resource_version().to_string();
    server.expire_watches();
    let mut raw = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match raw.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message
                    .starts_with(&format!("too old resource version: {old} (")),
                "{}",
                e.message
            );
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    assert!(raw.try_next().await.unwrap().is_none());

    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(_)));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));
    api.create(
        &PostParams::default(),
        &slice("ns", "b", "svc", &["10.0.0.2"]),
    )
    .await
    .unwrap();
    assert!(matches!(next_event(&mut stream).await, Event::Apply(_)));

    server.expire_watches();
    server
        .create(slice("ns", "c", "svc", &["10.0.0.3"]))
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(err, Err(watcher::Error::WatchError(ref s)) if s.code == 410),
        "{err:?}"
    );
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
    server
        .create(slice("ns", "a", "svc", &["10.0.0.1"]))
        .unwrap();
    let api: Api<EndpointSlice> = Api::namespaced(server.client(), "ns");
    let mut stream = watcher::watcher(api, watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    assert!(matches!(next_event(&mut stream).await, Event::InitApply(_)));
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_pods() {
    let server = FakeApiServer::new();
    let rss0 = rss_mib();
    let t = Instant::now();
    let pods = (0..100_000).map(|i| {
        let mut p = pod_json(&format!("ns-{}", i % 50), &format!("pod-{i:06}"), json!({"app": format!("app-{}", i % 1000)}));
        p["spec"]["nodeName"] = json!(format!("node-{}", i % 500));
        p["status"] = json!({"phase": "Running", "podIP": format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
            "conditions": [{"type": "Ready", "status": "True"}]});
        p
    });
    assert_eq!(server.create_many(pods).unwrap(), 100_000);
    let load = t.elapsed();
    let rss = rss_mib() - rss0;

    let api: Api<Pod> = Api::all(server.client());
    let t = Instant::now();
    let page = api.list(&ListParams::default().limit(500)).await.unwrap();
    let first_page = t.elapsed();
    assert_eq!(page.items.len(), 500);

    let t = Instant::now();
    let mut by_ns: BTreeMap<String, usize> = BTreeMap::new();
    let mut token = page.metadata.continue_.clone();
    page.iter()
        .for_each(|p| *by_ns.entry(p.namespace().unwrap()).or_default() += 1);
    while let Some(tok) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(500).continue_token(&tok))
            .await
            .unwrap();
        page.iter()
            .for_each(|p| *by_ns.entry(p.namespace().unwrap()).or_default() += 1);
        token = page.metadata.continue_.clone();
    }
    let walk = t.elapsed();
    assert_eq!(by_ns.values().sum::<usize>(), 100_000);

    let t = Instant::now();
    let selected = api
        .list(&ListParams::default().labels("app=app-7"))
        .await
        .unwrap();
    let select = t.elapsed();
    assert_eq!(selected.items.len(), 100);
    println!(
        "100k pods: load {load:?} (+{rss:.0} MiB RSS, 50 namespaces auto-created), first page of 500 {first_page:?}, \
         full paged walk {walk:?}, label-selected list {select:?}"
    );
}

//! The service controller under `sliced run`: a LoadBalancer Service gets the cleanup finalizer
//! and an address from the pools through the API server's status subresource, keeps it across a
//! restart while a newer Service gets the next one, and on deletion loses its address and then
//! its finalizer, so that the API server removes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sliced::engine::LoadBalancerOptions;
use sliced::kube::run::RunOptions;
use sliced::reconcile::load_balancer::PoolProvider;
use sliced::reconcile::load_balancer::pools::{IpAddressPoolObject, pool_from_object};

use super::small_cluster;
use crate::fake_api::FakeApiServer;
use crate::run_harness::{options, settle, start};

const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

fn with_pools() -> RunOptions {
    let object: IpAddressPoolObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "public"},
        "spec": {"addresses": ["192.0.2.0/28"], "avoidBuggyIPs": true}
    }))
    .unwrap();
    let pools = vec![pool_from_object(object).unwrap()];
    let mut options = options();
    options.engine.load_balancers = LoadBalancerOptions {
        provider: Some(Arc::new(PoolProvider::new(pools))),
        ..LoadBalancerOptions::default()
    };
    options
}

fn lb_service(name: &str, node_port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": "default", "name": name},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP",
                       "nodePort": node_port}],
            "ipFamilies": ["IPv4"]
        }
    })
}

/// Waits until `done` holds of the Service (or of its absence).
async fn until(
    fake: &FakeApiServer,
    name: &str,
    done: impl Fn(Option<&Value>) -> bool,
) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let service = fake.get("services", "default", name);
        if done(service.as_ref()) {
            return service;
        }
        assert!(Instant::now() < deadline, "service {name}: {service:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ingress_ip(service: Option<&Value>) -> Option<String> {
    service?["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .map(str::to_owned)
}

fn finalizers(service: &Value) -> Vec<String> {
    (service["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten())
    .filter_map(|f| f.as_str().map(str::to_owned))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_service_gets_an_address_keeps_it_and_gives_it_back() {
    let fake = small_cluster();
    // Another controller's finalizer, which every patch must keep.
    let mut shop = lb_service("shop", 30080);
    shop["metadata"]["finalizers"] = json!(["example.com/keep"]);
    fake.create(shop).unwrap();
    let running = start(&fake, with_pools());
    settle(&fake, &running).await;
    let shop = until(&fake, "shop", |s| ingress_ip(s).is_some())
        .await
        .unwrap();
    assert_eq!(ingress_ip(Some(&shop)).as_deref(), Some("192.0.2.1"));
    assert_eq!(finalizers(&shop), ["example.com/keep", FINALIZER]);
    running.stop().await.unwrap();

    // A restart: the address stays where it is, and a new Service takes the next one.
    let status_writes = fake.writes("services");
    fake.create(lb_service("api", 30081)).unwrap();
    let running = start(&fake, with_pools());
    settle(&fake, &running).await;
    let api = until(&fake, "api", |s| ingress_ip(s).is_some())
        .await
        .unwrap();
    assert_eq!(ingress_ip(Some(&api)).as_deref(), Some("192.0.2.2"));
    let shop = fake.get("services", "default", "shop").unwrap();
    assert_eq!(ingress_ip(Some(&shop)).as_deref(), Some("192.0.2.1"));
    // Requests to the API server: the test's own create is not one.
    assert_eq!(
        fake.writes("services"),
        status_writes + 2,
        "the new Service's finalizer and status; nothing of the other's"
    );

    // Deleted: the finalizer holds it until its load balancer is gone, then it goes; the
    // other controller's finalizer still holds it.
    fake.delete("services", "default", "shop").unwrap();
    let shop = until(&fake, "shop", |s| {
        s.is_some_and(|s| finalizers(s) == ["example.com/keep"])
    })
    .await
    .unwrap();
    assert!(shop["metadata"]["deletionTimestamp"].is_string());
    settle(&fake, &running).await;
    running.stop().await.unwrap();
}

/// Pools from the cluster's `IPAddressPool` objects, with no file: a Service gets an address from
/// one, and when the pool moves to other addresses, the Service moves with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clusters_address_pools_are_watched() {
    let fake = small_cluster();
    let pool = |addresses: &str| {
        json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": "public", "namespace": "metallb-system"},
            "spec": {"addresses": [addresses]}
        })
    };
    fake.create(pool("198.51.100.0/30")).unwrap();
    fake.create(lb_service("shop", 30080)).unwrap();
    let running = start(&fake, options());
    settle(&fake, &running).await;
    let shop = until(&fake, "shop", |s| ingress_ip(s).is_some()).await;
    assert_eq!(ingress_ip(shop.as_ref()).as_deref(), Some("198.51.100.0"));

    fake.apply(pool("203.0.113.8/30")).unwrap();
    let shop = until(&fake, "shop", |s| {
        ingress_ip(s).is_some_and(|ip| ip.starts_with("203.0.113."))
    })
    .await;
    assert_eq!(ingress_ip(shop.as_ref()).as_deref(), Some("203.0.113.8"));
    running.stop().await.unwrap();
}

/// A pool that serves only namespaces labelled `team: a`: the Service in `default` gets nothing
/// until its namespace is labelled, then an address, and loses it when the label goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_selecting_namespaces_follows_their_labels() {
    let fake = small_cluster();
    fake.create(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "team-a", "namespace": "metallb-system"},
        "spec": {
            "addresses": ["198.51.100.0/30"],
            "serviceAllocation": {"namespaceSelectors": [{"matchLabels": {"team": "a"}}]}
        }
    }))
    .unwrap();
    fake.create(lb_service("shop", 30080)).unwrap();
    let running = start(&fake, options());
    // Not settled: the failed Service waits out its backoff.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fake
        .list("events.events.k8s.io", "default")
        .iter()
        .any(|e| e["reason"] == "AllocationFailed" && e["regarding"]["name"] == "shop")
    {
        assert!(
            Instant::now() < deadline,
            "no AllocationFailed event on shop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let shop = fake.get("services", "default", "shop");
    assert_eq!(
        ingress_ip(shop.as_ref()),
        None,
        "no pool serves `default` yet"
    );

    let namespace = |labels: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "default", "labels": labels}})
    };
    fake.apply(namespace(json!({"team": "a"}))).unwrap();
    let shop = until(&fake, "shop", |s| ingress_ip(s).is_some()).await;
    assert_eq!(ingress_ip(shop.as_ref()).as_deref(), Some("198.51.100.0"));

    fake.apply(namespace(json!({"team": "b"}))).unwrap();
    until(&fake, "shop", |s| {
        s.is_some_and(|s| ingress_ip(Some(s)).is_none())
    })
    .await;
    running.stop().await.unwrap();
}

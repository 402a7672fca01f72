//! Many pods shaped like `fixtures/pods/deployment-pod.yaml`: a Deployment's pod as the API server
//! returns it, managedFields, probes, volumes and container statuses included. Variants differ in
//! name, uid, resourceVersion, IP, node and service label, and are deterministic.
//!
//! Include with `#[path = ".../support/real_pods.rs"] mod real_pods;` from tests and benches.

use k8s_openapi::api::core::v1 as core;

const FIXTURE: &str = include_str!("../../fixtures/pods/deployment-pod.yaml");

/// Decodes a watch event's object, as kube's watcher does.
#[allow(dead_code)] // Not every includer decodes.
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    match serde_json::from_slice(bytes) {
        Ok(object) => object,
        Err(e) => panic!("decoding an object: {e}"),
    }
}

/// Service `svc-{i}` of namespace `shop`, selecting the variants dealt to it.
#[allow(dead_code)] // Not every includer needs services.
pub fn service(i: usize) -> core::Service {
    let value = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": "shop", "name": format!("svc-{i}"), "uid": format!("uid-{i}")},
        "spec": {
            "selector": {"app.kubernetes.io/name": format!("svc-{i}")},
            "clusterIP": format!("10.96.{}.{}", i / 256, i % 256),
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]
        }
    });
    match serde_json::from_value(value) {
        Ok(svc) => svc,
        Err(e) => panic!("a service: {e}"),
    }
}

/// The fixture pod. Panics if the committed fixture does not parse: a broken test input.
pub fn template() -> core::Pod {
    match serde_saphyr::from_str(FIXTURE) {
        Ok(pod) => pod,
        Err(e) => panic!("fixtures/pods/deployment-pod.yaml: {e}"),
    }
}

/// The `i`th variant: in service `svc-{i % services}` of namespace `shop`, on one of 500 nodes.
pub fn variant(template: &core::Pod, i: usize, services: usize) -> core::Pod {
    let mut pod = template.clone();
    let service = format!("svc-{}", i % services);
    let ip = format!("10.{}.{}.{}", 64 + (i >> 16), (i >> 8) & 255, i & 255);
    let meta = &mut pod.metadata;
    meta.name = Some(format!("{service}-7d9c6b5f8b-{i:06x}"));
    meta.uid = Some(format!("0c3e4b8a-71d2-4f6e-9a0b-{i:012x}"));
    meta.resource_version = Some((48_213_377 + i).to_string());
    if let Some(labels) = meta.labels.as_mut() {
        labels.insert("app.kubernetes.io/name".to_string(), service);
    }
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(format!("node-{:04}", i % 500));
    }
    if let Some(status) = pod.status.as_mut() {
        status.pod_ip = Some(ip.clone());
        status.pod_ips = Some(vec![core::PodIP { ip }]);
    }
    pod
}

/// The variants `0..n`, each as the JSON bytes a watch event carries.
#[allow(dead_code)] // Not every includer needs the bytes.
pub fn json_variants(n: usize, services: usize) -> Vec<Vec<u8>> {
    let template = template();
    (0..n)
        .map(
            |i| match serde_json::to_vec(&variant(&template, i, services)) {
                Ok(bytes) => bytes,
                Err(e) => panic!("serializing a pod: {e}"),
            },
        )
        .collect()
}

/// Sets the pod's readiness as the kubelet reports it: the Ready and ContainersReady conditions
/// and every container's `ready`.
#[allow(dead_code)] // Not every includer flips readiness.
pub fn set_ready(pod: &mut core::Pod, ready: bool) {
    let Some(status) = pod.status.as_mut() else {
        return;
    };
    let value = if ready { "True" } else { "False" };
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == "Ready" || c.type_ == "ContainersReady" {
            c.status = value.to_string();
        }
    }
    for c in status.container_statuses.iter_mut().flatten() {
        c.ready = ready;
    }
}

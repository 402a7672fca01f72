//! Writes a cluster as `kubectl get ns,nodes,services,pods -A -o json` would print it, one JSON
//! `List`, deterministically: the input `perf/reconcile-whole.sh` times `sliced reconcile` on.
//!
//! ```text
//! cargo run --release --example cluster_dump -- --services 10000 --pods-per-service 100 \
//!     --namespaces 100 --nodes 5000 [--shape compact|real] [--synced] > cluster.json
//! ```
//!
//! `--shape compact` (the default) writes pods of about 480 bytes, the shape the issue measured
//! upstream on; `real` adds what the API server returns besides (managedFields, every condition,
//! container statuses), about 2.5 KB a pod. `--synced` appends the EndpointSlices and Endpoints
//! the controllers would write, so that a correct controller makes no write over the result.

use std::io::{BufWriter, Write};

use anyhow::{Context, bail};
use serde_json::{Value, json};

struct Spec {
    services: usize,
    pods_per_service: usize,
    namespaces: usize,
    nodes: usize,
    real: bool,
    synced: bool,
}

fn parse_args() -> anyhow::Result<Spec> {
    let mut spec = Spec {
        services: 1000,
        pods_per_service: 100,
        namespaces: 10,
        nodes: 500,
        real: false,
        synced: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut number = || -> anyhow::Result<usize> {
            let v = args
                .next()
                .with_context(|| format!("{flag} needs a value"))?;
            v.parse().with_context(|| format!("{flag} {v}"))
        };
        match flag.as_str() {
            "--services" => spec.services = number()?,
            "--pods-per-service" => spec.pods_per_service = number()?,
            "--namespaces" => spec.namespaces = number()?.max(1),
            "--nodes" => spec.nodes = number()?.max(1),
            "--synced" => spec.synced = true,
            "--shape" => match args.next().as_deref() {
                Some("compact") => spec.real = false,
                Some("real") => spec.real = true,
                other => bail!("--shape compact|real, not {other:?}"),
            },
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(spec)
}

const CREATED: &str = "2026-11-01T10:00:00Z";

fn namespace(n: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": format!("ns-{n}"), "uid": format!("6d1f0c1e-0000-4000-8000-{n:012x}")},
           "status": {"phase": "Active"}})
}

fn node(n: usize) -> Value {
    let name = format!("node-{n:05}");
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "uid": format!("7e2a1d2f-0000-4000-8000-{n:012x}"),
                        "labels": {"kubernetes.io/hostname": name,
                                   "topology.kubernetes.io/zone": format!("zone-{}", n % 3)}},
           "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
}

fn service(s: usize, namespaces: usize) -> Value {
    let ip = format!("10.96.{}.{}", (s >> 8) & 255, s & 255);
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": format!("svc-{s}"), "namespace": format!("ns-{}", s % namespaces),
                        "uid": format!("8f3b2e30-0000-4000-8000-{s:012x}"),
                        "resourceVersion": (1000 + s).to_string(), "creationTimestamp": CREATED},
           "spec": {"clusterIP": ip, "clusterIPs": [ip], "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack", "type": "ClusterIP",
                    "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}],
                    "selector": {"app": format!("svc-{s}")}}})
}

fn pod(spec: &Spec, s: usize, i: usize) -> Value {
    let n = s * spec.pods_per_service + i;
    let ip = format!("10.{}.{}.{}", 64 + (n >> 16), (n >> 8) & 255, n & 255);
    let app = format!("svc-{s}");
    let name = format!("{app}-7d9c6b5f8b-{n:06x}");
    let node = format!("node-{:05}", n % spec.nodes);
    let uid = format!("0c3e4b8a-71d2-4f6e-9a0b-{n:012x}");
    let ns = format!("ns-{}", s % spec.namespaces);
    if !spec.real {
        return json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": uid,
                         "resourceVersion": (100_000 + n).to_string(), "creationTimestamp": CREATED,
                         "labels": {"app": app, "pod-template-hash": "7d9c6b5f8b"}},
            "spec": {"nodeName": node,
                     "containers": [{"name": "app", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                                     "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": CREATED}]}});
    }
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": CREATED});
    let managed = |manager: &str, fields: Value| {
        json!({"apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": fields, "manager": manager, "operation": "Update", "time": CREATED})
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "generateName": format!("{app}-7d9c6b5f8b-"), "namespace": ns, "uid": uid,
            "resourceVersion": (100_000 + n).to_string(), "creationTimestamp": CREATED,
            "labels": {"app": app, "pod-template-hash": "7d9c6b5f8b"},
            "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": true, "controller": true,
                "kind": "ReplicaSet", "name": format!("{app}-7d9c6b5f8b"),
                "uid": format!("9a4c3f41-0000-4000-8000-{s:012x}")}],
            "managedFields": [
                managed("kube-controller-manager", json!({"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {".": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}}}},
                        "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:terminationGracePeriodSeconds": {}}})),
                managed("kubelet", json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                    "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.64.0.1\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}}))]},
        "spec": {"nodeName": node, "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "imagePullPolicy": "IfNotPresent", "args": ["netexec", "--http-port=8080"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                    "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "hostIP": format!("10.0.{}.{}", (n % spec.nodes) >> 8, (n % spec.nodes) & 255),
            "podIP": ip, "podIPs": [{"ip": ip}], "qosClass": "Burstable", "startTime": CREATED,
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
                           condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "started": true,
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "imageID": "registry.k8s.io/e2e-test-images/agnhost@sha256:99c6b4bb4a1e1df3f0b3752168c89358794d02258ebebc26bf21c29399011a85",
                "containerID": format!("containerd://{n:064x}"),
                "state": {"running": {"startedAt": CREATED}}, "lastState": {}}]}})
}

/// Writes `items` as the body of a List, each item on its own line.
fn write_items(out: &mut impl Write, first: &mut bool, item: &Value) -> anyhow::Result<()> {
    out.write_all(if *first { b"\n" } else { b",\n" })?;
    *first = false;
    serde_json::to_writer(&mut *out, item)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let spec = parse_args()?;
    let mut text: Vec<u8> = Vec::new();
    let mut first = true;
    text.extend_from_slice(
        br#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":["#,
    );
    for n in 0..spec.namespaces {
        write_items(&mut text, &mut first, &namespace(n))?;
    }
    for n in 0..spec.nodes {
        write_items(&mut text, &mut first, &node(n))?;
    }
    for s in 0..spec.services {
        write_items(&mut text, &mut first, &service(s, spec.namespaces))?;
    }
    for s in 0..spec.services {
        for i in 0..spec.pods_per_service {
            write_items(&mut text, &mut first, &pod(&spec, s, i))?;
        }
    }
    if spec.synced {
        let body = format!("{}]}}", String::from_utf8_lossy(&text));
        let loaded = sliced::kube::manifest::load_str("cluster", &body)?;
        let result = sliced::snapshot::reconcile_snapshot_full(
            &loaded.objects,
            &sliced::reconcile::Options::default(),
            &sliced::reconcile::mirroring::Options::default(),
            sliced::snapshot::Controllers::ALL,
            0,
        );
        for object in &result.objects {
            let value = sliced::kube::convert::object_to_json(object)?;
            write_items(&mut text, &mut first, &value)?;
        }
    }
    text.extend_from_slice(b"\n]}\n");
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    out.write_all(&text)?;
    out.flush()?;
    Ok(())
}

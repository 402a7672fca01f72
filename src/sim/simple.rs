//! The first generators: one service of n pods for benches, and a quick many-service cluster. Their
//! output is fixed (names, IPs, layout) since benches and `simulate` compare against it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use smallvec::smallvec;

use crate::model::{
    ClusterIp, ContainerPort, IpFamily, Labels, Meta, Name, Node, Pod, PodBuilder, PodIps,
    PodPhase, Protocol, Service, ServicePort, TargetPort, Timestamp, intern, keys,
};
use crate::snapshot::Snapshot;

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const PODS_PER_NODE: usize = 30;

/// One service and the pods it selects, spread over nodes in three zones.
pub struct ServiceScenario {
    pub service: Service,
    pub pods: Vec<Pod>,
    pub nodes: HashMap<Name, Node, ahash::RandomState>,
}

fn node_count(pods: usize) -> usize {
    pods.div_ceil(PODS_PER_NODE).max(3)
}

/// Ready nodes of 4 CPUs, `node-0`, `node-1`, ..., round-robin over three zones.
fn nodes(count: usize) -> impl Iterator<Item = Node> {
    (0..count).map(|i| Node {
        name: intern(&format!("node-{i}")),
        labels: Labels::from_pairs([(keys::LABEL_ZONE, ZONES[i % ZONES.len()])]),
        ready: true,
        allocatable_cpu_millis: 4000,
        ..Node::default()
    })
}

/// A ClusterIP service selecting `app=<name>`, port 80 to target port 8080.
fn service(namespace: &Name, name: &Name, index: usize) -> Service {
    let selector = Labels::from_pairs([("app", name.as_str())]);
    Service {
        meta: Meta {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: Name::new(&format!("00000000-0000-4000-9000-{index:012}")),
            resource_version: intern("1"),
            creation_timestamp: Timestamp::from_second(1_700_000_000).ok(),
            labels: selector.clone(),
            ..Meta::default()
        },
        selector: Some(selector),
        cluster_ip: ClusterIp::Ip(IpAddr::V4(Ipv4Addr::from(0x0a60_0000u32 + index as u32))),
        ip_families: smallvec![IpFamily::V4],
        ports: vec![ServicePort {
            name: intern("http"),
            port: 80,
            target_port: TargetPort::Number(8080),
            protocol: Protocol::Tcp,
            app_protocol: None,
            node_port: None,
        }],
        ..Service::default()
    }
}

/// A running, ready pod of `service`; `index` is unique in the cluster and gives its IP and UID.
fn pod(
    service: &Service,
    ordinal: usize,
    index: u32,
    node: usize,
    named: &Arc<[ContainerPort]>,
) -> Pod {
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: service.meta.namespace.clone(),
            name: Name::new(&format!("{}-{ordinal:06}", service.meta.name)),
            uid: Name::new(&format!("00000000-0000-4000-8000-{index:012}")),
            resource_version: intern("1"),
            labels: service.selector.clone().unwrap_or_default(),
            ..Meta::default()
        },
        node_name: Some(intern(&format!("node-{node}"))),
        phase: PodPhase::Running,
        has_pod_ip: true,
        ips: PodIps::One(IpAddr::V4(Ipv4Addr::from(0x0a01_0000u32 + index))),
        ready: true,
        named_ports: Arc::clone(named),
        ..PodBuilder::default()
    })
}

/// A service `web` in namespace `default` with `pods` ready pods, 30 pods per node.
pub fn single_service(pods: usize) -> ServiceScenario {
    let service = service(&intern("default"), &intern("web"), 1);
    let count = node_count(pods);
    let named: Arc<[ContainerPort]> = Arc::from(Vec::new());
    let pods = (0..pods)
        .map(|i| pod(&service, i, i as u32, i % count, &named))
        .collect();
    ServiceScenario {
        service,
        pods,
        nodes: nodes(count).map(|n| (n.name.clone(), n)).collect(),
    }
}

/// Gives `service` a second port, `metrics`, that names its target, and has the even pods serve
/// it on 9090 and the odd ones on 9091: the pods of two templates mid-way through a rolling update
/// that moves a named port. The Endpoints then hold several subsets, and the slices two port
/// groups.
pub fn two_templates(service: &mut Service, pods: &mut [Pod]) {
    service.ports.push(ServicePort {
        name: intern("metrics"),
        port: 9100,
        target_port: TargetPort::Name(intern("metrics")),
        protocol: Protocol::Tcp,
        app_protocol: None,
        node_port: None,
    });
    let named = |port| -> Arc<[ContainerPort]> {
        Arc::from(vec![ContainerPort {
            name: intern("metrics"),
            port,
            protocol: Protocol::Tcp,
            sidecar: false,
        }])
    };
    let (even, odd) = (named(9090), named(9091));
    for (i, pod) in pods.iter_mut().enumerate() {
        pod.named_ports = if i % 2 == 0 {
            even.clone()
        } else {
            odd.clone()
        };
    }
}

/// A deterministic cluster: `services` services in 10 namespaces sharing `pods` pods with a heavy
/// tail (service i gets a share proportional to 1/(i+1)), on nodes of 30 pods in three zones.
pub fn cluster(pods: usize, services: usize, seed: u64) -> Snapshot {
    let services = services.max(1);
    let weights: Vec<f64> = (0..services).map(|i| 1.0 / (i as f64 + 1.0)).collect();
    let total: f64 = weights.iter().sum();
    let mut sizes: Vec<usize> = weights
        .iter()
        .map(|w| ((w / total) * pods as f64).floor() as usize)
        .collect();
    let assigned: usize = sizes.iter().sum();
    for i in 0..pods.saturating_sub(assigned) {
        sizes[i % services] += 1;
    }
    // Rotate the sizes by the seed so different seeds give different layouts.
    sizes.rotate_left((seed as usize) % services);

    let count = node_count(pods);
    let named: Arc<[ContainerPort]> = Arc::from(Vec::new());
    let mut snapshot = Snapshot {
        nodes: nodes(count).collect(),
        ..Snapshot::default()
    };
    let mut index = 0u32;
    for (s, size) in sizes.into_iter().enumerate() {
        let svc = service(
            &intern(&format!("ns-{}", s % 10)),
            &intern(&format!("svc-{s}")),
            s,
        );
        for ordinal in 0..size {
            snapshot
                .pods
                .push(pod(&svc, ordinal, index, index as usize % count, &named));
            index += 1;
        }
        snapshot.services.push(svc);
    }
    snapshot
}

//! Deterministic synthetic clusters for benches, tests and `simulate`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use smallvec::smallvec;

use crate::model::{
    ClusterIp, IpFamily, Labels, Meta, Name, Node, Pod, PodPhase, Protocol, Service, ServicePort,
    TargetPort, Timestamp, intern, keys,
};

/// One service and the pods it selects, spread over nodes in three zones.
pub struct ServiceScenario {
    pub service: Service,
    pub pods: Vec<Pod>,
    pub nodes: HashMap<Name, Node, ahash::RandomState>,
}

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// A service `web` in namespace `default` with `pods` ready pods, 30 pods per node.
pub fn single_service(pods: usize) -> ServiceScenario {
    let namespace = intern("default");
    let selector = Labels::from_pairs([("app", "web")]);
    let service = Service {
        meta: Meta {
            namespace: namespace.clone(),
            name: intern("web"),
            uid: Name::new("8d3a1c1e-0000-4000-8000-000000000001"),
            resource_version: intern("1"),
            creation_timestamp: Some(Timestamp::from_second(1_700_000_000).unwrap_or_default()),
            labels: selector.clone(),
            ..Meta::default()
        },
        selector: Some(selector.clone()),
        cluster_ip: ClusterIp::Ip(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 10))),
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
    };
    let node_count = pods.div_ceil(30).max(3);
    let nodes: HashMap<Name, Node, ahash::RandomState> = (0..node_count)
        .map(|i| {
            let name = intern(&format!("node-{i}"));
            let node = Node {
                name: name.clone(),
                labels: Labels::from_pairs([(keys::LABEL_ZONE, ZONES[i % ZONES.len()])]),
                ready: true,
                allocatable_cpu_millis: 4000,
            };
            (name, node)
        })
        .collect();
    let named_ports = Arc::from(Vec::new());
    let pods = (0..pods)
        .map(|i| {
            let ip = Ipv4Addr::from(0x0a00_0000u32 + 0x0001_0000 + i as u32);
            Pod {
                meta: Meta {
                    namespace: namespace.clone(),
                    name: Name::new(&format!("web-{i:06}")),
                    uid: Name::new(&format!("00000000-0000-4000-8000-{i:012}")),
                    resource_version: intern("1"),
                    labels: selector.clone(),
                    ..Meta::default()
                },
                node_name: Some(intern(&format!("node-{}", i % node_count))),
                phase: PodPhase::Running,
                has_pod_ip: true,
                ips: smallvec![IpAddr::V4(ip)],
                ready: true,
                named_ports: Arc::clone(&named_ports),
                ..Pod::default()
            }
        })
        .collect();
    ServiceScenario {
        service,
        pods,
        nodes,
    }
}

/// A deterministic cluster: `services` services in 10 namespaces sharing `pods` pods with a heavy
/// tail (service i gets a share proportional to 1/(i+1)), on nodes of 30 pods in three zones.
pub fn cluster(pods: usize, services: usize, seed: u64) -> crate::snapshot::Snapshot {
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
    let shift = (seed as usize) % services;
    sizes.rotate_left(shift);

    let node_count = pods.div_ceil(30).max(3);
    let nodes: Vec<Node> = (0..node_count)
        .map(|i| Node {
            name: intern(&format!("node-{i}")),
            labels: Labels::from_pairs([(keys::LABEL_ZONE, ZONES[i % ZONES.len()])]),
            ready: true,
            allocatable_cpu_millis: 4000,
        })
        .collect();
    let named_ports: Arc<[crate::model::ContainerPort]> = Arc::from(Vec::new());
    let mut snapshot = crate::snapshot::Snapshot {
        nodes,
        ..Default::default()
    };
    let mut pod_index = 0u32;
    for (s, size) in sizes.into_iter().enumerate() {
        let namespace = intern(&format!("ns-{}", s % 10));
        let name = intern(&format!("svc-{s}"));
        let selector = Labels::from_pairs([("app", name.as_str())]);
        snapshot.services.push(Service {
            meta: Meta {
                namespace: namespace.clone(),
                name: name.clone(),
                uid: Name::new(&format!("00000000-0000-4000-9000-{s:012}")),
                resource_version: intern("1"),
                creation_timestamp: Timestamp::from_second(1_700_000_000).ok(),
                ..Meta::default()
            },
            selector: Some(selector.clone()),
            cluster_ip: ClusterIp::Ip(IpAddr::V4(Ipv4Addr::from(0x0a60_0000u32 + s as u32))),
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
        });
        for p in 0..size {
            let i = pod_index;
            pod_index += 1;
            snapshot.pods.push(Pod {
                meta: Meta {
                    namespace: namespace.clone(),
                    name: Name::new(&format!("{name}-{p}")),
                    uid: Name::new(&format!("00000000-0000-4000-8000-{i:012}")),
                    resource_version: intern("1"),
                    labels: selector.clone(),
                    ..Meta::default()
                },
                node_name: Some(intern(&format!("node-{}", i as usize % node_count))),
                phase: PodPhase::Running,
                has_pod_ip: true,
                ips: smallvec![IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32 + 0x0001_0000 + i))],
                ready: true,
                named_ports: Arc::clone(&named_ports),
                ..Pod::default()
            });
        }
    }
    snapshot
}

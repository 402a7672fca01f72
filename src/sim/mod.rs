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
    pub nodes: HashMap<Name, Node>,
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
    let nodes: HashMap<Name, Node> = (0..node_count)
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

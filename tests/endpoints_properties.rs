//! The Endpoints reconciler against a plain model of upstream's sync: one subset per pod and port,
//! then `RepackSubsets`. Random services (numeric and named target ports, publishNotReadyAddresses)
//! and pods (readiness, phases, deletion, several templates, shared IPs).

use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;
use smallvec::smallvec;

use sliced::model::{
    Address, ClusterIp, ContainerPort, EndpointAddress, EndpointSubset, Endpoints, EndpointsPort,
    IpFamily, Labels, Meta, Name, Pod, PodBuilder, PodPhase, Protocol, Service, ServicePort,
    TargetPort, TargetRef, Timestamp, intern,
};
use sliced::reconcile::endpoints::{
    EndpointsInput, EndpointsWrite, pod_in_endpoints, repack, same_subsets, sync,
};
use sliced::reconcile::ports::target_port_number;

#[derive(Clone, Debug)]
struct PodSpec {
    ip: u8,
    ready: bool,
    phase: u8,
    deleting: bool,
    template: u8,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        0u8..40,
        any::<bool>(),
        0u8..8,
        prop::bool::weighted(0.15),
        0u8..3,
    )
        .prop_map(|(ip, ready, phase, deleting, template)| PodSpec {
            ip,
            ready,
            phase,
            deleting,
            template,
        })
}

fn templates() -> Vec<Arc<[ContainerPort]>> {
    let port = |name: &str, port: i32| ContainerPort {
        name: intern(name),
        port,
        protocol: Protocol::Tcp,
        sidecar: false,
    };
    vec![
        Arc::from(vec![port("http", 8080), port("grpc", 9000)]),
        Arc::from(vec![port("http", 8081)]),
        Arc::from(Vec::new()),
    ]
}

fn service(named: bool, publish: bool, headless_no_ports: bool) -> Service {
    let selector = Labels::from_pairs([("app", "p")]);
    let port = |name: &str, target: TargetPort| ServicePort {
        name: intern(name),
        port: 80,
        target_port: target,
        protocol: Protocol::Tcp,
        app_protocol: None,
        node_port: None,
    };
    let ports = if headless_no_ports {
        Vec::new()
    } else if named {
        vec![
            port("http", TargetPort::Name(intern("http"))),
            port("grpc", TargetPort::Name(intern("grpc"))),
            port("metrics", TargetPort::Number(9090)),
        ]
    } else {
        vec![port("http", TargetPort::Number(8080))]
    };
    Service {
        meta: Meta {
            namespace: intern("default"),
            name: intern("p"),
            uid: Name::new("svc-uid"),
            labels: selector.clone(),
            creation_timestamp: Timestamp::from_second(1_790_000_000).ok(),
            ..Meta::default()
        },
        selector: Some(selector),
        cluster_ip: if headless_no_ports {
            ClusterIp::Headless
        } else {
            ClusterIp::Ip(IpAddr::from([10, 96, 0, 1]))
        },
        ip_families: smallvec![IpFamily::V4],
        ports,
        publish_not_ready_addresses: publish,
        ..Service::default()
    }
}

fn pods(specs: &[PodSpec]) -> Vec<Pod> {
    let templates = templates();
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Pod::from(PodBuilder {
                meta: Meta {
                    namespace: intern("default"),
                    name: Name::new(&format!("p-{i}")),
                    uid: Name::new(&format!("uid-{:03}", (i * 37) % 101)),
                    labels: Labels::from_pairs([("app", "p")]),
                    deletion_timestamp: s
                        .deleting
                        .then(|| Timestamp::from_second(1_790_000_100).ok())
                        .flatten(),
                    ..Meta::default()
                },
                node_name: Some(intern("node-a")),
                phase: match s.phase {
                    0 => PodPhase::Pending,
                    1 => PodPhase::Succeeded,
                    2 => PodPhase::Failed,
                    _ => PodPhase::Running,
                },
                has_pod_ip: s.ip != 0,
                ips: if s.ip == 0 {
                    vec![]
                } else {
                    vec![IpAddr::from([10, 0, s.ip % 3, s.ip])]
                }
                .into_iter()
                .collect(),
                ready: s.ready,
                named_ports: templates[usize::from(s.template)].clone(),
                ..PodBuilder::default()
            })
        })
        .collect()
}

/// Upstream's construction, literally: a one-address subset per pod and resolved port.
fn naive(service: &Service, pods: &[Pod]) -> Vec<EndpointSubset> {
    let mut subsets = Vec::new();
    for pod in pods {
        if !pod_in_endpoints(pod, service.publish_not_ready_addresses) {
            continue;
        }
        let Some(ip) = pod.ips().first() else {
            continue;
        };
        let address = EndpointAddress {
            ip: Address::Ip(*ip),
            hostname: None,
            node_name: pod.node_name.clone(),
            target_ref: Some(TargetRef {
                kind: Some(intern("Pod")),
                namespace: Some(pod.meta.namespace.clone()),
                name: Some(pod.meta.name.clone()),
                uid: Some(pod.meta.uid()),
                api_version: None,
                resource_version: None,
            }),
        };
        let ready = service.publish_not_ready_addresses || pod.ready;
        let mut add = |ports: Vec<EndpointsPort>| {
            let mut s = EndpointSubset {
                ports,
                ..EndpointSubset::default()
            };
            if ready {
                s.addresses.push(address.clone());
            } else {
                s.not_ready_addresses.push(address.clone());
            }
            subsets.push(s);
        };
        if service.ports.is_empty() {
            add(Vec::new());
        }
        for sp in &service.ports {
            if let Some(port) = target_port_number(&pod.named_ports, sp) {
                add(vec![EndpointsPort {
                    name: Some(sp.name.clone()),
                    port,
                    protocol: Some(sp.protocol),
                    app_protocol: None,
                }]);
            }
        }
    }
    repack(&subsets)
}

fn run(service: &Service, pods: &[Pod], current: Option<&Endpoints>) -> Option<EndpointsWrite> {
    let refs: Vec<&Pod> = pods.iter().collect();
    sync(&EndpointsInput {
        service,
        pods: &refs,
        current,
        trigger_time: service.meta.creation_timestamp,
    })
    .write
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn matches_upstreams_construction_and_settles(
        specs in prop::collection::vec(pod_spec(), 0..30),
        named in any::<bool>(),
        publish in any::<bool>(),
        headless_no_ports in prop::bool::weighted(0.2),
        later in prop::collection::vec(pod_spec(), 0..30),
    ) {
        let svc = service(named, publish, headless_no_ports);
        let pods = pods(&specs);
        let Some(EndpointsWrite::Create(mut created)) = run(&svc, &pods, None) else {
            panic!("a service without Endpoints gets them created");
        };
        prop_assert_eq!(&created.subsets, &naive(&svc, &pods));

        // Stored, it needs no write; nor in another subset order, which upstream (1.35 and
        // later) repacks before comparing.
        created.meta.resource_version = intern("1");
        prop_assert_eq!(run(&svc, &pods, Some(&created)), None);
        let mut reordered = created.clone();
        reordered.subsets.reverse();
        prop_assert_eq!(run(&svc, &pods, Some(&reordered)), None);

        // After a change, one update reaches the desired content, and then nothing more is written.
        let changed = self::pods(&later);
        match run(&svc, &changed, Some(&created)) {
            None => prop_assert!(same_subsets(&created.subsets, &naive(&svc, &changed))),
            Some(EndpointsWrite::Update(mut updated)) => {
                prop_assert_eq!(&updated.subsets, &naive(&svc, &changed));
                prop_assert!(!same_subsets(&created.subsets, &updated.subsets)
                    || created.meta.annotations != updated.meta.annotations
                    || created.meta.labels != updated.meta.labels);
                updated.meta.resource_version = intern("2");
                prop_assert_eq!(run(&svc, &changed, Some(&updated)), None);
            }
            Some(other) => prop_assert!(false, "unexpected write {other:?}"),
        }
    }
}

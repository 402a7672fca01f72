//! Property tests of the EndpointSlice reconciler against an independent oracle: for random services,
//! pods and earlier slices, one sync leaves exactly the desired endpoints, each once, in slices no
//! larger than the cap it writes; a second sync writes nothing; and the same inputs give the same
//! writes.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use proptest::prelude::*;
use smallvec::SmallVec;

use sliced::model::{
    ClusterIp, ContainerPort, IpFamily, Labels, Meta, Name, Node, Pod, PodBuilder, PodPhase,
    Protocol, Service, ServicePort, TargetPort, Timestamp, intern, keys,
};
use sliced::reconcile::Options;
use sliced::sink::Object;
use sliced::snapshot::{Snapshot, SnapshotResult, reconcile_snapshot};

#[derive(Clone, Debug)]
struct PodSpec {
    ready: bool,
    terminating: bool,
    terminal: bool,
    v4: bool,
    v6: bool,
    node: usize,
    http_port: Option<i32>,
}

#[derive(Clone, Debug)]
struct ServiceSpec {
    families: Vec<IpFamily>,
    publish_not_ready: bool,
    named_target: bool,
    two_ports: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        any::<bool>(),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.9),
        any::<bool>(),
        0usize..4,
        prop::option::weighted(0.8, prop_oneof![Just(8080), Just(9090)]),
    )
        .prop_map(
            |(ready, terminating, terminal, v4, v6, node, http_port)| PodSpec {
                ready,
                terminating,
                terminal,
                v4,
                v6,
                node,
                http_port,
            },
        )
}

fn service_spec() -> impl Strategy<Value = ServiceSpec> {
    (
        prop_oneof![
            Just(vec![IpFamily::V4]),
            Just(vec![IpFamily::V6]),
            Just(vec![IpFamily::V4, IpFamily::V6]),
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(families, publish_not_ready, named_target, two_ports)| ServiceSpec {
                families,
                publish_not_ready,
                named_target,
                two_ports,
            },
        )
}

fn service(spec: &ServiceSpec) -> Service {
    let mut ports = vec![ServicePort {
        name: intern("http"),
        port: 80,
        target_port: if spec.named_target {
            TargetPort::Name(intern("http"))
        } else {
            TargetPort::Number(8080)
        },
        protocol: Protocol::Tcp,
        app_protocol: None,
        node_port: None,
    }];
    if spec.two_ports {
        ports.push(ServicePort {
            name: intern("metrics"),
            port: 9100,
            target_port: TargetPort::Number(9100),
            protocol: Protocol::Tcp,
            app_protocol: None,
            node_port: None,
        });
    }
    Service {
        meta: Meta {
            namespace: intern("prop"),
            name: intern("svc"),
            uid: intern("uid-svc"),
            creation_timestamp: Timestamp::from_second(1_700_000_000).ok(),
            ..Meta::default()
        },
        selector: Some(Labels::from_pairs([("app", "svc")])),
        cluster_ip: ClusterIp::Ip(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1))),
        ip_families: spec.families.iter().copied().collect(),
        ports,
        publish_not_ready_addresses: spec.publish_not_ready,
        ..Service::default()
    }
}

fn pod(i: usize, spec: &PodSpec) -> Pod {
    let mut ips: SmallVec<[IpAddr; 2]> = SmallVec::new();
    if spec.v4 {
        ips.push(IpAddr::V4(Ipv4Addr::new(
            10,
            1,
            (i / 250) as u8,
            (i % 250) as u8,
        )));
    }
    if spec.v6 {
        ips.push(IpAddr::V6(Ipv6Addr::new(
            0xfd00, 0, 0, 0, 0, 0, 1, i as u16,
        )));
    }
    let named_ports: Arc<[ContainerPort]> = spec
        .http_port
        .map(|port| {
            vec![ContainerPort {
                name: intern("http"),
                port,
                protocol: Protocol::Tcp,
                sidecar: false,
            }]
        })
        .unwrap_or_default()
        .into();
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: intern("prop"),
            name: Name::new(&format!("pod-{i}")),
            uid: Name::new(&format!("uid-pod-{i}")),
            labels: Labels::from_pairs([("app", "svc")]),
            deletion_timestamp: spec
                .terminating
                .then(|| Timestamp::from_second(1_700_000_100).ok())
                .flatten(),
            ..Meta::default()
        },
        // node-3 does not exist.
        node_name: Some(intern(&format!("node-{}", spec.node))),
        phase: if spec.terminal {
            PodPhase::Succeeded
        } else {
            PodPhase::Running
        },
        has_pod_ip: !ips.is_empty(),
        ips: ips.into_iter().collect(),
        ready: spec.ready,
        named_ports,
        ..PodBuilder::default()
    })
}

fn nodes() -> Vec<Node> {
    (0..3)
        .map(|i| Node {
            name: intern(&format!("node-{i}")),
            labels: Labels::from_pairs([(keys::LABEL_ZONE, ["a", "b", "c"][i])]),
            ready: true,
            allocatable_cpu_millis: 2000,
            ..Node::default()
        })
        .collect()
}

/// The oracle: (address, pod name, ready, port numbers) of every endpoint the service should have.
fn expected(svc: &ServiceSpec, pods: &[PodSpec]) -> BTreeSet<(String, String, bool, Vec<i32>)> {
    let mut out = BTreeSet::new();
    for (i, p) in pods.iter().enumerate() {
        if p.terminal || !(p.v4 || p.v6) || (p.node == 3 && !svc.publish_not_ready) {
            continue;
        }
        let built = pod(i, p);
        let ready = svc.publish_not_ready || (p.ready && !p.terminating);
        let mut ports = Vec::new();
        match (svc.named_target, p.http_port) {
            (false, _) => ports.push(8080),
            (true, Some(n)) => ports.push(n),
            (true, None) => {}
        }
        if svc.two_ports {
            ports.push(9100);
        }
        ports.sort();
        for ip in built.ips() {
            if svc.families.contains(&IpFamily::of(ip)) {
                out.insert((ip.to_string(), format!("pod-{i}"), ready, ports.clone()));
            }
        }
    }
    out
}

fn actual(result: &SnapshotResult) -> Vec<(String, String, bool, Vec<i32>)> {
    let mut out = Vec::new();
    for o in &result.objects {
        let Object::EndpointSlice(s) = o else {
            continue;
        };
        let mut ports: Vec<i32> = s.ports.iter().filter_map(|p| p.port).collect();
        ports.sort();
        for e in &s.endpoints {
            for a in &e.addresses {
                let name = e
                    .target_ref
                    .as_ref()
                    .and_then(|t| t.name.as_ref())
                    .map(|n| n.to_string())
                    .unwrap_or_default();
                out.push((
                    a.to_string(),
                    name,
                    e.conditions.ready == Some(true),
                    ports.clone(),
                ));
            }
        }
    }
    out.sort();
    out
}

fn run(
    svc: &ServiceSpec,
    pods: &[PodSpec],
    existing: &SnapshotResult,
    max: usize,
) -> SnapshotResult {
    let snapshot = Snapshot {
        services: vec![service(svc)],
        pods: pods.iter().enumerate().map(|(i, p)| pod(i, p)).collect(),
        nodes: nodes(),
        endpoint_slices: existing
            .objects
            .iter()
            .filter_map(|o| o.as_slice().cloned())
            .collect(),
        ..Snapshot::default()
    };
    let options = Options {
        max_endpoints_per_slice: max,
        prefer_same_traffic_distribution: false,
    };
    reconcile_snapshot(&snapshot, &options, 7)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn one_sync_reaches_the_desired_state(
        svc in service_spec(),
        before in prop::collection::vec(pod_spec(), 0..24),
        after in prop::collection::vec(pod_spec(), 0..24),
        max_before in 1usize..6,
        max_after in 1usize..6,
    ) {
        let first = run(&svc, &before, &SnapshotResult::default(), max_before);
        let second = run(&svc, &after, &first, max_after);

        // Exactly the desired endpoints, each once.
        let want: Vec<_> = expected(&svc, &after).into_iter().collect();
        prop_assert_eq!(actual(&second), want);

        // No write grows a slice past the cap. (A lower cap does not split a slice that is already
        // larger: upstream never rebalances, it only stops adding.)
        for w in &second.writes {
            if let Some(s) = w.sent.as_slice() {
                let before = first
                    .objects
                    .iter()
                    .filter_map(|o| o.as_slice())
                    .find(|p| !s.meta.name.is_empty() && p.meta.name == s.meta.name)
                    .map_or(0, |p| p.endpoints.len());
                prop_assert!(
                    s.endpoints.len() <= max_after.max(before),
                    "{} endpoints > cap {} (had {})", s.endpoints.len(), max_after, before
                );
            }
        }
        // Every family has at least one slice.
        for family in &svc.families {
            let t = sliced::model::AddressType::for_family(*family);
            prop_assert!(second.objects.iter().any(|o| o.as_slice().is_some_and(|s| s.address_type == t)));
        }

        // A second sync over the result writes nothing.
        let third = run(&svc, &after, &second, max_after);
        prop_assert!(third.writes.is_empty(), "rerun wrote {:?}", third.writes.iter().map(|w| w.verb).collect::<Vec<_>>());

        // Same inputs, same writes.
        let again = run(&svc, &after, &first, max_after);
        prop_assert_eq!(format!("{:?}", again.writes), format!("{:?}", second.writes));
    }
}

//! The Endpoints reconciler against an independent model of upstream's sync
//! (tests/support/endpoints_model.rs: `ShouldPodBeInEndpoints`, the address of the service's IP
//! family, hostnames, `FindPort`, then `RepackSubsets`), written in plain types and calling none of
//! the reconciler's helpers. Random services (numeric, named and unnamed target ports, protocols,
//! appProtocol, IP families, headless without ports, publishNotReadyAddresses) and pods (readiness,
//! every phase, deletion, no IP, one or two IPs of either family first, host-network pods sharing
//! a node IP, a UID seen twice, container and sidecar ports, hostnames and subdomains).

use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;

use sliced::model::{
    ClusterIp, ContainerPort, Endpoints, IpFamily, Labels, Meta, Name, Pod, PodBuilder, PodPhase,
    Protocol, Service, ServicePort, TargetPort, Timestamp, intern,
};
use sliced::reconcile::endpoints::{
    AddressCache, Edit, EndpointsInput, EndpointsPlan, EndpointsWrite, Settled, sync, sync_cached,
    sync_settled,
};

#[path = "../support/endpoints_model.rs"]
mod endpoints_model;

use endpoints_model::{
    MAddress, MContainerPort, MPod, MPort, MService, MServicePort, MSubset, MTarget, Phase,
};
use sliced::reconcile::endpoints::repack;

// ---------------------------------------------------------------------------------------------
// Generation: plain specs, turned both into the model's input and into the crate's objects.

/// The named container ports of a pod template: (regular containers, sidecars).
fn template(t: u8) -> (Vec<MContainerPort>, Vec<MContainerPort>) {
    let p = |name: &str, port: i32, protocol: &'static str| MContainerPort {
        name: name.to_owned(),
        port,
        protocol,
    };
    match t {
        0 => (vec![p("http", 8080, "TCP"), p("grpc", 9000, "TCP")], vec![]),
        1 => (vec![p("http", 8081, "TCP")], vec![]),
        2 => (vec![], vec![]),
        // The protocol is part of the match: the UDP "http" is not the TCP one.
        3 => (vec![p("http", 8082, "UDP"), p("http", 8083, "TCP")], vec![]),
        // Found in a sidecar when no regular container declares it.
        4 => (vec![p("grpc", 9001, "TCP")], vec![p("http", 15001, "TCP")]),
        // A regular container wins over a sidecar, whatever their order in the pod.
        5 => (vec![p("http", 8084, "TCP")], vec![p("http", 15002, "TCP")]),
        // One name, two protocols.
        _ => (
            vec![p("dns", 5353, "UDP"), p("dns", 5354, "TCP")],
            vec![p("grpc", 15003, "TCP")],
        ),
    }
}
const TEMPLATES: u8 = 7;

#[derive(Clone, Debug)]
struct PodSpec {
    /// 0: no IP; otherwise the host part of the pod's IP(s).
    ip: u8,
    /// 0: IPv4 only, 1: IPv6 only, 2: both, IPv4 first, 3: both, IPv6 first.
    families: u8,
    /// On the host network: the node's IP (shared with the node's other host-network pods).
    host_network: bool,
    ready: bool,
    phase: u8,
    deleting: bool,
    template: u8,
    /// Its own copy of the template's ports rather than the shared one.
    own_ports: bool,
    node: u8,
    /// 0: none; 1: hostname with the service as subdomain; 2: hostname, another subdomain; 3:
    /// subdomain only.
    hostname: u8,
    /// Reuse the UID of an earlier pod (index modulo the pods so far).
    same_uid_as: Option<u8>,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        (0u8..40, 0u8..4, prop::bool::weighted(0.15), any::<bool>()),
        (
            0u8..10,
            prop::bool::weighted(0.15),
            0..TEMPLATES,
            any::<bool>(),
        ),
        (0u8..3, 0u8..4, prop::option::weighted(0.05, any::<u8>())),
    )
        .prop_map(
            |(
                (ip, families, host_network, ready),
                (phase, deleting, template, own_ports),
                (node, hostname, same_uid_as),
            )| PodSpec {
                ip,
                families,
                host_network,
                ready,
                phase,
                deleting,
                template,
                own_ports,
                node,
                hostname,
                same_uid_as,
            },
        )
}

#[derive(Clone, Debug)]
struct ServiceSpec {
    /// 0: one numeric port, 1: named, named, numeric, UDP-named, 2: one unnamed port named-target,
    /// 3: no ports.
    ports: u8,
    /// 0: clusterIP v4, 1: clusterIP v6, 2: headless, 3: clusterIP unset.
    cluster_ip: u8,
    /// 0: none, 1: [IPv4], 2: [IPv6], 3: [IPv6, IPv4].
    families: u8,
    publish: bool,
}

fn service_spec() -> impl Strategy<Value = ServiceSpec> {
    (0u8..4, 0u8..4, 0u8..4, any::<bool>()).prop_map(|(ports, cluster_ip, families, publish)| {
        ServiceSpec {
            ports,
            cluster_ip,
            families,
            publish,
        }
    })
}

fn v4(host: u8) -> String {
    format!("10.0.{}.{host}", host % 3)
}

/// Short texts, and long ones that share their first 16 bytes and differ after them (address
/// order must read past a text's head).
fn v6(host: u8) -> String {
    match host % 3 {
        0 => format!("fd00::{host:x}"),
        _ => format!("fd00:10:244:12::{host:x}"),
    }
}

fn node_v4(node: u8) -> String {
    format!("192.168.0.{}", node + 1)
}

fn node_v6(node: u8) -> String {
    format!("fd01::{:x}", node + 1)
}

fn model_service(s: &ServiceSpec) -> MService {
    let port =
        |name: &str, target: MTarget, protocol: &'static str, app: Option<&str>| MServicePort {
            name: name.to_owned(),
            target,
            protocol,
            app_protocol: app.map(str::to_owned),
        };
    let name = |n: &str| MTarget::Name(n.to_owned());
    MService {
        namespace: "default".to_owned(),
        name: "p".to_owned(),
        cluster_ip: match s.cluster_ip {
            0 => "10.96.0.1".to_owned(),
            1 => "fd02::1".to_owned(),
            2 => "None".to_owned(),
            _ => String::new(),
        },
        ip_families: match s.families {
            0 => vec![],
            1 => vec!["IPv4"],
            2 => vec!["IPv6"],
            _ => vec!["IPv6", "IPv4"],
        },
        ports: match s.ports {
            0 => vec![port("http", MTarget::Number(8080), "TCP", None)],
            1 => vec![
                port("http", name("http"), "TCP", Some("http")),
                port("grpc", name("grpc"), "TCP", None),
                port("metrics", MTarget::Number(9090), "TCP", None),
                port("dns", name("dns"), "UDP", None),
            ],
            2 => vec![port("", name("http"), "TCP", None)],
            _ => vec![],
        },
        publish_not_ready_addresses: s.publish,
    }
}

fn model_pods(specs: &[PodSpec]) -> Vec<MPod> {
    let mut uids: Vec<String> = Vec::new();
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let uid = match s.same_uid_as {
                Some(j) if i > 0 => uids[usize::from(j) % i].clone(),
                _ => format!("uid-{:03}", (i * 37) % 101),
            };
            uids.push(uid.clone());
            let (four, six) = if s.host_network {
                (node_v4(s.node), node_v6(s.node))
            } else {
                (v4(s.ip), v6(s.ip))
            };
            let pod_ips = match (s.ip, s.families) {
                (0, _) => vec![],
                (_, 0) => vec![four],
                (_, 1) => vec![six],
                (_, 2) => vec![four, six],
                _ => vec![six, four],
            };
            let (containers, sidecars) = template(s.template);
            MPod {
                namespace: "default".to_owned(),
                name: format!("p-{i}"),
                uid,
                // Node 0 stands for a pod not yet scheduled.
                node_name: (s.node != 0).then(|| format!("node-{}", s.node)),
                hostname: matches!(s.hostname, 1 | 2).then(|| format!("host-{i}")),
                subdomain: match s.hostname {
                    1 | 3 => Some("p".to_owned()),
                    2 => Some("other".to_owned()),
                    _ => None,
                },
                phase: match s.phase {
                    0 => Phase::Pending,
                    1 => Phase::Succeeded,
                    2 => Phase::Failed,
                    3 => Phase::Unknown,
                    _ => Phase::Running,
                },
                pod_ip: pod_ips.first().cloned(),
                pod_ips,
                ready: s.ready,
                deleting: s.deleting,
                containers,
                sidecars,
            }
        })
        .collect()
}

fn protocol(p: &str) -> Protocol {
    match p {
        "TCP" => Protocol::Tcp,
        "UDP" => Protocol::Udp,
        _ => Protocol::Sctp,
    }
}

fn service(m: &MService) -> Service {
    let selector = Labels::from_pairs([("app", "p")]);
    Service {
        meta: Meta {
            namespace: intern(&m.namespace),
            name: intern(&m.name),
            uid: Name::new("svc-uid"),
            labels: selector.clone(),
            creation_timestamp: Timestamp::from_second(1_790_000_000).ok(),
            ..Meta::default()
        },
        selector: Some(selector),
        cluster_ip: match m.cluster_ip.as_str() {
            "" => ClusterIp::Unset,
            "None" => ClusterIp::Headless,
            ip => ClusterIp::Ip(ip.parse().unwrap()),
        },
        ip_families: m
            .ip_families
            .iter()
            .map(|f| {
                if *f == "IPv4" {
                    IpFamily::V4
                } else {
                    IpFamily::V6
                }
            })
            .collect(),
        ports: m
            .ports
            .iter()
            .map(|p| ServicePort {
                name: intern(&p.name),
                port: 80,
                target_port: match &p.target {
                    MTarget::Number(n) => TargetPort::Number(*n),
                    MTarget::Name(n) => TargetPort::Name(intern(n)),
                },
                protocol: protocol(p.protocol),
                app_protocol: p.app_protocol.as_deref().map(intern),
                node_port: None,
            })
            .collect(),
        publish_not_ready_addresses: m.publish_not_ready_addresses,
        ..Service::default()
    }
}

fn container_ports(
    containers: &[MContainerPort],
    sidecars: &[MContainerPort],
) -> Vec<ContainerPort> {
    let port = |c: &MContainerPort, sidecar: bool| ContainerPort {
        name: intern(&c.name),
        port: c.port,
        protocol: protocol(c.protocol),
        sidecar,
    };
    containers
        .iter()
        .map(|c| port(c, false))
        .chain(sidecars.iter().map(|c| port(c, true)))
        .collect()
}

fn pods(specs: &[PodSpec], models: &[MPod]) -> Vec<Pod> {
    // Pods of one template share their ports, as the loader and the watch make them.
    let shared: Vec<Arc<[ContainerPort]>> = (0..TEMPLATES)
        .map(|t| {
            let (containers, sidecars) = template(t);
            Arc::from(container_ports(&containers, &sidecars))
        })
        .collect();
    specs
        .iter()
        .zip(models)
        .map(|(s, m)| {
            Pod::from(PodBuilder {
                meta: Meta {
                    namespace: intern(&m.namespace),
                    name: Name::new(&m.name),
                    uid: Name::new(&m.uid),
                    labels: Labels::from_pairs([("app", "p")]),
                    deletion_timestamp: m
                        .deleting
                        .then(|| Timestamp::from_second(1_790_000_100).ok())
                        .flatten(),
                    ..Meta::default()
                },
                node_name: m.node_name.as_deref().map(intern),
                hostname: m.hostname.as_deref().map(Name::new),
                subdomain: m.subdomain.as_deref().map(Name::new),
                phase: match m.phase {
                    Phase::Pending => PodPhase::Pending,
                    Phase::Running => PodPhase::Running,
                    Phase::Succeeded => PodPhase::Succeeded,
                    Phase::Failed => PodPhase::Failed,
                    Phase::Unknown => PodPhase::Unknown,
                },
                has_pod_ip: m.pod_ip.is_some(),
                ips: m
                    .pod_ips
                    .iter()
                    .map(|ip| ip.parse::<IpAddr>().unwrap())
                    .collect(),
                ready: m.ready,
                named_ports: if s.own_ports {
                    Arc::from(container_ports(&m.containers, &m.sidecars))
                } else {
                    shared[usize::from(s.template)].clone()
                },
                ..PodBuilder::default()
            })
        })
        .collect()
}

fn run(service: &Service, pods: &[Pod], current: Option<&Endpoints>) -> Option<EndpointsWrite> {
    run_over(service, pods, current, false)
}

/// A sync that knows whether `current` is its own last write (which it then compares unrepacked).
fn run_over(
    service: &Service,
    pods: &[Pod],
    current: Option<&Endpoints>,
    current_is_own_write: bool,
) -> Option<EndpointsWrite> {
    let refs: Vec<&Pod> = pods.iter().collect();
    sync(&EndpointsInput {
        service,
        pods: &refs,
        current,
        trigger_time: service.meta.creation_timestamp,
        current_is_own_write,
    })
    .write
}

// ---------------------------------------------------------------------------------------------
// Fixed cases: each rule on its own, so that a failure names it (and the model is checked too).

fn one_port_service(target: MTarget, protocol: &'static str, publish: bool) -> MService {
    MService {
        ports: vec![MServicePort {
            name: "web".to_owned(),
            target,
            protocol,
            app_protocol: None,
        }],
        publish_not_ready_addresses: publish,
        ..model_service(&ServiceSpec {
            ports: 0,
            cluster_ip: 0,
            families: 1,
            publish,
        })
    }
}

fn a_pod(i: u8) -> PodSpec {
    PodSpec {
        ip: i + 1,
        families: 0,
        host_network: false,
        ready: true,
        phase: 4,
        deleting: false,
        template: 0,
        own_ports: false,
        node: 1,
        hostname: 0,
        same_uid_as: None,
    }
}

/// (ready IPs, not-ready IPs, ports) of each subset the reconciler creates.
fn created(m: &MService, specs: &[PodSpec]) -> Vec<(Vec<String>, Vec<String>, Vec<i32>)> {
    let models = model_pods(specs);
    let svc = service(m);
    let pods = pods(specs, &models);
    let Some(EndpointsWrite::Create(e)) = run(&svc, &pods, None) else {
        panic!("a service without Endpoints gets them created");
    };
    assert_eq!(
        e.subsets,
        endpoints_model::subsets(m, &models),
        "the model agrees"
    );
    e.subsets
        .iter()
        .map(|s| {
            (
                s.addresses.iter().map(|a| a.ip.to_string()).collect(),
                s.not_ready_addresses
                    .iter()
                    .map(|a| a.ip.to_string())
                    .collect(),
                s.ports.iter().map(|p| p.port).collect(),
            )
        })
        .collect()
}

type Subsets = Vec<(Vec<String>, Vec<String>, Vec<i32>)>;

fn ips(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn which_pods_are_in_the_endpoints() {
    let svc = one_port_service(MTarget::Number(8080), "TCP", false);
    let mut specs: Vec<PodSpec> = (0..6).map(a_pod).collect();
    specs[1].ready = false;
    specs[2].phase = 1; // Succeeded
    specs[3].phase = 2; // Failed
    specs[4].deleting = true;
    specs[5].ip = 0; // no IP yet
    let want: Subsets = vec![(ips(&["10.0.1.1"]), ips(&["10.0.2.2"]), vec![8080])];
    assert_eq!(created(&svc, &specs), want);

    // publishNotReadyAddresses: every pod with an IP that is not terminal, ready or not, being
    // deleted or not, as a ready address.
    let svc = one_port_service(MTarget::Number(8080), "TCP", true);
    let want: Subsets = vec![(
        ips(&["10.0.1.1", "10.0.2.2", "10.0.2.5"]),
        vec![],
        vec![8080],
    )];
    assert_eq!(created(&svc, &specs), want);
}

#[test]
fn named_ports_resolve_by_name_and_protocol() {
    let mut specs: Vec<PodSpec> = (0..4).map(a_pod).collect();
    for (spec, t) in specs.iter_mut().zip([3, 4, 5, 2]) {
        spec.template = t;
    }
    // http/TCP: 8083 (not the UDP 8082), the sidecar's 15001, the regular 8084 over the sidecar;
    // the pod without it serves nothing.
    let svc = one_port_service(MTarget::Name("http".to_owned()), "TCP", false);
    let mut got = created(&svc, &specs);
    got.sort();
    let mut want: Subsets = vec![
        (ips(&["10.0.1.1"]), vec![], vec![8083]),
        (ips(&["10.0.2.2"]), vec![], vec![15001]),
        (ips(&["10.0.0.3"]), vec![], vec![8084]),
    ];
    want.sort();
    assert_eq!(got, want);
    // http/UDP: only the UDP port.
    let svc = one_port_service(MTarget::Name("http".to_owned()), "UDP", false);
    let want: Subsets = vec![(ips(&["10.0.1.1"]), vec![], vec![8082])];
    assert_eq!(created(&svc, &specs), want);
}

#[test]
fn not_ready_under_a_port_wins_for_a_shared_identity() {
    // Two pods with one IP and one UID: one identity, the first pod's record; not ready wins.
    let mut specs: Vec<PodSpec> = (0..2).map(a_pod).collect();
    specs[1].ip = specs[0].ip;
    specs[1].same_uid_as = Some(0);
    specs[1].ready = false;
    let svc = one_port_service(MTarget::Number(8080), "TCP", false);
    let want: Subsets = vec![(vec![], ips(&["10.0.1.1"]), vec![8080])];
    assert_eq!(created(&svc, &specs), want);
    // Host-network pods: one IP, different UIDs, so one address each, ordered by UID (pod 3's
    // uid-010 before pod 1's uid-037).
    let mut specs: Vec<PodSpec> = (0..4).map(a_pod).collect();
    for s in &mut specs {
        s.host_network = true;
    }
    let want: Subsets = vec![(ips(&["192.168.0.2"; 4]), vec![], vec![8080])];
    assert_eq!(created(&svc, &specs), want);
    let models = model_pods(&specs);
    let Some(EndpointsWrite::Create(e)) = run(&service(&svc), &pods(&specs, &models), None) else {
        panic!("created");
    };
    let names: Vec<_> = e.subsets[0]
        .addresses
        .iter()
        .map(|a| {
            a.target_ref
                .as_ref()
                .and_then(|t| t.name.clone())
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["p-0", "p-3", "p-1", "p-2"]);
}

#[test]
fn the_address_is_of_the_services_family() {
    let mut specs: Vec<PodSpec> = (0..3).map(a_pod).collect();
    specs[0].families = 3; // IPv6 first
    specs[1].families = 1; // IPv6 only
    specs[2].families = 0; // IPv4 only
    let mut svc = one_port_service(MTarget::Number(8080), "TCP", false);
    svc.ip_families = vec!["IPv6"];
    let want: Subsets = vec![(
        ips(&["fd00:10:244:12::1", "fd00:10:244:12::2"]),
        vec![],
        vec![8080],
    )];
    assert_eq!(created(&svc, &specs), want);
    svc.ip_families = vec!["IPv4"];
    let want: Subsets = vec![(ips(&["10.0.0.3", "10.0.1.1"]), vec![], vec![8080])];
    assert_eq!(created(&svc, &specs), want);
}

#[test]
fn addresses_are_in_ip_text_order() {
    // Upstream compares the IP strings byte-wise: "10.0.1.10" sorts before "10.0.1.4".
    let mut specs: Vec<PodSpec> = (0..3).map(a_pod).collect();
    for (spec, ip) in specs.iter_mut().zip([7, 10, 4]) {
        spec.ip = ip;
    }
    let svc = one_port_service(MTarget::Number(8080), "TCP", false);
    let want: Subsets = vec![(
        ips(&["10.0.1.10", "10.0.1.4", "10.0.1.7"]),
        vec![],
        vec![8080],
    )];
    assert_eq!(created(&svc, &specs), want);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn matches_upstreams_construction_and_settles(
        service_spec in service_spec(),
        specs in prop::collection::vec(pod_spec(), 0..30),
        later in prop::collection::vec(pod_spec(), 0..30),
    ) {
        let model_svc = model_service(&service_spec);
        let svc = service(&model_svc);
        let models = model_pods(&specs);
        let pods = pods(&specs, &models);
        let Some(EndpointsWrite::Create(mut created)) = run(&svc, &pods, None) else {
            panic!("a service without Endpoints gets them created");
        };
        prop_assert_eq!(&created.subsets, &endpoints_model::subsets(&model_svc, &models));

        // Stored, it needs no write; nor in another subset order, which upstream (1.35 and
        // later) repacks before comparing.
        created.meta.resource_version = intern("1");
        prop_assert_eq!(run(&svc, &pods, Some(&created)), None);
        let mut reordered = created.clone();
        reordered.subsets.reverse();
        for s in &mut reordered.subsets {
            s.addresses.reverse();
            s.not_ready_addresses.reverse();
            s.ports.reverse();
        }
        prop_assert_eq!(run(&svc, &pods, Some(&reordered)), None);
        // Nor in the layout before repacking (one address per subset, in pod order: reversed, an
        // identity shared by two pods would keep the other pod's record).
        let unpacked = endpoints_model::unpacked(&model_svc, &models);
        let mut stored = created.clone();
        stored.subsets = endpoints_model::to_subsets(&unpacked);
        prop_assert_eq!(run(&svc, &pods, Some(&stored)), None);

        // What the controller writes is in the layout repacking gives: a sync that knows the
        // object for its own write compares it as it is, and decides the same.
        prop_assert_eq!(&repack(&created.subsets), &created.subsets);
        prop_assert_eq!(run_over(&svc, &pods, Some(&created), true), None);

        // After a change, one update reaches the desired content, and then nothing more is written.
        let later_models = model_pods(&later);
        let changed = self::pods(&later, &later_models);
        let want = endpoints_model::subsets(&model_svc, &later_models);
        prop_assert_eq!(
            run_over(&svc, &changed, Some(&created), true),
            run(&svc, &changed, Some(&created))
        );
        match run(&svc, &changed, Some(&created)) {
            None => prop_assert_eq!(&created.subsets, &want),
            Some(EndpointsWrite::Update(mut updated)) => {
                prop_assert_eq!(&updated.subsets, &want);
                prop_assert!(created.subsets != updated.subsets
                    || created.meta.annotations != updated.meta.annotations
                    || created.meta.labels != updated.meta.labels);
                updated.meta.resource_version = intern("2");
                prop_assert_eq!(run(&svc, &changed, Some(&updated)), None);
                prop_assert_eq!(&repack(&updated.subsets), &updated.subsets);
                prop_assert_eq!(run_over(&svc, &changed, Some(&updated), true), None);
            }
            Some(other) => prop_assert!(false, "unexpected write {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RepackSubsets on its own, over any layout: addresses seen twice (under several ports, ready and
// not), records that differ beyond their identity, ports differing in one field, subsets without
// ports.

fn any_address() -> impl Strategy<Value = MAddress> {
    // Few IPs and UIDs, so identities repeat; node and hostname vary, so the record kept matters.
    (0u8..12, 0u8..3, 0u8..3, any::<bool>()).prop_map(|(ip, uid, node, hostname)| MAddress {
        ip: if ip < 10 { v4(ip * 7 + 1) } else { v4(ip) },
        hostname: if hostname {
            format!("h{node}")
        } else {
            String::new()
        },
        node_name: format!("node-{node}"),
        namespace: "default".to_owned(),
        name: format!("pod-{uid}"),
        uid: format!("uid-{uid}"),
    })
}

fn any_port() -> impl Strategy<Value = MPort> {
    prop_oneof![
        Just(MPort {
            name: "http".into(),
            port: 80,
            protocol: "TCP",
            app_protocol: None
        }),
        Just(MPort {
            name: "http".into(),
            port: 8080,
            protocol: "TCP",
            app_protocol: None
        }),
        Just(MPort {
            name: "http".into(),
            port: 80,
            protocol: "UDP",
            app_protocol: None
        }),
        Just(MPort {
            name: "http".into(),
            port: 80,
            protocol: "TCP",
            app_protocol: Some("h2c".into()),
        }),
        Just(MPort {
            name: "grpc".into(),
            port: 9000,
            protocol: "TCP",
            app_protocol: None
        }),
        Just(MPort {
            name: String::new(),
            port: 53,
            protocol: "UDP",
            app_protocol: None
        }),
    ]
}

fn any_subset(with_ports: bool) -> impl Strategy<Value = MSubset> {
    (
        prop::collection::vec(any_address(), 0..5),
        prop::collection::vec(any_address(), 0..4),
        prop::collection::vec(any_port(), if with_ports { 1..4 } else { 0..1 }),
    )
        .prop_map(|(addresses, not_ready_addresses, ports)| MSubset {
            addresses,
            not_ready_addresses,
            ports,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn repack_matches_upstreams_repack_subsets(
        subsets in prop::collection::vec(
            prop_oneof![6 => any_subset(true), 1 => any_subset(false)],
            0..6,
        ),
    ) {
        let got = repack(&endpoints_model::to_subsets(&subsets));
        prop_assert_eq!(&got, &endpoints_model::repack(&subsets));
        // Repacking is idempotent.
        prop_assert_eq!(repack(&got), got);
    }
}

/// Over capacity with one subset, the truncated object the controller writes is still in the
/// layout repacking gives: a sync that knows it for its own write decides as one that repacks it.
#[test]
fn a_truncated_one_subset_write_is_canonical() {
    let scenario = sliced::sim::single_service(1_500);
    let svc = &scenario.service;
    let pods = scenario.pods.clone();
    let Some(EndpointsWrite::Create(mut created)) = run(svc, &pods, None) else {
        panic!("a service without Endpoints gets them created");
    };
    assert_eq!(created.subsets.len(), 1);
    assert!(
        created
            .meta
            .annotations
            .contains_key(sliced::reconcile::endpoints::ANNOTATION_OVER_CAPACITY)
    );
    assert_eq!(repack(&created.subsets), created.subsets);
    created.meta.resource_version = sliced::model::intern("1");
    assert_eq!(
        run_over(svc, &pods, Some(&created), true),
        run(svc, &pods, Some(&created))
    );
    // Readiness moves among the addresses kept and the ones cut.
    let mut changed = pods.clone();
    for pod in changed.iter_mut().step_by(97) {
        pod.ready = !pod.ready;
    }
    let repacked = run(svc, &changed, Some(&created));
    assert!(repacked.is_some());
    assert_eq!(run_over(svc, &changed, Some(&created), true), repacked);
}

// ---------------------------------------------------------------------------------------------
// The address cache: kept by the changed pods alone, it plans what a full build plans.

const SLOTS: usize = 12;

/// The pods of the slots that hold one, each named after its slot (`p-<slot>`).
fn slot_pods(slots: &[Option<PodSpec>]) -> Vec<Option<Arc<Pod>>> {
    // A slot without a pod still takes its place in the UIDs that later pods may share.
    let filler = a_pod(0);
    let filled: Vec<PodSpec> = slots
        .iter()
        .map(|s| s.clone().unwrap_or_else(|| filler.clone()))
        .collect();
    let models = model_pods(&filled);
    pods(&filled, &models)
        .into_iter()
        .zip(slots)
        .map(|(pod, slot)| slot.as_ref().map(|_| Arc::new(pod)))
        .collect()
}

/// Changes one field of `pod`: `which` picks it.
fn tweak_pod(pod: &mut PodSpec, which: u8) {
    match which {
        0 | 1 => pod.ready = !pod.ready,
        2 => pod.own_ports = !pod.own_ports,
        3 => pod.node = (pod.node + 1) % 3,
        4 => pod.deleting = !pod.deleting,
        5 => pod.hostname = (pod.hostname + 1) % 4,
        6 => pod.phase = (pod.phase + 1) % 10,
        7 => pod.template = (pod.template + 1) % TEMPLATES,
        _ => pod.ip = (pod.ip + 1) % 40,
    }
}

/// Keeps `cache` as the engine does: edited by the changes, built afresh when it cannot be.
/// Returns what the changes did (`Moved` for a build).
pub fn keep(
    cache: &mut Option<AddressCache>,
    svc: &Service,
    changed: &[(Name, Option<Arc<Pod>>)],
    pods: &[Arc<Pod>],
) -> Edit {
    let edit = cache.as_mut().map(|c| c.apply(svc, changed));
    match edit {
        Some(edit @ (Edit::Kept | Edit::Moved | Edit::PastCut)) => edit,
        _ => {
            *cache = AddressCache::build(svc, pods);
            Edit::Moved
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn an_address_cache_kept_by_the_changed_pods_plans_as_a_full_build(
        service_spec in service_spec(),
        first in prop::collection::vec(prop::option::weighted(0.8, pod_spec()), SLOTS),
        steps in prop::collection::vec(
            (0..SLOTS, prop::option::weighted(0.8, pod_spec()), 0u8..12, prop::bool::weighted(0.2)),
            1..16,
        ),
    ) {
        // Any ports (numeric, named, several sets among the pods), but some.
        let ports = service_spec.ports % 3;
        let svc = Arc::new(service(&model_service(&ServiceSpec { ports, ..service_spec })));
        prop_assert!(AddressCache::fits(&svc));
        let members = |held: &[Option<Arc<Pod>>]| -> Vec<Arc<Pod>> {
            held.iter().flatten().cloned().collect()
        };
        let mut slots = first;
        let mut held = slot_pods(&slots);
        let mut cache = AddressCache::build(&svc, &members(&held));
        let mut current: Option<Endpoints> = None;
        for (n, (slot, spec, tweak, stale)) in steps.into_iter().enumerate() {
            // Mostly one field of a pod there is, as most pod updates are; else any pod or none.
            match (&mut slots[slot], tweak) {
                (Some(pod), 0..=8) => tweak_pod(pod, tweak),
                (held, _) => *held = spec,
            }
            // A pod left as it was stays the same `Arc`, as in the engine's index: the
            // subset hashes remembered between syncs know pods by identity.
            let now: Vec<Option<Arc<Pod>>> = slot_pods(&slots)
                .into_iter()
                .zip(&held)
                .map(|(after, before)| match (before, after) {
                    (Some(before), Some(after)) if *before == after => Some(Arc::clone(before)),
                    (_, after) => after,
                })
                .collect();
            // Every pod that differs, as the change log lists them (a pod's UID can follow
            // another's).
            let changed: Vec<(Name, Option<Arc<Pod>>)> = held
                .iter()
                .zip(&now)
                .enumerate()
                .filter(|(_, (before, after))| before.as_deref() != after.as_deref())
                .map(|(i, (_, after))| (Name::new(&format!("p-{i}")), after.clone()))
                .collect();
            held = now;
            let pods = members(&held);
            let edit = keep(&mut cache, &svc, &changed, &pods);
            // The engine's stale guard: the cache took the changes, and no plan was made.
            if stale {
                continue;
            }
            let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
            let input = EndpointsInput {
                service: &svc,
                pods: &refs,
                current: current.as_ref(),
                trigger_time: svc.meta.creation_timestamp,
                current_is_own_write: false,
            };
            let full = match &mut cache {
                Some(cache) => check_cached(&svc, cache, edit, &input, n)?,
                None => sync(&input),
            };
            store(full, n, &mut current);
        }
    }
}

/// A sync from `cache` plans as the full build (which this returns), and so does one decided
/// without the pods when the addresses are unchanged over the object settled. Then the cache is
/// settled as the engine settles it: the object found right, or the write once stored as
/// version `n + 1`.
pub fn check_cached(
    svc: &Arc<Service>,
    cache: &mut AddressCache,
    edit: Edit,
    input: &EndpointsInput,
    n: usize,
) -> Result<EndpointsPlan, TestCaseError> {
    let full = sync(input);
    if matches!(edit, Edit::Kept | Edit::PastCut)
        && let Some(settled) = sync_settled(svc, input.current, cache)
    {
        prop_assert_eq!(&settled, &full);
    }
    prop_assert_eq!(&sync_cached(input, cache), &full);
    let version = match &full.write {
        None => input.current.map(|c| c.meta.resource_version.clone()),
        Some(_) => Some(intern(&(n + 1).to_string())),
    };
    cache.settle(version.map(|version| Settled {
        version,
        service: Arc::clone(svc),
        ready: full.ready,
        not_ready: full.not_ready,
        truncated: full.truncated,
    }));
    Ok(full)
}

/// The API server takes the plan's write, as version `n + 1`.
pub fn store(plan: EndpointsPlan, n: usize, current: &mut Option<Endpoints>) {
    if let Some(EndpointsWrite::Create(mut e) | EndpointsWrite::Update(mut e)) = plan.write {
        e.meta.resource_version = intern(&(n + 1).to_string());
        *current = Some(e);
    }
}

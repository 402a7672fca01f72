use std::net::IpAddr;
use std::sync::Arc;

use smallvec::smallvec;

use super::*;
use crate::model::{
    Address, ClusterIp, ContainerPort, EndpointAddress, EndpointSubset, EndpointsPort, IpFamily,
    PodBuilder, PodPhase, Protocol, ServicePort, TargetPort, TargetRef, Uid, intern,
};
use crate::reconcile::hash_order;

fn service(ports: Vec<ServicePort>) -> Service {
    let selector = Labels::from_pairs([("app", "web")]);
    Service {
        meta: Meta {
            namespace: intern("default"),
            name: intern("web"),
            uid: Name::new("6b1a7f0e-2c4d-4f1a-9a63-0d3c2b1e4f51"),
            labels: selector.clone(),
            ..Meta::default()
        },
        selector: Some(selector),
        cluster_ip: ClusterIp::Ip("10.96.0.10".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))),
        ip_families: smallvec![IpFamily::V4],
        ports,
        ..Service::default()
    }
}

fn port(name: &str, target: TargetPort) -> ServicePort {
    ServicePort {
        name: intern(name),
        port: 80,
        target_port: target,
        protocol: Protocol::Tcp,
        app_protocol: None,
        node_port: None,
    }
}

fn pod(name: &str, ip: &str, ready: bool, named: &[(&str, i32)]) -> Pod {
    let named: Arc<[ContainerPort]> = named
        .iter()
        .map(|(n, p)| ContainerPort {
            name: intern(n),
            port: *p,
            protocol: Protocol::Tcp,
            sidecar: false,
        })
        .collect();
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: intern("default"),
            name: Name::new(name),
            uid: Name::new(&format!("uid-{name}")),
            labels: Labels::from_pairs([("app", "web")]),
            ..Meta::default()
        },
        node_name: Some(intern("node-a")),
        phase: PodPhase::Running,
        has_pod_ip: true,
        ips: ip.split(',').filter_map(|s| s.parse().ok()).collect(),
        ready,
        named_ports: named,
        ..PodBuilder::default()
    })
}

fn plan(service: &Service, pods: &[Pod], current: Option<&Endpoints>) -> EndpointsPlan {
    let refs: Vec<&Pod> = pods.iter().collect();
    sync(&EndpointsInput {
        service,
        pods: &refs,
        current,
        trigger_time: None,
        current_is_own_write: false,
    })
}

fn written(p: &EndpointsPlan) -> &Endpoints {
    match &p.write {
        Some(w) => w.object(),
        None => panic!("no write planned: {p:?}"),
    }
}

fn ips(list: &[Arc<EndpointAddress>]) -> Vec<String> {
    list.iter().map(|a| a.ip.to_string()).collect()
}

/// The controller's own construction before repacking: one subset per pod and port.
fn naive(service: &Service, pods: &[Pod]) -> Vec<EndpointSubset> {
    let mut out = Vec::new();
    for pod in pods {
        if !pod_in_endpoints(pod, service.publish_not_ready_addresses) {
            continue;
        }
        let Some(ip) = pod.ips().first() else {
            continue;
        };
        let address = Arc::new(EndpointAddress {
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
        });
        let ready = service.publish_not_ready_addresses || pod.ready;
        for sp in &service.ports {
            let Some(number) = crate::reconcile::ports::target_port_number(&pod.named_ports, sp)
            else {
                continue;
            };
            let mut subset = EndpointSubset {
                ports: vec![EndpointsPort {
                    name: Some(sp.name.clone()),
                    port: number,
                    protocol: Some(sp.protocol),
                    app_protocol: None,
                }],
                ..EndpointSubset::default()
            };
            if ready {
                subset.addresses.push(address.clone());
            } else {
                subset.not_ready_addresses.push(address.clone());
            }
            out.push(subset);
        }
    }
    out
}

#[test]
fn addresses_sort_by_ip_text_and_split_by_readiness() {
    let svc = service(vec![port("http", TargetPort::Number(8080))]);
    let pods = [
        pod("a", "10.0.0.2", true, &[]),
        pod("b", "10.0.0.10", true, &[]),
        pod("c", "10.0.0.3", false, &[]),
    ];
    let p = plan(&svc, &pods, None);
    let e = written(&p);
    assert!(matches!(p.write, Some(EndpointsWrite::Create(_))));
    assert_eq!(e.subsets.len(), 1);
    assert_eq!(ips(&e.subsets[0].addresses), ["10.0.0.10", "10.0.0.2"]);
    assert_eq!(ips(&e.subsets[0].not_ready_addresses), ["10.0.0.3"]);
    assert_eq!((p.ready, p.not_ready), (2, 1));
}

#[test]
fn named_ports_resolving_differently_make_several_subsets() {
    let svc = service(vec![
        port("http", TargetPort::Name(intern("http"))),
        port("metrics", TargetPort::Number(9090)),
    ]);
    let pods = [
        pod("a", "10.0.0.1", true, &[("http", 8080)]),
        pod("b", "10.0.0.2", true, &[("http", 8081)]),
        pod("c", "10.0.0.3", true, &[]),
        pod("d", "10.0.0.4", false, &[("http", 8080)]),
    ];
    let e = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(e.subsets, repack(&naive(&svc, &pods)));
    let layout: Vec<(Vec<i32>, Vec<String>, Vec<String>)> = e
        .subsets
        .iter()
        .map(|s| {
            (
                s.ports.iter().map(|p| p.port).collect(),
                ips(&s.addresses),
                ips(&s.not_ready_addresses),
            )
        })
        .collect();
    let mut expected = vec![
        (vec![8080], vec!["10.0.0.1".into()], vec!["10.0.0.4".into()]),
        (vec![8081], vec!["10.0.0.2".into()], vec![]),
        (
            vec![9090],
            vec!["10.0.0.1".into(), "10.0.0.2".into(), "10.0.0.3".into()],
            vec!["10.0.0.4".into()],
        ),
    ];
    let mut got = layout.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    // In upstream's order: by the hash of each subset.
    let hashes: Vec<u128> = e.subsets.iter().map(hash_order::subset_hash).collect();
    assert!(hashes.is_sorted(), "{layout:?}");
}

/// Subsets are ordered by hashing their addresses as read from the pods, not as built: the two
/// prints must agree, whatever the pod holds (a hostname, no node, a UID that is not a UUID).
#[test]
fn a_subset_printed_from_its_pods_prints_as_built() {
    let mut pods = vec![
        pod("a", "10.0.0.1", true, &[("admin", 9000)]),
        pod("b", "10.0.0.200", false, &[]),
        pod("c", "10.20.3.4", true, &[("admin", 9001)]),
        pod("d", "10.0.0.9", false, &[("admin", 9000)]),
    ];
    pods[0].set_hostname(Some(intern("a")));
    pods[0].set_subdomain(Some(intern("web")));
    pods[1].node_name = None;
    pods[2]
        .meta
        .set_uid(Uid::new("8f7d6c5b-4a39-4281-9f0e-1d2c3b4a5968"));
    pods[3].set_hostname(Some(intern("d")));
    let v4 = service(vec![
        port("http", TargetPort::Number(8080)),
        port("admin", TargetPort::Name(intern("admin"))),
    ]);
    let mut v6 = v4.clone();
    v6.ip_families = smallvec![IpFamily::V6];
    let mut v6_pods = pods.clone();
    for (i, p) in v6_pods.iter_mut().enumerate() {
        let ip: IpAddr = format!("fd00::{:x}", i * 0x1001 + 1).parse().unwrap();
        p.set_ips([ip]);
    }
    for (svc, pods) in [(&v4, &pods), (&v6, &v6_pods)] {
        let refs: Vec<&Pod> = pods.iter().collect();
        let prints = desired::Desired::build(svc, &refs).prints();
        assert!(prints.len() > 1, "{prints:?}");
        for (from_pods, built) in prints {
            assert_eq!(from_pods, built);
        }
    }
}

#[test]
fn another_order_alone_is_not_rewritten_but_a_write_restores_upstreams() {
    let svc = service(vec![
        port("http", TargetPort::Number(8080)),
        port("admin", TargetPort::Name(intern("admin"))),
    ]);
    let pods = [
        pod("a", "10.0.0.1", true, &[("admin", 9000)]),
        pod("b", "10.0.0.2", true, &[]),
    ];
    let canonical = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(canonical.subsets.len(), 2);
    let mut current = canonical.clone();
    current.meta.resource_version = intern("7");
    assert_eq!(plan(&svc, &pods, Some(&current)).write, None);
    // A target's resourceVersion is not compared.
    if let Some(t) = &mut Arc::make_mut(&mut current.subsets[0].addresses[0]).target_ref {
        t.resource_version = Some(intern("42"));
    }
    assert_eq!(plan(&svc, &pods, Some(&current)).write, None);
    // Upstream (1.35 and later) compares the stored subsets repacked too: an older release's
    // order is not rewritten for itself; a write made for another reason carries the new order.
    current.subsets.reverse();
    for s in &mut current.subsets {
        s.ports.reverse();
    }
    assert_eq!(plan(&svc, &pods, Some(&current)).write, None);
    current.meta.labels = current.meta.labels.with("extra", "x");
    let fixed = written(&plan(&svc, &pods, Some(&current))).clone();
    assert_eq!(fixed.subsets, canonical.subsets);
}

#[test]
fn duplicate_identity_keeps_first_record_and_not_ready_wins() {
    let svc = service(vec![port("http", TargetPort::Number(8080))]);
    let mut first = pod("a", "10.0.0.1", true, &[]);
    first.meta.set_uid(Uid::new("same"));
    let mut second = pod("b", "10.0.0.1", false, &[]);
    second.meta.set_uid(Uid::new("same"));
    let pods = [first, second];
    let e = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(e.subsets, repack(&naive(&svc, &pods)));
    assert_eq!(e.subsets[0].addresses.len(), 0);
    let only = &e.subsets[0].not_ready_addresses;
    assert_eq!(only.len(), 1);
    let name = only[0].target_ref.as_ref().and_then(|t| t.name.clone());
    assert_eq!(name.as_deref(), Some("a"));
}

#[test]
fn family_is_the_primary_one_or_the_legacy_guess() {
    let mut svc = service(vec![port("http", TargetPort::Number(8080))]);
    svc.ip_families = smallvec![IpFamily::V6, IpFamily::V4];
    let pods = [pod("a", "10.0.0.1,fd00::1", true, &[])];
    let e = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(ips(&e.subsets[0].addresses), ["fd00::1"]);

    // No ipFamilies, headless: the family of the pod's primary IP.
    svc.ip_families = smallvec![];
    svc.cluster_ip = ClusterIp::Headless;
    let e = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(ips(&e.subsets[0].addresses), ["10.0.0.1"]);
    // No ipFamilies, an IPv6 cluster IP.
    svc.cluster_ip = ClusterIp::Ip("fd00:96::1".parse().unwrap_or(IpAddr::from([0u8; 16])));
    let e = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(ips(&e.subsets[0].addresses), ["fd00::1"]);
}

#[test]
fn labels_replace_and_headless_label_follows_cluster_ip() {
    let mut svc = service(vec![]);
    svc.cluster_ip = ClusterIp::Headless;
    let pods = [pod("a", "10.0.0.1", true, &[])];
    let e = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(e.subsets.len(), 1);
    assert!(e.subsets[0].ports.is_empty());
    assert_eq!(
        e.meta.labels.get(keys::LABEL_HEADLESS).map(|v| v.as_str()),
        Some("")
    );
    assert_eq!(
        e.meta
            .labels
            .get(keys::LABEL_ENDPOINTS_MANAGED_BY)
            .map(|v| v.as_str()),
        Some(keys::ENDPOINTS_CONTROLLER)
    );
    // The headless label alone does not make a write; user labels do, and so does a missing
    // managed-by label (Kubernetes 1.33 and later).
    let managed = svc
        .meta
        .labels
        .with(keys::LABEL_ENDPOINTS_MANAGED_BY, keys::ENDPOINTS_CONTROLLER);
    let mut current = e.clone();
    current.meta.labels = managed.clone();
    assert_eq!(plan(&svc, &pods, Some(&current)).write, None);
    current.meta.labels = svc.meta.labels.clone();
    assert!(plan(&svc, &pods, Some(&current)).write.is_some());
    current.meta.labels = managed.with("extra", "x");
    let e = written(&plan(&svc, &pods, Some(&current))).clone();
    assert_eq!(e.meta.labels, managed.with(keys::LABEL_HEADLESS, ""));

    // A service without ports and with a cluster IP has no subsets.
    let plain = service(vec![]);
    assert!(written(&plan(&plain, &pods, None)).subsets.is_empty());
}

#[test]
fn externalname_and_selectorless_services_are_left_alone() {
    let mut svc = service(vec![port("http", TargetPort::Number(8080))]);
    let pods = [pod("a", "10.0.0.1", true, &[])];
    svc.service_type = ServiceType::ExternalName;
    assert_eq!(plan(&svc, &pods, None).write, None);
    svc.service_type = ServiceType::ClusterIp;
    svc.selector = None;
    assert_eq!(plan(&svc, &pods, None).write, None);
}

#[test]
fn over_capacity_is_truncated_annotated_and_then_stable() {
    let svc = service(vec![port("http", TargetPort::Number(8080))]);
    let pods: Vec<Pod> = (0..1001u32)
        .map(|i| {
            let ip = IpAddr::from((0x0a00_0000u32 + i).to_be_bytes());
            pod(&format!("p{i}"), &ip.to_string(), true, &[])
        })
        .collect();
    let p = plan(&svc, &pods, None);
    assert!(p.truncated);
    let e = written(&p).clone();
    assert_eq!(e.subsets[0].addresses.len(), MAX_CAPACITY);
    assert_eq!(
        e.meta
            .annotations
            .get(ANNOTATION_OVER_CAPACITY)
            .map(|v| v.as_str()),
        Some(OVER_CAPACITY_TRUNCATED)
    );
    // Upstream would update again; the same content is not written twice.
    assert_eq!(plan(&svc, &pods, Some(&e)).write, None);
    // Back under the cap: the annotation goes.
    let p = plan(&svc, &pods[..1000], Some(&e));
    let e = written(&p);
    assert!(!e.meta.annotations.contains_key(ANNOTATION_OVER_CAPACITY));
    assert!(matches!(p.write, Some(EndpointsWrite::Update(_))));
}

#[test]
fn trigger_time_is_set_or_removed_and_user_annotations_survive() {
    let svc = service(vec![port("http", TargetPort::Number(8080))]);
    let pods = [pod("a", "10.0.0.1", true, &[])];
    let mut current = written(&plan(&svc, &pods, None)).clone();
    current.meta.annotations = Labels::from_pairs([
        ("team", "blue"),
        (keys::ANNOTATION_TRIGGER_TIME, "2020-01-01T00:00:00Z"),
    ]);
    current.subsets.clear();
    let refs: Vec<&Pod> = pods.iter().collect();
    let at = jiff::Timestamp::from_second(1_700_000_000).ok();
    let p = sync(&EndpointsInput {
        service: &svc,
        pods: &refs,
        current: Some(&current),
        trigger_time: at,
        current_is_own_write: false,
    });
    let e = written(&p);
    assert_eq!(
        e.meta
            .annotations
            .get(keys::ANNOTATION_TRIGGER_TIME)
            .map(|v| v.as_str()),
        Some("2023-11-14T22:13:20Z")
    );
    assert!(e.meta.annotations.contains_key("team"));
    let e = written(&plan(&svc, &pods, Some(&current))).clone();
    assert!(
        !e.meta
            .annotations
            .contains_key(keys::ANNOTATION_TRIGGER_TIME)
    );
}

#[test]
fn leftovers_spare_leader_records_and_existing_services() {
    let mk = |name: &str, leader: bool| Endpoints {
        meta: Meta {
            namespace: intern("kube-system"),
            name: Name::new(name),
            annotations: if leader {
                Labels::from_pairs([(ANNOTATION_LEADER, "{}")])
            } else {
                Labels::new()
            },
            ..Meta::default()
        },
        subsets: Vec::new(),
    };
    let all = [mk("gone", false), mk("lock", true), mk("kept", false)];
    let plans = leftovers(&all, |_, n| n.as_str() == "kept");
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].service_key, "kube-system/gone");
    assert!(matches!(plans[0].write, Some(EndpointsWrite::Delete(_))));
}

#[test]
fn a_pod_turning_unready_is_written() {
    let svc = service(vec![port("http", TargetPort::Number(8080))]);
    let mut pods: Vec<Pod> = (0..5u32)
        .map(|i| pod(&format!("p{i}"), &format!("10.0.0.{i}"), true, &[]))
        .collect();
    let mut current = written(&plan(&svc, &pods, None)).clone();
    current.meta.resource_version = intern("3");
    pods[2].ready = false;
    let p = plan(&svc, &pods, Some(&current));
    let e = written(&p);
    assert_eq!(ips(&e.subsets[0].not_ready_addresses), ["10.0.0.2"]);
}

#[test]
fn address_order_is_the_ip_text_byte_wise() {
    // A spread of IPv4 addresses whose octets cover one-, two- and three-digit texts, then the same
    // with IPv6 addresses mixed in (the other sorting path).
    let mut ips: Vec<IpAddr> = (0..3000u32)
        .map(|i| {
            let x = i.wrapping_mul(2_654_435_761);
            IpAddr::from([
                (x >> 24) as u8 % 12,
                (x >> 16) as u8,
                (x >> 8) as u8,
                x as u8,
            ])
        })
        .collect();
    ips.push(ips[17]);
    let uids: Vec<String> = (0..ips.len())
        .map(|i| format!("uid-{}", 9999 - i))
        .collect();
    let check = |ips: &[IpAddr]| {
        let order = repack::sort_addresses(
            ips.len(),
            |i| ips[i as usize],
            |i| uids[i as usize].as_str(),
        );
        let mut want: Vec<u32> = (0..ips.len() as u32).collect();
        want.sort_by(|a, b| {
            let (x, y) = (*a as usize, *b as usize);
            ips[x]
                .to_string()
                .cmp(&ips[y].to_string())
                .then(uids[x].cmp(&uids[y]))
        });
        assert_eq!(order, want);
    };
    check(&ips);
    for i in (0..ips.len()).step_by(7) {
        let x = i as u16;
        ips[i] = IpAddr::from([0xfd00, 0x10, 0x244, x % 3, 0, 0, x / 7, x]);
    }
    check(&ips);
}

/// An update shares with the object there is every address it would build exactly as held, and
/// builds the others: among them one that differs only where upstream's comparison does not look
/// (a target's resourceVersion), which must not be written.
#[test]
fn an_update_shares_the_addresses_it_would_build_and_no_other() {
    let svc = service(vec![port("http", TargetPort::Number(8080))]);
    let mut pods: Vec<Pod> = (0..12u32)
        .map(|i| pod(&format!("p{i}"), &format!("10.0.0.{i}"), true, &[]))
        .collect();
    let mut current = written(&plan(&svc, &pods, None)).clone();
    current.meta.resource_version = intern("3");
    let odd = "10.0.0.8";
    for a in &mut current.subsets[0].addresses {
        if a.ip.to_string() == odd
            && let Some(t) = &mut Arc::make_mut(a).target_ref
        {
            t.resource_version = Some(intern("42"));
        }
    }
    // Around the shared addresses: one goes, one turns not ready, one comes.
    pods.remove(3);
    pods[5].ready = false;
    pods.push(pod("p20", "10.0.0.20", true, &[]));

    let update = written(&plan(&svc, &pods, Some(&current))).clone();
    let fresh = written(&plan(&svc, &pods, None)).clone();
    assert_eq!(
        update.subsets, fresh.subsets,
        "the same as built from nothing"
    );
    let held = &current.subsets[0].addresses;
    let mut shared = Vec::new();
    for a in update
        .subsets
        .iter()
        .flat_map(|s| s.addresses.iter().chain(&s.not_ready_addresses))
    {
        if held.iter().any(|h| Arc::ptr_eq(h, a)) {
            shared.push(a.ip.to_string());
        }
    }
    let want: Vec<String> = ["0", "1", "10", "11", "2", "4", "5", "7", "9"]
        .iter()
        .map(|host| format!("10.0.0.{host}"))
        .collect();
    assert_eq!(shared, want);
}

/// An edit that moves an address off the settled object decides the comparison; a second edit
/// (after a sync that planned nothing) may move it back, and then only comparing can tell.
#[test]
fn an_address_moved_off_the_settled_object_and_back_writes_nothing() {
    let svc = Arc::new(service(vec![port("http", TargetPort::Number(8080))]));
    let mut pods: Vec<Arc<Pod>> = (0..5u32)
        .map(|i| Arc::new(pod(&format!("p{i}"), &format!("10.0.0.{i}"), true, &[])))
        .collect();
    let Some(mut cache) = AddressCache::build(&svc, &pods) else {
        panic!("five pods of distinct addresses fit");
    };
    let plan = |cache: &AddressCache, current: Option<&Endpoints>| {
        let input = EndpointsInput {
            service: &svc,
            pods: &[],
            current,
            trigger_time: None,
            current_is_own_write: true,
        };
        sync_cached(&input, cache)
    };
    let mut current = written(&plan(&cache, None)).clone();
    current.meta.resource_version = intern("7");
    cache.settle(Some(Settled {
        version: intern("7"),
        service: Arc::clone(&svc),
        ready: 5,
        not_ready: 0,
        truncated: false,
    }));
    let mut flip = |cache: &mut AddressCache| {
        let mut p = (*pods[2]).clone();
        p.ready = !p.ready;
        pods[2] = Arc::new(p);
        cache.apply(&svc, &[(Name::new("p2"), Some(Arc::clone(&pods[2])))])
    };
    assert_eq!(flip(&mut cache), Edit::Moved);
    assert!(cache.moved_since(&current, &svc));
    let update = written(&plan(&cache, Some(&current))).clone();
    assert_eq!(ips(&update.subsets[0].not_ready_addresses), ["10.0.0.2"]);
    // No plan made (the stale guard), then the pod turns back.
    assert_eq!(flip(&mut cache), Edit::Moved);
    assert!(!cache.moved_since(&current, &svc));
    assert_eq!(plan(&cache, Some(&current)).write, None);
}

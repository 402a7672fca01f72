use super::*;
use crate::model::{
    LOAD_BALANCER_CLEANUP_FINALIZER, Labels, ServiceLoadBalancer, ServicePort, TargetPort,
    TrafficPolicy, intern,
};

fn lb_service() -> Service {
    let mut s = Service::default();
    s.meta.namespace = intern("ns");
    s.meta.name = intern("web");
    s.meta.uid = Name::new("uid-1");
    s.service_type = ServiceType::LoadBalancer;
    s.ports = vec![ServicePort {
        name: intern("http"),
        port: 80,
        target_port: TargetPort::Number(8080),
        protocol: Default::default(),
        app_protocol: None,
        node_port: Some(30080),
    }];
    s.load_balancer = Some(Box::new(ServiceLoadBalancer::default()));
    s
}

fn lb(s: &mut Service) -> &mut ServiceLoadBalancer {
    s.load_balancer.get_or_insert_with(Default::default)
}

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        name: intern(name),
        labels: Labels::from_pairs(labels.iter().copied()),
        ready: true,
        provider_id: Some(Name::new(&format!("kind://{name}"))),
        ..Node::default()
    }
}

#[test]
fn only_type_load_balancer_without_a_foreign_class_wants_one() {
    let none = ClassFilter::default();
    let ours = ClassFilter(Some(intern("sliced.io/pool")));
    let mut s = lb_service();
    assert!(wants_load_balancer(&s, &none));
    lb(&mut s).class = Some(intern("sliced.io/pool"));
    assert!(!wants_load_balancer(&s, &none), "upstream takes no class");
    assert!(wants_load_balancer(&s, &ours));
    lb(&mut s).class = Some(intern("other.io/lb"));
    assert!(!wants_load_balancer(&s, &ours));
    let mut s = lb_service();
    s.service_type = ServiceType::NodePort;
    assert!(!wants_load_balancer(&s, &none));
}

#[test]
fn cleanup_needs_the_finalizer_and_a_deletion_or_a_type_change() {
    let mut s = lb_service();
    assert!(!needs_cleanup(&s));
    s.meta.deletion_timestamp = Some("2026-11-27T10:00:00Z".parse().unwrap());
    assert!(!needs_cleanup(&s), "no finalizer: nothing to clean up");
    lb(&mut s).finalizers = vec![intern("other"), intern(LOAD_BALANCER_CLEANUP_FINALIZER)];
    assert!(needs_cleanup(&s));
    s.meta.deletion_timestamp = None;
    assert!(!needs_cleanup(&s));
    s.service_type = ServiceType::ClusterIp;
    assert!(needs_cleanup(&s));
}

#[test]
fn needs_update_sees_what_a_load_balancer_reflects_and_nothing_else() {
    let none = ClassFilter::default();
    let base = lb_service();
    type Edit = fn(&mut Service);
    let reflected: [(&str, Edit); 14] = [
        ("type", |s| s.service_type = ServiceType::ClusterIp),
        ("source ranges", |s| {
            lb(s).source_ranges = vec![Name::new("10.0.0.0/8")]
        }),
        ("port number", |s| s.ports[0].port = 81),
        ("port name", |s| s.ports[0].name = intern("web")),
        ("node port", |s| s.ports[0].node_port = Some(30081)),
        ("target port", |s| {
            s.ports[0].target_port = TargetPort::Number(9090)
        }),
        ("app protocol", |s| {
            s.ports[0].app_protocol = Some(intern("h2c"))
        }),
        ("a port more", |s| s.ports.push(s.ports[0].clone())),
        ("session affinity", |s| {
            lb(s).session_affinity = Some(intern("ClientIP"))
        }),
        ("loadBalancerIP", |s| {
            lb(s).load_balancer_ip = Some(Name::new("192.0.2.7"))
        }),
        ("external IPs", |s| {
            lb(s).external_ips = vec![Name::new("192.0.2.8")]
        }),
        ("annotations", |s| {
            s.meta.annotations = Labels::from_pairs([("metallb.io/address-pool", "a")])
        }),
        ("UID", |s| s.meta.uid = Name::new("uid-2")),
        ("traffic policy", |s| {
            lb(s).external_traffic_policy = TrafficPolicy::Local
        }),
    ];
    for (what, edit) in reflected {
        let mut changed = base.clone();
        edit(&mut changed);
        assert!(needs_update(&base, &changed, &none), "{what}");
    }
    let ignored: [(&str, Edit); 5] = [
        ("labels", |s| {
            s.meta.labels = Labels::from_pairs([("team", "a")])
        }),
        ("finalizers", |s| {
            lb(s).finalizers = vec![intern(LOAD_BALANCER_CLEANUP_FINALIZER)]
        }),
        ("status", |s| {
            lb(s).ingress = vec![LoadBalancerIngress::ip("192.0.2.1".parse().unwrap())]
        }),
        ("selector", |s| {
            s.selector = Some(Labels::from_pairs([("app", "x")]))
        }),
        ("resource version", |s| {
            s.meta.resource_version = Name::new("99")
        }),
    ];
    for (what, edit) in ignored {
        let mut changed = base.clone();
        edit(&mut changed);
        assert!(!needs_update(&base, &changed, &none), "{what}");
    }
    // Neither wants one: nothing matters.
    let mut a = base.clone();
    a.service_type = ServiceType::ClusterIp;
    let mut b = a.clone();
    b.meta.uid = Name::new("uid-9");
    assert!(!needs_update(&a, &b, &none));
}

#[test]
fn node_predicates_follow_the_stable_node_set() {
    let plain = node("a", &[]);
    assert!(backs_load_balancers(&plain));
    let mut not_ready = plain.clone();
    not_ready.ready = false;
    assert!(
        backs_load_balancers(&not_ready),
        "readiness no longer counts"
    );
    for (value, backs) in [
        ("false", true),
        ("False", true),
        ("0", true),
        ("true", false),
        ("", false),
        ("yes", false),
    ] {
        let n = node("a", &[(LABEL_EXCLUDE_FROM_LOAD_BALANCERS, value)]);
        assert_eq!(backs_load_balancers(&n), backs, "label value {value:?}");
    }
    let mut deleting = plain.clone();
    deleting.deleting = true;
    assert!(!backs_load_balancers(&deleting));
    let mut scaled_down = plain.clone();
    scaled_down.to_be_deleted = true;
    assert!(!backs_load_balancers(&scaled_down));
}

#[test]
fn only_the_verdict_or_the_provider_id_make_a_node_change_matter() {
    let old = node("a", &[("zone", "x")]);
    let mut heartbeat = old.clone();
    heartbeat.ready = false;
    heartbeat.allocatable_cpu_millis = 7;
    heartbeat.labels = Labels::from_pairs([("zone", "y")]);
    assert!(!node_change_matters(&old, &heartbeat));
    let mut moved = old.clone();
    moved.provider_id = Some(Name::new("kind://b"));
    assert!(node_change_matters(&old, &moved));
    let excluded = node("a", &[(LABEL_EXCLUDE_FROM_LOAD_BALANCERS, "true")]);
    assert!(node_change_matters(&old, &excluded));
    let mut tainted = old.clone();
    tainted.to_be_deleted = true;
    assert!(node_change_matters(&old, &tainted));
}

#[test]
fn the_host_set_keeps_backing_nodes_with_their_provider_ids() {
    let nodes = [
        node("b", &[]),
        node("a", &[(LABEL_EXCLUDE_FROM_LOAD_BALANCERS, "")]),
        node("c", &[]),
    ];
    let hosts = host_set(&nodes);
    let names: Vec<&str> = hosts.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["b", "c"]);
    assert_eq!(
        hosts[&intern("c")]
            .as_ref()
            .map(|p| p.to_string())
            .as_deref(),
        Some("kind://c")
    );
}

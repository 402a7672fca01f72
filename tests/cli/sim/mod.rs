//! The synthetic cluster generator: the spec and its fixture, determinism, the shape of the default
//! cluster (size distribution, dual-stack, named ports, headless, labels), its speed, the `apply`
//! oracle and the first generators. Traces are tested in `traces.rs`.

mod sizes;
mod traces;

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::fmt::{self, Debug};
use std::hash::Hasher;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sliced::change::Change;
use sliced::model::{ClusterIp, IpFamily, Labels, Name, Node, PodPhase, TargetPort, intern};
use sliced::sim::{
    Applied, Cluster, ClusterSpec, LABEL_TEMPLATE_HASH, SpecError, apply, cluster, generate,
    single_service,
};

/// A hash of the `Debug` form, streamed: equal hashes mean equal values, without holding megabytes
/// of text.
pub(crate) fn digest(value: &(impl Debug + ?Sized)) -> u64 {
    struct Sink(DefaultHasher);
    impl fmt::Write for Sink {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut sink = Sink(DefaultHasher::new());
    fmt::write(&mut sink, format_args!("{value:?}")).expect("hashing never fails");
    sink.0.finish()
}

/// A cluster small enough to replay traces on quickly, with every feature present.
pub(crate) fn small(seed: u64) -> ClusterSpec {
    ClusterSpec {
        seed,
        pods: 3_000,
        services: 60,
        namespaces: 6,
        huge_services: 1,
        huge_service_pods: 600,
        max_service_pods: 300,
        ..ClusterSpec::default()
    }
}

fn fixture(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn default_fixture_is_the_default_spec() {
    let spec = ClusterSpec::from_yaml(&fixture("fixtures/sim/default.yaml"));
    assert_eq!(spec, Ok(ClusterSpec::default()));
}

#[test]
fn specs_name_only_what_they_change_and_bad_ones_are_refused() {
    assert_eq!(ClusterSpec::from_yaml(""), Ok(ClusterSpec::default()));
    assert_eq!(
        ClusterSpec::from_yaml("# nothing\n"),
        Ok(ClusterSpec::default())
    );
    let spec = ClusterSpec::from_yaml("pods: 20000\nservices: 50\nseed: 9\n");
    assert_eq!(
        spec,
        Ok(ClusterSpec {
            pods: 20_000,
            services: 50,
            seed: 9,
            ..ClusterSpec::default()
        })
    );
    assert!(matches!(
        ClusterSpec::from_yaml("podz: 3\n"),
        Err(SpecError::Parse(_))
    ));
    assert!(matches!(
        ClusterSpec::from_yaml("pods: many\n"),
        Err(SpecError::Parse(_))
    ));
    let field = |text: &str| match ClusterSpec::from_yaml(text) {
        Err(SpecError::Invalid { field, .. }) => field,
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(field("dual_stack_fraction: 1.5\n"), "dual_stack_fraction");
    assert_eq!(field("pods: 1000\n"), "huge_services");
    assert_eq!(field("zones: 0\n"), "zones");
    assert_eq!(field("tail_shape: -1\n"), "tail_shape");
    assert_eq!(
        field("pods: 1000\nhuge_services: 0\nservices: 2\nmax_service_pods: 10\n"),
        "max_service_pods"
    );
    assert_eq!(
        field("pods: 100\nhuge_services: 0\nmin_service_pods: 5\n"),
        "min_service_pods"
    );
}

#[test]
fn specs_out_of_range_are_clamped_not_refused() {
    for spec in [
        ClusterSpec {
            pods: 10,
            services: 0,
            zones: 0,
            namespaces: 0,
            dual_stack_fraction: f64::NAN,
            tail_shape: 0.0,
            ..ClusterSpec::default()
        },
        ClusterSpec {
            pods: 12_000,
            services: 2,
            huge_services: 2,
            ..ClusterSpec::default()
        },
        ClusterSpec {
            pods: 0,
            services: 5,
            ..ClusterSpec::default()
        },
    ] {
        let c = generate(&spec);
        assert_eq!(c.snapshot.pods.len(), spec.pods, "{spec:?}");
        assert!(c.snapshot.services.len() >= spec.services.min(1));
    }
}

#[test]
fn the_same_seed_gives_the_same_cluster_and_another_seed_another() {
    let a = generate(&small(5));
    let b = generate(&small(5));
    let c = generate(&small(6));
    let fingerprint = |c: &Cluster| digest(&(&c.snapshot, &c.deployments, &c.zones));
    assert_eq!(fingerprint(&a), fingerprint(&b));
    assert_ne!(fingerprint(&a), fingerprint(&c));
    let sizes = |c: &Cluster| {
        c.deployments
            .iter()
            .map(|d| d.pods.len())
            .collect::<Vec<_>>()
    };
    assert_ne!(sizes(&a), sizes(&c));
}

/// Pods selected by `selector` in `namespace`, by the same rule the reconciler uses.
fn selected<'a>(c: &'a Cluster, namespace: &Name, selector: &Labels) -> Vec<&'a str> {
    c.snapshot
        .pods
        .iter()
        .filter(|p| &p.meta.namespace == namespace && p.meta.labels.matches(selector))
        .map(|p| p.meta.name.as_str())
        .collect()
}

#[test]
fn the_default_cluster_has_the_promised_shape() {
    let spec = ClusterSpec::default();
    let c = generate(&spec);
    let s = &c.snapshot;
    assert_eq!(s.pods.len(), 100_000);
    assert_eq!(s.services.len(), 1_000);
    assert_eq!(c.deployments.len(), 1_000);
    assert_eq!(s.namespaces.len(), 20);

    // Sizes: exactly two huge services, a tail bounded below them, heavy.
    let mut tail: Vec<usize> = c.deployments.iter().map(|d| d.pods.len()).collect();
    assert_eq!(tail.iter().sum::<usize>(), 100_000);
    assert_eq!(tail.iter().filter(|&&n| n == 5_000).count(), 2);
    tail.retain(|&n| n != 5_000);
    tail.sort_unstable();
    assert!(tail.iter().all(|&n| (1..=2_500).contains(&n)));
    let median = tail[tail.len() / 2];
    let top_tenth: usize = tail[tail.len() * 9 / 10..].iter().sum();
    let all: usize = tail.iter().sum();
    assert!(median <= 60, "median {median}");
    assert!(tail[tail.len() - 1] >= 20 * median, "largest {tail:?}");
    assert!(top_tenth * 2 >= all, "top 10% hold {top_tenth} of {all}");
    assert!(tail[0] <= 3, "smallest {}", tail[0]);

    // Exact fractions of services.
    let count =
        |f: &dyn Fn(&sliced::model::Service) -> bool| s.services.iter().filter(|v| f(v)).count();
    assert_eq!(count(&|v| v.ip_families.len() == 2), 100);
    assert_eq!(count(&|v| v.cluster_ip == ClusterIp::Headless), 50);
    assert_eq!(
        count(&|v| v
            .ports
            .iter()
            .all(|p| matches!(p.target_port, TargetPort::Name(_)))),
        200
    );
    let not_ready = s.pods.iter().filter(|p| !p.ready).count();
    assert_eq!(not_ready, 1_000);

    // Nodes: three zones of equal size, enough for 30 pods a node; every pod on one.
    assert_eq!(c.zones.len(), 3);
    assert_eq!(s.nodes.len(), 3 * 1_112);
    let nodes: HashSet<&Name> = s.nodes.iter().map(|n| &n.name).collect();
    for zone in &c.zones {
        assert_eq!(zone.nodes.len(), 1_112);
        for &n in &zone.nodes {
            assert_eq!(s.nodes[n].zone(), Some(&zone.name));
        }
    }

    let mut names = HashSet::new();
    let mut ips = HashSet::new();
    for p in &s.pods {
        assert!(names.insert((&p.meta.namespace, &p.meta.name)));
        assert!(
            p.ips().iter().all(|ip| ips.insert(*ip)),
            "{:?} reused",
            p.ips()
        );
        assert!(nodes.contains(p.node_name.as_ref().expect("placed")));
        assert_eq!(p.phase, PodPhase::Running);
        assert!(p.has_pod_ip && p.ready_transition().is_some());
        for key in ["app", LABEL_TEMPLATE_HASH, "tier"] {
            assert!(p.meta.labels.contains_key(key), "{:?}", p.meta.labels);
        }
    }

    for d in &c.deployments {
        let svc = &s.services[d.service];
        assert_eq!(svc.meta.name, d.name);
        assert_eq!(svc.selector.as_ref(), Some(&d.selector()));
        let mut want: Vec<&str> = d
            .pods
            .iter()
            .map(|&i| s.pods[i].meta.name.as_str())
            .collect();
        let mut got = selected(&c, &d.namespace, &d.selector());
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "{}", d.name);
        let dual = svc.ip_families.len() == 2;
        assert_eq!(d.dual_stack, dual);
        let named = matches!(svc.ports[0].target_port, TargetPort::Name(_));
        for &i in &d.pods {
            let p = &s.pods[i];
            let families: Vec<IpFamily> = p.ips().iter().map(IpFamily::of).collect();
            let want = if dual {
                vec![IpFamily::V4, IpFamily::V6]
            } else {
                vec![IpFamily::V4]
            };
            assert_eq!(families, want);
            assert_eq!(
                p.meta.labels.get(LABEL_TEMPLATE_HASH),
                Some(&d.template_hash)
            );
            // One list per deployment, shared, as the loader shares them.
            assert!(Arc::ptr_eq(&p.named_ports, &d.named_ports));
            if named {
                let ports: Vec<&str> = p.named_ports.iter().map(|c| c.name.as_str()).collect();
                assert_eq!(ports, ["http", "metrics"]);
            }
        }
    }
}

#[test]
fn a_100k_pod_cluster_is_generated_well_under_a_second() {
    let start = Instant::now();
    let c = generate(&ClusterSpec::default());
    let took = start.elapsed();
    assert_eq!(c.snapshot.pods.len(), 100_000);
    // About 0.1 s in release; unoptimised builds are many times slower.
    let limit = if cfg!(debug_assertions) { 20 } else { 1 };
    assert!(took < Duration::from_secs(limit), "took {took:?}");
}

#[test]
fn apply_creates_replaces_and_deletes_by_key() {
    let mut snap = generate(&small(1)).snapshot;
    let before = snap.pods.len();
    let mut pod = snap.pods[7].clone();
    pod.ready = !pod.ready;
    assert_eq!(
        apply(&mut snap, &Change::Pod(pod.clone())),
        Applied::Replaced
    );
    assert_eq!(snap.pods.len(), before);
    assert!(snap.pods.contains(&pod));
    let mut other = pod.clone();
    other.meta.namespace = intern("elsewhere");
    assert_eq!(apply(&mut snap, &Change::Pod(other)), Applied::Created);
    let delete = Change::PodDeleted {
        namespace: pod.meta.namespace.clone(),
        name: pod.meta.name.clone(),
    };
    assert_eq!(apply(&mut snap, &delete), Applied::Deleted);
    assert_eq!(apply(&mut snap, &delete), Applied::Missing);
    assert_eq!(snap.pods.len(), before);

    let node = Node {
        name: intern("node-new"),
        ready: true,
        ..Node::default()
    };
    assert_eq!(
        apply(&mut snap, &Change::Node(node.clone())),
        Applied::Created
    );
    assert_eq!(apply(&mut snap, &Change::Node(node)), Applied::Replaced);
    let gone = Change::NodeDeleted {
        name: intern("node-new"),
    };
    assert_eq!(apply(&mut snap, &gone), Applied::Deleted);
    assert_eq!(apply(&mut snap, &gone), Applied::Missing);

    let svc = snap.services[0].clone();
    assert_eq!(
        apply(&mut snap, &Change::Service(svc.clone())),
        Applied::Replaced
    );
    let deleted = Change::ServiceDeleted {
        namespace: svc.meta.namespace.clone(),
        name: svc.meta.name.clone(),
    };
    assert_eq!(apply(&mut snap, &deleted), Applied::Deleted);
    assert!(!snap.services.contains(&svc));
}

#[test]
fn the_first_generators_are_unchanged() {
    let s = single_service(100);
    assert_eq!(s.service.meta.key(), "default/web");
    assert_eq!(s.pods.len(), 100);
    assert_eq!(s.nodes.len(), 4);
    assert_eq!(s.pods[0].meta.name.as_str(), "web-000000");
    assert_eq!(
        s.pods[99].ips()[0],
        "10.1.0.99".parse::<IpAddr>().expect("ip")
    );
    assert_eq!(s.pods[31].node_name.as_deref(), Some("node-3"));
    assert!(s.pods.iter().all(|p| p.ready));
    let zones: HashSet<&str> = s
        .nodes
        .values()
        .filter_map(|n| n.zone())
        .map(|z| z.as_str())
        .collect();
    assert_eq!(zones.len(), 3);

    let snap = cluster(1_000, 10, 1);
    assert_eq!(snap.pods.len(), 1_000);
    assert_eq!(snap.services.len(), 10);
    let per_service: HashMap<&str, usize> = snap.pods.iter().fold(HashMap::new(), |mut m, p| {
        *m.entry(p.meta.labels.get("app").map_or("", |a| a.as_str()))
            .or_default() += 1;
        m
    });
    assert_eq!(per_service.len(), 10);
    assert_eq!(digest(&snap), digest(&cluster(1_000, 10, 1)));
}

//! Bytes the index spends per pod: 100,000 pods in 1,000 services (10 namespaces of 100 services
//! of 100 pods), counted by a global allocator that tracks live bytes. Run with `--nocapture` to
//! see the figures. Bytes are as requested from the allocator, without its own overhead.
//!
//! The bounds below are the targets (index with its pods under 300 B per pod), not the figure. The
//! figure is measured by `cargo bench --bench watch -- memory/index_100k_synthetic` on the same
//! pods: 100 B per pod for the index without the pods, 292 B with them, on 2026-11-25
//! (`perf/bench-watch.txt`).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use sliced::index::{Index, ServiceKey};
use sliced::model::{Labels, Meta, Name, Pod, PodBuilder, PodPhase, Service, intern};

use crate::counting_alloc::live;

const NAMESPACES: usize = 10;
const SERVICES_PER_NS: usize = 100;
const PODS_PER_SERVICE: usize = 100;
const PODS: usize = NAMESPACES * SERVICES_PER_NS * PODS_PER_SERVICE;

fn service(ns: usize, s: usize) -> Service {
    Service {
        meta: Meta {
            namespace: intern(&format!("ns-{ns}")),
            name: intern(&format!("svc-{s}")),
            ..Meta::default()
        },
        selector: Some(Labels::from_pairs([("app", format!("svc-{s}"))])),
        ..Service::default()
    }
}

/// A pod as the converter would build it: names and UID in storage of their own, labels interned.
fn pod(ns: usize, s: usize, i: usize) -> Pod {
    let hash = format!("{:08x}", s * 7919 + 17);
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: intern(&format!("ns-{ns}")),
            name: Name::new(&format!("svc-{s}-{hash}-{i:05}")),
            uid: Name::new(&format!("{:08x}-0000-4000-8000-{:012x}", ns * 1000 + s, i)),
            resource_version: Name::new(&format!("{}", 1_000_000 + i)),
            labels: Labels::from_pairs([
                ("app", format!("svc-{s}")),
                ("pod-template-hash", hash),
                ("tier", ["web", "api", "db"][s % 3].to_owned()),
            ]),
            ..Meta::default()
        },
        node_name: Some(intern(&format!("node-{}", i % 50))),
        phase: PodPhase::Running,
        has_pod_ip: true,
        ips: [IpAddr::V4(Ipv4Addr::new(10, ns as u8, s as u8, i as u8))]
            .into_iter()
            .collect(),
        ready: true,
        ..PodBuilder::default()
    })
}

fn pods() -> Vec<Arc<Pod>> {
    let mut out = Vec::with_capacity(PODS);
    for ns in 0..NAMESPACES {
        for s in 0..SERVICES_PER_NS {
            for i in 0..PODS_PER_SERVICE {
                out.push(Arc::new(pod(ns, s, i)));
            }
        }
    }
    out
}

fn per_pod(bytes: isize) -> f64 {
    bytes as f64 / PODS as f64
}

/// Builds the index in one order, returns (index bytes without pods, index bytes with pods).
fn measure(services_first: bool) -> (f64, f64) {
    let start = live();
    let pods = pods();
    let vec_bytes = (pods.capacity() * size_of::<Arc<Pod>>()) as isize;
    let pod_bytes = live() - start - vec_bytes;
    let services: Vec<Service> = (0..NAMESPACES)
        .flat_map(|ns| (0..SERVICES_PER_NS).map(move |s| service(ns, s)))
        .collect();

    let before_index = live();
    let index = Index::new();
    if services_first {
        services.into_iter().for_each(|s| {
            index.services().apply(s);
        });
        pods.iter().for_each(|p| {
            index.pods().apply(p.clone());
        });
    } else {
        pods.iter().for_each(|p| {
            index.pods().apply(p.clone());
        });
        services.into_iter().for_each(|s| {
            index.services().apply(s);
        });
    }
    let index_bytes = live() - before_index;
    assert_eq!(index.pods().len(), PODS);
    assert_eq!(
        index.member_count(&ServiceKey::new("ns-3", "svc-42")),
        PODS_PER_SERVICE
    );
    drop(pods);
    let total = live() - start;
    // The index alone holds the pods now: its bytes plus theirs.
    assert!((total - index_bytes - pod_bytes).abs() < 1024 * 1024);
    println!(
        "{} first: pods {:.0} B each; index {:.0} B per pod without pods, {:.0} B with them",
        if services_first { "services" } else { "pods" },
        per_pod(pod_bytes),
        per_pod(index_bytes),
        per_pod(total)
    );
    drop(index);
    (per_pod(index_bytes), per_pod(total))
}

/// Measured 100 B and 292 B per pod (`perf/bench-watch.txt`); bounded at 250 B and the 300 B target.
#[test]
fn bytes_per_pod_in_the_index() {
    let _alone = crate::alone();
    let (index, total) = measure(true);
    assert!(index < 250.0, "index: {index:.0} B per pod");
    assert!(total < 300.0, "index with pods: {total:.0} B per pod");
    let (index, _) = measure(false);
    assert!(index < 250.0, "index: {index:.0} B per pod");
}

//! Pod -> services lookup, upstream's `BenchmarkGetPodServicesToUpdate` at 1,000 and 10,000 services
//! in one namespace: service i selects `app=svc-i`; the pod carries `app=svc-0` and two other
//! labels. Measured through the selector cache, through `pod_projection` + `services_to_update` for
//! an add event, and, as the baseline, by scanning every service of the namespace as upstream does.
//! Throughput is in lookups.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

use sliced::index::{Index, ServiceKey, pod_projection};
use sliced::model::{Labels, Meta, Name, Pod, PodBuilder, Service, intern};

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: [usize; 2] = [1_000, 10_000];
const NAMESPACE: &str = "bench";

fn services(n: usize) -> Vec<Service> {
    (0..n)
        .map(|i| Service {
            meta: Meta {
                namespace: intern(NAMESPACE),
                name: intern(&format!("svc-{i}")),
                ..Meta::default()
            },
            selector: Some(Labels::from_pairs([("app", format!("svc-{i}"))])),
            ..Service::default()
        })
        .collect()
}

fn pod() -> Pod {
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: intern(NAMESPACE),
            name: Name::new("svc-0-7d4b9c8f6-abcde"),
            labels: Labels::from_pairs([
                ("app", "svc-0"),
                ("pod-template-hash", "7d4b9c8f6"),
                ("tier", "web"),
            ]),
            ..Meta::default()
        },
        ..PodBuilder::default()
    })
}

/// Upstream's `getServicesForPod`: every service of the namespace, its selector matched in turn.
fn scan(services: &[Service], labels: &Labels) -> Vec<ServiceKey> {
    let mut out: Vec<ServiceKey> = services
        .iter()
        .filter(|s| s.selector.as_ref().is_some_and(|sel| labels.matches(sel)))
        .map(ServiceKey::of)
        .collect();
    out.sort_unstable();
    out
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("pod_to_services");
    group.throughput(Throughput::Elements(1));
    let pod = pod();
    for n in SIZES {
        let services = services(n);
        let index = Index::new();
        for s in &services {
            index.services().apply(s.clone());
        }
        assert_eq!(index.services_for_pod(NAMESPACE, &pod.meta.labels).len(), 1);
        assert_eq!(scan(&services, &pod.meta.labels).len(), 1);

        group.bench_with_input(BenchmarkId::new("services_for_pod", n), &n, |b, _| {
            b.iter(|| index.services_for_pod(black_box(NAMESPACE), black_box(&pod.meta.labels)))
        });
        group.bench_with_input(BenchmarkId::new("projection_add", n), &n, |b, _| {
            b.iter(|| {
                pod_projection(None, Some(black_box(&pod)))
                    .map(|p| index.services_to_update(&p))
                    .unwrap_or_default()
            })
        });
        group.bench_with_input(BenchmarkId::new("namespace_scan", n), &n, |b, _| {
            b.iter(|| scan(black_box(&services), black_box(&pod.meta.labels)))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // What the binary ships with.
    config = {
        sliced::allocator::return_freed_pages_at_once();
        sliced::allocator::no_transparent_huge_pages();
        Criterion::default()
    };
    targets = lookup
}
criterion_main!(benches);

//! One full reconcile of one service, fresh (no slices yet), unchanged (slices already correct) and
//! with 1% of its pods changed, at 100 to 50,000 ready pods. Throughput is in pods.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

use sliced::model::{EndpointSlice, Name, Pod, Uid, intern};
use sliced::reconcile::Options;
use sliced::reconcile::slices::{SyncInput, reconcile};
use sliced::reconcile::topology::TopologyCache;
use sliced::sim::{ServiceScenario, single_service};

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: [usize; 4] = [100, 1_000, 10_000, 50_000];

fn sync(s: &ServiceScenario, pods: &[&Pod], slices: &[&EndpointSlice]) -> usize {
    let options = Options::default();
    let topology = TopologyCache::default();
    let plan = reconcile(&SyncInput {
        service: &s.service,
        pods,
        nodes: &s.nodes,
        slices,
        trigger_time: None,
        topology: &topology,
        options: &options,
    });
    plan.write_count()
}

/// The slices a fresh sync creates, named as the API server would name them.
fn existing_slices(s: &ServiceScenario) -> Vec<EndpointSlice> {
    let pods: Vec<&Pod> = s.pods.iter().collect();
    let options = Options::default();
    let topology = TopologyCache::default();
    let plan = reconcile(&SyncInput {
        service: &s.service,
        pods: &pods,
        nodes: &s.nodes,
        slices: &[],
        trigger_time: None,
        topology: &topology,
        options: &options,
    });
    plan.per_type
        .into_iter()
        .flat_map(|t| t.creates)
        .enumerate()
        .map(|(i, mut slice)| {
            // As read back from the API server by the converter: kind, namespace, node and zone
            // interned, the pod's name in storage of its own, the UID parsed.
            let own = |n: &mut Option<Name>| {
                if let Some(v) = n {
                    *v = Name::new(v);
                }
            };
            let interned = |n: &mut Option<Name>| {
                if let Some(v) = n {
                    *v = intern(v);
                }
            };
            for ep in &mut slice.endpoints {
                let ep = std::sync::Arc::make_mut(ep);
                interned(&mut ep.node_name);
                interned(&mut ep.zone);
                if let Some(t) = &mut ep.target_ref {
                    interned(&mut t.kind);
                    interned(&mut t.namespace);
                    own(&mut t.name);
                    t.uid = t.uid.as_ref().map(|u| Uid::new(&u.to_string()));
                }
            }
            slice.meta.name = Name::new(&format!("web-{i:05}"));
            slice.meta.uid = Name::new(&format!("slice-uid-{i}"));
            slice.meta.resource_version = Name::new("1");
            slice.meta.generation = 1;
            slice
        })
        .collect()
}

fn bench_reconcile(c: &mut Criterion) {
    let mut group = c.benchmark_group("reconcile");
    group.sample_size(20);
    for &n in &SIZES {
        let scenario = single_service(n);
        let pods: Vec<&Pod> = scenario.pods.iter().collect();
        let slices = existing_slices(&scenario);
        let slice_refs: Vec<&EndpointSlice> = slices.iter().collect();
        group.throughput(Throughput::Elements(n as u64));

        group.bench_with_input(BenchmarkId::new("fresh", n), &n, |b, _| {
            b.iter(|| black_box(sync(&scenario, &pods, &[])))
        });
        group.bench_with_input(BenchmarkId::new("unchanged", n), &n, |b, _| {
            b.iter(|| {
                let writes = sync(&scenario, &pods, &slice_refs);
                assert_eq!(writes, 0, "an unchanged service must need no write");
                black_box(writes)
            })
        });
        // 1% of pods (at least one) stop being ready.
        let mut changed_pods = scenario.pods.clone();
        let step = 100.min(n);
        for p in changed_pods.iter_mut().step_by(step) {
            p.ready = false;
        }
        let changed_refs: Vec<&Pod> = changed_pods.iter().collect();
        group.bench_with_input(BenchmarkId::new("one_percent_changed", n), &n, |b, _| {
            b.iter(|| {
                let writes = sync(&scenario, &changed_refs, &slice_refs);
                assert!(writes > 0);
                black_box(writes)
            })
        });
    }
    group.finish();
}

/// 1,000 services of 100 ready pods each, every one reconciled fresh: the shape of a cold start.
fn bench_many_services(c: &mut Criterion) {
    let scenarios: Vec<ServiceScenario> = (0..1_000).map(|_| single_service(100)).collect();
    let pods: Vec<Vec<&Pod>> = scenarios.iter().map(|s| s.pods.iter().collect()).collect();
    let mut group = c.benchmark_group("reconcile_many");
    group.sample_size(10);
    group.throughput(Throughput::Elements(100_000));
    group.bench_function("fresh/1000x100", |b| {
        b.iter(|| {
            let writes: usize = scenarios
                .iter()
                .zip(&pods)
                .map(|(s, p)| sync(s, p, &[]))
                .sum();
            assert_eq!(writes, 1_000);
            black_box(writes)
        })
    });
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
    targets = bench_reconcile, bench_many_services
}
criterion_main!(benches);

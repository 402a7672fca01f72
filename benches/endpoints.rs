//! One sync of the Endpoints of a 1,000- and a 5,000-pod service: fresh (no Endpoints yet),
//! unchanged (the Endpoints already right: no write), and one pod changed. Throughput is in pods.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

use sliced::model::{Endpoints, Name, Pod, Uid, intern};
use sliced::reconcile::endpoints::{EndpointsInput, EndpointsPlan, EndpointsWrite, sync};
use sliced::sim::{ServiceScenario, single_service};

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// At the cap, and a service five times over it (whose Endpoints are truncated to 1,000).
const SIZES: [usize; 2] = [1_000, 5_000];

fn plan(s: &ServiceScenario, pods: &[&Pod], current: Option<&Endpoints>) -> EndpointsPlan {
    sync(&EndpointsInput {
        service: &s.service,
        pods,
        current,
        trigger_time: s.service.meta.creation_timestamp,
        current_is_own_write: false,
    })
}

/// The Endpoints a fresh sync creates, as read back from the API server by the converter: kind,
/// namespace and node interned, the pod's name and UID in storage of their own.
fn existing_endpoints(s: &ServiceScenario, pods: &[&Pod]) -> Endpoints {
    let Some(EndpointsWrite::Create(mut e)) = plan(s, pods, None).write else {
        panic!("a fresh sync creates the Endpoints");
    };
    for subset in &mut e.subsets {
        for a in subset
            .addresses
            .iter_mut()
            .chain(subset.not_ready_addresses.iter_mut())
        {
            a.node_name = a.node_name.as_deref().map(intern);
            if let Some(t) = &mut a.target_ref {
                t.kind = t.kind.as_deref().map(intern);
                t.namespace = t.namespace.as_deref().map(intern);
                t.name = t.name.as_deref().map(Name::new);
                t.uid = t.uid.as_ref().map(|u| Uid::new(&u.to_string()));
            }
        }
    }
    e.meta.uid = Name::new("2c9d7e4b-0000-4a3f-8b1c-5e6f7a8b9c0d");
    e.meta.resource_version = Name::new("1");
    e
}

fn bench_endpoints(c: &mut Criterion) {
    let mut group = c.benchmark_group("endpoints");
    group.sample_size(30);
    for &n in &SIZES {
        let scenario = single_service(n);
        let pods: Vec<&Pod> = scenario.pods.iter().collect();
        let current = existing_endpoints(&scenario, &pods);
        group.throughput(Throughput::Elements(n as u64));

        group.bench_with_input(BenchmarkId::new("fresh", n), &n, |b, _| {
            b.iter(|| black_box(plan(&scenario, &pods, None).write_count()))
        });
        group.bench_with_input(BenchmarkId::new("unchanged", n), &n, |b, _| {
            b.iter(|| {
                let writes = plan(&scenario, &pods, Some(&current)).write_count();
                assert_eq!(writes, 0, "unchanged Endpoints must need no write");
                black_box(writes)
            })
        });
        // One pod stops being ready: the first in address order, so that it is among the addresses
        // a truncated object keeps.
        let mut changed_pods = scenario.pods.clone();
        changed_pods[0].ready = false;
        let changed: Vec<&Pod> = changed_pods.iter().collect();
        group.bench_with_input(BenchmarkId::new("one_pod_changed", n), &n, |b, _| {
            b.iter(|| {
                let writes = plan(&scenario, &changed, Some(&current)).write_count();
                assert_eq!(writes, 1);
                black_box(writes)
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // What the binary ships with.
    config = {
        sliced::allocator::return_freed_pages_at_once();
        Criterion::default()
    };
    targets = bench_endpoints
}
criterion_main!(benches);

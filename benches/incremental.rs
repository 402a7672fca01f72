//! One pod changing in a 5,000-pod service (slices of 100): the incremental reconcile against the
//! full one, in the same run. Cases: a pod becomes not ready, becomes ready again, and a new pod is
//! added. Before criterion runs, a short timed loop prints both costs and their ratio.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

use sliced::model::{AddressType, EndpointSlice, Name, Pod, Uid, intern};
use sliced::reconcile::slices::{IncrementalInput, SyncInput, reconcile, reconcile_incremental};
use sliced::reconcile::topology::TopologyCache;
use sliced::reconcile::{Options, Plan};
use sliced::sim::{ServiceScenario, single_service};

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PODS: usize = 5_000;
const CHANGED: usize = 2_500;

type Map<K, V> = HashMap<K, V, ahash::RandomState>;

/// The state before a change and the change: slices as the last sync left them, the pods after it.
struct Case {
    name: &'static str,
    slices: Vec<EndpointSlice>,
    pods: Vec<Pod>,
    changed: Name,
}

fn full(s: &ServiceScenario, pods: &[&Pod], slices: &[&EndpointSlice]) -> Plan {
    reconcile(&SyncInput {
        service: &s.service,
        pods,
        nodes: &s.nodes,
        slices,
        trigger_time: None,
        topology: &TopologyCache::default(),
        options: &Options::default(),
    })
}

/// Applies a plan's writes, naming created slices as the API server would.
fn apply(slices: &mut Vec<EndpointSlice>, plan: &Plan) {
    for t in &plan.per_type {
        for create in &t.creates {
            let mut slice = create.clone();
            let i = slices.len();
            slice.meta.name = Name::new(&format!("web-{i:05}"));
            slice.meta.uid = Name::new(&format!("slice-uid-{i}"));
            slice.meta.resource_version = Name::new("1");
            slices.push(slice);
        }
        for update in &t.updates {
            if let Some(at) = slices.iter().position(|s| s.meta.name == update.meta.name) {
                slices[at] = update.clone();
            }
        }
        for delete in &t.deletes {
            slices.retain(|s| s.meta.name != delete.meta.name);
        }
    }
    slices.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
}

/// The slices a fresh sync creates, as read back from the API server (see benches/reconcile.rs).
fn fresh_slices(s: &ServiceScenario) -> Vec<EndpointSlice> {
    let pods: Vec<&Pod> = s.pods.iter().collect();
    let mut slices = Vec::new();
    apply(&mut slices, &full(s, &pods, &[]));
    for slice in &mut slices {
        for ep in &mut slice.endpoints {
            let ep = std::sync::Arc::make_mut(ep);
            ep.node_name = ep.node_name.as_deref().map(intern);
            ep.zone = ep.zone.as_deref().map(intern);
            if let Some(t) = &mut ep.target_ref {
                t.name = t.name.as_deref().map(Name::new);
                t.uid = t.uid.as_ref().map(|u| Uid::new(&u.to_string()));
            }
        }
    }
    slices
}

fn cases(s: &ServiceScenario) -> Vec<Case> {
    let fresh = fresh_slices(s);
    let changed = s.pods[CHANGED].meta.name.clone();

    let mut not_ready = s.pods.clone();
    not_ready[CHANGED].ready = false;

    // The state the not-ready sync left, then the pod is ready again.
    let refs: Vec<&Pod> = not_ready.iter().collect();
    let fresh_refs: Vec<&EndpointSlice> = fresh.iter().collect();
    let mut after = fresh.clone();
    apply(&mut after, &full(s, &refs, &fresh_refs));

    let mut added = s.pods.clone();
    let mut new_pod = s.pods[PODS - 1].clone();
    new_pod.meta.name = Name::new(&format!("web-{PODS:06}"));
    new_pod
        .meta
        .set_uid(Uid::new("00000000-0000-4000-8000-new"));
    new_pod.set_ips([IpAddr::V4(Ipv4Addr::new(10, 200, 0, 1))]);
    let added_name = new_pod.meta.name.clone();
    added.push(new_pod);

    vec![
        Case {
            name: "not_ready",
            slices: fresh.clone(),
            pods: not_ready,
            changed: changed.clone(),
        },
        Case {
            name: "ready",
            slices: after,
            pods: s.pods.clone(),
            changed,
        },
        Case {
            name: "added",
            slices: fresh,
            pods: added,
            changed: added_name,
        },
    ]
}

/// Everything a caller keeps between syncs: where each pod's endpoint is.
struct Prepared<'a> {
    pods: Vec<&'a Pod>,
    slices: Vec<&'a EndpointSlice>,
    located: Map<&'a str, usize>,
    changed: Vec<(Name, Option<&'a Pod>)>,
}

fn prepare(case: &Case) -> Prepared<'_> {
    let pods: Vec<&Pod> = case.pods.iter().collect();
    let by_name: Map<&str, &Pod> = pods.iter().map(|p| (p.meta.name.as_str(), *p)).collect();
    let mut located = Map::default();
    for (i, slice) in case.slices.iter().enumerate() {
        for ep in &slice.endpoints {
            if let Some(name) = ep.target_ref.as_ref().and_then(|t| t.name.as_deref()) {
                located.insert(name, i);
            }
        }
    }
    let changed = vec![(
        case.changed.clone(),
        by_name.get(case.changed.as_str()).copied(),
    )];
    Prepared {
        pods,
        slices: case.slices.iter().collect(),
        located,
        changed,
    }
}

fn incremental(s: &ServiceScenario, p: &Prepared) -> Option<Plan> {
    let locate = |name: &str, t: &AddressType| {
        if *t == AddressType::IPv4 {
            p.located.get(name).copied()
        } else {
            None
        }
    };
    reconcile_incremental(&IncrementalInput {
        service: &s.service,
        changed: &p.changed,
        left_out: &[],
        nodes: &s.nodes,
        slices: &p.slices,
        locate: &locate,
        trigger_time: None,
        topology: &TopologyCache::default(),
        options: &Options::default(),
    })
}

/// Mean time of `f` over enough runs to be steady, in µs.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..20 {
        f();
    }
    let runs = 500;
    let start = Instant::now();
    for _ in 0..runs {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / runs as f64
}

fn bench_incremental(c: &mut Criterion) {
    let scenario = single_service(PODS);
    let cases = cases(&scenario);
    let mut group = c.benchmark_group("incremental");
    group.sample_size(50);
    for case in &cases {
        let p = prepare(case);
        let expected = full(&scenario, &p.pods, &p.slices);
        let got = incremental(&scenario, &p).expect("the incremental path answers");
        assert_eq!(
            format!("{:?}", got.per_type),
            format!("{:?}", expected.per_type),
            "{}: the incremental plan differs from the full one",
            case.name
        );
        assert!(expected.write_count() > 0);

        let inc = time(|| {
            black_box(incremental(&scenario, &p));
        });
        let all = time(|| {
            black_box(full(&scenario, &p.pods, &p.slices));
        });
        eprintln!(
            "{}/{}: incremental {inc:.1} µs, full {all:.1} µs, {:.0}x",
            case.name,
            PODS,
            all / inc
        );

        group.bench_with_input(
            BenchmarkId::new(format!("incremental/{}", case.name), PODS),
            &p,
            |b, p| b.iter(|| black_box(incremental(&scenario, p))),
        );
        group.bench_with_input(
            BenchmarkId::new(format!("full/{}", case.name), PODS),
            &p,
            |b, p| b.iter(|| black_box(full(&scenario, &p.pods, &p.slices))),
        );
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
    targets = bench_incremental
}
criterion_main!(benches);

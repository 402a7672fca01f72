//! One sync of the Endpoints of a 1,000- and a 5,000-pod service: fresh (no Endpoints yet),
//! unchanged (the Endpoints already right: no write), and one pod changed; the same two changes
//! through the address cache the engine keeps; and one sync of the mirroring controller against the
//! decoding of the Endpoints object it mirrors. Throughput is in pods (addresses for mirroring).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use sliced::kube::convert::{endpoints_from_k8s, endpoints_to_k8s};
use sliced::model::{Address, EndpointAddress, EndpointSlice, Endpoints, Name, Pod, Uid, intern};
use sliced::reconcile::endpoints::{
    AddressCache, Edit, EndpointsInput, EndpointsPlan, EndpointsWrite, Settled, sync, sync_cached,
    sync_settled,
};
use sliced::reconcile::mirroring::{self, MirrorInput};
use sliced::sim::{self, ServiceScenario, single_service};

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
            let a = Arc::make_mut(a);
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
        // The same, with the pods of two templates that name a port differently: three subsets,
        // ordered by the hash of each one's whole print (as mid-way through a rolling update that
        // moves a named port). Against `one_pod_changed`: the cost of that order.
        let templates = two_templates(&scenario);
        let pods: Vec<&Pod> = templates.pods.iter().collect();
        let current = existing_endpoints(&templates, &pods);
        assert_eq!(current.subsets.len(), 3);
        let mut changed_pods = templates.pods.clone();
        changed_pods[0].ready = false;
        let changed: Vec<&Pod> = changed_pods.iter().collect();
        group.bench_with_input(
            BenchmarkId::new("two_templates_one_pod_changed", n),
            &n,
            |b, _| {
                b.iter(|| {
                    let writes = plan(&templates, &changed, Some(&current)).write_count();
                    assert_eq!(writes, 1);
                    black_box(writes)
                })
            },
        );
    }
    group.finish();
}

/// `s` with the pods of two templates that serve a named port differently.
fn two_templates(s: &ServiceScenario) -> ServiceScenario {
    let mut out = ServiceScenario {
        service: s.service.clone(),
        pods: s.pods.clone(),
        nodes: s.nodes.clone(),
    };
    sim::two_templates(&mut out.service, &mut out.pods);
    out
}

/// The engine's incremental path: the address cache edited by one changed pod, then the sync
/// decided from it.
fn bench_cached(c: &mut Criterion) {
    let mut group = c.benchmark_group("endpoints_cached");
    group.sample_size(30);
    for &n in &SIZES {
        let scenario = single_service(n);
        let pods: Vec<&Pod> = scenario.pods.iter().collect();
        let current = existing_endpoints(&scenario, &pods);
        let service = Arc::new(scenario.service.clone());
        let members: Vec<Arc<Pod>> = scenario.pods.iter().cloned().map(Arc::new).collect();
        let Some(mut cache) = AddressCache::build(&service, &members) else {
            panic!("the scenario's pods share no identity");
        };
        let input = |current| EndpointsInput {
            service: &service,
            pods: &[],
            current,
            trigger_time: service.meta.creation_timestamp,
            current_is_own_write: true,
        };
        assert_eq!(sync_cached(&input(Some(&current)), &cache).write_count(), 0);
        group.throughput(Throughput::Elements(n as u64));

        // The first pod in address order stops being ready (an edit, and the sync's write), then is
        // ready again (an edit: the object is as before).
        let name = members[0].meta.name.clone();
        let mut not_ready = (*members[0]).clone();
        not_ready.ready = false;
        let not_ready = vec![(name.clone(), Some(Arc::new(not_ready)))];
        let ready = vec![(name.clone(), Some(Arc::clone(&members[0])))];
        group.bench_with_input(
            BenchmarkId::new("one_pod_flipped_and_back", n),
            &n,
            |b, _| {
                b.iter(|| {
                    assert_eq!(cache.apply(&service, &not_ready), Edit::Moved);
                    let writes = sync_cached(&input(Some(&current)), &cache).write_count();
                    assert_eq!(writes, 1);
                    assert_eq!(cache.apply(&service, &ready), Edit::Moved);
                    black_box(writes)
                })
            },
        );

        // The same flip where the pods of two templates serve a named port two ways: three
        // subsets, whose hashes the cache remembers from one sync to the next.
        let templates = two_templates(&scenario);
        let template_pods: Vec<&Pod> = templates.pods.iter().collect();
        let template_current = existing_endpoints(&templates, &template_pods);
        assert_eq!(template_current.subsets.len(), 3);
        let template_service = Arc::new(templates.service.clone());
        let template_members: Vec<Arc<Pod>> =
            templates.pods.iter().cloned().map(Arc::new).collect();
        let Some(mut template_cache) = AddressCache::build(&template_service, &template_members)
        else {
            panic!("the scenario's pods share no identity");
        };
        let template_input = EndpointsInput {
            service: &template_service,
            ..input(Some(&template_current))
        };
        assert_eq!(
            sync_cached(&template_input, &template_cache).write_count(),
            0
        );
        let flip = |pod: &Arc<Pod>| {
            let mut flipped = (**pod).clone();
            flipped.ready = !flipped.ready;
            vec![(pod.meta.name.clone(), Some(Arc::new(flipped)))]
        };
        let first = &template_members[0];
        let (away, back) = (
            flip(first),
            vec![(first.meta.name.clone(), Some(Arc::clone(first)))],
        );
        group.bench_with_input(
            BenchmarkId::new("two_templates_one_pod_flipped_and_back", n),
            &n,
            |b, _| {
                b.iter(|| {
                    assert_eq!(template_cache.apply(&template_service, &away), Edit::Moved);
                    let writes = sync_cached(&template_input, &template_cache).write_count();
                    assert_eq!(writes, 1);
                    assert_eq!(template_cache.apply(&template_service, &back), Edit::Moved);
                    black_box(writes)
                })
            },
        );

        // A pod changed in nothing the Endpoints carry, over the object the last sync found right.
        cache.settle(Some(Settled {
            version: current.meta.resource_version.clone(),
            service: Arc::clone(&service),
            ready: n,
            not_ready: 0,
            truncated: n > 1_000,
        }));
        let mut relabelled = (*members[n / 2]).clone();
        relabelled.meta.labels = relabelled.meta.labels.with("release", "canary");
        let relabelled = vec![(relabelled.meta.name.clone(), Some(Arc::new(relabelled)))];
        group.bench_with_input(
            BenchmarkId::new("one_pod_unchanged_settled", n),
            &n,
            |b, _| {
                b.iter(|| {
                    assert_eq!(cache.apply(&service, &relabelled), Edit::Kept);
                    let plan = sync_settled(&service, Some(&current), &cache);
                    assert!(plan.is_some_and(|p| p.write.is_none()));
                    black_box(cache.len())
                })
            },
        );

        // Over the cap, a pod past the last address the object holds flips and back: decided by
        // the settled object, and (the way before) by comparing the 1,000 addresses it holds.
        let held = &current.subsets[0].addresses;
        let Some(past) = (n > 1_000)
            .then(|| members.iter().find(|p| !held.iter().any(|a| same_ip(a, p))))
            .flatten()
        else {
            continue;
        };
        let (away, back) = (
            flip(past),
            vec![(past.meta.name.clone(), Some(Arc::clone(past)))],
        );
        for (name, settled) in [
            ("one_pod_past_the_cut_flipped_and_back", true),
            ("one_pod_past_the_cut_flipped_and_back_compared", false),
        ] {
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    for change in [&away, &back] {
                        assert_eq!(cache.apply(&service, change), Edit::PastCut);
                        let plan = match settled {
                            true => sync_settled(&service, Some(&current), &cache),
                            false => Some(sync_cached(&input(Some(&current)), &cache)),
                        };
                        assert!(plan.is_some_and(|p| p.write.is_none()));
                    }
                    black_box(cache.len())
                })
            });
        }
    }
    group.finish();
}

/// `address` is `pod`'s.
fn same_ip(address: &EndpointAddress, pod: &Pod) -> bool {
    matches!(address.ip, Address::Ip(ip) if pod.ips().first() == Some(&ip))
}

/// The mirrored slices of `endpoints`, as the API server would hold them after the first sync.
fn mirrored(scenario: &ServiceScenario, endpoints: &Endpoints) -> Vec<EndpointSlice> {
    let plan = mirroring::reconcile(&MirrorInput {
        namespace: &scenario.service.meta.namespace,
        name: &scenario.service.meta.name,
        service: Some(&scenario.service),
        endpoints: Some(endpoints),
        slices: &[],
        options: &mirroring::Options::default(),
    });
    plan.per_type
        .into_iter()
        .flat_map(|t| t.creates)
        .enumerate()
        .map(|(i, mut slice)| {
            slice.meta.name = Name::new(&format!("{}-{i}", scenario.service.meta.name));
            slice.meta.resource_version = Name::new("1");
            slice
        })
        .collect()
}

/// Mirroring reads one Endpoints object per sync, which the watch decoded whole first: one address
/// changed in a 1,000-address object, mirrored, against decoding that object from JSON.
fn bench_mirroring(c: &mut Criterion) {
    let mut group = c.benchmark_group("mirroring");
    group.sample_size(30);
    let n = 1_000;
    let mut scenario = single_service(n);
    let pods: Vec<&Pod> = scenario.pods.iter().collect();
    let mut endpoints = existing_endpoints(&scenario, &pods);
    endpoints.meta.labels = Default::default();
    // A selector-less Service: its Endpoints are someone else's, and mirrored.
    scenario.service.selector = None;
    let slices = mirrored(&scenario, &endpoints);
    assert!(!slices.is_empty());
    let refs: Vec<&EndpointSlice> = slices.iter().collect();
    // One address moves to an IP no pod has.
    Arc::make_mut(&mut endpoints.subsets[0].addresses[0]).ip =
        Address::Ip(IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1)));
    let json = serde_json::to_vec(&endpoints_to_k8s(&endpoints)).unwrap_or_default();
    group.throughput(Throughput::Elements(n as u64));
    group.bench_with_input(BenchmarkId::new("one_address_changed", n), &n, |b, _| {
        b.iter(|| {
            let plan = mirroring::reconcile(&MirrorInput {
                namespace: &scenario.service.meta.namespace,
                name: &scenario.service.meta.name,
                service: Some(&scenario.service),
                endpoints: Some(&endpoints),
                slices: &refs,
                options: &mirroring::Options::default(),
            });
            assert_eq!(plan.write_count(), 1);
            black_box(plan.write_count())
        })
    });
    group.bench_with_input(BenchmarkId::new("decode_the_endpoints", n), &n, |b, _| {
        b.iter(|| {
            let decoded: k8s_openapi::api::core::v1::Endpoints =
                serde_json::from_slice(&json).unwrap_or_default();
            let model = endpoints_from_k8s(&decoded).ok().map(|e| e.subsets.len());
            assert_eq!(model, Some(1));
            black_box(model)
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
    targets = bench_endpoints, bench_cached, bench_mirroring
}
criterion_main!(benches);

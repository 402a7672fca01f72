//! The service controller at the size the issue names: 10,000 LoadBalancer Services over 5,000
//! nodes. Node sync for a heartbeat, a node added (and removed again) and a node excluded by
//! label, each through the engine with a provider that only counts its calls, beside upstream's
//! rule (every Service's host set filtered anew from every node and compared with the last one
//! pushed) computed in the same run. Then the address pools: 100,000 Services allocated one after
//! another, and a restart that takes back 100,000 assignments from status.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions, LoadBalancerOptions};
use sliced::model::{
    Labels, LoadBalancerIngress, Name, Node, Service, ServiceLoadBalancer, ServicePort,
    ServiceType, TargetPort, intern,
};
use sliced::queue::{Clock, VirtualClock};
use sliced::reconcile::load_balancer::pools::{IpAddressPoolObject, pool_from_object};
use sliced::reconcile::load_balancer::{
    Ensured, HostSet, LoadBalancerProvider, PoolProvider, ProviderError, backs_load_balancers,
    host_set,
};
use sliced::sink::MemorySink;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SERVICES: usize = 10_000;
const NODES: usize = 5_000;
const POOL_SERVICES: usize = 100_000;
const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// A provider that answers at once and counts what it was asked.
#[derive(Default)]
struct Counting {
    ensures: AtomicU64,
    updates: AtomicU64,
}

impl LoadBalancerProvider for Counting {
    fn provider_name(&self) -> &'static str {
        "counting"
    }
    fn get(&self, _: &Service) -> Result<Option<Vec<LoadBalancerIngress>>, ProviderError> {
        Ok(None)
    }
    fn ensure(&self, _: &Service, _: &HostSet) -> Result<Ensured, ProviderError> {
        self.ensures.fetch_add(1, Ordering::Relaxed);
        Ok(Ensured {
            ingress: vec![LoadBalancerIngress::ip(IpAddr::V4(Ipv4Addr::new(
                192, 0, 2, 1,
            )))],
            events: Vec::new(),
        })
    }
    fn update_hosts(&self, _: &Service, _: &HostSet) -> Result<(), ProviderError> {
        self.updates.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn ensure_deleted(&self, _: &Service) -> Result<(), ProviderError> {
        Ok(())
    }
}

fn node(i: usize) -> Node {
    let name = format!("node-{i:05}");
    Node {
        labels: Labels::from_pairs([("kubernetes.io/hostname", name.as_str())]),
        provider_id: Some(Name::new(&format!("aws:///eu-west-1a/i-{i:016x}"))),
        name: intern(&name),
        ready: true,
        allocatable_cpu_millis: 16_000,
        ..Node::default()
    }
}

fn service(i: usize) -> Service {
    let mut s = Service::default();
    s.meta.namespace = intern(&format!("ns-{:03}", i % 100));
    s.meta.name = intern(&format!("lb-{i:06}"));
    s.meta.uid = Name::new(&format!("00000000-0000-4000-8000-{i:012}"));
    s.service_type = ServiceType::LoadBalancer;
    s.ports = vec![ServicePort {
        name: intern("https"),
        port: 443,
        target_port: TargetPort::Number(8443),
        protocol: Default::default(),
        app_protocol: None,
        node_port: Some(30_000 + (i % 2_000) as i32),
    }];
    s.load_balancer = Some(Box::new(ServiceLoadBalancer::default()));
    s
}

/// An engine running the service controller alone, every Service ensured once.
fn synced(provider: Arc<Counting>) -> (Engine, MemorySink) {
    let engine = Engine::new(
        EngineOptions {
            controllers: Controllers::LOAD_BALANCER,
            load_balancers: LoadBalancerOptions {
                provider: Some(provider),
                ..LoadBalancerOptions::default()
            },
            ..EngineOptions::default()
        },
        Arc::new(VirtualClock::new()) as Arc<dyn Clock>,
    );
    for i in 0..NODES {
        engine.handle(Change::Node(node(i)));
    }
    for i in 0..SERVICES {
        engine.handle(Change::Service(service(i)));
    }
    engine.start();
    let sink = MemorySink::new(1);
    sink.set_logging(false);
    engine.sync_all_ready(&sink);
    (engine, sink)
}

/// Upstream's node sync: for every Service, the nodes filtered by the predicates anew and
/// compared with the set last pushed; a call where they differ. Returns the calls.
fn upstream_node_sync(nodes: &[Node], last: &mut [HostSet]) -> usize {
    let mut calls = 0;
    for pushed in last.iter_mut() {
        let hosts = host_set(nodes.iter().filter(|n| backs_load_balancers(n)));
        if hosts != *pushed {
            *pushed = hosts;
            calls += 1;
        }
    }
    calls
}

fn node_sync(c: &mut Criterion) {
    let provider = Arc::new(Counting::default());
    let (engine, sink) = synced(Arc::clone(&provider));
    let mut group = c.benchmark_group("load_balancer_node_sync");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));

    let calls =
        |p: &Counting| p.updates.load(Ordering::Relaxed) + p.ensures.load(Ordering::Relaxed);
    let mut heartbeat = 0u64;
    let before = calls(&provider);
    group.bench_function("heartbeat", |b| {
        b.iter(|| {
            heartbeat += 1;
            let mut n = node(7);
            n.allocatable_cpu_millis = 16_000 - (heartbeat % 2) as i64;
            engine.handle(Change::Node(n));
            black_box(engine.sync_all_ready(&sink));
        })
    });
    eprintln!(
        "heartbeat: {} provider calls in all iterations",
        calls(&provider) - before
    );

    let mut present = false;
    let before = calls(&provider);
    let mut rounds = 0u64;
    group.bench_function("node_added_or_removed", |b| {
        b.iter(|| {
            rounds += 1;
            if present {
                engine.handle(Change::NodeDeleted {
                    name: intern(&format!("node-{NODES:05}")),
                });
            } else {
                engine.handle(Change::Node(node(NODES)));
            }
            present = !present;
            black_box(engine.sync_all_ready(&sink));
        })
    });
    eprintln!(
        "node added or removed: {} provider calls per change",
        (calls(&provider) - before) / rounds.max(1)
    );

    let mut excluded = false;
    let before = calls(&provider);
    let mut rounds = 0u64;
    group.bench_function("node_excluded_or_included", |b| {
        b.iter(|| {
            rounds += 1;
            let mut n = node(11);
            excluded = !excluded;
            if excluded {
                n.labels = n.labels.with(EXCLUDE, "true");
            }
            engine.handle(Change::Node(n));
            black_box(engine.sync_all_ready(&sink));
        })
    });
    eprintln!(
        "node excluded or included: {} provider calls per change",
        (calls(&provider) - before) / rounds.max(1)
    );

    // Upstream's rule over the same cluster: a heartbeat that passes its event filter is
    // dropped there, so its cost is the node sync pass that a node added runs.
    let mut nodes: Vec<Node> = (0..NODES).map(node).collect();
    let first = host_set(nodes.iter());
    let mut last: Vec<HostSet> = vec![first; SERVICES];
    let mut added = false;
    let mut upstream_calls = 0;
    let mut rounds = 0usize;
    group.bench_function("upstream_rule_node_added_or_removed", |b| {
        b.iter(|| {
            rounds += 1;
            if added {
                nodes.pop();
            } else {
                nodes.push(node(NODES));
            }
            added = !added;
            upstream_calls += upstream_node_sync(&nodes, &mut last);
        })
    });
    eprintln!(
        "upstream's rule, node added or removed: {} provider calls per change",
        upstream_calls / rounds.max(1)
    );
    group.finish();
}

fn pool_object(addresses: &str) -> IpAddressPoolObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": {"name": "big"},
        "spec": {"addresses": [addresses], "avoidBuggyIPs": true},
    }))
    .expect("pool object")
}

fn pools(c: &mut Criterion) {
    let pool = pool_from_object(pool_object("10.16.0.0/12")).expect("pool");
    let services: Vec<Service> = (0..POOL_SERVICES).map(service).collect();
    let hosts = HostSet::new();
    let mut group = c.benchmark_group("load_balancer_pools");
    group.sample_size(10);
    group.throughput(Throughput::Elements(POOL_SERVICES as u64));
    group.bench_function("allocate_100000", |b| {
        b.iter_batched(
            || PoolProvider::new(vec![pool.clone()]),
            |provider| {
                for s in &services {
                    black_box(provider.ensure(s, &hosts).ok());
                }
                provider
            },
            BatchSize::PerIteration,
        )
    });
    // The statuses the allocation wrote, as a restart lists them.
    let first = PoolProvider::new(vec![pool.clone()]);
    let with_status: Vec<Service> = services
        .iter()
        .map(|s| {
            let mut s = s.clone();
            let ingress = first
                .ensure(&s, &hosts)
                .map(|e| e.ingress)
                .unwrap_or_default();
            s.load_balancer.get_or_insert_with(Default::default).ingress = ingress;
            s
        })
        .collect();
    let refs: Vec<&Service> = with_status.iter().collect();
    group.bench_function("restore_100000", |b| {
        b.iter_batched(
            || PoolProvider::new(vec![pool.clone()]),
            |provider| {
                provider.restore(&refs);
                provider
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, node_sync, pools);
criterion_main!(benches);

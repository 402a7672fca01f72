//! The service controller in the engine, against a fake provider that records its calls: node
//! sync that calls the provider only for Services whose backends moved, the finalizer on deletion,
//! a Service replaced under the same name, and the provider's special answers. The Service patches
//! are given back to the engine as the watch would deliver them.

use std::sync::Arc;
use std::time::Duration;

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions, LoadBalancerOptions};
use sliced::model::{
    LOAD_BALANCER_CLEANUP_FINALIZER, Labels, Name, Node, Service, ServiceLoadBalancer, ServicePort,
    ServiceType, TargetPort, intern,
};
use sliced::queue::{Clock, VirtualClock};
use sliced::reconcile::load_balancer::ProviderError;
use sliced::reconcile::load_balancer::fake::{FakeCall, FakeProvider, Operation};
use sliced::sink::{MemorySink, ServiceChange};

const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

struct Harness {
    engine: Engine,
    clock: Arc<VirtualClock>,
    provider: Arc<FakeProvider>,
    sink: MemorySink,
}

impl Harness {
    fn new(nodes: &[Node], services: &[Service]) -> Harness {
        let clock = Arc::new(VirtualClock::new());
        let provider = Arc::new(FakeProvider::new());
        let engine = Engine::new(
            EngineOptions {
                controllers: Controllers::LOAD_BALANCER,
                load_balancers: LoadBalancerOptions {
                    provider: Some(Arc::clone(&provider) as _),
                    ..LoadBalancerOptions::default()
                },
                ..EngineOptions::default()
            },
            Arc::clone(&clock) as Arc<dyn Clock>,
        );
        for node in nodes {
            engine.handle(Change::Node(node.clone()));
        }
        for service in services {
            engine.handle(Change::Service(service.clone()));
        }
        engine.start();
        Harness {
            engine,
            clock,
            provider,
            sink: MemorySink::new(1),
        }
    }

    /// Syncs what is ready, gives the patched Services back as the watch would, and returns the
    /// provider calls made meanwhile.
    fn sync(&self) -> Vec<FakeCall> {
        let before = self.provider.calls().len();
        self.engine.sync_all_ready(&self.sink);
        for patch in self.sink.take_service_patches() {
            let index = self.engine.index();
            let Some(stored) = index.services().get(&patch.namespace, &patch.name) else {
                continue;
            };
            let mut service = (*stored).clone();
            let lb = service.load_balancer.get_or_insert_with(Default::default);
            match patch.change {
                ServiceChange::Finalizers(f) => lb.finalizers = f,
                ServiceChange::Ingress(i) => lb.ingress = i,
            }
            service.meta.resource_version = Name::new("next");
            self.engine.handle(Change::Service(service));
        }
        self.engine.sync_all_ready(&self.sink);
        self.provider.calls()[before..].to_vec()
    }

    fn service(&self, name: &str) -> Arc<Service> {
        self.engine
            .index()
            .services()
            .get("ns", name)
            .expect("service")
    }
}

fn node(name: &str) -> Node {
    Node {
        name: intern(name),
        ready: true,
        provider_id: Some(Name::new(&format!("kind://{name}"))),
        ..Node::default()
    }
}

fn lb_service(name: &str, uid: &str) -> Service {
    let mut s = Service::default();
    s.meta.namespace = intern("ns");
    s.meta.name = intern(name);
    s.meta.uid = Name::new(uid);
    s.meta.resource_version = Name::new("1");
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

fn ops(calls: &[FakeCall]) -> Vec<(Operation, &str, Vec<&str>)> {
    calls
        .iter()
        .map(|c| {
            let hosts = c.hosts.iter().map(String::as_str).collect();
            (c.operation, c.service.as_str(), hosts)
        })
        .collect()
}

#[test]
fn node_sync_calls_the_provider_only_where_the_backends_moved() {
    let mut foreign = lb_service("foreign", "u-2");
    foreign.load_balancer.as_mut().expect("fields").class = Some(intern("other.io/lb"));
    let h = Harness::new(
        &[node("a"), node("b")],
        &[lb_service("web", "u-1"), foreign, lb_service("api", "u-3")],
    );
    let first = h.sync();
    // In the order the Services arrived, as a queue hands them out.
    assert_eq!(
        ops(&first),
        [
            (Operation::Ensure, "ns/web", vec!["a", "b"]),
            (Operation::Ensure, "ns/api", vec!["a", "b"]),
        ]
    );
    let web = h.service("web");
    let lb = web.load_balancer.as_deref().expect("fields");
    assert!(lb.has_cleanup_finalizer());
    assert_eq!(lb.ingress.len(), 1, "status written once ensured");

    // A heartbeat, a readiness flip and a label nobody reads: no provider call at all.
    let mut b = node("b");
    b.ready = false;
    b.allocatable_cpu_millis = 3900;
    b.labels = Labels::from_pairs([("team", "x")]);
    h.engine.handle(Change::Node(b));
    assert!(h.sync().is_empty());

    // A node added: one update per Service, nothing ensured again, no write.
    h.engine.handle(Change::Node(node("c")));
    let added = h.sync();
    assert_eq!(
        ops(&added),
        [
            (Operation::UpdateHosts, "ns/api", vec!["a", "b", "c"]),
            (Operation::UpdateHosts, "ns/web", vec!["a", "b", "c"]),
        ]
    );
    assert!(h.sink.take_service_patches().is_empty());

    // A node excluded by label, then let back in by the value "false".
    let mut a = node("a");
    a.labels = Labels::from_pairs([(EXCLUDE, "true")]);
    h.engine.handle(Change::Node(a.clone()));
    let excluded = h.sync();
    assert_eq!(excluded.len(), 2);
    assert!(excluded.iter().all(|c| c.hosts == ["b", "c"]));
    a.labels = Labels::from_pairs([(EXCLUDE, "false")]);
    h.engine.handle(Change::Node(a));
    assert!(h.sync().iter().all(|c| c.hosts == ["a", "b", "c"]));

    // A node deleted: updates again; a Service change meanwhile gets a full ensure instead.
    let mut changed = (*h.service("web")).clone();
    changed.ports[0].port = 8081;
    h.engine.handle(Change::Service(changed));
    h.engine.handle(Change::NodeDeleted { name: intern("c") });
    assert_eq!(
        ops(&h.sync()),
        [
            (Operation::Ensure, "ns/web", vec!["a", "b"]),
            (Operation::UpdateHosts, "ns/api", vec!["a", "b"]),
        ]
    );
}

#[test]
fn a_deleted_service_loses_its_load_balancer_then_its_finalizer() {
    let h = Harness::new(&[node("a")], &[lb_service("web", "u-1")]);
    h.sync();
    let mut deleting = (*h.service("web")).clone();
    deleting.meta.deletion_timestamp = Some("2026-11-27T10:00:00Z".parse().expect("time"));
    let lb = deleting.load_balancer.as_mut().expect("fields");
    lb.finalizers.insert(0, intern("example.com/keep"));
    h.engine.handle(Change::Service(deleting));
    h.engine.sync_all_ready(&h.sink);
    let calls = h.provider.calls();
    let last: Vec<Operation> = calls.iter().rev().take(2).map(|c| c.operation).collect();
    assert_eq!(last, [Operation::EnsureDeleted, Operation::Get]);
    assert!(!h.provider.exists("ns/web"));
    let patches = h.sink.take_service_patches();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(
        patches[0].change,
        ServiceChange::Finalizers(vec![intern("example.com/keep")]),
        "the others' finalizers are kept"
    );
    assert_eq!(patches[1].change, ServiceChange::Ingress(Vec::new()));
}

#[test]
fn a_service_replaced_under_its_name_gets_a_new_load_balancer() {
    let h = Harness::new(&[node("a")], &[lb_service("web", "u-1")]);
    h.sync();
    h.engine.handle(Change::ServiceDeleted {
        namespace: intern("ns"),
        name: intern("web"),
    });
    h.engine.handle(Change::Service(lb_service("web", "u-2")));
    let calls = h.sync();
    assert_eq!(
        calls.iter().map(|c| c.operation).collect::<Vec<_>>(),
        [Operation::EnsureDeleted, Operation::Ensure]
    );
}

#[test]
fn a_service_deleted_without_the_finalizer_is_cleaned_up() {
    let h = Harness::new(&[node("a")], &[lb_service("web", "u-1")]);
    h.sync();
    h.engine.handle(Change::ServiceDeleted {
        namespace: intern("ns"),
        name: intern("web"),
    });
    let calls = h.sync();
    assert_eq!(ops(&calls), [(Operation::EnsureDeleted, "ns/web", vec![])]);
    assert!(!h.provider.exists("ns/web"));
}

#[test]
fn the_providers_special_answers() {
    let h = Harness::new(
        &[node("a")],
        &[lb_service("web", "u-1"), lb_service("api", "u-2")],
    );
    h.provider.fail_next(
        Operation::Ensure,
        "ns/web",
        ProviderError::Retry {
            after: Duration::from_secs(42),
            message: "the cloud is busy".into(),
        },
    );
    h.provider
        .fail_next(Operation::Ensure, "ns/api", ProviderError::failed("quota"));
    h.engine.sync_all_ready(&h.sink);
    let queue_at = |engine: &Engine| engine.next_ready_at();
    // The retry waits exactly what the provider asked; the failure backs off from 5 s.
    assert_eq!(
        queue_at(&h.engine),
        Some(h.engine.now() + Duration::from_secs(5))
    );
    h.clock.advance(Duration::from_secs(5));
    h.engine.sync_all_ready(&h.sink);
    assert!(h.provider.exists("ns/api"));
    assert!(!h.provider.exists("ns/web"));
    h.clock.advance(Duration::from_secs(36));
    h.engine.sync_all_ready(&h.sink);
    assert!(!h.provider.exists("ns/web"), "not before 42 s");
    h.clock.advance(Duration::from_secs(1));
    h.engine.sync_all_ready(&h.sink);
    assert!(h.provider.exists("ns/web"));

    // Implemented elsewhere: a success without status.
    let h = Harness::new(&[node("a")], &[lb_service("web", "u-1")]);
    h.provider.fail_next(
        Operation::Ensure,
        "ns/web",
        ProviderError::ImplementedElsewhere,
    );
    h.engine.sync_all_ready(&h.sink);
    let patches = h.sink.take_service_patches();
    assert_eq!(patches.len(), 1, "the finalizer only: {patches:?}");
    assert!(matches!(&patches[0].change, ServiceChange::Finalizers(f)
        if f.iter().any(|f| f.as_str() == LOAD_BALANCER_CLEANUP_FINALIZER)));
    assert_eq!(h.engine.next_ready_at(), None, "nothing retried");
}

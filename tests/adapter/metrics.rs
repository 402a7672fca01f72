//! Metrics from a real engine: syncs through the in-memory API server, then the exposition text
//! checked against the writes made and the objects the server holds.

use std::net::IpAddr;
use std::sync::Arc;

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::metrics::Metrics;
use sliced::model::{
    Address, EndpointAddress, EndpointSubset, Endpoints, EndpointsPort, Meta, Name, Protocol,
    Service, intern,
};
use sliced::queue::{Clock, VirtualClock};
use sliced::sim;
use sliced::sink::{Kind, MemorySink, Verb, WriteError};

fn engine(controllers: Controllers) -> Engine {
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new());
    Engine::new(
        EngineOptions {
            controllers,
            workers: 1,
            check_invariants: true,
            ..EngineOptions::default()
        },
        clock,
    )
}

/// Syncs until nothing is ready, counting every batch.
fn drain(engine: &Engine, sink: &MemorySink, metrics: &Metrics) -> Vec<(Verb, Kind)> {
    let mut writes = Vec::new();
    loop {
        let records = engine.sync_ready(sink);
        assert_eq!(
            engine.stats().invariant_violations,
            0,
            "{:?}",
            engine.take_violations()
        );
        if records.is_empty() {
            // With nothing left to do, every service holds what a full reconcile gives.
            if engine.is_idle() {
                let unsettled = engine.check_all();
                assert!(unsettled.is_empty(), "{unsettled:?}");
            }
            return writes;
        }
        metrics.observe_syncs(&records);
        for r in &records {
            writes.extend(r.writes.iter().map(|w| (w.verb, w.object.kind())));
        }
    }
}

fn scrape(engine: &Engine, metrics: &Metrics) -> String {
    metrics.refresh(engine);
    match metrics.encode() {
        Ok(text) => text,
        Err(e) => panic!("{e}"),
    }
}

/// The value of the sample written exactly as `series` (name and labels).
fn value(text: &str, series: &str) -> f64 {
    let found: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .collect();
    match found.as_slice() {
        [v] => *v,
        _ => panic!("{series}: {found:?} in\n{text}"),
    }
}

/// Slices of the EndpointSlice controller the server holds, and their endpoints.
fn slices_held(sink: &MemorySink, namespace: &str) -> (usize, usize) {
    let slices: Vec<_> = sink
        .list_slices(namespace)
        .into_iter()
        .filter(|s| {
            s.managed_by().map(|m| m.as_str())
                == Some(sliced::model::keys::ENDPOINTSLICE_CONTROLLER)
        })
        .collect();
    let endpoints = slices.iter().map(|s| s.endpoints.len()).sum();
    (slices.len(), endpoints)
}

/// Every sample belongs to the family of the `# TYPE` line before it, as Prometheus' text format
/// 0.0.4 wants: a counter or gauge sample bears the family's name exactly (so no `_total` added to
/// a counter that upstream names without it), a histogram's its `_bucket`, `_sum` or `_count`.
fn check_text_format(text: &str) {
    let mut family: Option<(&str, &str)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line");
            family = Some((name, kind));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name = line.split(['{', ' ']).next().expect("sample name");
        let (family, kind) = family.expect("a sample after a TYPE line");
        let ok = match kind {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family)),
            _ => name == family,
        };
        assert!(ok, "{name} under {kind} {family}");
        let value = line.rsplit(' ').next().expect("value");
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[test]
fn metrics_is_send_and_sync() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Metrics>();
}

#[test]
fn endpointslice_syncs_match_the_writes_and_the_slices() {
    let engine = engine(Controllers::ALL);
    let sink = MemorySink::new(7);
    let metrics = Metrics::new();
    let scenario = sim::single_service(250);
    for node in scenario.nodes.values() {
        engine.handle(Change::Node(node.clone()));
    }
    engine.handle(Change::Service(scenario.service.clone()));
    for pod in &scenario.pods {
        engine.handle(Change::Pod(pod.clone()));
    }

    metrics.set_resident_bytes(250 * 1000);
    let text = scrape(&engine, &metrics);
    assert_eq!(value(&text, "sliced_index_bytes_per_pod"), 1000.0);
    assert_eq!(
        value(&text, r#"workqueue_depth{name="endpoint_slice"}"#),
        1.0
    );
    assert_eq!(
        value(&text, r#"workqueue_adds_total{name="endpoint_slice"}"#),
        1.0
    );
    assert_eq!(value(&text, r#"workqueue_depth{name="endpoint"}"#), 1.0);
    assert_eq!(value(&text, r#"sliced_index_objects{kind="pods"}"#), 250.0);
    assert_eq!(
        value(&text, r#"sliced_index_objects{kind="services"}"#),
        1.0
    );

    let writes = drain(&engine, &sink, &metrics);
    let creates = writes
        .iter()
        .filter(|w| **w == (Verb::Create, Kind::EndpointSlice))
        .count();
    assert_eq!(creates, 3, "250 endpoints in slices of 100");
    let text = scrape(&engine, &metrics);
    check_text_format(&text);
    assert!(text.contains("# TYPE endpoint_slice_controller_changes counter\n"));
    assert!(!text.contains("endpoint_slice_controller_changes_total"));
    assert!(text.contains("# TYPE workqueue_adds_total counter\n"));
    assert!(text.contains(
        "# HELP endpoint_slice_controller_syncs [ALPHA] Number of EndpointSlice syncs\n"
    ));
    assert_eq!(
        value(
            &text,
            r#"endpoint_slice_controller_syncs{result="success"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"endpoint_slice_controller_changes{operation="create"}"#
        ),
        creates as f64
    );
    let (held, endpoints) = slices_held(&sink, "default");
    assert_eq!((held, endpoints), (3, 250));
    assert_eq!(
        value(&text, "endpoint_slice_controller_endpoints_desired"),
        250.0
    );
    assert_eq!(
        value(&text, "endpoint_slice_controller_num_endpoint_slices"),
        3.0
    );
    assert_eq!(
        value(&text, "endpoint_slice_controller_desired_endpoint_slices"),
        3.0
    );
    // 250 added endpoints: above the 128 bucket, within the 256 one.
    let added = "endpoint_slice_controller_endpoints_added_per_sync";
    assert_eq!(
        value(&text, &format!(r#"{added}_bucket{{le="128.0"}}"#)),
        0.0
    );
    assert_eq!(
        value(&text, &format!(r#"{added}_bucket{{le="256.0"}}"#)),
        1.0
    );
    assert_eq!(value(&text, &format!("{added}_sum")), 250.0);
    let changed = "endpoint_slice_controller_endpointslices_changed_per_sync";
    let labels = r#"{topology="Disabled",traffic_distribution=""}"#;
    assert_eq!(value(&text, &format!("{changed}_count{labels}")), 1.0);
    assert_eq!(value(&text, &format!("{changed}_sum{labels}")), 3.0);
    assert_eq!(
        value(&text, r#"workqueue_depth{name="endpoint_slice"}"#),
        0.0
    );
    assert_eq!(
        value(
            &text,
            r#"workqueue_queue_duration_seconds_count{name="endpoint_slice"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"workqueue_work_duration_seconds_count{name="endpoint_slice"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"sliced_writes_total{controller="endpointslice",kind="EndpointSlice",verb="create"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            r#"sliced_writes_total{controller="endpoints",kind="Endpoints",verb="create"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"sliced_sync_duration_seconds_count{controller="endpointslice"}"#
        ),
        1.0
    );

    // 100 pods go: endpoints leave their slices, which stay; one slice fewer would do.
    for pod in &scenario.pods[..100] {
        engine.handle(Change::PodDeleted {
            namespace: pod.meta.namespace.clone(),
            name: pod.meta.name.clone(),
        });
    }
    let incremental = engine.stats().incremental_syncs;
    drain(&engine, &sink, &metrics);
    assert_eq!(
        engine.stats().incremental_syncs,
        incremental + 1,
        "the incremental path's figures are checked here"
    );
    let text = scrape(&engine, &metrics);
    let (held, endpoints) = slices_held(&sink, "default");
    assert_eq!(endpoints, 150);
    assert_eq!(
        value(&text, "endpoint_slice_controller_endpoints_desired"),
        150.0
    );
    assert_eq!(
        value(&text, "endpoint_slice_controller_num_endpoint_slices"),
        held as f64
    );
    assert_eq!(
        value(&text, "endpoint_slice_controller_desired_endpoint_slices"),
        2.0
    );
    assert_eq!(
        value(
            &text,
            "endpoint_slice_controller_endpoints_removed_per_sync_sum"
        ),
        100.0
    );
    assert_eq!(
        value(
            &text,
            r#"endpoint_slice_controller_syncs{result="success"}"#
        ),
        2.0
    );
    assert_eq!(value(&text, r#"sliced_index_objects{kind="pods"}"#), 150.0);

    // The service goes: its entry leaves the cache.
    engine.handle(Change::ServiceDeleted {
        namespace: intern("default"),
        name: intern("web"),
    });
    drain(&engine, &sink, &metrics);
    let text = scrape(&engine, &metrics);
    assert_eq!(
        value(&text, "endpoint_slice_controller_endpoints_desired"),
        0.0
    );
    assert_eq!(
        value(&text, "endpoint_slice_controller_num_endpoint_slices"),
        0.0
    );
    assert_eq!(
        value(&text, "endpoint_slice_controller_desired_endpoint_slices"),
        0.0
    );
    assert_eq!(
        value(
            &text,
            r#"endpoint_slice_controller_syncs{result="success"}"#
        ),
        3.0
    );
}

fn mirrored_service() -> Service {
    Service {
        meta: Meta {
            namespace: intern("default"),
            name: intern("ext"),
            uid: Name::new("a0000000-0000-4000-8000-000000000001"),
            ..Meta::default()
        },
        selector: None,
        ..Service::default()
    }
}

fn custom_endpoints(ips: &[&str]) -> Endpoints {
    let addr = |ip: &&str| EndpointAddress {
        ip: match ip.parse::<IpAddr>() {
            Ok(ip) => Address::Ip(ip),
            Err(_) => Address::Text(Name::new(ip)),
        },
        hostname: None,
        node_name: None,
        target_ref: None,
    };
    Endpoints {
        meta: Meta {
            namespace: intern("default"),
            name: intern("ext"),
            uid: Name::new("e0000000-0000-4000-8000-000000000001"),
            ..Meta::default()
        },
        subsets: vec![EndpointSubset {
            addresses: ips.iter().map(|ip| Arc::new(addr(ip))).collect(),
            not_ready_addresses: Vec::new(),
            ports: vec![EndpointsPort {
                name: Some(intern("http")),
                port: 80,
                protocol: Some(Protocol::Tcp),
                app_protocol: None,
            }],
        }],
    }
}

#[test]
fn mirroring_syncs_fill_the_mirroring_metrics() {
    let engine = engine(Controllers::ALL);
    let sink = MemorySink::new(7);
    let metrics = Metrics::new();
    engine.handle(Change::Service(mirrored_service()));
    let endpoints = Arc::new(custom_endpoints(&["10.1.0.1", "10.1.0.2", "not-an-ip"]));
    engine.handle(Change::Endpoints(Arc::clone(&endpoints)));
    let writes = drain(&engine, &sink, &metrics);
    assert!(writes.contains(&(Verb::Create, Kind::EndpointSlice)));
    let text = scrape(&engine, &metrics);
    check_text_format(&text);
    let m = "endpoint_slice_mirroring_controller";
    assert_eq!(
        value(&text, &format!(r#"{m}_changes{{operation="create"}}"#)),
        1.0
    );
    assert_eq!(value(&text, &format!("{m}_endpoints_desired")), 2.0);
    assert_eq!(value(&text, &format!("{m}_num_endpoint_slices")), 1.0);
    assert_eq!(value(&text, &format!("{m}_desired_endpoint_slices")), 1.0);
    assert_eq!(
        value(&text, &format!("{m}_endpoints_added_per_sync_sum")),
        2.0
    );
    assert_eq!(
        value(&text, &format!("{m}_addresses_skipped_per_sync_sum")),
        1.0
    );
    assert_eq!(
        value(&text, &format!("{m}_endpoints_sync_duration_count")),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"workqueue_adds_total{name="endpoint_slice_mirroring"}"#
        ),
        1.0
    );

    // One address changes readiness: an update of one endpoint, nothing added.
    let mut changed = custom_endpoints(&["10.1.0.1", "not-an-ip"]);
    changed.subsets[0]
        .not_ready_addresses
        .push(endpoints.subsets[0].addresses[1].clone());
    engine.handle(Change::Endpoints(Arc::new(changed)));
    drain(&engine, &sink, &metrics);
    let text = scrape(&engine, &metrics);
    assert_eq!(
        value(&text, &format!("{m}_endpoints_updated_per_sync_sum")),
        1.0
    );
    assert_eq!(
        value(&text, &format!("{m}_endpoints_added_per_sync_sum")),
        2.0
    );
    assert_eq!(
        value(&text, &format!(r#"{m}_changes{{operation="update"}}"#)),
        1.0
    );

    // The Endpoints goes: no longer mirrored, its entry leaves the cache.
    engine.handle(Change::EndpointsDeleted {
        namespace: intern("default"),
        name: intern("ext"),
        uid: Default::default(),
    });
    drain(&engine, &sink, &metrics);
    let text = scrape(&engine, &metrics);
    assert_eq!(value(&text, &format!("{m}_endpoints_desired")), 0.0);
    assert_eq!(value(&text, &format!("{m}_num_endpoint_slices")), 0.0);
    // The EndpointSlice controller never ran for this selector-less service.
    assert_eq!(
        value(&text, "endpoint_slice_controller_num_endpoint_slices"),
        0.0
    );
}

#[test]
fn adapter_setters_show_in_the_exposition() {
    let engine = engine(Controllers::ENDPOINTSLICE);
    let metrics = Metrics::new();
    metrics.set_leader(true);
    metrics.dry_run().set_differences(Kind::EndpointSlice, 4);
    metrics
        .dry_run()
        .record_difference(Kind::EndpointSlice, Verb::Update);
    let pods = metrics.watch_events("pods");
    pods.inc();
    pods.inc();
    metrics.watch_restarts("pods").inc();
    metrics.set_resident_bytes(1 << 20);
    let text = scrape(&engine, &metrics);
    check_text_format(&text);
    assert_eq!(value(&text, "sliced_leader"), 1.0);
    assert_eq!(
        value(&text, r#"sliced_dry_run_differences{kind="EndpointSlice"}"#),
        4.0
    );
    assert_eq!(
        value(
            &text,
            r#"sliced_dry_run_differences_found_total{kind="EndpointSlice",verb="update"}"#
        ),
        1.0
    );
    assert_eq!(
        value(&text, r#"sliced_watch_events_total{kind="pods"}"#),
        2.0
    );
    assert_eq!(
        value(&text, r#"sliced_watch_restarts_total{kind="pods"}"#),
        1.0
    );
    assert_eq!(value(&text, "process_resident_memory_bytes"), 1048576.0);
    // No pods: no figure per pod.
    assert!(!text.contains("sliced_index_bytes_per_pod"));
    // Only what runs is shown: neither the other controllers' queues nor their metrics, nor
    // upstream's gauges before a first sync.
    assert!(!text.contains(r#"name="endpoint_slice_mirroring""#));
    assert!(!text.contains(r#"name="endpoint""#));
    assert!(!text.contains("endpoint_slice_mirroring_controller"));
    assert!(!text.contains("endpoint_slice_controller_num_endpoint_slices"));
    assert_eq!(
        value(&text, r#"workqueue_depth{name="endpoint_slice"}"#),
        0.0
    );
    assert!(!text.contains("# EOF"));
}

#[test]
fn refused_writes_are_counted_by_kind_verb_and_reason() {
    let engine = engine(Controllers::ENDPOINTSLICE);
    let metrics = Metrics::new();
    let conflict = WriteError::Conflict {
        kind: Kind::EndpointSlice.resource(),
        name: Name::new("web-abc"),
    };
    let server_error = WriteError::Status {
        code: 500,
        reason: "InternalError".to_string(),
        message: "Internal error occurred: etcdserver: request timed out".to_string(),
    };
    let webhook = WriteError::Status {
        code: 500,
        reason: "a webhook's own words".to_string(),
        message: "x".to_string(),
    };
    metrics.record_write_error(Kind::EndpointSlice, Verb::Update, &conflict);
    metrics.record_write_error(Kind::EndpointSlice, Verb::Update, &conflict);
    metrics.record_write_error(Kind::EndpointSlice, Verb::Create, &server_error);
    metrics.record_write_error(
        Kind::EndpointSlice,
        Verb::Delete,
        &WriteError::uid_precondition(Kind::EndpointSlice, "web-abc", "a", "b"),
    );
    metrics.record_write_error(
        Kind::Endpoints,
        Verb::Update,
        &WriteError::NamespaceTerminating {
            kind: Kind::Endpoints.resource(),
            name: Name::new("web"),
            namespace: Name::new("doomed"),
        },
    );
    metrics.record_write_error(Kind::Endpoints, Verb::Create, &webhook);
    let text = scrape(&engine, &metrics);
    check_text_format(&text);
    assert!(text.contains(
        "# HELP sliced_write_errors_total Writes the API server refused, or that were not sent, by kind, verb and reason\n"
    ));
    assert!(text.contains("# TYPE sliced_write_errors_total counter\n"));
    for (series, n) in [
        (
            r#"sliced_write_errors_total{kind="EndpointSlice",verb="update",reason="Conflict"}"#,
            2.0,
        ),
        (
            r#"sliced_write_errors_total{kind="EndpointSlice",verb="create",reason="InternalError"}"#,
            1.0,
        ),
        (
            r#"sliced_write_errors_total{kind="EndpointSlice",verb="delete",reason="PreconditionFailed"}"#,
            1.0,
        ),
        (
            r#"sliced_write_errors_total{kind="Endpoints",verb="update",reason="NamespaceTerminating"}"#,
            1.0,
        ),
        (
            r#"sliced_write_errors_total{kind="Endpoints",verb="create",reason="Unknown"}"#,
            1.0,
        ),
    ] {
        assert_eq!(value(&text, series), n, "{series}");
    }
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("sliced_write_errors_total{"))
            .count(),
        5,
        "{text}"
    );
}

/// The service controller's node sync: one update per LoadBalancer Service whose backends moved,
/// counted and timed under upstream's names; a failed one counted as an error too.
#[test]
fn node_sync_fills_the_service_controller_metrics() {
    use sliced::engine::LoadBalancerOptions;
    use sliced::model::{Node, ServiceLoadBalancer, ServiceType};
    use sliced::reconcile::load_balancer::ProviderError;
    use sliced::reconcile::load_balancer::fake::{FakeProvider, Operation};

    let provider = Arc::new(FakeProvider::new());
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new());
    let engine = Engine::new(
        EngineOptions {
            controllers: Controllers::LOAD_BALANCER,
            load_balancers: LoadBalancerOptions {
                provider: Some(Arc::clone(&provider) as _),
                ..LoadBalancerOptions::default()
            },
            ..EngineOptions::default()
        },
        clock,
    );
    let node = |name: &str| Node {
        name: intern(name),
        ..Node::default()
    };
    engine.handle(Change::Node(node("a")));
    for name in ["api", "web"] {
        let mut s = Service::default();
        s.meta.namespace = intern("ns");
        s.meta.name = intern(name);
        s.service_type = ServiceType::LoadBalancer;
        s.load_balancer = Some(Box::new(ServiceLoadBalancer::default()));
        engine.handle(Change::Service(s));
    }
    engine.start();
    let sink = MemorySink::new(1);
    let metrics = Metrics::new();
    drain(&engine, &sink, &metrics);
    let text = scrape(&engine, &metrics);
    assert_eq!(
        value(&text, "service_controller_loadbalancer_sync_total"),
        0.0
    );

    provider.fail_next(
        Operation::UpdateHosts,
        "ns/web",
        ProviderError::failed("quota"),
    );
    engine.handle(Change::Node(node("b")));
    drain(&engine, &sink, &metrics);
    let text = scrape(&engine, &metrics);
    check_text_format(&text);
    assert_eq!(
        value(&text, "service_controller_loadbalancer_sync_total"),
        2.0
    );
    assert_eq!(value(&text, "service_controller_nodesync_error_total"), 1.0);
    assert_eq!(
        value(
            &text,
            "service_controller_update_loadbalancer_host_latency_seconds_count"
        ),
        2.0
    );
    assert_eq!(
        value(&text, "service_controller_nodesync_latency_seconds_count"),
        1.0
    );
}

//! The incremental path against the full path: the same churn trace through two engines, one
//! reconciling only what changed and one always in full, must give the same writes, in the same
//! order, and the same slices.

use std::time::Duration;

use proptest::prelude::*;

use crate::model;
use sliced::change::{Change, Step};
use sliced::engine::{EngineOptions, SyncOutcome};
use sliced::replay::{ReplayOptions, replay};
use sliced::sim::{self, ClusterSpec, TraceKind};

struct Outcome {
    writes: String,
    /// Every sync's time, service, controller, outcome and message, in order.
    syncs_made: String,
    objects: String,
    syncs: u64,
    incremental_syncs: u64,
    /// Syncs after the initial ones that wrote without error.
    later_successes: u64,
}

fn run(spec: &ClusterSpec, kind: TraceKind, seed: u64, max: usize, incremental: bool) -> Outcome {
    let cluster = sim::generate(spec);
    let trace = sim::trace(&cluster, kind, seed, 300);
    run_trace(&cluster, &trace, seed, max, incremental)
}

/// Where the trace starts: once the cold start over the cluster (every object there at time zero)
/// has settled, as `sliced simulate` runs one.
const TRACE_START: Duration = Duration::from_secs(60);

fn run_trace(
    cluster: &sim::Cluster,
    trace: &[Step],
    seed: u64,
    max: usize,
    incremental: bool,
) -> Outcome {
    let mut steps = cluster.snapshot.as_steps();
    steps.extend(trace.iter().map(|step| Step {
        at: step.at + TRACE_START,
        ..step.clone()
    }));
    let options = ReplayOptions {
        engine: EngineOptions {
            incremental,
            workers: 1,
            check_invariants: true,
            reconcile: sliced::reconcile::Options {
                max_endpoints_per_slice: max,
                prefer_same_traffic_distribution: false,
            },
            ..EngineOptions::default()
        },
        seed,
        // Drained, and once more after a resync (as informers do periodically), every service
        // holds what a full reconcile gives.
        resync_when_idle: true,
        ..ReplayOptions::default()
    };
    let result = replay(&steps, &options);
    assert!(!result.out_of_time);
    assert_eq!(result.unsettled, Some(Vec::new()), "settled");
    let writes: Vec<String> = result
        .writes
        .iter()
        .map(|w| format!("{:?} {:?}", w.verb, w.object))
        .collect();
    let stats = &result.stats;
    assert_eq!(stats.invariant_violations, 0, "{:?}", result.violations);
    assert!(stats.invariant_checks > 0);
    let syncs_made: Vec<String> = result
        .syncs
        .iter()
        .map(|r| {
            format!(
                "{:?} {} {} {:?} {:?}",
                r.at, r.service, r.controller, r.outcome, r.message
            )
        })
        .collect();
    Outcome {
        writes: writes.join("\n"),
        syncs_made: syncs_made.join("\n"),
        objects: format!("{:?}", result.objects),
        syncs: stats.syncs,
        incremental_syncs: stats.incremental_syncs,
        later_successes: result
            .syncs
            .iter()
            .filter(|r| r.at >= TRACE_START && r.outcome != SyncOutcome::Error)
            .count() as u64,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn incremental_and_full_syncs_write_the_same(
        seed in 0u64..1_000,
        kind in prop::sample::select(TraceKind::ALL.to_vec()),
        pods in 50usize..400,
        max in 2usize..20,
    ) {
        let spec = ClusterSpec {
            seed,
            pods,
            services: 8,
            namespaces: 2,
            huge_services: 0,
            max_service_pods: 200,
            ..ClusterSpec::default()
        };
        let full = run(&spec, kind, seed, max, false);
        let inc = run(&spec, kind, seed, max, true);
        prop_assert_eq!(full.incremental_syncs, 0);
        prop_assert_eq!(inc.writes, full.writes);
        prop_assert_eq!(inc.objects, full.objects);
        prop_assert_eq!(inc.syncs, full.syncs);
        prop_assert_eq!(inc.syncs_made, full.syncs_made);
        // A node lost early can fail every service's syncs until its pods are gone, as upstream's
        // do: such a trace is rejected as uninformative (at most one recovery sync per service).
        prop_assume!(inc.later_successes > spec.services as u64);
        // Otherwise the comparison means something only if the incremental path ran; the tests
        // below hold its share on steady churn.
        prop_assert!(
            inc.incremental_syncs > 0,
            "{:?}: {} of {} syncs incremental", kind, inc.incremental_syncs, inc.syncs
        );
    }
}

fn small_spec() -> ClusterSpec {
    ClusterSpec {
        seed: 7,
        pods: 300,
        services: 8,
        namespaces: 2,
        huge_services: 0,
        max_service_pods: 200,
        ..ClusterSpec::default()
    }
}

#[test]
fn mixed_churn_is_mostly_incremental() {
    let inc = run(&small_spec(), TraceKind::Mixed, 7, 10, true);
    assert!(
        inc.incremental_syncs * 2 >= inc.syncs,
        "{} of {} syncs incremental",
        inc.incremental_syncs,
        inc.syncs
    );
}

#[test]
fn readiness_churn_is_mostly_incremental() {
    let inc = run(&small_spec(), TraceKind::ReadinessFlap, 7, 10, true);
    // The cold start is full; nearly every sync after it is one pod flipping.
    assert!(
        inc.incremental_syncs * 10 >= inc.syncs * 8,
        "{} of {} syncs incremental",
        inc.incremental_syncs,
        inc.syncs
    );
}

/// A node moving zone is a change of the pods on it, in their services only: every later sync
/// stays incremental, and the endpoints on that node carry the new zone, as a full sync gives.
#[test]
fn node_zone_change_touches_only_its_pods() {
    let cluster = sim::generate(&small_spec());
    let snapshot = &cluster.snapshot;
    let node = snapshot.nodes[0].clone();
    let mut moved = node.clone();
    moved.labels = node
        .labels
        .with("topology.kubernetes.io/zone", "zone-elsewhere");
    let mut trace = vec![Step::change(Duration::from_secs(1), Change::Node(moved))];
    // Then one pod of every service flips readiness, so that every service syncs.
    for (i, service) in snapshot.services.iter().enumerate() {
        let Some(selector) = &service.selector else {
            continue;
        };
        let Some(pod) = snapshot.pods.iter().find(|p| {
            p.meta.namespace == service.meta.namespace && p.meta.labels.matches(selector)
        }) else {
            continue;
        };
        let mut pod = pod.clone();
        pod.ready = !pod.ready;
        pod.meta
            .set_resource_version(sliced::model::ResourceVersion::new(&format!("9{i:04}")));
        trace.push(Step::change(Duration::from_secs(2), Change::Pod(pod)));
    }
    let on_node = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.as_ref() == Some(&node.name))
        .count();
    assert!(
        on_node > 0,
        "the generated cluster puts pods on the first node"
    );

    let full = run_trace(&cluster, &trace, 7, 10, false);
    let inc = run_trace(&cluster, &trace, 7, 10, true);
    assert_eq!(inc.writes, full.writes);
    assert_eq!(inc.objects, full.objects);
    assert!(
        inc.objects.contains("zone-elsewhere"),
        "the endpoints on the moved node carry its new zone"
    );
    // Only the cold start is full: one sync per service.
    let cold_start = snapshot.services.len() as u64;
    assert_eq!(inc.syncs - inc.incremental_syncs, cold_start);
}

/// A node deleted while its pods still exist (the VM is gone; the pod GC has not deleted them
/// yet), and nothing else happens: the services selecting those pods are synced anyway, and their
/// endpoints on the gone node leave the slices at once. Upstream queues nothing for a node and
/// keeps them until the pods are deleted; no resync runs here to hide the difference.
#[test]
fn a_deleted_nodes_endpoints_leave_without_another_event() {
    let cluster = sim::generate(&small_spec());
    let snapshot = &cluster.snapshot;
    let node = snapshot.nodes[0].name.clone();
    let on_node: Vec<String> = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.as_ref() == Some(&node))
        .map(|p| p.meta.name.to_string())
        .collect();
    assert!(
        !on_node.is_empty(),
        "the generated cluster puts pods on the first node"
    );
    let mut steps = snapshot.as_steps();
    steps.push(Step::change(
        TRACE_START,
        Change::NodeDeleted { name: node.clone() },
    ));
    let result = replay(
        &steps,
        &ReplayOptions {
            engine: EngineOptions {
                workers: 1,
                check_invariants: true,
                ..EngineOptions::default()
            },
            seed: 7,
            resync_when_idle: false,
            ..ReplayOptions::default()
        },
    );
    assert!(!result.out_of_time);
    assert_eq!(
        result.unsettled,
        Some(Vec::new()),
        "settled without a resync"
    );
    let held: Vec<&sliced::model::EndpointSlice> = result
        .objects
        .iter()
        .filter_map(|o| match o {
            sliced::sink::Object::EndpointSlice(s) => Some(&**s),
            _ => None,
        })
        .collect();
    for slice in &held {
        for endpoint in &slice.endpoints {
            let pod = endpoint.target_ref.as_ref().and_then(|t| t.name.as_ref());
            assert!(
                pod.is_none_or(|p| !on_node.iter().any(|gone| gone == p.as_str())),
                "{} still holds {pod:?}, on the deleted node {node}",
                slice.meta.name
            );
        }
    }
    assert!(
        result.syncs.iter().any(|r| r.at >= TRACE_START),
        "the node's deletion synced its pods' services"
    );
    // Every other endpoint stays, as the model built from upstream's rules says.
    let mut final_state = snapshot.clone();
    final_state.nodes.retain(|n| n.name != node);
    let final_state = &final_state;
    let (observed, broken) = model::observed_slices(
        &held,
        &final_state.services,
        EngineOptions::default().reconcile.max_endpoints_per_slice,
    );
    assert!(broken.is_empty(), "slices breaking the rules: {broken:?}");
    let differences = model::differences(&model::slices(final_state), &observed);
    assert!(
        differences.is_empty(),
        "slices differ from the model: {differences:#?}"
    );
}

//! A restart over a cluster the controllers already keep correct writes nothing: a new engine
//! whose caches are filled from lists (trackers empty, nothing known of earlier writes) syncs every
//! service of every controller, and each sync finds its objects as it would write them.

use std::sync::Arc;

use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::queue::{Clock, VirtualClock};
use sliced::sim;
use sliced::sink::{MemorySink, Object};
use sliced::snapshot::{Snapshot, load_stored};

use crate::sink::common::Together;

fn engine() -> Engine {
    Engine::new(
        EngineOptions {
            controllers: Controllers::ALL,
            workers: 2,
            check_invariants: true,
            ..EngineOptions::default()
        },
        Arc::new(VirtualClock::new()) as Arc<dyn Clock>,
    )
}

/// Nodes, Services and Pods of the snapshot, and every object the API server holds, as a new
/// process's initial lists deliver them; then the start-up work.
fn listed(snapshot: &Snapshot, sink: &MemorySink) -> Engine {
    let engine = engine();
    snapshot.load_cluster_into(&engine);
    load_stored(&engine, sink.objects());
    engine.start();
    engine
}

/// Syncs until nothing is ready; returns (syncs, writes).
fn drain(engine: &Engine, sink: &MemorySink) -> (usize, usize) {
    let records = engine.sync_all_ready(sink);
    assert_eq!(
        engine.stats().invariant_violations,
        0,
        "{:?}",
        engine.take_violations()
    );
    let writes = records.iter().map(|r| r.writes.len()).sum();
    (records.len(), writes)
}

#[test]
fn a_restart_over_a_correct_cluster_writes_nothing() {
    // 20,000 pods in 1,000 services of heavy-tailed sizes (the largest of about 2,700 pods, its
    // Endpoints over capacity): slices of every fill, every controller's objects.
    let snapshot = sim::cluster(20_000, 1_000, 7);
    let sink = MemorySink::new(7);
    let first = listed(&snapshot, &sink);
    let (_, written) = drain(&first, &sink);
    assert!(
        written >= 2_000,
        "the first start writes every object: {written}"
    );
    let objects = sink.len();

    for round in 0..2 {
        let restarted = listed(&snapshot, &sink);
        let (syncs, writes) = drain(&restarted, &sink);
        assert!(
            syncs >= 2 * snapshot.services.len(),
            "round {round}: {syncs} syncs"
        );
        assert_eq!(writes, 0, "round {round}: a restart wrote {writes} times");
        assert_eq!(sink.len(), objects);
    }
}

/// The standby of a leader change has followed every change through its watches; taking over, it
/// writes nothing if the cluster is correct, and exactly what is due if something changed.
#[test]
fn a_standby_taking_over_writes_only_what_changed() {
    let snapshot = sim::cluster(5_000, 200, 11);
    let sink = MemorySink::new(11);
    let leader = listed(&snapshot, &sink);
    let standby = listed(&snapshot, &sink);
    drain(&leader, &sink);
    // The standby sees the leader's writes come back through its watch.
    for object in sink.objects() {
        standby.handle(match object {
            Object::EndpointSlice(s) => Change::EndpointSlice(s),
            Object::Endpoints(e) => Change::Endpoints(e),
        });
    }
    let (_, writes) = drain(&standby, &sink);
    assert_eq!(writes, 0, "a warm standby taking over wrote {writes} times");

    // One pod goes not ready while the standby leads: one slice and one Endpoints update.
    let mut pod = snapshot.pods[0].clone();
    pod.ready = false;
    pod.meta
        .set_resource_version(sliced::model::ResourceVersion::new("999999"));
    standby.handle(Change::Pod(pod));
    let (_, writes) = drain(&standby, &sink);
    assert_eq!(writes, 2);
}

/// Written in parallel, the cluster is as one write at a time leaves it: the invariant holds
/// after every sync, and a restart over it writes nothing.
#[test]
fn writes_sent_together_leave_a_cluster_a_restart_finds_correct() {
    let snapshot = sim::cluster(20_000, 1_000, 13);
    let sink = MemorySink::new(13);
    let first = listed(&snapshot, &sink);
    let records = first.sync_all_ready(&Together(&sink));
    assert_eq!(
        first.stats().invariant_violations,
        0,
        "{:?}",
        first.take_violations()
    );
    let written: usize = records.iter().map(|r| r.writes.len()).sum();
    assert!(
        written >= 2_000,
        "the first start writes every object: {written}"
    );
    assert_eq!(sink.writes().len(), written);
    let restarted = listed(&snapshot, &sink);
    let (_, writes) = drain(&restarted, &sink);
    assert_eq!(
        writes, 0,
        "a restart wrote {writes} times after parallel writes"
    );
}

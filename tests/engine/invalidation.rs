//! Every path that changes the managed slices, or what a sync reads, outside the engine's own
//! writes, one test each. Each runs the same events through an incremental engine and an engine
//! that syncs in full every time: their writes must be the same, and what they leave must be what
//! the independent model wants.

use std::sync::Arc;

use sliced::change::{Change, ChangeKind};
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::model::{EndpointSlice, Name, Pod, ResourceVersion, Service, Timestamp, Uid};
use sliced::queue::{Clock, VirtualClock};
use sliced::replay::FaultProfile;
use sliced::replay::faults::FaultySink;
use sliced::sim::{self, ServiceScenario};
use sliced::sink::{Kind, MemorySink, Object, Sink};
use sliced::snapshot::Snapshot;

use crate::model;

/// One engine, its clock and its API server.
struct Side {
    engine: Engine,
    clock: Arc<VirtualClock>,
    sink: MemorySink,
}

impl Side {
    fn new(incremental: bool) -> Side {
        let clock = Arc::new(VirtualClock::new());
        Side {
            engine: Engine::new(
                EngineOptions {
                    incremental,
                    workers: 1,
                    controllers: Controllers::ENDPOINTSLICE,
                    check_invariants: true,
                    ..EngineOptions::default()
                },
                clock.clone() as Arc<dyn Clock>,
            ),
            clock,
            sink: MemorySink::new(5),
        }
    }

    /// Syncs everything ready now and later, through `sink` (the plain API server if `None`).
    fn drain(&self, sink: Option<&dyn Sink>) {
        sliced::replay::drain(&self.engine, &self.clock, sink.unwrap_or(&self.sink));
        let stats = self.engine.stats();
        assert_eq!(
            stats.invariant_violations,
            0,
            "{:?}",
            self.engine.take_violations()
        );
    }

    fn handle(&self, change: Change) {
        self.engine.handle(change);
    }

    fn slices(&self) -> Vec<Arc<EndpointSlice>> {
        self.sink
            .objects()
            .into_iter()
            .filter_map(|o| o.slice_arc().cloned())
            .collect()
    }

    fn writes(&self) -> Vec<String> {
        self.sink
            .writes()
            .iter()
            .map(|w| format!("{:?} {:?}", w.verb, w.sent))
            .collect()
    }
}

/// Both engines, fed the same.
struct Pair {
    incremental: Side,
    full: Side,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            incremental: Side::new(true),
            full: Side::new(false),
        }
    }

    /// Two engines that have taken in `snapshot` and synced it.
    fn loaded(snapshot: &Snapshot) -> Pair {
        let pair = Pair::new();
        pair.each(|side| {
            load(side, snapshot);
            side.drain(None);
        });
        pair
    }

    fn each(&self, f: impl Fn(&Side)) {
        f(&self.incremental);
        f(&self.full);
    }

    /// Each change delivered to both, each followed by every sync it leads to.
    fn deliver(&self, changes: &[Change]) {
        self.each(|side| {
            for change in changes {
                side.handle(change.clone());
                side.drain(None);
            }
        });
    }

    /// Same writes; what is left is the model's; a sync of every service would write nothing.
    fn check(&self, snapshot: &Snapshot) {
        if let Some(d) =
            crate::faults::first_difference(&self.incremental.writes(), &self.full.writes())
        {
            panic!("writes differ: {d}");
        }
        let slices = self.incremental.slices();
        let refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        let (observed, broken) = model::observed_slices(&refs, &snapshot.services, 100);
        assert!(broken.is_empty(), "{broken:?}");
        let differences = model::differences(&model::slices(snapshot), &observed);
        assert!(differences.is_empty(), "{differences:#?}");
        self.each(|side| {
            side.engine.resync();
            side.drain(None);
            assert!(side.engine.check_all().is_empty());
        });
    }
}

/// A service of `pods` pods, as a snapshot (for the model) and its changes.
fn scenario(pods: usize) -> (ServiceScenario, Snapshot) {
    let scenario = sim::single_service(pods);
    let snapshot = Snapshot {
        services: vec![scenario.service.clone()],
        pods: scenario.pods.clone(),
        nodes: scenario.nodes.values().cloned().collect(),
        ..Snapshot::default()
    };
    (scenario, snapshot)
}

fn load(side: &Side, snapshot: &Snapshot) {
    for node in &snapshot.nodes {
        side.handle(Change::Node(node.clone()));
    }
    for service in &snapshot.services {
        side.handle(Change::Service(service.clone()));
    }
    for pod in &snapshot.pods {
        side.handle(Change::Pod(pod.clone()));
    }
}

/// Another version of `pod`, as the API server stores it: a new resourceVersion.
fn version(pod: &Pod, rv: u64, change: impl FnOnce(&mut Pod)) -> Pod {
    let mut pod = pod.clone();
    change(&mut pod);
    pod.meta
        .set_resource_version(ResourceVersion::new(&rv.to_string()));
    pod
}

/// Sets `snapshot`'s pod of the same name to `pod` (or adds it), and returns the change.
fn apply_pod(snapshot: &mut Snapshot, pod: Pod) -> Change {
    match snapshot
        .pods
        .iter_mut()
        .find(|p| p.meta.name == pod.meta.name)
    {
        Some(p) => *p = pod.clone(),
        None => snapshot.pods.push(pod.clone()),
    }
    Change::Pod(pod)
}

/// A pod of the service not yet in it.
fn new_pod(scenario: &ServiceScenario, ordinal: usize) -> Pod {
    let mut pod = version(&scenario.pods[0], 100 + ordinal as u64, |p| {
        p.meta.name = Name::new(&format!("web-new-{ordinal}"));
        p.meta
            .set_uid(Uid::new(&format!("00000000-0000-4000-8888-{ordinal:012}")));
    });
    pod.set_ips([std::net::IpAddr::from([10, 9, 0, ordinal as u8])]);
    pod
}

/// A restarted engine has not written the slices it finds: they are untracked. A relist then
/// finds one of them gone (the watch missed its deletion): upstream's tracker queues nothing, but
/// the next sync, queued by a new pod, must put back every endpoint.
#[test]
fn a_relist_that_finds_an_untracked_slice_gone() {
    let (scenario, mut snapshot) = scenario(30);
    let pair = Pair::loaded(&snapshot);
    // Restart both: fresh engines over the same API servers.
    let pair = Pair {
        incremental: restarted(pair.incremental, true, &snapshot),
        full: restarted(pair.full, false, &snapshot),
    };
    pair.each(|side| {
        let slice = side.slices()[0].clone();
        side.sink
            .remove_external(Kind::EndpointSlice, &slice.meta.namespace, &slice.meta.name);
        let listed: std::collections::HashSet<(Name, Name)> = side
            .slices()
            .iter()
            .map(|s| (s.meta.namespace.clone(), s.meta.name.clone()))
            .collect();
        side.engine.relisted(ChangeKind::EndpointSlice, &listed);
        side.drain(None);
    });
    let change = apply_pod(&mut snapshot, new_pod(&scenario, 1));
    pair.deliver(&[change]);
    pair.check(&snapshot);
}

/// A new engine over `side`'s API server, its caches filled from lists.
fn restarted(side: Side, incremental: bool, snapshot: &Snapshot) -> Side {
    let fresh = Side {
        sink: side.sink,
        ..Side::new(incremental)
    };
    load(&fresh, snapshot);
    for slice in fresh.slices() {
        fresh.handle(Change::EndpointSlice(slice));
    }
    fresh.engine.start();
    fresh.drain(None);
    fresh
}

/// A slice the engine wrote is deleted and created again under its name while the watch is down:
/// the relist shows another uid under a known name. Upstream keeps expecting the old uid and
/// stays stale for ever; sliced takes it as a deletion and a creation.
#[test]
fn a_tracked_slice_replaced_under_its_name_is_not_stale_for_ever() {
    let (scenario, mut snapshot) = scenario(30);
    let pair = Pair::new();
    pair.each(|side| {
        load(side, &snapshot);
        side.drain(None);
        let slice = side.slices()[0].clone();
        side.sink
            .remove_external(Kind::EndpointSlice, &slice.meta.namespace, &slice.meta.name);
        let mut copy = EndpointSlice::clone(&slice);
        copy.meta.uid = Name::default();
        copy.endpoints.truncate(10);
        if let Ok(Object::EndpointSlice(stored)) = side.sink.apply_external(Object::from(copy)) {
            side.handle(Change::EndpointSlice(stored));
        }
        side.drain(None);
    });
    let change = apply_pod(&mut snapshot, new_pod(&scenario, 2));
    pair.deliver(&[change]);
    pair.each(|side| assert_eq!(side.engine.stats().stale, 0, "stale syncs"));
    pair.check(&snapshot);
}

/// A Service deleted and created again under its name (a new uid) while the garbage collector
/// lags: the old slices are not the new Service's, and their late deletion changes nothing.
#[test]
fn a_recreated_service_while_the_garbage_collector_lags() {
    let (scenario, mut snapshot) = scenario(30);
    let pair = Pair::loaded(&snapshot);
    let mut recreated: Service = scenario.service.clone();
    recreated.meta.uid = Name::new("00000000-0000-4000-9000-00000000beef");
    recreated.meta.resource_version = Name::new("77");
    recreated.meta.creation_timestamp = Timestamp::from_second(1_700_000_600).ok();
    snapshot.services = vec![recreated.clone()];
    pair.each(|side| {
        side.handle(Change::ServiceDeleted {
            namespace: recreated.meta.namespace.clone(),
            name: recreated.meta.name.clone(),
        });
        side.drain(None);
        side.handle(Change::Service(recreated.clone()));
        side.drain(None);
        // The collector catches up: the old uid's slices go.
        for slice in side.slices() {
            if !slice.is_owned_by(&recreated.meta.uid) {
                side.sink.remove_external(
                    Kind::EndpointSlice,
                    &slice.meta.namespace,
                    &slice.meta.name,
                );
                side.handle(Change::EndpointSliceDeleted {
                    namespace: slice.meta.namespace.clone(),
                    name: slice.meta.name.clone(),
                });
            }
        }
        side.drain(None);
    });
    let change = apply_pod(&mut snapshot, new_pod(&scenario, 3));
    pair.deliver(&[change]);
    pair.check(&snapshot);
}

/// Creates land but their answers are lost: the engine believes they failed, retries (writing a
/// second slice with the same endpoints), and only later sees the first through its watch. The
/// duplicates must go, and no endpoint may be lost or kept twice.
#[test]
fn writes_whose_answers_are_lost() {
    let (scenario, mut snapshot) = scenario(30);
    let pair = Pair::new();
    pair.each(|side| {
        load(side, &snapshot);
        let lossy = FaultySink::new(
            &side.sink,
            FaultProfile {
                answer_lost: 1.0,
                ..FaultProfile::none()
            },
            3,
        );
        // The first sync's create lands unanswered; its retry a second later lands unanswered too.
        side.drain(Some(&lossy));
        assert!(side.engine.stats().sync_errors > 0);
        // The watch delivers what landed, late.
        for echo in lossy.take_echoes() {
            side.handle(echo);
        }
        side.drain(None);
    });
    let change = apply_pod(&mut snapshot, new_pod(&scenario, 4));
    pair.deliver(&[change]);
    pair.check(&snapshot);
}

/// A pod deleted and created again under its name with the same IP while the watch was down: the
/// relist shows a new uid but no change upstream's projection sees, so nothing is queued. The
/// next sync, whatever queues it, must write the new uid, as a full sync does.
#[test]
fn a_pod_replaced_under_its_name_while_the_watch_was_down() {
    let (scenario, mut snapshot) = scenario(30);
    let pair = Pair::loaded(&snapshot);
    let replaced = version(&scenario.pods[5], 50, |p| {
        p.meta
            .set_uid(Uid::new("00000000-0000-4000-8000-0000000fffff"));
    });
    let quiet = apply_pod(&mut snapshot, replaced);
    let loud = apply_pod(&mut snapshot, new_pod(&scenario, 5));
    pair.deliver(&[quiet, loud]);
    pair.check(&snapshot);
    let slices = pair.incremental.slices();
    let uid = slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .filter_map(|e| e.target_ref.as_ref())
        .find(|t| t.name.as_deref() == Some(scenario.pods[5].meta.name.as_str()))
        .and_then(|t| t.uid.clone());
    assert_eq!(
        uid.map(|u| u.as_str().to_string()),
        Some("00000000-0000-4000-8000-0000000fffff".to_string())
    );
}

/// A pod that went not ready and back while the watch was down: the relist shows it ready as
/// before, with a later Ready transition. Nothing is queued; the next sync's trigger time must
/// be what a full sync computes.
#[test]
fn a_readiness_flap_a_relist_skipped() {
    let (scenario, mut snapshot) = scenario(30);
    let pair = Pair::loaded(&snapshot);
    let flapped = version(&scenario.pods[7], 60, |p| {
        p.set_ready_transition(Timestamp::from_second(1_700_000_900).ok());
    });
    let quiet = apply_pod(&mut snapshot, flapped);
    let mut other = version(&scenario.pods[8], 61, |p| p.ready = false);
    other.set_ready_transition(Timestamp::from_second(1_700_000_950).ok());
    let loud = apply_pod(&mut snapshot, other);
    pair.deliver(&[quiet, loud]);
    pair.check(&snapshot);
}

/// The model itself, on upstream's rules: a pod without IPs and a terminal pod publish nothing; a
/// terminating pod is published not ready but serving.
#[test]
fn the_model_follows_upstreams_rules() {
    let (scenario, mut snapshot) = scenario(4);
    let mut pod = scenario.pods[0].clone();
    pod.set_ips(std::iter::empty());
    pod.has_pod_ip = false;
    snapshot.pods[0] = pod;
    snapshot.pods[1].phase = sliced::model::PodPhase::Succeeded;
    let mut terminating = snapshot.pods[2].to_builder();
    terminating.meta.deletion_timestamp = Timestamp::from_second(1_700_000_000).ok();
    snapshot.pods[2] = Pod::from(terminating);
    let wanted = model::slices(&snapshot);
    let endpoints: Vec<&model::SliceEndpoint> = wanted.values().flatten().collect();
    assert_eq!(endpoints.len(), 2);
    let terminating = endpoints
        .iter()
        .find(|e| e.pod == snapshot.pods[2].meta.name.as_str())
        .expect("published");
    assert!(!terminating.ready && terminating.serving && terminating.terminating);
}

/// Pods of two templates that resolve a named port differently: two port groups. A sync whose
/// changes touch one group places it incrementally; one the incremental path cannot place is in
/// full, but with its trigger time taken from the changed pods alone. Readiness moves, a new pod
/// and a deleted one must be written with the trigger times a full sync computes from every pod.
#[test]
fn two_port_groups_are_written_with_the_trigger_time_of_the_changed_pods() {
    let (scenario, mut snapshot) = scenario(40);
    sim::two_templates(&mut snapshot.services[0], &mut snapshot.pods);
    let pair = Pair::loaded(&snapshot);
    let mut second = 1_700_001_000;
    for i in [3, 4, 11, 3] {
        second += 10;
        let pod = snapshot.pods[i].clone();
        let flipped = version(&pod, second as u64, |p| {
            p.ready = !p.ready;
            p.set_ready_transition(Timestamp::from_second(second).ok());
        });
        let change = apply_pod(&mut snapshot, flipped);
        pair.deliver(&[change]);
    }
    let mut added = new_pod(&scenario, 7);
    added.named_ports = snapshot.pods[1].named_ports.clone();
    added.set_ready_transition(Timestamp::from_second(second + 10).ok());
    let change = apply_pod(&mut snapshot, added);
    pair.deliver(&[change]);
    let gone = snapshot.pods.remove(6);
    pair.deliver(&[Change::PodDeleted {
        namespace: gone.meta.namespace.clone(),
        name: gone.meta.name.clone(),
    }]);
    pair.check(&snapshot);
    let slices = pair.incremental.slices();
    let groups: std::collections::HashSet<String> =
        slices.iter().map(|s| format!("{:?}", s.ports)).collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
}

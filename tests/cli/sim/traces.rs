//! Churn traces: every kind replays consistently onto the generated snapshot with `apply`, is
//! reproducible, and does what its name promises.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use sliced::change::{Change, Step};
use sliced::model::{Name, Pod, PodPhase, Timestamp};
use sliced::sim::{
    Applied, Churn, Cluster, ClusterSpec, EPOCH_SECOND, LABEL_TEMPLATE_HASH, NodeLoss, TraceKind,
    apply, apply_all, generate, trace,
};
use sliced::snapshot::Snapshot;

use super::{digest, small};

/// A generated trace holds changes only, never a fault.
fn change(step: &Step) -> &Change {
    match step.as_change() {
        Some(change) => change,
        None => panic!("a generated trace holds a fault: {step:?}"),
    }
}

fn time_of(at: Duration) -> Option<Timestamp> {
    Timestamp::from_second(EPOCH_SECOND + at.as_secs() as i64).ok()
}

type Key = (Name, Name);

/// What a trace did, counted while it is checked.
#[derive(Debug, Default)]
struct Counts {
    created: usize,
    got_ip: usize,
    ready: usize,
    not_ready: usize,
    terminated: usize,
    deleted: usize,
    relabelled: usize,
    node_updated: usize,
    node_created: usize,
    node_deleted: usize,
}

/// Replays steps onto the cluster's snapshot with `apply`, asserting at each step that it is one an
/// API server could have sent after the ones before.
struct Replay {
    snapshot: Snapshot,
    pods: HashMap<Key, Pod>,
    gone: HashSet<Key>,
    nodes: HashSet<Name>,
    nodes_gone: HashSet<Name>,
    /// Deployment names by namespace, to check label moves.
    apps: HashMap<Name, HashSet<Name>>,
    last_at: Option<Duration>,
    last_rv: u64,
    counts: Counts,
}

fn rv(pod: &Pod) -> u64 {
    let rv = pod.meta.resource_version();
    rv.as_str()
        .parse()
        .unwrap_or_else(|_| panic!("resourceVersion {rv:?}"))
}

impl Replay {
    fn new(c: &Cluster) -> Replay {
        let pods: HashMap<Key, Pod> = c
            .snapshot
            .pods
            .iter()
            .map(|p| ((p.meta.namespace.clone(), p.meta.name.clone()), p.clone()))
            .collect();
        let last_rv = pods.values().map(rv).max().unwrap_or(0);
        let mut apps: HashMap<Name, HashSet<Name>> = HashMap::new();
        for d in &c.deployments {
            apps.entry(d.namespace.clone())
                .or_default()
                .insert(d.name.clone());
        }
        Replay {
            snapshot: c.snapshot.clone(),
            pods,
            gone: HashSet::new(),
            nodes: c.snapshot.nodes.iter().map(|n| n.name.clone()).collect(),
            nodes_gone: HashSet::new(),
            apps,
            last_at: None,
            last_rv,
            counts: Counts::default(),
        }
    }

    fn run(c: &Cluster, steps: &[Step]) -> Replay {
        let mut r = Replay::new(c);
        for (i, step) in steps.iter().enumerate() {
            r.step(step, i);
        }
        r
    }

    fn step(&mut self, step: &Step, i: usize) {
        assert!(
            self.last_at.is_none_or(|last| step.at > last),
            "step {i}: time does not increase"
        );
        self.last_at = Some(step.at);
        let applied = apply(&mut self.snapshot, change(step));
        match change(step) {
            Change::Pod(pod) => self.pod(pod, step.at, applied, i),
            Change::PodDeleted { namespace, name } => {
                let key = (namespace.clone(), name.clone());
                assert_eq!(applied, Applied::Deleted, "step {i}: delete of {name}");
                assert!(self.pods.remove(&key).is_some());
                self.gone.insert(key);
                self.counts.deleted += 1;
            }
            Change::Node(node) => {
                assert!(!self.nodes_gone.contains(&node.name), "step {i}: node back");
                let new = self.nodes.insert(node.name.clone());
                assert_eq!(
                    applied,
                    if new {
                        Applied::Created
                    } else {
                        Applied::Replaced
                    }
                );
                if new {
                    self.counts.node_created += 1;
                } else {
                    self.counts.node_updated += 1;
                }
            }
            Change::NodeDeleted { name } => {
                assert_eq!(applied, Applied::Deleted, "step {i}: delete of node {name}");
                self.nodes.remove(name);
                self.nodes_gone.insert(name.clone());
                self.counts.node_deleted += 1;
            }
            other => panic!("step {i}: a trace changes pods and nodes only: {other:?}"),
        }
    }

    fn pod(&mut self, pod: &Pod, at: Duration, applied: Applied, i: usize) {
        let key = (pod.meta.namespace.clone(), pod.meta.name.clone());
        assert!(
            !self.gone.contains(&key),
            "step {i}: {} changed after its delete",
            pod.meta.name
        );
        let version = rv(pod);
        assert!(
            version > self.last_rv,
            "step {i}: resourceVersion went back"
        );
        self.last_rv = version;
        let now = time_of(at);
        let Some(old) = self.pods.insert(key, pod.clone()) else {
            assert_eq!(applied, Applied::Created, "step {i}");
            assert_eq!(pod.phase, PodPhase::Pending, "step {i}: created {pod:?}");
            assert!(!pod.has_pod_ip && pod.ips().is_empty() && !pod.ready);
            assert!(pod.node_name.is_none() && pod.meta.deletion_timestamp().is_none());
            assert_eq!(pod.meta.creation_timestamp(), now);
            self.counts.created += 1;
            return;
        };
        assert_eq!(applied, Applied::Replaced, "step {i}");
        assert_eq!(old.meta.uid(), pod.meta.uid(), "step {i}: another pod");
        let mut same = old.clone();
        same.meta.set_resource_version(pod.meta.resource_version());
        assert_ne!(&same, pod, "step {i}: an update that changes nothing");
        if old.meta.deletion_timestamp().is_some() {
            assert_eq!(old.meta.deletion_timestamp(), pod.meta.deletion_timestamp());
        } else if pod.meta.deletion_timestamp().is_some() {
            self.counts.terminated += 1;
        }
        if pod.meta.deletion_timestamp().is_some() {
            assert!(!pod.ready, "step {i}: terminating and ready");
        }
        if pod.ready {
            assert!(pod.has_pod_ip && pod.phase == PodPhase::Running);
        }
        if old.has_pod_ip {
            assert_eq!((old.ips(), &old.node_name), (pod.ips(), &pod.node_name));
        } else if pod.has_pod_ip {
            assert!(pod.node_name.is_some() && !pod.ips().is_empty());
            assert!(self.nodes.contains(pod.node_name.as_ref().expect("bound")));
            self.counts.got_ip += 1;
        }
        if old.ready != pod.ready {
            assert_eq!(pod.ready_transition(), now, "step {i}: ready_transition");
            if pod.ready {
                self.counts.ready += 1;
            } else {
                self.counts.not_ready += 1;
            }
        }
        let app = |p: &Pod| p.meta.labels.get("app").cloned();
        if app(&old) != app(pod) {
            let apps = &self.apps[&pod.meta.namespace];
            assert!(app(pod).is_some_and(|a| apps.contains(&a)), "step {i}");
            assert!(old.meta.deletion_timestamp().is_none());
            self.counts.relabelled += 1;
        }
    }
}

#[test]
fn every_kind_replays_consistently_and_reproducibly() {
    let c = generate(&small(3));
    for kind in TraceKind::ALL {
        let steps = trace(&c, kind, 11, 4_000);
        assert_eq!(steps.len(), 4_000, "{kind}");
        let r = Replay::run(&c, &steps);
        let n = &r.counts;
        match kind {
            TraceKind::RollingUpdate | TraceKind::Scale => {
                assert!(
                    n.created > 0 && n.got_ip > 0 && n.ready > 0,
                    "{kind}: {n:?}"
                );
                assert!(n.terminated > 0 && n.deleted > 0, "{kind}: {n:?}");
                assert_eq!(n.relabelled + n.node_updated + n.node_deleted, 0, "{kind}");
            }
            TraceKind::NodeLoss => {
                assert!(n.node_updated + n.node_deleted > 0, "{n:?}");
                assert!(
                    n.node_created > 0 && n.deleted > 0 && n.created > 0,
                    "{n:?}"
                );
                assert_eq!(n.relabelled, 0);
            }
            TraceKind::ReadinessFlap => {
                assert!(n.ready > 0 && n.not_ready > 0, "{n:?}");
                assert_eq!(n.created + n.deleted + n.terminated + n.relabelled, 0);
                assert_eq!(n.ready + n.not_ready, steps.len());
            }
            TraceKind::LabelMove => {
                assert!(n.relabelled > 0 && n.created > 0, "{n:?}");
                assert_eq!(n.deleted + n.terminated + n.node_created, 0, "{n:?}");
            }
            TraceKind::Mixed => {
                assert!(n.created > 0 && n.deleted > 0 && n.relabelled > 0, "{n:?}");
                assert!(n.not_ready > n.terminated, "flaps too: {n:?}");
            }
        }
        assert_eq!(
            digest(&steps),
            digest(&trace(&c, kind, 11, 4_000)),
            "{kind}"
        );
        assert_ne!(
            digest(&steps),
            digest(&trace(&c, kind, 12, 4_000)),
            "{kind}"
        );
    }
}

#[test]
fn a_long_mixed_trace_holds_every_kind_of_change() {
    let c = generate(&small(4));
    let steps = trace(&c, TraceKind::Mixed, 1, 30_000);
    let r = Replay::run(&c, &steps);
    let n = &r.counts;
    assert!(
        n.created > 0 && n.got_ip > 0 && n.ready > 0 && n.not_ready > 0,
        "{n:?}"
    );
    assert!(
        n.terminated > 0 && n.deleted > 0 && n.relabelled > 0,
        "{n:?}"
    );
    assert!(
        n.node_updated + n.node_deleted > 0 && n.node_created > 0,
        "{n:?}"
    );
    assert_eq!(r.snapshot.pods.len(), r.pods.len());
    // The indexed replay ends in the very same snapshot.
    let mut fast = c.snapshot.clone();
    apply_all(&mut fast, steps.iter().map(change));
    assert_eq!(digest(&fast), digest(&r.snapshot));
}

#[test]
fn a_long_trace_replays_onto_100k_pods_quickly() {
    let c = generate(&ClusterSpec::default());
    let start = Instant::now();
    let steps = trace(&c, TraceKind::Mixed, 1, 50_000);
    let mut snapshot = c.snapshot.clone();
    apply_all(&mut snapshot, steps.iter().map(change));
    let took = start.elapsed();
    assert_eq!(steps.len(), 50_000);
    // About 0.3 s in release.
    let limit = if cfg!(debug_assertions) { 60 } else { 5 };
    assert!(took < Duration::from_secs(limit), "took {took:?}");
}

#[test]
fn traces_are_prefixes_of_longer_ones() {
    let c = generate(&small(2));
    let short = trace(&c, TraceKind::Mixed, 5, 500);
    let long = trace(&c, TraceKind::Mixed, 5, 1_000);
    assert_eq!(digest(&short[..]), digest(&long[..500]));
    assert!(trace(&c, TraceKind::Mixed, 5, 0).is_empty());
}

fn key_of(pod: &Pod) -> Key {
    (pod.meta.namespace.clone(), pod.meta.name.clone())
}

/// A deployment of `lo..=hi` pods.
fn deployment_sized(c: &Cluster, lo: usize, hi: usize) -> usize {
    c.deployments
        .iter()
        .position(|d| (lo..=hi).contains(&d.pods.len()))
        .expect("a deployment of that size")
}

#[test]
fn a_rolling_update_replaces_every_pod_with_as_many_ready_new_ones() {
    let c = generate(&small(1));
    let d = deployment_sized(&c, 20, 200);
    let old: HashSet<Key> = c.deployments[d]
        .pods
        .iter()
        .map(|&i| key_of(&c.snapshot.pods[i]))
        .collect();
    let mut churn = Churn::new(&c, 9);
    assert!(churn.rolling_update(d));
    assert!(!churn.rolling_update(d), "one rollout at a time");
    churn.run_until_idle();
    assert!(!churn.rollout_in_progress(d));
    let hash = churn
        .deployment(d)
        .expect("deployment")
        .template_hash
        .clone();
    assert_ne!(hash, c.deployments[d].template_hash);
    let now = churn.deployment_pods(d);
    assert_eq!(now.len(), old.len());
    for p in &now {
        assert!(!old.contains(&key_of(p)));
        assert!(p.ready && p.meta.deletion_timestamp().is_none());
        assert_eq!(p.meta.labels.get(LABEL_TEMPLATE_HASH), Some(&hash));
    }

    let steps = churn.into_steps();
    let r = Replay::run(&c, &steps);
    assert_eq!(r.counts.created, old.len());
    assert_eq!(r.counts.deleted, old.len());
    // Every old pod was terminating (not ready) before it was deleted.
    let mut terminating = HashSet::new();
    for s in &steps {
        match change(s) {
            Change::Pod(p) if old.contains(&key_of(p)) => {
                assert!(p.meta.deletion_timestamp().is_some() && !p.ready);
                terminating.insert(key_of(p));
            }
            Change::PodDeleted { namespace, name } => {
                assert!(terminating.contains(&(namespace.clone(), name.clone())));
            }
            _ => {}
        }
    }
    assert_eq!(terminating, old);
}

#[test]
fn scaling_up_then_down_creates_then_removes_pods() {
    let c = generate(&small(1));
    let d = deployment_sized(&c, 8, 100);
    let n = c.deployments[d].pods.len();
    let mut churn = Churn::new(&c, 2);
    assert!(churn.scale(d, 2 * n));
    churn.run_until_idle();
    let pods = churn.deployment_pods(d);
    assert_eq!(pods.len(), 2 * n);
    let created = churn.steps().len();
    assert!(churn.scale(d, n / 2));
    churn.run_until_idle();
    assert_eq!(churn.deployment_pods(d).len(), n / 2);
    let steps = churn.into_steps();
    let r = Replay::run(&c, &steps);
    assert_eq!(r.counts.created, n);
    assert_eq!(r.counts.deleted, 2 * n - n / 2);
    // Scaling down only terminates and deletes.
    assert!(steps[created..].iter().all(|s| match change(s) {
        Change::Pod(p) => p.meta.deletion_timestamp().is_some(),
        change => matches!(change, Change::PodDeleted { .. }),
    }));
}

#[test]
fn a_node_lost_either_way_takes_its_pods_and_is_replaced() {
    let c = generate(&small(1));
    for how in [NodeLoss::NotReadyFirst, NodeLoss::NodeDeletedFirst] {
        let node = c.snapshot.nodes[0].name.clone();
        let on_node: HashSet<Key> = c
            .snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.as_ref() == Some(&node))
            .map(key_of)
            .collect();
        assert!(!on_node.is_empty());
        let mut churn = Churn::new(&c, 4);
        assert!(churn.node_loss(0, how));
        assert!(!churn.node_loss(0, how), "lost already");
        churn.run_until_idle();
        // Every deployment is back to its size, on other nodes.
        for (d, dep) in c.deployments.iter().enumerate() {
            let pods = churn.deployment_pods(d);
            assert_eq!(pods.len(), dep.pods.len());
            assert!(pods.iter().all(|p| p.node_name.as_ref() != Some(&node)));
        }
        let steps = churn.into_steps();
        let r = Replay::run(&c, &steps);
        assert_eq!(r.counts.deleted, on_node.len(), "{how:?}");
        assert_eq!(r.counts.created, on_node.len(), "{how:?}");
        assert_eq!((r.counts.node_deleted, r.counts.node_created), (1, 1));
        match how {
            NodeLoss::NotReadyFirst => {
                assert!(matches!(change(&steps[0]), Change::Node(n) if n.name == node && !n.ready));
                // The node's pods went not ready and terminating before they were deleted.
                let ready_on_node = c
                    .snapshot
                    .pods
                    .iter()
                    .filter(|p| on_node.contains(&key_of(p)) && p.ready)
                    .count();
                assert!(r.counts.not_ready >= ready_on_node);
                assert_eq!(r.counts.terminated, on_node.len());
            }
            NodeLoss::NodeDeletedFirst => {
                assert!(matches!(change(&steps[0]), Change::NodeDeleted { name } if *name == node));
                assert_eq!(r.counts.terminated, 0);
            }
        }
    }
}

#[test]
fn a_label_move_takes_a_pod_to_another_service_of_its_namespace() {
    let c = generate(&small(1));
    let mut churn = Churn::new(&c, 3);
    let moved = churn.label_move().expect("a pod to move");
    churn.run_until_idle();
    let pod = churn
        .pods()
        .find(|p| p.meta.name == moved)
        .expect("still there");
    let before = c
        .snapshot
        .pods
        .iter()
        .find(|p| p.meta.name == moved)
        .expect("generated");
    let (was, is) = (before.meta.labels.get("app"), pod.meta.labels.get("app"));
    assert_ne!(was, is);
    let target = c
        .deployments
        .iter()
        .find(|d| Some(&d.name) == is)
        .expect("a service's app");
    assert_eq!(target.namespace, pod.meta.namespace);
    assert_eq!(pod.meta.labels.get("tier"), Some(&target.tier));
    // Its old ReplicaSet replaced it.
    let owner = c
        .deployments
        .iter()
        .position(|d| Some(&d.name) == was)
        .expect("owner");
    assert_eq!(
        churn.deployment_pods(owner).len(),
        c.deployments[owner].pods.len()
    );
    Replay::run(&c, churn.steps());
}

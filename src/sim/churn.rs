//! The churn simulator: a discrete-event simulation over a copy of a generated cluster. Controllers
//! (ReplicaSets, the deployment rollout, the kubelet, the node lifecycle) are actions on an agenda in
//! virtual time; each action checks the current state when it runs, so interleaved episodes never
//! touch a pod that is gone and every emitted change is one an API server could have sent.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use ahash::RandomState;

use super::cluster::{
    Cluster, Deployment, EPOCH_SECOND, LABEL_TEMPLATE_HASH, pod_ips, resource_version, timestamp,
};
use super::keyset::KeySet;
use super::rng::Rng;
use super::trace::TraceKind;
use crate::change::Change;
use crate::change::Step;
use crate::model::{Labels, Name, Node, Pod, PodPhase, ResourceVersion};

/// After this many actions without a change, `run` stops: nothing in the cluster can move.
const IDLE_LIMIT: usize = 100_000;
/// A rollout that has not finished after this many checks gives up (pods that never become ready).
pub(super) const ROLLOUT_TICKS: u32 = 2_000;
/// Grace period written into deletionTimestamp.
const GRACE_SECONDS: i64 = 30;

/// A live pod and the deployment whose ReplicaSet owns it; `None` once relabelled out of it.
pub(super) struct Live {
    pub(super) pod: Pod,
    pub(super) owner: Option<usize>,
    /// Index of its node in `Churn::nodes`, once scheduled.
    pub(super) node: Option<usize>,
}

pub(super) struct Dep {
    pub(super) d: Deployment,
    /// Labels of the current template's pods.
    pub(super) labels: Labels,
    pub(super) members: KeySet<Name>,
    pub(super) replicas: usize,
    /// Members with a deletionTimestamp: `members.len() - terminating` is what the ReplicaSet
    /// counts, without a scan.
    pub(super) terminating: usize,
    /// Checks done so far, while a rollout is in progress.
    pub(super) rollout: Option<u32>,
}

pub(super) struct NodeState {
    pub(super) node: Node,
    pub(super) zone: usize,
    pub(super) exists: bool,
    /// Pods bound to it, so that losing it needs no scan of every pod.
    pub(super) pods: KeySet<Name>,
}

#[derive(Clone, Debug)]
pub(super) enum Action {
    Start(TraceKind),
    /// Scheduled and running with an IP; the number is the tries left to find a node.
    Running(Name, u8),
    Ready(Name),
    NotReady(Name),
    /// deletionTimestamp set; a delete follows after a time in this window (ms), if any.
    Terminate(Name, Option<(u64, u64)>),
    Delete(Name),
    /// The ReplicaSet of a deployment brings its pod count back to `replicas`.
    Reconcile(usize),
    RolloutTick(usize),
    NodeDelete(usize),
    /// A replacement node joins this zone.
    NodeJoin(usize),
}

struct Scheduled {
    at: Duration,
    seq: u64,
    action: Action,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A simulation of churn on a generated cluster. `trace` drives one; tests and tools can also start
/// episodes by hand and `run_until_idle`.
pub struct Churn {
    pub(super) rng: Rng,
    pub(super) now: Duration,
    last_at: Option<Duration>,
    seq: u64,
    agenda: BinaryHeap<Reverse<Scheduled>>,
    pub(super) pods: HashMap<Name, Live, RandomState>,
    /// Every live pod, for uniform random picks.
    pub(super) all: KeySet<Name>,
    pub(super) deps: Vec<Dep>,
    pub(super) by_namespace: HashMap<Name, Vec<usize>, RandomState>,
    pub(super) nodes: Vec<NodeState>,
    pub(super) schedulable: KeySet<usize>,
    pub(super) zone_next: Vec<usize>,
    pub(super) next_pod_ip: u32,
    pub(super) next_rv: u64,
    pub(super) max_replicas: usize,
    pub(super) rollouts_running: usize,
    pub(super) node_losses_running: usize,
    pub(super) steps: Vec<Step>,
}

impl Churn {
    /// A simulation starting from `cluster`'s objects at virtual time zero.
    pub fn new(cluster: &Cluster, seed: u64) -> Churn {
        let mut pods =
            HashMap::with_capacity_and_hasher(cluster.snapshot.pods.len(), RandomState::new());
        let mut nodes = Vec::with_capacity(cluster.snapshot.nodes.len());
        let mut schedulable = KeySet::new();
        for (z, zone) in cluster.zones.iter().enumerate() {
            for &n in &zone.nodes {
                if let Some(node) = cluster.snapshot.nodes.get(n) {
                    schedulable.insert(nodes.len());
                    nodes.push(NodeState {
                        node: node.clone(),
                        zone: z,
                        exists: true,
                        pods: KeySet::new(),
                    });
                }
            }
        }
        let node_index: HashMap<Name, usize, RandomState> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node.name.clone(), i))
            .collect();
        let mut all = KeySet::with_capacity(cluster.snapshot.pods.len());
        let mut deps = Vec::with_capacity(cluster.deployments.len());
        let mut by_namespace: HashMap<Name, Vec<usize>, RandomState> = HashMap::default();
        for (i, d) in cluster.deployments.iter().enumerate() {
            let mut members = KeySet::with_capacity(d.pods.len());
            for &p in &d.pods {
                let Some(pod) = cluster.snapshot.pods.get(p) else {
                    continue;
                };
                let node = pod
                    .node_name
                    .as_ref()
                    .and_then(|n| node_index.get(n))
                    .copied();
                if let Some(state) = node.and_then(|n| nodes.get_mut(n)) {
                    state.pods.insert(pod.meta.name.clone());
                }
                members.insert(pod.meta.name.clone());
                all.insert(pod.meta.name.clone());
                pods.insert(
                    pod.meta.name.clone(),
                    Live {
                        pod: pod.clone(),
                        owner: Some(i),
                        node,
                    },
                );
            }
            by_namespace.entry(d.namespace.clone()).or_default().push(i);
            deps.push(Dep {
                labels: d.pod_labels(),
                d: Deployment {
                    pods: Vec::new(),
                    ..d.clone()
                },
                replicas: members.len(),
                terminating: 0,
                members,
                rollout: None,
            });
        }
        Churn {
            rng: Rng::stream(seed, 0x0074_7261_6365),
            now: Duration::ZERO,
            last_at: None,
            seq: 0,
            agenda: BinaryHeap::new(),
            pods,
            all,
            deps,
            by_namespace,
            nodes,
            schedulable,
            zone_next: cluster.zones.iter().map(|z| z.nodes.len()).collect(),
            next_pod_ip: cluster.next_pod_ip,
            next_rv: cluster.next_resource_version,
            max_replicas: cluster
                .spec
                .max_service_pods
                .max(cluster.spec.huge_service_pods),
            rollouts_running: 0,
            node_losses_running: 0,
            steps: Vec::new(),
        }
    }

    /// Virtual time of the last action run.
    pub fn now(&self) -> Duration {
        self.now
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    pub fn into_steps(self) -> Vec<Step> {
        self.steps
    }

    /// The live pods the deployment's ReplicaSets own, terminating ones included.
    pub fn deployment_pods(&self, deployment: usize) -> Vec<&Pod> {
        self.deps.get(deployment).map_or_else(Vec::new, |d| {
            d.members
                .iter()
                .filter_map(|n| self.pods.get(n).map(|l| &l.pod))
                .collect()
        })
    }

    /// Every live pod, in a stable order.
    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.all
            .iter()
            .filter_map(|n| self.pods.get(n).map(|l| &l.pod))
    }

    pub fn deployment(&self, deployment: usize) -> Option<&Deployment> {
        self.deps.get(deployment).map(|d| &d.d)
    }

    pub fn rollout_in_progress(&self, deployment: usize) -> bool {
        self.deps
            .get(deployment)
            .is_some_and(|d| d.rollout.is_some())
    }

    /// Runs actions until `max_steps` changes were emitted or nothing more can happen.
    pub fn run(&mut self, max_steps: usize) {
        let mut idle = 0;
        while self.steps.len() < max_steps && idle < IDLE_LIMIT {
            let before = self.steps.len();
            if !self.step() {
                break;
            }
            idle = if self.steps.len() == before {
                idle + 1
            } else {
                0
            };
        }
    }

    /// Runs every episode started by hand to its end.
    pub fn run_until_idle(&mut self) {
        self.run(usize::MAX);
    }

    /// Runs the next action; false when the agenda is empty.
    fn step(&mut self) -> bool {
        let Some(Reverse(next)) = self.agenda.pop() else {
            return false;
        };
        self.now = self.now.max(next.at);
        self.execute(next.action);
        true
    }

    pub(super) fn schedule(&mut self, after: Duration, action: Action) {
        self.seq += 1;
        self.agenda.push(Reverse(Scheduled {
            at: self.now + after,
            seq: self.seq,
            action,
        }));
    }

    pub(super) fn schedule_start(&mut self, after: Duration, kind: TraceKind) {
        self.schedule(after, Action::Start(kind));
    }

    pub(super) fn execute(&mut self, action: Action) {
        match action {
            Action::Start(kind) => self.start(kind),
            Action::Running(name, tries) => self.pod_running(&name, tries),
            Action::Ready(name) => {
                // A kubelet that is gone reports nothing: pods on a lost node stay not ready.
                let healthy = self
                    .pods
                    .get(&name)
                    .and_then(|l| l.node)
                    .and_then(|n| self.nodes.get(n))
                    .is_some_and(|n| n.exists && n.node.ready);
                if !healthy {
                    return;
                }
                self.update_pod(
                    &name,
                    |p| p.has_pod_ip && !terminating(p) && !p.ready,
                    |p, s| {
                        p.ready = true;
                        p.set_ready_transition(timestamp(s));
                    },
                );
            }
            Action::NotReady(name) => {
                self.update_pod(
                    &name,
                    |p| p.ready,
                    |p, s| {
                        p.ready = false;
                        p.set_ready_transition(timestamp(s));
                    },
                );
            }
            Action::Terminate(name, delete) => self.terminate(&name, delete),
            Action::Delete(name) => self.delete(&name),
            Action::Reconcile(dep) => self.reconcile(dep),
            Action::RolloutTick(dep) => self.rollout_tick(dep),
            Action::NodeDelete(node) => self.node_delete(node),
            Action::NodeJoin(zone) => self.node_join(zone),
        }
    }

    /// The time of the next step: now, or just after the previous step, so times strictly increase.
    pub(super) fn next_at(&mut self) -> Duration {
        let at = match self.last_at {
            Some(last) if self.now <= last => last + Duration::from_micros(1),
            _ => self.now,
        };
        self.last_at = Some(at);
        at
    }

    pub(super) fn emit(&mut self, change: Change) {
        let at = self.next_at();
        self.steps.push(Step::change(at, change));
    }

    pub(super) fn take_rv(&mut self) -> Name {
        self.next_rv += 1;
        resource_version(self.next_rv - 1)
    }

    /// Unix second of virtual time `at`: API server timestamps have whole seconds.
    pub(super) fn second(at: Duration) -> i64 {
        EPOCH_SECOND + at.as_secs() as i64
    }

    /// Applies `change` to a live pod for which `when` holds, with a fresh resourceVersion, and emits
    /// the pod. False when the pod is gone or `when` fails.
    pub(super) fn update_pod(
        &mut self,
        name: &Name,
        when: impl FnOnce(&Pod) -> bool,
        change: impl FnOnce(&mut Pod, i64),
    ) -> bool {
        if !self.pods.get(name).is_some_and(|l| when(&l.pod)) {
            return false;
        }
        let at = self.next_at();
        let rv = self.take_rv();
        let Some(live) = self.pods.get_mut(name) else {
            return false;
        };
        change(&mut live.pod, Self::second(at));
        live.pod
            .meta
            .set_resource_version(ResourceVersion::new(&rv));
        let pod = live.pod.clone();
        self.steps.push(Step::change(at, Change::Pod(pod)));
        true
    }

    /// A new Pending pod of the deployment's current template; it gets a node and IP shortly.
    pub(super) fn create_pod(&mut self, dep: usize) {
        let at = self.next_at();
        let rv = self.next_rv;
        let Some(d) = self.deps.get_mut(dep) else {
            return;
        };
        let pod = d.d.new_pod(&d.labels, &mut self.rng, rv, Self::second(at));
        d.d.next_ordinal += 1;
        self.next_rv += 1;
        let name = pod.meta.name.clone();
        d.members.insert(name.clone());
        self.all.insert(name.clone());
        self.pods.insert(
            name.clone(),
            Live {
                pod: pod.clone(),
                owner: Some(dep),
                node: None,
            },
        );
        self.steps.push(Step::change(at, Change::Pod(pod)));
        let after = self.rng.millis(500, 3_000);
        self.schedule(after, Action::Running(name, 30));
    }

    pub(super) fn pod_running(&mut self, name: &Name, tries: u8) {
        let Some(live) = self.pods.get(name) else {
            return;
        };
        if live.pod.has_pod_ip || terminating(&live.pod) {
            return;
        }
        let dual = live
            .owner
            .and_then(|d| self.deps.get(d))
            .is_some_and(|d| d.d.dual_stack);
        let Some(&node) = self.schedulable.pick(&mut self.rng) else {
            // Unschedulable until a node joins.
            if tries > 0 {
                self.schedule(
                    Duration::from_secs(5),
                    Action::Running(name.clone(), tries - 1),
                );
            }
            return;
        };
        let node_name = self.nodes[node].node.name.clone();
        self.nodes[node].pods.insert(name.clone());
        if let Some(live) = self.pods.get_mut(name) {
            live.node = Some(node);
        }
        let ips = pod_ips(self.next_pod_ip, dual);
        self.next_pod_ip = self.next_pod_ip.wrapping_add(1);
        self.update_pod(
            name,
            |_| true,
            |p, s| {
                p.node_name = Some(node_name);
                p.phase = PodPhase::Running;
                p.has_pod_ip = true;
                p.set_ips(ips.iter().copied());
                p.ready = false;
                p.set_ready_transition(timestamp(s));
            },
        );
        let after = self.rng.millis(1_000, 8_000);
        self.schedule(after, Action::Ready(name.clone()));
    }

    pub(super) fn terminate(&mut self, name: &Name, delete: Option<(u64, u64)>) {
        let done = self.update_pod(
            name,
            |p| !terminating(p),
            |p, s| {
                p.meta.set_deletion_timestamp(timestamp(s + GRACE_SECONDS));
                if p.ready {
                    p.ready = false;
                    p.set_ready_transition(timestamp(s));
                }
            },
        );
        if !done {
            return;
        }
        if let Some((lo, hi)) = delete {
            let after = self.rng.millis(lo, hi);
            self.schedule(after, Action::Delete(name.clone()));
        }
        // A terminating pod no longer counts towards its ReplicaSet's replicas.
        if let Some(owner) = self.pods.get(name).and_then(|l| l.owner) {
            if let Some(d) = self.deps.get_mut(owner) {
                d.terminating += 1;
            }
            self.schedule(Duration::from_millis(100), Action::Reconcile(owner));
        }
    }

    pub(super) fn delete(&mut self, name: &Name) {
        let Some(live) = self.pods.remove(name) else {
            return;
        };
        self.all.remove(name);
        if let Some(node) = live.node.and_then(|n| self.nodes.get_mut(n)) {
            node.pods.remove(name);
        }
        if let Some(owner) = live.owner {
            if let Some(d) = self.deps.get_mut(owner) {
                d.members.remove(name);
                if terminating(&live.pod) {
                    d.terminating = d.terminating.saturating_sub(1);
                }
            }
            self.schedule(Duration::from_millis(100), Action::Reconcile(owner));
        }
        self.emit(Change::PodDeleted {
            namespace: live.pod.meta.namespace,
            name: live.pod.meta.name,
        });
    }

    /// Members of `dep` that are not terminating, not-ready ones first: the pods a ReplicaSet deletes
    /// first when it scales down.
    pub(super) fn active(&self, dep: usize, template: Option<bool>) -> Vec<(Name, bool)> {
        let Some(d) = self.deps.get(dep) else {
            return Vec::new();
        };
        let mut out: Vec<(Name, bool)> = d
            .members
            .iter()
            .filter_map(|n| self.pods.get(n))
            .filter(|l| !terminating(&l.pod))
            .filter(|l| {
                template.is_none_or(|current| {
                    (l.pod.meta.labels.get(LABEL_TEMPLATE_HASH) == Some(&d.d.template_hash))
                        == current
                })
            })
            .map(|l| (l.pod.meta.name.clone(), l.pod.ready))
            .collect();
        out.sort_by_key(|(_, ready)| *ready);
        out
    }

    pub(super) fn reconcile(&mut self, dep: usize) {
        let Some(d) = self.deps.get(dep) else {
            return;
        };
        if d.rollout.is_some() {
            // The rollout sizes both templates itself.
            return;
        }
        let replicas = d.replicas;
        let count = d.members.len().saturating_sub(d.terminating);
        if count < replicas {
            for _ in count..replicas {
                self.create_pod(dep);
            }
        } else if count > replicas {
            let active = self.active(dep, None);
            for (name, _) in active.iter().take(active.len().saturating_sub(replicas)) {
                self.terminate(name, Some((1_000, 30_000)));
            }
        }
    }
}

pub(super) fn terminating(pod: &Pod) -> bool {
    pod.meta.deletion_timestamp().is_some()
}

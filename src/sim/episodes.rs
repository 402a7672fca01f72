//! Episodes of churn: what starts a rollout, a scale, a node loss, a readiness flap or a label
//! move. Each schedules the controller actions that carry it out (see `churn`).

use std::time::Duration;

use super::churn::{Action, Churn, NodeState, ROLLOUT_TICKS, terminating};
use super::cluster::letters;
use super::keyset::KeySet;
use crate::change::Change;
use crate::model::{Name, Node, intern};

/// How a node is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeLoss {
    /// The node stops reporting: Node not ready, its pods not ready, evicted (terminating), force
    /// deleted, then the Node object deleted.
    NotReadyFirst,
    /// The VM is gone and the cloud node controller deletes the Node object first; pod GC then
    /// deletes its orphaned pods.
    NodeDeletedFirst,
}

impl Churn {
    /// Starts a rolling update of the deployment to a new template (maxSurge and maxUnavailable
    /// 25%, the Deployment defaults). False when one is already in progress.
    pub fn rolling_update(&mut self, deployment: usize) -> bool {
        let Some(d) = self.deps.get_mut(deployment) else {
            return false;
        };
        if d.rollout.is_some() {
            return false;
        }
        let old = d.d.template_hash.clone();
        while d.d.template_hash == old {
            d.d.template_hash = intern(&self.rng.safe_string(10));
        }
        d.labels = d.d.pod_labels();
        d.rollout = Some(0);
        self.rollouts_running += 1;
        self.schedule(Duration::ZERO, Action::RolloutTick(deployment));
        true
    }

    /// One pass of the deployment controller over a rollout in progress.
    pub(super) fn rollout_tick(&mut self, dep: usize) {
        let Some(d) = self.deps.get_mut(dep) else {
            return;
        };
        let Some(ticks) = d.rollout else {
            return;
        };
        d.rollout = Some(ticks + 1);
        let target = d.replicas;
        let new = self.active(dep, Some(true));
        let old = self.active(dep, Some(false));
        if (old.is_empty() && new.len() >= target) || ticks >= ROLLOUT_TICKS {
            if let Some(d) = self.deps.get_mut(dep) {
                d.rollout = None;
            }
            self.rollouts_running = self.rollouts_running.saturating_sub(1);
            // Trim a surplus, if pods were replaced while the rollout ran.
            self.reconcile(dep);
            return;
        }
        let surge = target.div_ceil(4);
        let unavailable = match (surge, target / 4) {
            (0, 0) => 1,
            (_, u) => u,
        };
        let create = (target + surge)
            .saturating_sub(new.len() + old.len())
            .min(target.saturating_sub(new.len()));
        for _ in 0..create {
            self.create_pod(dep);
        }
        let available = new.iter().chain(&old).filter(|(_, ready)| *ready).count();
        let mut removable = available.saturating_sub(target.saturating_sub(unavailable));
        for (name, ready) in &old {
            // Old pods that are not ready are not available: removing them costs nothing.
            if *ready {
                if removable == 0 {
                    continue;
                }
                removable -= 1;
            }
            self.terminate(name, Some((1_000, 30_000)));
        }
        let after = self.rng.millis(1_000, 2_000);
        self.schedule(after, Action::RolloutTick(dep));
    }

    /// Sets the deployment's replicas; its ReplicaSet creates or terminates pods to match.
    pub fn scale(&mut self, deployment: usize, replicas: usize) -> bool {
        let Some(d) = self.deps.get_mut(deployment) else {
            return false;
        };
        d.replicas = replicas;
        self.schedule(Duration::ZERO, Action::Reconcile(deployment));
        true
    }

    /// Flips one random ready pod to not ready, and back after a few seconds. The pod's name, or
    /// `None` when no ready pod was found.
    pub fn flap(&mut self) -> Option<Name> {
        for _ in 0..16 {
            let name = self.all.pick(&mut self.rng).cloned()?;
            let ok = self
                .pods
                .get(&name)
                .is_some_and(|l| l.pod.ready && !terminating(&l.pod));
            if ok {
                self.execute(Action::NotReady(name.clone()));
                let after = self.rng.millis(1_000, 20_000);
                self.schedule(after, Action::Ready(name.clone()));
                return Some(name);
            }
        }
        None
    }

    /// Relabels one random pod so it leaves its service for another service of its namespace; its
    /// ReplicaSet releases it and creates a replacement. The pod's name, or `None` when no pod has a
    /// neighbour service.
    pub fn label_move(&mut self) -> Option<Name> {
        for _ in 0..16 {
            let name = self.all.pick(&mut self.rng).cloned()?;
            let Some(live) = self.pods.get(&name) else {
                continue;
            };
            let Some(from) = live.owner else {
                continue;
            };
            if terminating(&live.pod) {
                continue;
            }
            let Some(others) = self.by_namespace.get(&live.pod.meta.namespace) else {
                continue;
            };
            if others.len() < 2 {
                continue;
            }
            let mut to = others[self.rng.below(others.len())];
            if to == from {
                to = others
                    [(others.iter().position(|&d| d == from).unwrap_or(0) + 1) % others.len()];
            }
            let Some(target) = self.deps.get(to) else {
                continue;
            };
            let (app, tier) = (target.d.name.clone(), target.d.tier.clone());
            self.update_pod(
                &name,
                |_| true,
                |p, _| {
                    p.meta.labels = p.meta.labels.with("app", &app).with("tier", &tier);
                },
            );
            if let Some(live) = self.pods.get_mut(&name) {
                live.owner = None;
            }
            if let Some(d) = self.deps.get_mut(from) {
                d.members.remove(&name);
            }
            let after = self.rng.millis(100, 1_000);
            self.schedule(after, Action::Reconcile(from));
            return Some(name);
        }
        None
    }

    /// Loses the node at `node` (an index into the cluster's nodes, or a node that joined since);
    /// a replacement node joins the same zone later. False when the node is already gone.
    pub fn node_loss(&mut self, node: usize, how: NodeLoss) -> bool {
        let Some(state) = self.nodes.get(node) else {
            return false;
        };
        if !state.exists || !self.schedulable.contains(&node) {
            return false;
        }
        self.schedulable.remove(&node);
        self.node_losses_running += 1;
        let zone = state.zone;
        let on_node: Vec<Name> = state.pods.iter().cloned().collect();
        match how {
            NodeLoss::NotReadyFirst => {
                self.nodes[node].node.ready = false;
                let updated = self.nodes[node].node.clone();
                self.emit(Change::Node(updated));
                for pod in on_node {
                    let t = self.rng.millis(1_000, 5_000);
                    self.schedule(t, Action::NotReady(pod.clone()));
                    let t = self.rng.millis(20_000, 40_000);
                    // The kubelet is gone: nothing finishes the termination but the force delete.
                    self.schedule(t, Action::Terminate(pod.clone(), None));
                    let t = self.rng.millis(60_000, 90_000);
                    self.schedule(t, Action::Delete(pod));
                }
                let t = self.rng.millis(45_000, 60_000);
                self.schedule(t, Action::NodeDelete(node));
                let t = self.rng.millis(90_000, 180_000);
                self.schedule(t, Action::NodeJoin(zone));
            }
            NodeLoss::NodeDeletedFirst => {
                self.node_delete(node);
                for pod in on_node {
                    let t = self.rng.millis(1_000, 20_000);
                    self.schedule(t, Action::Delete(pod));
                }
                let t = self.rng.millis(60_000, 120_000);
                self.schedule(t, Action::NodeJoin(zone));
            }
        }
        true
    }

    pub(super) fn node_delete(&mut self, node: usize) {
        let Some(state) = self.nodes.get_mut(node) else {
            return;
        };
        if !state.exists {
            return;
        }
        state.exists = false;
        let name = state.node.name.clone();
        self.schedulable.remove(&node);
        self.emit(Change::NodeDeleted { name });
    }

    pub(super) fn node_join(&mut self, zone: usize) {
        self.node_losses_running = self.node_losses_running.saturating_sub(1);
        let Some(next) = self.zone_next.get_mut(zone) else {
            return;
        };
        let name = format!("node-{}-{:04}", letters(zone), *next);
        *next += 1;
        let Some(template) = self.nodes.iter().find(|n| n.zone == zone) else {
            return;
        };
        let node = Node {
            labels: template.node.labels.with("kubernetes.io/hostname", &name),
            name: intern(&name),
            ready: true,
            allocatable_cpu_millis: template.node.allocatable_cpu_millis,
            ..Node::default()
        };
        self.schedulable.insert(self.nodes.len());
        self.nodes.push(NodeState {
            node: node.clone(),
            zone,
            exists: true,
            pods: KeySet::new(),
        });
        self.emit(Change::Node(node));
    }

    /// Nodes that exist and take pods, for picking one to lose.
    pub fn schedulable_nodes(&self) -> usize {
        self.schedulable.len()
    }
}

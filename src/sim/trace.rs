//! Churn traces: timed changes to a generated cluster, as a watch would deliver them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::churn::Churn;
use super::cluster::Cluster;
use super::episodes::NodeLoss;
use crate::change::Step;

/// The kind of churn a trace is made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceKind {
    /// Deployments replaced in waves (maxSurge and maxUnavailable 25%): new pods created Pending
    /// without an IP, then running with IPs, then ready; old pods terminating, then deleted.
    RollingUpdate,
    /// Deployments scaled up (new pods go through the same lifecycle) and down (terminate, delete).
    Scale,
    /// Nodes lost one at a time, either way `NodeLoss` describes, their pods replaced elsewhere and
    /// a new node joining the zone later.
    NodeLoss,
    /// Random ready pods go not ready and back a few seconds later.
    ReadinessFlap,
    /// A pod relabelled from one service's selector to another's in its namespace; its ReplicaSet
    /// replaces it.
    LabelMove,
    /// All of the above, interleaved.
    #[default]
    Mixed,
}

impl TraceKind {
    pub const ALL: [TraceKind; 6] = [
        TraceKind::RollingUpdate,
        TraceKind::Scale,
        TraceKind::NodeLoss,
        TraceKind::ReadinessFlap,
        TraceKind::LabelMove,
        TraceKind::Mixed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TraceKind::RollingUpdate => "rolling-update",
            TraceKind::Scale => "scale",
            TraceKind::NodeLoss => "node-loss",
            TraceKind::ReadinessFlap => "readiness-flap",
            TraceKind::LabelMove => "label-move",
            TraceKind::Mixed => "mixed",
        }
    }
}

impl fmt::Display for TraceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TraceKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TraceKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = TraceKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown trace kind {s:?} (one of {})", names.join(", "))
            })
    }
}

/// `len` steps of churn of `kind` on `cluster`, reproducible from `seed`. Fewer when the cluster
/// cannot change that way at all (e.g. label moves with one service per namespace). Replayed in
/// order from the cluster's snapshot, every step is one an API server could have sent: no change
/// to a deleted object, resourceVersions increasing.
pub fn trace(cluster: &Cluster, kind: TraceKind, seed: u64, len: usize) -> Vec<Step> {
    let mut churn = Churn::new(cluster, seed);
    churn.schedule_start(Duration::ZERO, kind);
    churn.run(len);
    let mut steps = churn.into_steps();
    steps.truncate(len);
    steps
}

/// Concurrent episodes allowed, so that churn stays a background and not a meltdown.
const MAX_ROLLOUTS: usize = 2;
const MAX_NODE_LOSSES: usize = 1;

impl Churn {
    /// Starts an episode of `kind` and schedules the next start.
    pub(super) fn start(&mut self, kind: TraceKind) {
        let (lo, hi) = match kind {
            TraceKind::RollingUpdate => (5_000, 30_000),
            TraceKind::Scale => (2_000, 20_000),
            TraceKind::NodeLoss => (30_000, 120_000),
            TraceKind::ReadinessFlap => (20, 500),
            TraceKind::LabelMove => (500, 5_000),
            TraceKind::Mixed => (200, 3_000),
        };
        let episode = match kind {
            TraceKind::Mixed => match self.rng.below(100) {
                0..45 => TraceKind::ReadinessFlap,
                45..55 => TraceKind::LabelMove,
                55..70 => TraceKind::Scale,
                70..85 => TraceKind::RollingUpdate,
                _ => TraceKind::NodeLoss,
            },
            other => other,
        };
        match episode {
            TraceKind::RollingUpdate => {
                self.start_rollout();
            }
            TraceKind::Scale => {
                self.start_scale();
            }
            TraceKind::NodeLoss => {
                self.start_node_loss();
            }
            TraceKind::ReadinessFlap | TraceKind::Mixed => {
                self.flap();
            }
            TraceKind::LabelMove => {
                self.label_move();
            }
        }
        let after = self.rng.millis(lo, hi);
        self.schedule_start(after, kind);
    }

    /// A random deployment with pods and no rollout in progress, if one is found quickly.
    fn pick_deployment(&mut self, eligible: impl Fn(&Churn, usize) -> bool) -> Option<usize> {
        for _ in 0..16 {
            let d = self.rng.below(self.deps.len());
            if eligible(self, d) {
                return Some(d);
            }
        }
        None
    }

    fn start_rollout(&mut self) -> bool {
        if self.rollouts_running >= MAX_ROLLOUTS {
            return false;
        }
        let pick = self.pick_deployment(|c, d| {
            c.deps
                .get(d)
                .is_some_and(|d| d.rollout.is_none() && d.replicas > 0)
        });
        pick.is_some_and(|d| self.rolling_update(d))
    }

    fn start_scale(&mut self) -> bool {
        let Some(dep) = self.pick_deployment(|c, d| d < c.deps.len()) else {
            return false;
        };
        let current = self.deps[dep].replicas;
        let replicas = if self.rng.chance(0.5) {
            let by = (current * self.rng.between(20, 100) as usize / 100).max(1);
            (current + by).min(self.max_replicas.max(current))
        } else {
            let by = (current * self.rng.between(20, 60) as usize / 100).max(1);
            current.saturating_sub(by)
        };
        self.scale(dep, replicas)
    }

    fn start_node_loss(&mut self) -> bool {
        // Never the last schedulable node: replacement pods need somewhere to run.
        if self.node_losses_running >= MAX_NODE_LOSSES || self.schedulable.len() <= 1 {
            return false;
        }
        let Some(&node) = self.schedulable.pick(&mut self.rng) else {
            return false;
        };
        let how = if self.rng.chance(0.5) {
            NodeLoss::NotReadyFirst
        } else {
            NodeLoss::NodeDeletedFirst
        };
        self.node_loss(node, how)
    }
}

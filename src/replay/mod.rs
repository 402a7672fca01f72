//! Replaying a trace of cluster changes through the engine in virtual time: the `--events` form of
//! `sliced simulate`.

mod duration;
pub mod faults;
mod replicas;
mod run;
mod world;

use std::sync::Arc;
use std::time::Duration;

use crate::change::Change;
use crate::sink::{Kind, Verb, WriteError};
use crate::snapshot::Snapshot;

pub use duration::{
    DurationError, MAX_DURATION, duration_from_seconds, format_seconds, parse_duration,
};
pub use faults::{FaultCounts, FaultProfile};
pub use run::{FaultReport, ReplayOptions, ReplayResult, TimedWrite, replay, replay_with_progress};

/// What a step does.
#[derive(Clone, Debug)]
pub enum Action {
    /// An object created, or updated if one of its kind, namespace and name exists.
    Apply(Change),
    /// An object deleted by kind, namespace and name.
    Delete(Change),
    /// The next `times` writes of that verb and kind fail with `error`.
    Fail {
        verb: Verb,
        kind: Kind,
        error: WriteError,
        times: usize,
    },
}

/// One step of a trace: at a virtual time, an action.
#[derive(Clone, Debug)]
pub struct Step {
    pub at: Duration,
    pub action: Action,
}

impl Step {
    /// A change as a step: an object applied, or a deletion carried out.
    pub fn of_change(at: Duration, change: Change) -> Step {
        let action = match change {
            Change::Service(_)
            | Change::Pod(_)
            | Change::Node(_)
            | Change::Namespace(_)
            | Change::EndpointSlice(_)
            | Change::Endpoints(_) => Action::Apply(change),
            _ => Action::Delete(change),
        };
        Step { at, action }
    }

    /// Every object of a snapshot, arriving at time zero: namespaces, nodes, services, pods, then
    /// EndpointSlices and Endpoints.
    pub fn cold_start(snapshot: &Snapshot) -> Vec<Step> {
        let mut steps: Vec<Step> = Vec::with_capacity(snapshot.len());
        let mut add = |change| steps.push(Step::of_change(Duration::ZERO, change));
        for ns in &snapshot.namespaces {
            add(Change::Namespace(ns.clone()));
        }
        for node in &snapshot.nodes {
            add(Change::Node(node.clone()));
        }
        for service in &snapshot.services {
            add(Change::Service(service.clone()));
        }
        for pod in &snapshot.pods {
            add(Change::Pod(pod.clone()));
        }
        for slice in &snapshot.endpoint_slices {
            add(Change::EndpointSlice(Arc::new(slice.clone())));
        }
        for endpoints in &snapshot.endpoints {
            add(Change::Endpoints(Arc::new(endpoints.clone())));
        }
        steps
    }
}

//! What one sync of one service did, whichever controller ran it, and what the queue and the
//! trackers learn from it.

use std::time::Duration;

use super::slice_metrics::SliceSyncMetrics;
use crate::index::ServiceKey;
use crate::queue::{RetryDecision, WorkQueue};
use crate::reconcile::Plan;
use crate::sink::apply::{AppliedWrite, TypeStatus, apply_plan};
use crate::sink::{Object, Sink, Verb};
use crate::tracker::EndpointSliceTracker;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncOutcome {
    Success,
    Error,
    /// The informer cache is behind the controller's own writes; retried with backoff.
    Stale,
}

impl SyncOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncOutcome::Success => "success",
            SyncOutcome::Error => "error",
            SyncOutcome::Stale => "stale",
        }
    }
}

/// What one sync of one service did.
#[derive(Clone, Debug)]
pub struct SyncRecord {
    pub at: Duration,
    pub service: ServiceKey,
    pub controller: &'static str,
    pub outcome: SyncOutcome,
    pub message: Option<String>,
    /// Accepted writes, in order, as the API server returned them.
    pub writes: Vec<AppliedWrite>,
    /// Wall-clock time the sync took: computing the plan and carrying it out.
    pub took: Duration,
    /// The sync failed for the last time allowed: the key was dropped from the queue.
    pub dropped: bool,
    /// What upstream's EndpointSlice or mirroring metrics count of this sync; `None` for the
    /// Endpoints controller, and for syncs that reconciled nothing (stale, no selector).
    pub slice_metrics: Option<SliceSyncMetrics>,
    /// A create met a terminating namespace and, as upstream, the rest of the writes were dropped
    /// without an error: a success that did not write all it planned.
    pub abandoned: bool,
    /// Objects the sync deleted that the API server no longer had (answered NotFound): not writes,
    /// but the engine's view drops them at once rather than when the watch says so.
    pub gone: Vec<Object>,
}

impl SyncRecord {
    pub(super) fn new(at: Duration, service: ServiceKey, controller: &'static str) -> Self {
        SyncRecord {
            at,
            service,
            controller,
            outcome: SyncOutcome::Success,
            message: None,
            writes: Vec::new(),
            took: Duration::ZERO,
            dropped: false,
            slice_metrics: None,
            abandoned: false,
            gone: Vec::new(),
        }
    }
}

pub(super) const STALE_MESSAGE: &str = "EndpointSlice informer cache is out of date";

/// Records a sync's own slice writes, and the slices it found gone, in its controller's generation
/// tracker.
pub(super) fn track_own_writes(tracker: &EndpointSliceTracker, record: &SyncRecord) {
    for w in &record.writes {
        if let Object::EndpointSlice(slice) = &w.object {
            match w.verb {
                Verb::Delete => tracker.expect_deletion(slice),
                Verb::Create | Verb::Update => tracker.update(slice),
            }
        }
    }
    for slice in record.gone.iter().filter_map(Object::as_slice) {
        tracker.expect_deletion(slice);
    }
}

impl SyncRecord {
    /// The queue's side of a finished sync: the key's failures are forgotten on success; on error
    /// it is retried with backoff, or dropped once out of retries.
    pub(super) fn settle(&mut self, queue: &WorkQueue<ServiceKey>, error: Option<String>) {
        match error {
            None => queue.forget(&self.service),
            Some(message) => {
                self.dropped = matches!(queue.retry_or_drop(&self.service), RetryDecision::Dropped);
                self.message = Some(message);
            }
        }
    }
}

impl SyncRecord {
    /// Carries out a plan of slice writes (the EndpointSlice or the mirroring controller's): the
    /// record takes the accepted writes, the objects found gone, the metrics, and whether a
    /// terminating namespace cut the plan short. Returns the sync's error, if any.
    pub(super) fn apply_slice_plan(
        &mut self,
        sink: &dyn Sink,
        plan: &mut Plan,
        mut metrics: SliceSyncMetrics,
    ) -> Option<String> {
        let outcome = apply_plan(sink, plan);
        metrics.applied(&outcome);
        let error = outcome.error_message();
        self.slice_metrics = Some(metrics);
        self.abandoned = outcome
            .per_type
            .iter()
            .any(|t| t.status == TypeStatus::NamespaceTerminating);
        self.writes = outcome.records;
        self.gone = outcome.gone;
        if error.is_some() {
            self.outcome = SyncOutcome::Error;
        }
        error
    }
}

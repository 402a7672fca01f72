//! Faults for replays: a seeded, reproducible misbehaving world around the engine, for
//! `sliced simulate --faults` and the tests. The API server refuses, loses and slows writes
//! ([`FaultySink`]); watches deliver late, twice, or expire and relist; others edit, delete,
//! duplicate and recreate managed objects; the garbage collector lags; the process restarts and the
//! leader changes. Faults stop at a set time, after which the engine must bring every object back
//! to what a full reconcile gives.
//!
//! Given the same seed and the same writes from the engine, every fault is the same: an
//! incremental engine and a full-sync engine that write the same see the same world.

mod actors;
mod profile;
mod sink;
mod watch;

use std::collections::VecDeque;
use std::time::Duration;

use crate::change::{Change, ChangeKind};
use crate::model::Name;
use crate::sim::Rng;
use crate::sink::memory::MemorySink;

pub use profile::{FaultProfile, UnknownProfile};
pub use sink::FaultySink;
pub(super) use watch::Watches;

/// What was injected, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Writes refused: 409 Conflict, 429, 500 or 503, 504 without landing.
    pub conflicts: u64,
    pub throttled: u64,
    pub server_errors: u64,
    pub timeouts: u64,
    /// Writes that landed but whose answer was lost.
    pub answers_lost: u64,
    pub slow_writes: u64,
    /// Watch events delivered late, and a second time.
    pub late_events: u64,
    pub duplicated_events: u64,
    /// Watches that expired, the events they lost, and the relists that followed.
    pub watch_expiries: u64,
    pub events_lost: u64,
    /// Others' acts on managed objects.
    pub slices_edited: u64,
    pub slices_deleted: u64,
    pub slices_duplicated: u64,
    pub slices_recreated: u64,
    pub endpoints_edited: u64,
    pub endpoints_deleted: u64,
    pub services_recreated: u64,
    /// Owners whose dependents the garbage collector deleted late.
    pub gc_delays: u64,
    pub resyncs: u64,
    pub restarts: u64,
    pub leader_changes: u64,
}

impl FaultCounts {
    /// Every count with its name (snake case), in declaration order.
    pub fn rows(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("conflicts", self.conflicts),
            ("throttled", self.throttled),
            ("server_errors", self.server_errors),
            ("timeouts", self.timeouts),
            ("answers_lost", self.answers_lost),
            ("slow_writes", self.slow_writes),
            ("late_events", self.late_events),
            ("duplicated_events", self.duplicated_events),
            ("watch_expiries", self.watch_expiries),
            ("events_lost", self.events_lost),
            ("slices_edited", self.slices_edited),
            ("slices_deleted", self.slices_deleted),
            ("slices_duplicated", self.slices_duplicated),
            ("slices_recreated", self.slices_recreated),
            ("endpoints_edited", self.endpoints_edited),
            ("endpoints_deleted", self.endpoints_deleted),
            ("services_recreated", self.services_recreated),
            ("gc_delays", self.gc_delays),
            ("resyncs", self.resyncs),
            ("restarts", self.restarts),
            ("leader_changes", self.leader_changes),
        ]
    }

    pub fn total(&self) -> u64 {
        self.rows().iter().map(|(_, n)| n).sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &FaultCounts) {
        let sum = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        sum(&mut self.conflicts, other.conflicts);
        sum(&mut self.throttled, other.throttled);
        sum(&mut self.server_errors, other.server_errors);
        sum(&mut self.timeouts, other.timeouts);
        sum(&mut self.answers_lost, other.answers_lost);
        sum(&mut self.slow_writes, other.slow_writes);
        sum(&mut self.late_events, other.late_events);
        sum(&mut self.duplicated_events, other.duplicated_events);
        sum(&mut self.watch_expiries, other.watch_expiries);
        sum(&mut self.events_lost, other.events_lost);
        sum(&mut self.slices_edited, other.slices_edited);
        sum(&mut self.slices_deleted, other.slices_deleted);
        sum(&mut self.slices_duplicated, other.slices_duplicated);
        sum(&mut self.slices_recreated, other.slices_recreated);
        sum(&mut self.endpoints_edited, other.endpoints_edited);
        sum(&mut self.endpoints_deleted, other.endpoints_deleted);
        sum(&mut self.services_recreated, other.services_recreated);
        sum(&mut self.gc_delays, other.gc_delays);
        sum(&mut self.resyncs, other.resyncs);
        sum(&mut self.restarts, other.restarts);
        sum(&mut self.leader_changes, other.leader_changes);
    }
}

/// A fault at a set time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scheduled {
    Expire(ChangeKind),
    Act,
    /// A Service deleted and created again: which one, by index in name order.
    RecreateService(usize),
    Resync,
    Restart,
    LeaderChange,
}

/// The kinds whose watches can expire.
const WATCHED: [ChangeKind; 5] = [
    ChangeKind::Node,
    ChangeKind::Service,
    ChangeKind::Pod,
    ChangeKind::EndpointSlice,
    ChangeKind::Endpoints,
];

/// The faults of one replay that are not the API server's: the watches, the schedule of others'
/// acts, resyncs, restarts and leader changes, and the garbage collector's lag.
pub(super) struct Faults {
    pub profile: FaultProfile,
    schedule: VecDeque<(Duration, Scheduled)>,
    /// Owners whose dependents the garbage collector deletes at a later time.
    garbage: Vec<(Duration, Name, Name)>,
    rng: Rng,
    pub counts: FaultCounts,
    /// When faults stop.
    pub stop_at: Duration,
    stopped: bool,
}

/// The most faults of one scheduled kind (expiries, edits, restarts ...) a replay gets: a trace
/// that spans years would otherwise schedule billions of them before it starts.
const MAX_SCHEDULED_PER_KIND: usize = 1_000;

impl Faults {
    /// The faults of `profile` from time zero until `stop_at`, at most
    /// [`MAX_SCHEDULED_PER_KIND`] of each kind.
    pub fn new(profile: FaultProfile, seed: u64, stop_at: Duration) -> Faults {
        let mut rng = Rng::stream(seed, 0xfa17);
        let mut schedule: Vec<(Duration, Scheduled)> = Vec::new();
        let mut poisson = |per_minute: f64, what: &mut dyn FnMut(&mut Rng) -> Scheduled| {
            if per_minute <= 0.0 {
                return;
            }
            let mean_gap = 60.0 / per_minute;
            let mut t = 0.0f64;
            for _ in 0..MAX_SCHEDULED_PER_KIND {
                // Exponential gaps; 1 - unit() is in (0, 1], so the logarithm is finite.
                t += -mean_gap * (1.0 - rng.unit()).ln();
                let Ok(at) = Duration::try_from_secs_f64(t) else {
                    break;
                };
                if at >= stop_at {
                    break;
                }
                let kind = what(&mut rng);
                schedule.push((at, kind));
            }
        };
        poisson(profile.expiries_per_minute, &mut |r| {
            Scheduled::Expire(WATCHED[r.below(WATCHED.len())])
        });
        poisson(profile.edits_per_minute, &mut |_| Scheduled::Act);
        poisson(profile.service_recreations_per_minute, &mut |r| {
            Scheduled::RecreateService(r.below(usize::MAX))
        });
        poisson(profile.resyncs_per_minute, &mut |_| Scheduled::Resync);
        poisson(profile.restarts_per_minute, &mut |_| Scheduled::Restart);
        poisson(profile.leader_changes_per_minute, &mut |_| {
            Scheduled::LeaderChange
        });
        schedule.sort_by_key(|(at, _)| *at);
        Faults {
            profile,
            schedule: schedule.into(),
            garbage: Vec::new(),
            rng,
            counts: FaultCounts::default(),
            stop_at,
            stopped: false,
        }
    }

    /// The scheduled faults due by `now`, in time order.
    pub fn take_due(&mut self, now: Duration) -> Vec<Scheduled> {
        let mut due = Vec::new();
        while self.schedule.front().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, what)) = self.schedule.pop_front() {
                due.push(what);
            }
        }
        due
    }

    /// The owner's dependents go at once, or up to the profile's lag later.
    pub fn collect_garbage_of(&mut self, now: Duration, namespace: Name, owner_uid: Name) {
        let lag_ms = u64::try_from(self.profile.gc_lag_max.as_millis()).unwrap_or(u64::MAX);
        let lag = if self.stopped || lag_ms == 0 {
            Duration::ZERO
        } else {
            self.counts.gc_delays += 1;
            Duration::from_millis(self.rng.between(1, lag_ms))
        };
        self.garbage.push((now + lag, namespace, owner_uid));
    }

    /// The garbage collections due by `now`, as watch events.
    pub fn collect_due_garbage(&mut self, now: Duration, sink: &MemorySink) -> Vec<Change> {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.garbage)
            .into_iter()
            .partition(|(at, _, _)| *at <= now);
        self.garbage = later;
        due.into_iter()
            .flat_map(|(_, namespace, uid)| super::world::collect_garbage(&namespace, &uid, sink))
            .collect()
    }

    /// Others' act on a managed object, as watch events.
    pub fn act(
        &mut self,
        sink: &MemorySink,
        managed_endpoints: &dyn Fn(&crate::model::Endpoints) -> bool,
    ) -> Vec<Change> {
        actors::act(&mut self.rng, sink, managed_endpoints, &mut self.counts)
    }

    /// When something is next due: a scheduled fault, a garbage collection, the end of faults.
    pub fn next_due(&self) -> Option<Duration> {
        [
            self.schedule.front().map(|(at, _)| *at),
            self.garbage.iter().map(|(at, _, _)| *at).min(),
            (!self.stopped).then_some(self.stop_at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Faults stop: the collector keeps up, nothing more is scheduled. What is in flight still
    /// arrives.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.schedule.clear();
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }
}

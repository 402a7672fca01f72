//! The virtual-time loop: steps and queued syncs in time order, with no real waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Step;
use super::world::World;
use crate::engine::{Engine, EngineOptions, EngineStats, SyncRecord, Violation};
use crate::index::ServiceKey;
use crate::model::Timestamp;
use crate::queue::{Clock, VirtualClock};
use crate::reconcile::Event;
use crate::sink::memory::MemorySink;
use crate::sink::{Object, Verb};

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub engine: EngineOptions,
    /// Keep every write and sync record (the `--events` output); a long run keeps only counts.
    pub keep_records: bool,
    /// Stop at this virtual time even if work remains.
    pub until: Option<Duration>,
    /// Seed of generated names.
    pub seed: u64,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            engine: EngineOptions::default(),
            keep_records: true,
            until: None,
            seed: 0,
        }
    }
}

/// A write the API server accepted, at a virtual time, as the controller sent it.
#[derive(Clone, Debug)]
pub struct TimedWrite {
    pub at: Duration,
    pub verb: Verb,
    pub object: Object,
}

#[derive(Debug, Default)]
pub struct ReplayResult {
    pub writes: Vec<TimedWrite>,
    pub syncs: Vec<SyncRecord>,
    /// EndpointSlices and Endpoints at the end, sorted by kind, namespace and name.
    pub objects: Vec<Object>,
    pub events: Vec<(ServiceKey, Event)>,
    pub stats: EngineStats,
    /// The first invariant violations found, when the engine checks them.
    pub violations: Vec<Violation>,
    /// Accepted writes by verb: create, update, delete.
    pub write_counts: [usize; 3],
    /// Wall-clock time of every sync.
    pub sync_times: Vec<Duration>,
    pub steps: usize,
    /// Virtual time at the end.
    pub ended_at: Duration,
    /// Wall-clock time the replay took.
    pub elapsed: Duration,
}

/// 2026-01-01T00:00:00Z: virtual time zero, for creation times the steps leave out.
const EPOCH_SECONDS: i64 = 1_767_225_600;

/// Replays `steps` (in time order; equal times in file order) through a fresh engine and an
/// in-memory API server, in virtual time, until nothing is queued or delayed, or `until`.
pub fn replay(steps: &[Step], options: &ReplayOptions) -> ReplayResult {
    replay_with_progress(steps, options, &mut |_, _| {})
}

/// `replay`, telling `progress` (steps applied, steps in all) as virtual time moves on.
pub fn replay_with_progress(
    steps: &[Step],
    options: &ReplayOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> ReplayResult {
    let started = Instant::now();
    let clock = Arc::new(VirtualClock::new());
    let engine = Engine::new(
        options.engine.clone(),
        clock.clone() as Arc<dyn crate::queue::Clock>,
    );
    let sink = MemorySink::new(options.seed);
    sink.set_logging(options.keep_records);
    let epoch = Timestamp::from_second(EPOCH_SECONDS).unwrap_or_default();
    let mut world = World::new(epoch);
    let mut order: Vec<&Step> = steps.iter().collect();
    order.sort_by_key(|s| s.at); // stable: equal times keep file order
    let mut result = ReplayResult {
        steps: steps.len(),
        ..ReplayResult::default()
    };

    let mut next = 0;
    let mut caches_listed = false;
    loop {
        let now = clock.now();
        sink.set_now(
            epoch
                .checked_add(jiff::SignedDuration::try_from(now).unwrap_or_default())
                .unwrap_or(epoch),
        );
        let before = next;
        while next < order.len() && order[next].at <= now {
            world.apply(&order[next].action, now, &engine, &sink);
            next += 1;
        }
        if next != before {
            progress(next, order.len());
        }
        // The objects there at time zero are the caches' initial list.
        if !caches_listed {
            engine.start();
            caches_listed = true;
        }
        // A sync takes no virtual time: run everything ready now.
        loop {
            let records = engine.sync_ready(&sink);
            if records.is_empty() {
                break;
            }
            for r in &records {
                result.sync_times.push(r.took);
                for w in &r.writes {
                    result.write_counts[w.verb as usize] += 1;
                }
            }
            if options.keep_records {
                result
                    .writes
                    .extend(sink.take_writes().into_iter().map(|w| TimedWrite {
                        at: now,
                        verb: w.verb,
                        object: w.sent,
                    }));
                result.syncs.extend(records);
            }
        }
        let wake = [order.get(next).map(|s| s.at), engine.next_ready_at()]
            .into_iter()
            .flatten()
            .min();
        match wake {
            Some(t) if options.until.is_none_or(|u| t <= u) => clock.set(t.max(now)),
            _ => break,
        }
    }
    result.ended_at = clock.now();
    result.objects = sink.objects();
    result.events = engine.take_events();
    result.stats = engine.stats();
    result.violations = engine.take_violations();
    result.elapsed = started.elapsed();
    result
}

//! The virtual-time loop: steps, faults and queued syncs in time order, with no real waiting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Step;
use super::faults::{FaultCounts, FaultProfile, Faults, FaultySink, Scheduled};
use super::replicas::Replicas;
use super::world::{World, collect_garbage};
use crate::engine::{Engine, EngineOptions, EngineStats, SyncRecord, Violation};
use crate::index::ServiceKey;
use crate::model::Timestamp;
use crate::queue::{Clock, VirtualClock};
use crate::reconcile::Event;
use crate::sink::memory::MemorySink;
use crate::sink::{Object, Sink, Verb};

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub engine: EngineOptions,
    /// Keep every write and sync record (the `--events` output); a long run keeps only counts.
    pub keep_records: bool,
    /// Stop at this virtual time even if work remains.
    pub until: Option<Duration>,
    /// Seed of generated names and of faults.
    pub seed: u64,
    /// The faults injected until the last step; then a resync, and the run goes on until
    /// everything settles.
    pub faults: FaultProfile,
    /// Once nothing is left to do, resync every service once (as the informers' periodic resync)
    /// and run on until that settles too, as a run with faults always does: what upstream
    /// queues nothing for (pods on a node that went) is then repaired before the end.
    pub resync_when_idle: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            engine: EngineOptions::default(),
            keep_records: true,
            until: None,
            seed: 0,
            faults: FaultProfile::none(),
            resync_when_idle: false,
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

/// What the faults did, and how the engine came out of them.
#[derive(Clone, Debug, Default)]
pub struct FaultReport {
    pub profile: &'static str,
    pub counts: FaultCounts,
    /// When faults stopped.
    pub stopped_at: Duration,
    /// Writes to objects no controller of sliced manages.
    pub unmanaged_writes: Vec<String>,
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
    /// Once the queues drained (after faults, a resync and a drain), the objects a full reconcile
    /// would still change: `None` unless the engine checks invariants or faults were injected, or
    /// when `until` cut the run short.
    pub unsettled: Option<Vec<Violation>>,
    /// Present when faults were injected.
    pub faults: Option<FaultReport>,
    /// The Services, Pods, Nodes and Namespaces at the end, as the API server holds them (others
    /// may have recreated Services): kept when faults relist or restart.
    pub final_state: Option<crate::snapshot::Snapshot>,
    /// Accepted writes by verb: create, update, delete.
    pub write_counts: [usize; 3],
    /// Wall-clock time of every sync.
    pub sync_times: Vec<Duration>,
    pub steps: usize,
    /// Virtual time at the end.
    pub ended_at: Duration,
    /// Work was still due beyond the end of virtual time (about 584 years), so the run stopped.
    pub out_of_time: bool,
    /// Wall-clock time the replay took.
    pub elapsed: Duration,
    /// The service controller's patches of Services the API server took.
    pub service_patches: u64,
    /// LoadBalancer Services at the end, and those with an address in their status.
    pub load_balancers: (usize, usize),
    /// Status patches that gave a Service other addresses than it held (none, unless its
    /// request or the pools changed).
    pub moved_addresses: u64,
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
    let sink = MemorySink::new(options.seed);
    sink.set_logging(options.keep_records);
    let faulty = (!options.faults.is_none())
        .then(|| FaultySink::new(&sink, options.faults.clone(), options.seed));
    let writes_to: &dyn Sink = match &faulty {
        Some(faulty) => faulty,
        None => &sink,
    };
    let epoch = Timestamp::from_second(EPOCH_SECONDS).unwrap_or_default();
    let mut world = World::new(epoch, options.faults.lists());
    let mut order: Vec<&Step> = steps.iter().collect();
    order.sort_by_key(|s| s.at); // stable: equal times keep file order
    // Faults last as long as the steps (or until `until`).
    let last_step = order.last().map_or(Duration::ZERO, |s| s.at);
    let stop_at = options.until.map_or(last_step, |u| u.min(last_step));
    let mut faults = Faults::new(options.faults.clone(), options.seed, stop_at);
    let mut replicas = Replicas::new(
        options.engine.clone(),
        clock.clone(),
        options.faults.clone(),
        options.seed,
    );
    let mut result = ReplayResult {
        steps: steps.len(),
        ..ReplayResult::default()
    };
    let mut unmanaged: Vec<String> = Vec::new();

    let mut next = 0;
    let mut caches_listed = false;
    let mut resynced = false;
    let mut out_of_time = false;
    loop {
        let now = clock.now();
        sink.set_now(
            epoch
                .checked_add(jiff::SignedDuration::try_from(now).unwrap_or_default())
                .unwrap_or(epoch),
        );
        if faulty.is_some() && !faults.is_stopped() && now >= stop_at {
            faults.stop();
            replicas.stop_faults();
            if let Some(faulty) = &faulty {
                faulty.stop_faults();
            }
        }
        let before = next;
        while next < order.len() && order[next].at <= now {
            let applied = world.apply(&order[next].happening, now, &sink);
            for change in applied.events {
                replicas.send(now, change, &mut faults.counts);
            }
            for (namespace, uid) in applied.garbage {
                if faulty.is_some() {
                    faults.collect_garbage_of(now, namespace, uid);
                } else {
                    for change in collect_garbage(&namespace, &uid, &sink) {
                        replicas.send(now, change, &mut faults.counts);
                    }
                }
            }
            next += 1;
        }
        if next != before {
            progress(next, order.len());
        }
        for change in faults.collect_due_garbage(now, &sink) {
            replicas.send(now, change, &mut faults.counts);
        }
        for fault in faults.take_due(now) {
            inject(fault, now, &mut faults, &mut replicas, &mut world, &sink);
        }
        replicas.deliver_due(now);
        // The objects there at time zero are the caches' initial list.
        if !caches_listed {
            replicas.start();
            caches_listed = true;
        }
        // A sync takes no virtual time, but slow writes do: the clock moves on after the batch.
        let mut took = Duration::ZERO;
        loop {
            let records = replicas.leader().sync_ready(writes_to);
            // The service controller's patches reach the Services, and come back as watch events.
            for patch in sink.take_service_patches() {
                result.service_patches += 1;
                let applied = world.patch_service(&patch);
                for change in applied.events {
                    replicas.send(now, change, &mut faults.counts);
                }
                for (namespace, uid) in applied.garbage {
                    for change in collect_garbage(&namespace, &uid, &sink) {
                        replicas.send(now, change, &mut faults.counts);
                    }
                }
            }
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
            if let Some(faulty) = &faulty {
                for change in faulty.take_echoes() {
                    replicas.send(now, change, &mut faults.counts);
                }
                took += faulty.take_time();
                for (verb, namespace, name) in faulty.take_endpoints_writes() {
                    // The Endpoints of a Service without a selector are its owner's (mirroring
                    // reads them); the engine, whose view may lag, may write any other.
                    if world.service_selects(&namespace, &name) == Some(false) {
                        unmanaged.push(format!("{} Endpoints {namespace}/{name}", verb.as_str()));
                    }
                }
                // Echoes at zero lag are due now.
                replicas.deliver_due(now);
            }
        }
        let mut wake = [
            order.get(next).map(|s| s.at),
            replicas.leader().next_ready_at(),
            replicas.next_due(),
            faults.next_due().filter(|_| faulty.is_some()),
        ]
        .into_iter()
        .flatten()
        .min();
        // After the faults, one resync (as the informers' periodic one), so that what others
        // changed without queueing a sync is repaired too; then the run settles.
        if wake.is_none() && (faulty.is_some() || options.resync_when_idle) && !resynced {
            resynced = true;
            faults.counts.resyncs += 1;
            replicas.leader().resync();
            wake = Some(now);
        }
        match wake {
            Some(t) if options.until.is_none_or(|u| t <= u) => {
                let to = t.max(now.saturating_add(took));
                clock.set(to);
                // A time beyond the clock's range (about 584 years) can never come: stop there
                // rather than ask for it forever.
                if clock.now() < to {
                    out_of_time = true;
                    break;
                }
            }
            _ => break,
        }
    }
    result.ended_at = clock.now();
    result.out_of_time = out_of_time;
    result.objects = sink.objects();
    result.load_balancers = world.load_balancers();
    result.moved_addresses = world.moved_addresses;
    result.final_state = world.into_snapshot();
    result.events = replicas.take_events();
    result.stats = replicas.stats();
    result.violations = replicas.take_violations();
    let drained = !out_of_time
        && replicas.is_settled()
        && replicas.leader().is_idle()
        && options.until.is_none_or(|u| result.ended_at < u);
    if drained && (options.engine.check_invariants || faulty.is_some()) {
        result.unsettled = Some(replicas.leader().check_all());
    }
    if let Some(faulty) = &faulty {
        let mut counts = faults.counts.clone();
        counts.add(&faulty.counts());
        unmanaged.extend(faulty.unmanaged_writes());
        result.faults = Some(FaultReport {
            profile: options.faults.name,
            counts,
            stopped_at: stop_at,
            unmanaged_writes: unmanaged,
        });
    }
    result.elapsed = started.elapsed();
    result
}

/// Syncs everything ready now and later, moving `clock` on to each delayed sync: the engine
/// alone, with nothing else happening meanwhile. Stops short of a time the clock cannot reach.
pub fn drain(engine: &Engine, clock: &VirtualClock, sink: &dyn Sink) -> Vec<SyncRecord> {
    let mut records = Vec::new();
    loop {
        records.extend(engine.sync_all_ready(sink));
        let Some(due) = engine.next_ready_at() else {
            return records;
        };
        let to = due.max(clock.now());
        clock.set(to);
        if clock.now() < to {
            return records;
        }
    }
}

/// Carries out one scheduled fault.
fn inject(
    fault: Scheduled,
    now: Duration,
    faults: &mut Faults,
    replicas: &mut Replicas,
    world: &mut World,
    sink: &MemorySink,
) {
    match fault {
        Scheduled::Expire(kind) => {
            faults.counts.watch_expiries += 1;
            let lost = replicas.expire(kind, world, sink);
            faults.counts.events_lost += lost as u64;
        }
        Scheduled::Act => {
            let managed = |e: &crate::model::Endpoints| {
                world.service_selects(&e.meta.namespace, &e.meta.name) == Some(true)
            };
            for change in faults.act(sink, &managed) {
                replicas.send(now, change, &mut faults.counts);
            }
        }
        Scheduled::RecreateService(pick) => {
            if let Some(applied) = world.recreate_service(pick, now, sink) {
                faults.counts.services_recreated += 1;
                for change in applied.events {
                    replicas.send(now, change, &mut faults.counts);
                }
                for (namespace, uid) in applied.garbage {
                    faults.collect_garbage_of(now, namespace, uid);
                }
            }
        }
        Scheduled::Resync => {
            faults.counts.resyncs += 1;
            replicas.leader().resync();
        }
        Scheduled::Restart => {
            faults.counts.restarts += 1;
            replicas.restart(world, sink);
        }
        Scheduled::LeaderChange => {
            faults.counts.leader_changes += 1;
            replicas.change_leader(world, sink);
        }
    }
}

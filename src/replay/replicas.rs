//! The controller processes of a replay: the leader, which syncs and writes, and, when leaders
//! change, a standby whose caches follow the same watches. Each has its own watches; a restarted
//! process starts from fresh lists, as `sliced run` does.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::faults::{FaultCounts, FaultProfile, Watches};
use super::world::World;
use crate::change::{Change, ChangeKind};
use crate::engine::{Engine, EngineOptions, EngineStats, Violation};
use crate::index::ServiceKey;
use crate::model::Name;
use crate::queue::{Clock, VirtualClock};
use crate::reconcile::Event;
use crate::sink::memory::MemorySink;

/// One process: its engine and what its watches have in flight.
struct Replica {
    engine: Engine,
    watches: Watches,
}

pub(super) struct Replicas {
    options: EngineOptions,
    clock: Arc<VirtualClock>,
    profile: FaultProfile,
    /// Faults were injected: events go through the watches, even after faults stop (what is in
    /// flight keeps its order).
    faulty: bool,
    seed: u64,
    /// Processes started so far, for each one's own stream of watch lags.
    started: u64,
    leader: Replica,
    standby: Option<Replica>,
    /// What replaced processes did.
    retired: EngineStats,
    events: Vec<(ServiceKey, Event)>,
    violations: Vec<Violation>,
}

/// The key of a listed object, as a relist compares it.
fn key_of(change: &Change) -> (Name, Name) {
    match change {
        Change::Service(s) => (s.meta.namespace.clone(), s.meta.name.clone()),
        Change::Pod(p) => (p.meta.namespace.clone(), p.meta.name.clone()),
        Change::Node(n) => (Name::default(), n.name.clone()),
        Change::Namespace(n) => (Name::default(), n.name.clone()),
        Change::EndpointSlice(s) => (s.meta.namespace.clone(), s.meta.name.clone()),
        Change::Endpoints(e) => (e.meta.namespace.clone(), e.meta.name.clone()),
        Change::ServiceDeleted { namespace, name }
        | Change::PodDeleted { namespace, name }
        | Change::EndpointSliceDeleted { namespace, name }
        | Change::EndpointsDeleted {
            namespace, name, ..
        } => (namespace.clone(), name.clone()),
        Change::NodeDeleted { name } | Change::NamespaceDeleted { name } => {
            (Name::default(), name.clone())
        }
    }
}

impl Replicas {
    /// A leader (and a standby if the profile changes leaders) with empty caches: the replay's
    /// steps at time zero are their initial lists.
    pub fn new(
        options: EngineOptions,
        clock: Arc<VirtualClock>,
        profile: FaultProfile,
        seed: u64,
    ) -> Replicas {
        let mut replicas = Replicas {
            leader: Replica {
                engine: Engine::new(options.clone(), clock.clone() as Arc<dyn Clock>),
                watches: Watches::new(profile.watch_lag_max, profile.duplicated, seed),
            },
            standby: None,
            options,
            clock,
            faulty: !profile.is_none(),
            seed,
            started: 1,
            retired: EngineStats::default(),
            events: Vec::new(),
            violations: Vec::new(),
            profile,
        };
        if replicas.profile.leader_changes_per_minute > 0.0 {
            replicas.standby = Some(replicas.replica());
        }
        replicas
    }

    fn replica(&mut self) -> Replica {
        self.started += 1;
        Replica {
            engine: Engine::new(self.options.clone(), self.clock.clone() as Arc<dyn Clock>),
            watches: Watches::new(
                self.profile.watch_lag_max,
                self.profile.duplicated,
                self.seed.wrapping_add(self.started),
            ),
        }
    }

    pub fn leader(&self) -> &Engine {
        &self.leader.engine
    }

    /// The start-up work of the first processes, once their initial lists are in.
    pub fn start(&self) {
        self.leader.engine.start();
        if let Some(standby) = &self.standby {
            standby.engine.start();
        }
    }

    fn replicas_mut(&mut self) -> impl Iterator<Item = &mut Replica> {
        std::iter::once(&mut self.leader).chain(self.standby.as_mut())
    }

    /// An event the API server sent at `now`, into every process's watch; without faults, taken
    /// in at once.
    pub fn send(&mut self, now: Duration, change: Change, counts: &mut FaultCounts) {
        if !self.faulty {
            self.leader.engine.handle(change);
            return;
        }
        for replica in self.replicas_mut() {
            let pushed = replica.watches.push(now, change.clone());
            counts.late_events += pushed.late;
            counts.duplicated_events += pushed.duplicated;
        }
    }

    /// Every watch event due by `now`, taken in.
    pub fn deliver_due(&mut self, now: Duration) {
        for replica in self.replicas_mut() {
            for change in replica.watches.take_due(now) {
                replica.engine.handle(change);
            }
        }
    }

    /// When the next watch event is due, in any process.
    pub fn next_due(&self) -> Option<Duration> {
        std::iter::once(&self.leader)
            .chain(self.standby.as_ref())
            .filter_map(|r| r.watches.next_due())
            .min()
    }

    /// Whether no watch event is in flight.
    pub fn is_settled(&self) -> bool {
        std::iter::once(&self.leader)
            .chain(self.standby.as_ref())
            .all(|r| r.watches.is_empty())
    }

    /// Faults stop: later events arrive at once, once.
    pub fn stop_faults(&mut self) {
        self.profile = FaultProfile::none();
        for replica in self.replicas_mut() {
            replica.watches.stop_faults();
        }
    }

    /// The leader's watch of `kind` expires: what it had in flight is lost, and a relist
    /// follows, which deletes what vanished meanwhile.
    pub fn expire(&mut self, kind: ChangeKind, world: &World, sink: &MemorySink) -> usize {
        let lost = self.leader.watches.expire(kind);
        relist(&self.leader.engine, kind, world, sink);
        lost
    }

    /// The leader's process restarts: a new engine, its caches filled from lists.
    pub fn restart(&mut self, world: &World, sink: &MemorySink) {
        let fresh = self.listed(world, sink);
        let old = std::mem::replace(&mut self.leader, fresh);
        self.retire(old);
    }

    /// The leader goes; the standby takes over with its warm caches, and a new standby starts
    /// from lists.
    pub fn change_leader(&mut self, world: &World, sink: &MemorySink) {
        let next = match self.standby.take() {
            Some(standby) => standby,
            None => self.listed(world, sink),
        };
        let old = std::mem::replace(&mut self.leader, next);
        self.retire(old);
        self.standby = Some(self.listed(world, sink));
    }

    /// A new process, once its initial lists are in.
    fn listed(&mut self, world: &World, sink: &MemorySink) -> Replica {
        let replica = self.replica();
        for kind in ChangeKind::ALL {
            for change in world.list(kind, sink) {
                replica.engine.handle(change);
            }
        }
        replica.engine.start();
        replica
    }

    fn retire(&mut self, replica: Replica) {
        let engine = replica.engine;
        self.retired.add(&engine.stats());
        self.events.extend(engine.take_events());
        self.violations.extend(engine.take_violations());
    }

    /// Events recorded by every process so far.
    pub fn take_events(&mut self) -> Vec<(ServiceKey, Event)> {
        let mut events = std::mem::take(&mut self.events);
        events.extend(self.leader.engine.take_events());
        events
    }

    /// The counters of every process, summed.
    pub fn stats(&self) -> EngineStats {
        let mut stats = self.retired.clone();
        stats.add(&self.leader.engine.stats());
        if let Some(standby) = &self.standby {
            stats.add(&standby.engine.stats());
        }
        stats
    }

    pub fn take_violations(&mut self) -> Vec<Violation> {
        let mut violations = std::mem::take(&mut self.violations);
        violations.extend(self.leader.engine.take_violations());
        violations
    }
}

/// A relist of `kind` into `engine`: every object listed, then what it holds but the list lacks
/// deleted.
fn relist(engine: &Engine, kind: ChangeKind, world: &World, sink: &MemorySink) {
    let listed = world.list(kind, sink);
    let keys: HashSet<(Name, Name)> = listed.iter().map(key_of).collect();
    for change in listed {
        engine.handle(change);
    }
    engine.relisted(kind, &keys);
}

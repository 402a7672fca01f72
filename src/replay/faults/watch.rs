//! The watches between the API server and the controllers: each kind's events in order, each late
//! by up to the profile's lag, some delivered twice; a watch that expires loses what was in flight
//! and is followed by a relist.

use std::collections::VecDeque;
use std::time::Duration;

use crate::change::{Change, ChangeKind};
use crate::sim::Rng;

/// One watch per kind, in `ChangeKind::ALL`'s order.
const KINDS: usize = ChangeKind::ALL.len();

fn slot(kind: ChangeKind) -> usize {
    ChangeKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

pub(in crate::replay) struct Watches {
    /// Events not yet delivered, with the time each is due and the order they were sent in; each
    /// queue in delivery order.
    queues: [VecDeque<(Duration, u64, Change)>; KINDS],
    sent: u64,
    lag_max: Duration,
    duplicated: f64,
    rng: Rng,
}

/// What a push did, for the fault counts.
#[derive(Default)]
pub(in crate::replay) struct Pushed {
    pub late: u64,
    pub duplicated: u64,
}

impl Watches {
    pub fn new(lag_max: Duration, duplicated: f64, seed: u64) -> Watches {
        Watches {
            queues: Default::default(),
            sent: 0,
            lag_max,
            duplicated,
            rng: Rng::stream(seed, 0x3a7c),
        }
    }

    /// Faults stop: later events arrive at once, once.
    pub fn stop_faults(&mut self) {
        self.lag_max = Duration::ZERO;
        self.duplicated = 0.0;
    }

    /// An event the API server sent at `now`.
    pub fn push(&mut self, now: Duration, change: Change) -> Pushed {
        let mut pushed = Pushed::default();
        let lag_ms = u64::try_from(self.lag_max.as_millis()).unwrap_or(u64::MAX);
        let lag = if lag_ms == 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(self.rng.between(0, lag_ms))
        };
        let queue = &mut self.queues[slot(change.kind())];
        // A watch keeps its order: an event is never due before the one sent before it.
        let due = queue
            .back()
            .map_or(now + lag, |(last, _, _)| (*last).max(now + lag));
        if due > now {
            pushed.late = 1;
        }
        let twice = self.duplicated > 0.0 && self.rng.chance(self.duplicated);
        if twice {
            pushed.duplicated = 1;
            self.sent += 1;
            queue.push_back((due, self.sent, change.clone()));
        }
        self.sent += 1;
        queue.push_back((due, self.sent, change));
        pushed
    }

    /// When the next event is due.
    pub fn next_due(&self) -> Option<Duration> {
        self.queues
            .iter()
            .filter_map(|q| q.front().map(|(at, _, _)| *at))
            .min()
    }

    /// The events due by `now`, earliest first; among equal times, in the order sent.
    pub fn take_due(&mut self, now: Duration) -> Vec<Change> {
        let mut due: Vec<(Duration, u64, Change)> = Vec::new();
        for queue in &mut self.queues {
            while queue.front().is_some_and(|(at, _, _)| *at <= now) {
                if let Some(event) = queue.pop_front() {
                    due.push(event);
                }
            }
        }
        due.sort_by_key(|(at, sent, _)| (*at, *sent));
        due.into_iter().map(|(_, _, c)| c).collect()
    }

    /// The watch of `kind` ends (410 Gone): what was in flight is lost. Returns how much.
    pub fn expire(&mut self, kind: ChangeKind) -> usize {
        let queue = &mut self.queues[slot(kind)];
        let lost = queue.len();
        queue.clear();
        lost
    }

    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }
}

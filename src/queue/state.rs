//! The queue's state behind its lock: one slot per key, a FIFO of ready keys and a heap of timers.
//!
//! Every key is in exactly one state, so de-duplication is a single hash lookup and the FIFO never
//! holds a key twice. Timers are deleted lazily: a heap entry is live only while its key's slot still
//! carries the entry's sequence number, and the heap is rebuilt when stale entries outnumber live ones.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use ahash::AHashMap;

use super::limiter::TokenBucket;
use super::timing::Timing;

/// Below this many heap entries stale timers are not worth a rebuild.
const COMPACT_MIN: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timed {
    pub(super) at: Duration,
    pub(super) seq: u64,
}

/// Where a key is in the queue proper. Its timer (see `Slot::timer`) is independent, as in
/// client-go, where the waiting list and the queue are separate: `add` does not cancel a timer, and
/// a timer set on a queued key still fires later and queues it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not queued.
    Idle,
    /// In the FIFO since `since`.
    Ready { since: Duration },
    /// Handed out at `started` and not yet done; `requeued` is when it was added meanwhile.
    Processing {
        started: Duration,
        requeued: Option<Duration>,
    },
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) state: State,
    /// The pending `add_after`, if any.
    pub(super) timer: Option<Timed>,
    /// Rate-limited requeues since the last `forget`.
    pub(super) failures: u32,
}

impl Slot {
    fn timer(&self) -> Option<Timed> {
        self.timer
    }

    fn releasable(&self) -> bool {
        self.state == State::Idle && self.timer.is_none() && self.failures == 0
    }
}

/// A heap entry; ordered so that the earliest time, then the earliest scheduled, is on top.
struct Timer<K> {
    at: Duration,
    seq: u64,
    key: K,
}

impl<K> PartialEq for Timer<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<K> Eq for Timer<K> {}

impl<K> PartialOrd for Timer<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Timer<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Event counters since the queue was created.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counters {
    pub(super) adds: u64,
    pub(super) add_afters: u64,
    pub(super) retries: u64,
    pub(super) drops: u64,
    /// Every `add_after` call, zero delays included: client-go's retries metric.
    pub(super) add_after_calls: u64,
}

pub(super) struct Inner<K> {
    slots: AHashMap<K, Slot>,
    ready: VecDeque<K>,
    timers: BinaryHeap<Timer<K>>,
    /// Live timers: slots with a timer.
    delayed: usize,
    processing: usize,
    next_seq: u64,
    pub(super) shut_down: bool,
    pub(super) counters: Counters,
    pub(super) timing: Timing,
    /// The global bucket; it lives under the same lock because every reservation schedules a key.
    pub(super) bucket: TokenBucket,
}

impl<K: Clone + Eq + Hash> Inner<K> {
    pub(super) fn new(bucket: TokenBucket) -> Self {
        Self {
            slots: AHashMap::new(),
            ready: VecDeque::new(),
            timers: BinaryHeap::new(),
            delayed: 0,
            processing: 0,
            next_seq: 0,
            shut_down: false,
            counters: Counters::default(),
            timing: Timing::default(),
            bucket,
        }
    }

    pub(super) fn ready_len(&self) -> usize {
        self.ready.len()
    }

    pub(super) fn delayed_len(&self) -> usize {
        self.delayed
    }

    pub(super) fn processing_len(&self) -> usize {
        self.processing
    }

    pub(super) fn tracked_len(&self) -> usize {
        self.slots.len()
    }

    /// Makes `key` ready, as of `since`. Returns whether it entered the FIFO (so a waiting pop
    /// should wake).
    pub(super) fn add(&mut self, key: K, since: Duration) -> bool {
        let slot = self.slots.entry(key.clone()).or_insert(Slot {
            state: State::Idle,
            timer: None,
            failures: 0,
        });
        match slot.state {
            State::Ready { .. }
            | State::Processing {
                requeued: Some(_), ..
            } => false,
            // Counted only when the key becomes dirty, as client-go's adds metric is.
            State::Processing {
                started,
                requeued: None,
            } => {
                slot.state = State::Processing {
                    started,
                    requeued: Some(since),
                };
                self.counters.adds += 1;
                self.timing.requeued += 1;
                false
            }
            State::Idle => {
                slot.state = State::Ready { since };
                self.ready.push_back(key);
                self.counters.adds += 1;
                true
            }
        }
    }

    /// Sets `key`'s timer to `at`, unless it already waits for an earlier time. Whether the key is
    /// queued does not matter: the timer fires all the same. Returns whether its timer is now the
    /// earliest (so a waiting pop should recompute its wait).
    pub(super) fn add_at(&mut self, key: K, at: Duration) -> bool {
        let seq = self.next_seq;
        let slot = self.slots.entry(key.clone()).or_insert(Slot {
            state: State::Idle,
            timer: None,
            failures: 0,
        });
        match slot.timer {
            Some(old) if old.at <= at => return false,
            Some(_) => {}
            None => self.delayed += 1,
        }
        slot.timer = Some(Timed { at, seq });
        self.next_seq += 1;
        self.timers.push(Timer { at, seq, key });
        let earliest = self.timers.peek().is_some_and(|t| t.seq == seq);
        self.maybe_compact();
        earliest
    }

    /// Moves every timer due at `now` into the FIFO, in time order, ties in scheduling order. A key
    /// still being processed is marked to go back to the FIFO when done. Timers never fire after
    /// shutdown, as upstream stops its waiting loop.
    pub(super) fn promote(&mut self, now: Duration) {
        if self.shut_down {
            return;
        }
        while self.timers.peek().is_some_and(|t| t.at <= now) {
            let Some(timer) = self.timers.pop() else {
                break;
            };
            let Some(slot) = self.slots.get_mut(&timer.key) else {
                continue;
            };
            if slot.timer().map(|t| t.seq) != Some(timer.seq) {
                continue;
            }
            slot.timer = None;
            self.delayed -= 1;
            // Ready since the timer was due, however late this promotion comes.
            self.add(timer.key, timer.at);
        }
    }

    /// The time of the earliest live timer, dropping stale ones from the top on the way.
    pub(super) fn next_ready_at(&mut self) -> Option<Duration> {
        while let Some(top) = self.timers.peek() {
            let live = self
                .slots
                .get(&top.key)
                .and_then(Slot::timer)
                .is_some_and(|t| t.seq == top.seq);
            if live {
                return Some(top.at);
            }
            self.timers.pop();
        }
        None
    }

    /// Hands out up to `max` ready keys in FIFO order at `now` and marks them processing.
    pub(super) fn pop(&mut self, max: usize, now: Duration) -> Vec<K> {
        let n = max.min(self.ready.len());
        let mut out = Vec::with_capacity(n);
        for key in self.ready.drain(..n) {
            if let Some(slot) = self.slots.get_mut(&key) {
                if let State::Ready { since } = slot.state {
                    self.timing.queue_wait.observe(now.saturating_sub(since));
                }
                slot.state = State::Processing {
                    started: now,
                    requeued: None,
                };
            }
            out.push(key);
        }
        self.processing += out.len();
        self.timing.started(now, out.len());
        out
    }

    /// Ends processing of `key` at `now`. Returns `None` if it was not being processed, else
    /// whether it went back into the FIFO.
    pub(super) fn done(&mut self, key: &K, now: Duration) -> Option<bool> {
        let slot = self.slots.get_mut(key)?;
        let State::Processing { started, requeued } = slot.state else {
            return None;
        };
        self.processing -= 1;
        self.timing.finished(started, now);
        if let Some(since) = requeued {
            self.timing.requeued -= 1;
            slot.state = State::Ready { since };
            self.ready.push_back(key.clone());
            Some(true)
        } else {
            slot.state = State::Idle;
            if slot.releasable() {
                self.slots.remove(key);
            }
            Some(false)
        }
    }

    /// Returns the failure count before this failure and counts this one.
    pub(super) fn fail(&mut self, key: &K) -> u32 {
        if let Some(slot) = self.slots.get_mut(key) {
            let failures = slot.failures;
            slot.failures = failures.saturating_add(1);
            return failures;
        }
        self.slots.insert(
            key.clone(),
            Slot {
                state: State::Idle,
                timer: None,
                failures: 1,
            },
        );
        0
    }

    pub(super) fn failures(&self, key: &K) -> u32 {
        self.slots.get(key).map_or(0, |s| s.failures)
    }

    pub(super) fn forget(&mut self, key: &K) {
        if let Some(slot) = self.slots.get_mut(key) {
            slot.failures = 0;
            if slot.releasable() {
                self.slots.remove(key);
            }
        }
    }

    /// Rebuilds the heap once stale timers outnumber live ones, so lazy deletion costs O(1) amortized
    /// and the heap stays within twice the live timers.
    fn maybe_compact(&mut self) {
        let len = self.timers.len();
        if len < COMPACT_MIN || len <= 2 * self.delayed {
            return;
        }
        let slots = &self.slots;
        self.timers.retain(|t| {
            slots
                .get(&t.key)
                .and_then(Slot::timer)
                .is_some_and(|live| live.seq == t.seq)
        });
    }

    #[cfg(test)]
    pub(super) fn heap_len(&self) -> usize {
        self.timers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_timers_are_compacted() {
        let mut q: Inner<u32> = Inner::new(TokenBucket::new(0.0, 1));
        // Each earlier add_after leaves the previous timer stale.
        for round in 0..10u64 {
            for k in 0..1000u32 {
                q.add_at(k, Duration::from_secs(100 - round));
            }
        }
        assert_eq!(q.delayed_len(), 1000);
        assert!(q.heap_len() <= 2 * 1000 + 1, "heap {}", q.heap_len());
        // Adds do not cancel timers (as in client-go): each key is ready now and its timer stays.
        for k in 0..1000u32 {
            q.add(k, Duration::ZERO);
        }
        assert_eq!(q.ready_len(), 1000);
        assert_eq!(q.delayed_len(), 1000);
        assert_eq!(q.next_ready_at(), Some(Duration::from_secs(91)));
        q.promote(Duration::from_secs(1000));
        assert_eq!(q.delayed_len(), 0);
        assert_eq!(q.ready_len(), 1000);
        assert_eq!(q.heap_len(), 0);
    }

    #[test]
    fn idle_slots_are_released() {
        let mut q: Inner<u32> = Inner::new(TokenBucket::new(0.0, 1));
        q.add(1, Duration::ZERO);
        assert_eq!(q.pop(10, Duration::ZERO), vec![1]);
        assert_eq!(q.done(&1, Duration::ZERO), Some(false));
        assert_eq!(q.tracked_len(), 0);
        assert_eq!(q.fail(&2), 0);
        assert_eq!(q.fail(&2), 1);
        q.forget(&2);
        assert_eq!(q.tracked_len(), 0);
        assert_eq!(q.done(&2, Duration::ZERO), None);
    }
}

//! The work queue: de-duplicated keys, delays for the batch period, per-key exponential backoff, a
//! global token bucket and a retry limit, with client-go's delaying-queue semantics:
//!
//! - `add_after(key, d)` with `d == 0` is `add(key)`;
//! - a key waiting for a timer keeps the **earlier** of its ready times;
//! - a key already ready is not duplicated;
//! - a key being processed is never handed out again before `done`; if added meanwhile, it goes back
//!   to the queue at `done`;
//! - a key's timer is independent of whether it is queued: `add` does not cancel it, and a timer set
//!   on a queued key still fires and queues it again later. Replayed traces count syncs exactly as
//!   upstream would.
//!
//! Time comes from a [`Clock`], so tests and the simulator run in virtual time and never sleep.
//! All state sits behind one mutex: every operation is O(1) (hash map and FIFO) or O(log n) (the timer
//! heap), far below the cost of the sync it schedules, so sharding would buy nothing. Waiters sleep on
//! a condvar rather than a crossbeam channel: the FIFO, the de-duplication state and the timers must
//! change together, and a channel would only hold a second copy of the FIFO.

mod budget;
mod clock;
mod limiter;
mod state;
mod timing;

use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use budget::{StepsError, WriteBudget, WriteQpsSteps};
pub use clock::{Clock, SystemClock, VirtualClock};
pub use limiter::{TokenBucket, exponential_backoff};
pub use timing::{DURATION_BUCKETS_NANOS, DurationHistogram, QueueMetrics};

use state::Inner;

/// Upstream's `maxRetries`.
pub const MAX_RETRIES: u32 = 15;
/// Upstream's `defaultSyncBackOff`.
pub const DEFAULT_SYNC_BACKOFF: Duration = Duration::from_secs(1);
/// Upstream's `maxSyncBackOff`.
pub const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(1000);

/// Rate limits and retry limit. The default is upstream's service queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// First per-key backoff; it doubles on each rate-limited requeue.
    pub base_delay: Duration,
    /// Cap of the per-key backoff.
    pub max_delay: Duration,
    /// Refill rate of the global token bucket; not a positive finite number means no bucket.
    pub qps: f64,
    /// Size of the global token bucket.
    pub burst: u32,
    /// `retry_or_drop` retries while a key has fewer requeues than this.
    pub max_retries: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            base_delay: DEFAULT_SYNC_BACKOFF,
            max_delay: MAX_SYNC_BACKOFF,
            qps: 10.0,
            burst: 100,
            max_retries: MAX_RETRIES,
        }
    }
}

impl QueueConfig {
    /// client-go's `DefaultControllerRateLimiter` (base 5 ms), used upstream by the pod and topology
    /// queues.
    pub fn controller_default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            ..Self::default()
        }
    }
}

/// What `retry_or_drop` did with a failed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Requeued with this delay.
    Retry { after: Duration },
    /// Out of retries: forgotten and not requeued.
    Dropped,
}

/// A snapshot of the queue's gauges and counters, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Ready keys (upstream's `workqueue_depth`).
    pub depth: usize,
    /// Keys waiting for a timer, including keys being processed that have one.
    pub delayed: usize,
    /// Keys handed out and not yet done.
    pub processing: usize,
    /// Keys the queue holds state for (including failure counts of idle keys).
    pub tracked: usize,
    /// Times a key became pending: an `add` that was not a duplicate, or a timer that fired
    /// (upstream's `workqueue_adds_total`).
    pub adds: u64,
    /// Calls of `add_after` with a delay (the batch period and retries). Upstream counts these as
    /// `workqueue_retries_total`.
    pub add_afters: u64,
    /// Calls of `add_rate_limited`.
    pub retries: u64,
    /// Keys dropped by `retry_or_drop` after `max_retries`.
    pub drops: u64,
}

/// The work queue. All methods take `&self`; share it by reference or in an `Arc`.
pub struct WorkQueue<K> {
    inner: Mutex<Inner<K>>,
    /// Signalled when a key becomes ready, the earliest timer moves earlier, or on shutdown.
    wake: Condvar,
    clock: Box<dyn Clock>,
    config: QueueConfig,
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send> WorkQueue<K> {
    /// An empty queue reading time from `clock`.
    pub fn new(config: QueueConfig, clock: impl Clock + 'static) -> Self {
        let bucket = TokenBucket::new(config.qps, config.burst);
        Self {
            inner: Mutex::new(Inner::new(bucket)),
            wake: Condvar::new(),
            clock: Box::new(clock),
            config,
        }
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// The queue's current time.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Makes `key` ready now. Ignored after shutdown.
    pub fn add(&self, key: K) {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        if inner.shut_down {
            return;
        }
        // Due timers first, so the queue stays in order of becoming ready.
        inner.promote(now);
        if inner.add(key, now) {
            self.wake.notify_one();
        }
    }

    /// Makes `key` ready after `delay`, keeping an earlier ready time if it has one and leaving it
    /// alone if it is ready already. Ignored after shutdown.
    pub fn add_after(&self, key: K, delay: Duration) {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        if inner.shut_down {
            return;
        }
        self.add_after_locked(&mut inner, key, now, delay);
    }

    fn add_after_locked(&self, inner: &mut Inner<K>, key: K, now: Duration, delay: Duration) {
        inner.counters.add_after_calls += 1;
        inner.promote(now);
        if delay.is_zero() {
            if inner.add(key, now) {
                self.wake.notify_one();
            }
            return;
        }
        inner.counters.add_afters += 1;
        let at = now.checked_add(delay).unwrap_or(Duration::MAX);
        if inner.add_at(key, at) {
            self.wake.notify_one();
        }
    }

    /// Requeues `key` after the larger of its exponential backoff and the token bucket's delay, and
    /// counts a failure. Returns the delay.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        self.add_rate_limited_locked(&mut inner, key, now)
    }

    fn add_rate_limited_locked(&self, inner: &mut Inner<K>, key: K, now: Duration) -> Duration {
        let failures = inner.fail(&key);
        let backoff = exponential_backoff(self.config.base_delay, self.config.max_delay, failures);
        // Upstream reserves a token on every call, even when the backoff is longer.
        let bucket = inner.bucket.reserve(now);
        let delay = backoff.max(bucket);
        inner.counters.retries += 1;
        if !inner.shut_down {
            self.add_after_locked(inner, key, now, delay);
        }
        delay
    }

    /// Upstream's `handleErr` for a failed sync: requeue rate-limited while the key has fewer than
    /// `max_retries` requeues, else forget it and drop it.
    pub fn retry_or_drop(&self, key: &K) -> RetryDecision {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        if inner.failures(key) < self.config.max_retries {
            let after = self.add_rate_limited_locked(&mut inner, key.clone(), now);
            RetryDecision::Retry { after }
        } else {
            inner.forget(key);
            inner.counters.drops += 1;
            RetryDecision::Dropped
        }
    }

    /// Resets the failure count of `key` (after a successful sync).
    pub fn forget(&self, key: &K) {
        self.inner.lock().forget(key);
    }

    /// Rate-limited requeues of `key` since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.inner.lock().failures(key)
    }

    /// Hands out up to `max` ready keys, oldest first, after moving due timers into the queue. The
    /// caller must call `done` for each.
    pub fn pop_ready(&self, max: usize) -> Vec<K> {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        inner.promote(now);
        self.pop_locked(&mut inner, max, now)
    }

    fn pop_locked(&self, inner: &mut Inner<K>, max: usize, now: Duration) -> Vec<K> {
        let out = inner.pop(max, now);
        // Pass the baton: another waiter may take what this one left.
        if inner.ready_len() > 0 {
            self.wake.notify_one();
        }
        out
    }

    /// Like `pop_ready`, but waits up to `timeout` (real time) for a key to become ready. Returns
    /// empty on timeout, and at once after shutdown when nothing is ready. With a virtual clock it
    /// waits for adds but not for timers: if timers are pending it returns at once, so the driver can
    /// advance the clock.
    pub fn pop_blocking(&self, max: usize, timeout: Duration) -> Vec<K> {
        let deadline = Instant::now().checked_add(timeout);
        let mut inner = self.inner.lock();
        loop {
            let now = self.clock.now();
            inner.promote(now);
            if inner.ready_len() > 0 || max == 0 {
                return self.pop_locked(&mut inner, max, now);
            }
            if inner.shut_down {
                return Vec::new();
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Vec::new();
            }
            let timer = if self.clock.is_virtual() {
                if inner.delayed_len() > 0 {
                    return Vec::new();
                }
                None
            } else {
                inner.next_ready_at().map(|at| at.saturating_sub(now))
            };
            let wait = match (left, timer) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match wait {
                Some(w) => {
                    self.wake.wait_for(&mut inner, w);
                }
                None => self.wake.wait(&mut inner),
            }
        }
    }

    /// Ends processing of `key`. If it was added meanwhile it becomes ready again, or waits for its
    /// timer. A key that is not being processed is ignored.
    pub fn done(&self, key: &K) {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        inner.promote(now);
        if inner.done(key, now) == Some(true) {
            self.wake.notify_one();
        }
    }

    /// The earliest time a waiting key becomes ready, if any waits; the simulator jumps there.
    pub fn next_ready_at(&self) -> Option<Duration> {
        self.inner.lock().next_ready_at()
    }

    /// Ready keys (due timers included).
    pub fn len(&self) -> usize {
        self.promoted().ready_len()
    }

    /// Whether no key is ready (due timers included).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting for a timer that is not yet due.
    pub fn delayed_len(&self) -> usize {
        self.promoted().delayed_len()
    }

    /// Keys handed out and not yet done.
    pub fn processing_len(&self) -> usize {
        self.inner.lock().processing_len()
    }

    /// Nothing ready, waiting or being processed.
    pub fn is_idle(&self) -> bool {
        let inner = self.inner.lock();
        inner.ready_len() == 0 && inner.delayed_len() == 0 && inner.processing_len() == 0
    }

    /// Stops accepting keys and wakes every waiter. Ready keys can still be popped; timers never fire.
    pub fn shut_down(&self) {
        self.inner.lock().shut_down = true;
        self.wake.notify_all();
    }

    pub fn is_shut_down(&self) -> bool {
        self.inner.lock().shut_down
    }

    /// Gauges (as of now, due timers counted as ready) and counters.
    pub fn stats(&self) -> QueueStats {
        let inner = self.promoted();
        let c = inner.counters;
        QueueStats {
            depth: inner.ready_len(),
            delayed: inner.delayed_len(),
            processing: inner.processing_len(),
            tracked: inner.tracked_len(),
            adds: c.adds,
            add_afters: c.add_afters,
            retries: c.retries,
            drops: c.drops,
        }
    }

    /// What client-go's workqueue metrics read, as of now (due timers counted as ready).
    pub fn metrics(&self) -> QueueMetrics {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        inner.promote(now);
        QueueMetrics {
            depth: inner.ready_len() + inner.timing.requeued,
            adds: inner.counters.adds,
            retries: inner.counters.add_after_calls,
            queue_wait: inner.timing.queue_wait,
            work: inner.timing.work,
            unfinished_work: inner.timing.unfinished_work(now),
            longest_running: inner.timing.longest_running(now),
        }
    }

    /// The state with due timers moved to the ready queue, so gauges agree with `pop_ready`.
    fn promoted(&self) -> parking_lot::MutexGuard<'_, Inner<K>> {
        let now = self.clock.now();
        let mut inner = self.inner.lock();
        inner.promote(now);
        inner
    }
}

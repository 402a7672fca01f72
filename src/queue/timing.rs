//! What client-go's workqueue metrics need from a queue: how long keys wait before being handed out,
//! how long their processing takes, and the processing still under way. Kept under the queue's own
//! lock, which every operation holds anyway: an observation is a few integer operations, and the
//! metrics layer reads a snapshot at scrape time.

use std::time::Duration;

/// Upper bounds of client-go's workqueue duration buckets, in nanoseconds: 10 ns to 10 s, ×10
/// (`ExponentialBuckets(10e-9, 10, 10)`).
pub const DURATION_BUCKETS_NANOS: [u64; 10] = [
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// A histogram of durations over [`DURATION_BUCKETS_NANOS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    /// Observations per bucket, not cumulative; the last counts those above every bound.
    pub counts: [u64; DURATION_BUCKETS_NANOS.len() + 1],
    pub sum: Duration,
}

impl DurationHistogram {
    pub fn observe(&mut self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // `le` semantics: a value equal to a bound falls in that bound's bucket.
        let i = DURATION_BUCKETS_NANOS.partition_point(|&b| b < nanos);
        self.counts[i] += 1;
        self.sum = self.sum.saturating_add(d);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Upper bounds in seconds, with the non-cumulative count of each; the last bound is +Inf.
    pub fn buckets(&self) -> [(f64, u64); DURATION_BUCKETS_NANOS.len() + 1] {
        let mut out = [(f64::INFINITY, 0); DURATION_BUCKETS_NANOS.len() + 1];
        for (i, slot) in out.iter_mut().enumerate() {
            let bound = DURATION_BUCKETS_NANOS
                .get(i)
                .map_or(f64::INFINITY, |&n| n as f64 / 1e9);
            *slot = (bound, self.counts[i]);
        }
        out
    }
}

/// The queue's side of client-go's workqueue metrics, as of one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueMetrics {
    /// Keys added and not yet handed out: ready keys, and keys added again while being processed
    /// (client-go's `depth` counts both).
    pub depth: usize,
    /// Times a key became pending (`adds_total`).
    pub adds: u64,
    /// Calls of `add_after`, whatever the delay, including those of `add_rate_limited`: client-go
    /// counts every `AddAfter` as a retry (`retries_total`).
    pub retries: u64,
    /// From becoming ready (or being added while processed) to being handed out
    /// (`queue_duration_seconds`).
    pub queue_wait: DurationHistogram,
    /// From being handed out to `done` (`work_duration_seconds`).
    pub work: DurationHistogram,
    /// Sum of the time every key being processed has been at it (`unfinished_work_seconds`).
    pub unfinished_work: Duration,
    /// The longest a key being processed has been at it (`longest_running_processor_seconds`).
    pub longest_running: Duration,
}

/// The timing state behind the queue's lock.
#[derive(Debug, Default)]
pub(super) struct Timing {
    pub(super) queue_wait: DurationHistogram,
    pub(super) work: DurationHistogram,
    /// Keys being processed, by the time they were handed out: (time, how many), in time order.
    /// Keys are handed out in batches at one time, so this holds a handful of entries.
    in_flight: Vec<(Duration, usize)>,
    /// Keys added while being processed: pending, so counted in the depth.
    pub(super) requeued: usize,
}

impl Timing {
    /// `n` keys were handed out at `now`.
    pub(super) fn started(&mut self, now: Duration, n: usize) {
        if n == 0 {
            return;
        }
        match self.in_flight.last_mut() {
            Some((at, count)) if *at == now => *count += n,
            Some((at, _)) if *at > now => {
                // A clock moved backwards (a virtual one can): keep the order.
                let i = self.in_flight.partition_point(|(t, _)| *t < now);
                match self.in_flight.get_mut(i) {
                    Some((t, count)) if *t == now => *count += n,
                    _ => self.in_flight.insert(i, (now, n)),
                }
            }
            _ => self.in_flight.push((now, n)),
        }
    }

    /// A key handed out at `started` is done at `now`.
    pub(super) fn finished(&mut self, started: Duration, now: Duration) {
        self.work.observe(now.saturating_sub(started));
        if let Some(i) = self.in_flight.iter().position(|(t, _)| *t == started) {
            self.in_flight[i].1 -= 1;
            if self.in_flight[i].1 == 0 {
                self.in_flight.remove(i);
            }
        }
    }

    pub(super) fn unfinished_work(&self, now: Duration) -> Duration {
        self.in_flight
            .iter()
            .map(|&(t, n)| {
                now.saturating_sub(t)
                    .saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
            })
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    pub(super) fn longest_running(&self, now: Duration) -> Duration {
        self.in_flight
            .first()
            .map_or(Duration::ZERO, |&(t, _)| now.saturating_sub(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_fall_in_le_buckets() {
        let mut h = DurationHistogram::default();
        h.observe(Duration::from_nanos(10));
        h.observe(Duration::from_nanos(11));
        h.observe(Duration::from_secs(1));
        h.observe(Duration::from_secs(11));
        assert_eq!(h.counts[0], 1);
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[8], 1);
        assert_eq!(h.counts[10], 1);
        assert_eq!(h.count(), 4);
        let b = h.buckets();
        assert_eq!(b[0].0, 1e-8);
        assert_eq!(b[9].0, 10.0);
        assert!(b[10].0.is_infinite());
    }

    #[test]
    fn in_flight_keys_give_unfinished_and_longest() {
        let s = Duration::from_secs;
        let mut t = Timing::default();
        t.started(s(1), 2);
        t.started(s(3), 1);
        t.started(s(2), 1);
        assert_eq!(t.unfinished_work(s(5)), s(4 + 4 + 2 + 3));
        assert_eq!(t.longest_running(s(5)), s(4));
        t.finished(s(1), s(5));
        t.finished(s(1), s(5));
        assert_eq!(t.longest_running(s(5)), s(3));
        assert_eq!(t.work.count(), 2);
        t.finished(s(2), s(5));
        t.finished(s(3), s(5));
        assert_eq!(t.unfinished_work(s(9)), Duration::ZERO);
    }
}

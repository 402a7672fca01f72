//! How long a pod-triggered sync waits: upstream's fixed batch period, or an adaptive window
//! (`--endpointslice-updates-batch-period auto`).
//!
//! The adaptive window is one per controller, moved at most once a second by the engine's write
//! rate: widened by the overshoot (at least doubled, from 100 ms, up to `--max-batch-period`)
//! while the rate is over the write budget, halved for a second of writes under half of it, left
//! alone by a silent second. Only a service that wrote within a few windows waits for it; any
//! other is synced at the floor (the fixed batch period, zero), so an isolated change, or the
//! first after a calm spell, is not delayed.

use std::sync::Arc;
use std::time::Duration;

use ahash::RandomState;
use dashmap::DashMap;
use parking_lot::Mutex;

use crate::index::ServiceKey;
use crate::queue::WriteBudget;

/// The first step of a widening window, and the narrowest a window is before it falls back to
/// the floor.
const FIRST_STEP: Duration = Duration::from_millis(100);

/// A service that wrote within this many windows is busy: its next change waits for the
/// window. A pause of a few windows in a rolling update is not calm.
const BUSY_WINDOWS: u32 = 4;

/// The span over which the engine's write rate is measured.
const RATE_SPAN: Duration = Duration::from_secs(1);

/// `--endpointslice-updates-batch-period auto`: a window between the fixed batch period and
/// `max_batch_period`, widened while writes exceed `write_qps`, for the services that write.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveBatch {
    /// `--max-batch-period`: the widest a window grows.
    pub max_batch_period: Duration,
    /// Writes per second the engine aims to stay under at first (`--kube-api-qps`); the
    /// engine's [`WriteBudget`] may move it later (`--write-qps-steps`).
    pub write_qps: f64,
}

/// A batch period flag's value: a fixed delay, as upstream's, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BatchPeriod {
    Fixed(Duration),
    Auto(AdaptiveBatch),
}

impl BatchPeriod {
    /// Reads a batch period flag's value: a Go-style duration (`0s`, `500ms`), or `auto` for
    /// the adaptive window within `adaptive`'s bounds.
    pub fn parse(
        text: &str,
        adaptive: AdaptiveBatch,
    ) -> Result<BatchPeriod, crate::duration::DurationError> {
        match text {
            "auto" => Ok(BatchPeriod::Auto(adaptive)),
            _ => crate::duration::parse_duration(text).map(BatchPeriod::Fixed),
        }
    }

    /// The engine's fields for this value: the fixed delay (the floor of an adaptive window,
    /// zero) and the adaptive window's bounds.
    pub fn split(self) -> (Duration, Option<AdaptiveBatch>) {
        match self {
            BatchPeriod::Fixed(period) => (period, None),
            BatchPeriod::Auto(adaptive) => (Duration::ZERO, Some(adaptive)),
        }
    }
}

/// The writes every controller made lately, measured over the last [`RATE_SPAN`], and the
/// budget they are held to.
#[derive(Debug)]
pub struct WriteRate {
    spans: Mutex<Spans>,
    pub budget: Arc<WriteBudget>,
}

impl Default for WriteRate {
    fn default() -> Self {
        WriteRate::new(f64::INFINITY)
    }
}

#[derive(Debug, Default)]
struct Spans {
    /// The index of the current span since time zero.
    current: u64,
    in_current: u64,
    in_previous: u64,
}

impl WriteRate {
    pub fn new(budget: f64) -> Self {
        WriteRate {
            spans: Mutex::default(),
            budget: Arc::new(WriteBudget::new(budget)),
        }
    }

    /// Counts `writes` made at `at`.
    pub fn record(&self, at: Duration, writes: usize) {
        if writes == 0 {
            return;
        }
        let mut spans = self.spans.lock();
        spans.roll(at);
        spans.in_current = spans.in_current.saturating_add(writes as u64);
    }

    /// Writes per second at `at`: the current span's count, plus the previous span's weighted by
    /// the part of it still within one span of `at` (a sliding window without a ring of stamps).
    pub fn per_second(&self, at: Duration) -> f64 {
        let mut spans = self.spans.lock();
        spans.roll(at);
        let span = RATE_SPAN.as_secs_f64();
        let into = at.as_secs_f64() % span / span;
        (spans.in_current as f64 + spans.in_previous as f64 * (1.0 - into)) / span
    }
}

impl Spans {
    fn roll(&mut self, at: Duration) {
        let span = (at.as_nanos() / RATE_SPAN.as_nanos()) as u64;
        match span.saturating_sub(self.current) {
            0 => {}
            1 => {
                self.in_previous = self.in_current;
                self.in_current = 0;
            }
            _ => {
                self.in_previous = 0;
                self.in_current = 0;
            }
        }
        self.current = self.current.max(span);
    }
}

/// The window busy services wait, moved once per [`RATE_SPAN`] by the engine's write rate.
#[derive(Debug, Default)]
struct Pressure {
    window: Duration,
    adjusted_at: Duration,
}

impl Pressure {
    /// Widens the window while the rate is over budget, by the overshoot (at least twice) so
    /// that a flood is met in one step; halves it once for a span with writes under half of the
    /// budget. A span without writes leaves it: a service that has not written lately is synced
    /// at once whatever the window, and the next burst finds the window the last one needed.
    /// Steps of one span, so the rate measured has seen the last step's effect.
    fn adjust(&mut self, now: Duration, floor: Duration, max: Duration, rate: &WriteRate) {
        if now.saturating_sub(self.adjusted_at) < RATE_SPAN {
            return;
        }
        self.adjusted_at = now;
        let per_second = rate.per_second(now);
        // No limit (`--kube-api-qps 0`, as the token bucket reads it): nothing to stay under.
        let budget = Some(rate.budget.qps())
            .filter(|qps| *qps > 0.0)
            .unwrap_or(f64::INFINITY);
        if per_second > budget {
            let factor = (per_second / budget).clamp(2.0, 16.0);
            let widened = self.window.max(FIRST_STEP).mul_f64(factor);
            self.window = widened.min(max).max(floor);
        } else if per_second > 0.0 && per_second < budget / 2.0 {
            self.window /= 2;
            if self.window < FIRST_STEP {
                self.window = floor;
            }
        }
    }
}

/// The delays of one controller's pod-triggered syncs.
pub(super) struct BatchWindows {
    /// The fixed batch period: the delay, or the narrowest adaptive window.
    floor: Duration,
    adaptive: Option<AdaptiveBatch>,
    pressure: Mutex<Pressure>,
    /// Every controller's writes: the budget is the engine's, not one controller's.
    rate: Arc<WriteRate>,
    /// When each service last wrote, while adaptive: one that wrote within a few windows is busy.
    last_writes: DashMap<ServiceKey, Duration, RandomState>,
}

impl BatchWindows {
    pub fn new(floor: Duration, adaptive: Option<AdaptiveBatch>, rate: Arc<WriteRate>) -> Self {
        BatchWindows {
            floor,
            adaptive,
            rate,
            pressure: Mutex::new(Pressure {
                window: floor,
                adjusted_at: Duration::ZERO,
            }),
            last_writes: DashMap::default(),
        }
    }

    /// The fixed batch period.
    pub fn floor(&self) -> Duration {
        self.floor
    }

    /// How long a sync of `key` queued by a pod change at `now` waits: the floor, or, for a
    /// service that wrote within the last few windows, the adaptive window. `now` is read only
    /// when the window is adaptive: a fixed period costs a pod event no clock.
    pub fn delay(&self, key: &ServiceKey, now: impl FnOnce() -> Duration) -> Duration {
        let Some(adaptive) = self.adaptive else {
            return self.floor;
        };
        let now = now();
        let window = {
            let mut pressure = self.pressure.lock();
            pressure.adjust(now, self.floor, adaptive.max_batch_period, &self.rate);
            pressure.window
        };
        let busy = (self.last_writes.get(key))
            .is_some_and(|at| now.saturating_sub(*at) < window.saturating_mul(BUSY_WINDOWS));
        if busy { window } else { self.floor }
    }

    /// A sync of `key` at `at` had writes accepted (the rate counts them already).
    pub fn wrote(&self, key: &ServiceKey, at: Duration) {
        let Some(adaptive) = self.adaptive else {
            return;
        };
        self.pressure
            .lock()
            .adjust(at, self.floor, adaptive.max_batch_period, &self.rate);
        self.last_writes.insert(key.clone(), at);
    }

    /// A deleted service's last write is let go.
    pub fn forget(&self, key: &ServiceKey) {
        self.last_writes.remove(key);
    }

    /// The window busy services wait now: for `/metrics`.
    pub fn window(&self) -> Duration {
        self.pressure.lock().window
    }

    /// The window, when adaptive.
    pub fn adaptive_window(&self) -> Option<Duration> {
        self.adaptive.map(|_| self.window())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn key(name: &str) -> ServiceKey {
        ServiceKey::new(&crate::model::intern("ns"), &crate::model::intern(name))
    }

    fn auto(qps: f64) -> (BatchWindows, Arc<WriteRate>) {
        let rate = Arc::new(WriteRate::new(qps));
        let adaptive = AdaptiveBatch {
            max_batch_period: 1000 * MS,
            write_qps: qps,
        };
        let windows = BatchWindows::new(Duration::ZERO, Some(adaptive), Arc::clone(&rate));
        (windows, rate)
    }

    /// `service` writes `writes` every 10 ms from `from` for `span`.
    fn busy(
        windows: &BatchWindows,
        rate: &WriteRate,
        service: &str,
        from: Duration,
        span: Duration,
    ) {
        let mut at = from;
        while at < from + span {
            rate.record(at, 1);
            windows.wrote(&key(service), at);
            at += 10 * MS;
        }
    }

    #[test]
    fn a_fixed_period_never_moves() {
        let rate = Arc::new(WriteRate::default());
        let windows = BatchWindows::new(500 * MS, None, Arc::clone(&rate));
        busy(&windows, &rate, "web", Duration::ZERO, 5000 * MS);
        assert_eq!(windows.delay(&key("web"), || 5000 * MS), 500 * MS);
        assert_eq!(windows.window(), 500 * MS);
    }

    #[test]
    fn over_budget_the_window_widens_each_second_by_the_overshoot_up_to_the_ceiling() {
        // 100 writes a second against a budget of 50: twice over, so twice as wide each second.
        let (windows, rate) = auto(50.0);
        let mut seen = Vec::new();
        for second in 0..7 {
            busy(&windows, &rate, "web", second * 1000 * MS, 1000 * MS);
            seen.push(windows.window());
        }
        // The write at each second's first instant counts too: 101 a second, 2.02 times over.
        let want = [0.0, 0.202, 0.40804, 0.8242408, 1.0, 1.0, 1.0];
        for (seen, want) in seen.iter().zip(want) {
            assert!((seen.as_secs_f64() - want).abs() < 1e-6, "{seen:?} {want}");
        }
        // A flood far over the budget is met in one step.
        let (windows, rate) = auto(5.0);
        busy(&windows, &rate, "web", Duration::ZERO, 1010 * MS);
        assert_eq!(windows.window(), 1000 * MS);
    }

    #[test]
    fn only_a_service_that_wrote_within_a_few_windows_waits() {
        let (windows, rate) = auto(50.0);
        busy(&windows, &rate, "web", Duration::ZERO, 3000 * MS);
        let now = 3000 * MS;
        let window = windows.delay(&key("web"), || now);
        assert!(window > 800 * MS && window < 820 * MS, "{window:?}");
        assert_eq!(windows.delay(&key("calm"), || now), Duration::ZERO);
        // Still busy three windows after its last write; calm after four.
        assert_eq!(windows.delay(&key("web"), || now + 3 * window), window);
        assert_eq!(
            windows.delay(&key("web"), || now + 4 * window),
            Duration::ZERO
        );
        windows.forget(&key("web"));
        assert_eq!(windows.delay(&key("web"), || now), Duration::ZERO);
    }

    #[test]
    fn a_second_of_few_writes_halves_the_window_and_a_silent_one_leaves_it() {
        let (windows, rate) = auto(5.0);
        busy(&windows, &rate, "web", Duration::ZERO, 5000 * MS);
        assert_eq!(windows.window(), 1000 * MS);
        // Silent from 5 s to 9 s: the next burst finds the window the last one needed.
        let _ = windows.delay(&key("web"), || 9000 * MS);
        assert_eq!(windows.window(), 1000 * MS);
        // One write a second, under half the budget: halved once a second, then the floor.
        let mut seen = Vec::new();
        for second in 10..15 {
            let at = second * 1000 * MS;
            rate.record(at, 1);
            windows.wrote(&key("web"), at);
            seen.push(windows.window());
        }
        assert_eq!(seen, [500, 250, 125, 0, 0].map(|ms| ms * MS));
    }

    #[test]
    fn under_budget_nothing_widens() {
        let (windows, rate) = auto(1000.0);
        busy(&windows, &rate, "web", Duration::ZERO, 5000 * MS);
        assert_eq!(windows.delay(&key("web"), || 5000 * MS), Duration::ZERO);
    }

    #[test]
    fn no_limit_never_widens() {
        for qps in [0.0, -1.0, f64::NAN] {
            let (windows, rate) = auto(qps);
            busy(&windows, &rate, "web", Duration::ZERO, 3000 * MS);
            assert_eq!(windows.window(), Duration::ZERO, "{qps}");
        }
    }

    #[test]
    fn the_write_rate_slides_over_one_second() {
        let rate = WriteRate::default();
        rate.record(Duration::from_millis(900), 10);
        assert_eq!(rate.per_second(Duration::from_millis(950)), 10.0);
        // Half a second into the next span, half of the previous span's writes still count.
        assert!((rate.per_second(Duration::from_millis(1500)) - 5.0).abs() < 1e-9);
        assert_eq!(rate.per_second(Duration::from_secs(3)), 0.0);
    }
}

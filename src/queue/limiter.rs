//! The two rate limiters behind `add_rate_limited`: per-key exponential backoff and a global token
//! bucket. Upstream takes the larger of the two delays (client-go's `MaxOfRateLimiter`).

use std::time::Duration;

/// Per-key exponential backoff: `base * 2^failures`, capped at `cap` (client-go's
/// `ItemExponentialFailureRateLimiter`). Overflow saturates at the cap instead of wrapping.
pub fn exponential_backoff(base: Duration, cap: Duration, failures: u32) -> Duration {
    1u32.checked_shl(failures)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(cap, |d| d.min(cap))
}

/// A token bucket of `burst` tokens refilled at `qps` per second, which reserves a token per call and
/// says how long until that token is available, as golang.org/x/time/rate's `Reserve` does.
///
/// It is kept as a theoretical arrival time (GCRA) in integer nanoseconds rather than a float token
/// count, so the spacing of reservations is exact (100 ms at 10 qps) however long it runs.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Time to refill one token; `None` when the bucket does not limit.
    interval: Option<Duration>,
    burst: u32,
    /// When the bucket would be full again if nothing else were reserved.
    full_at: Duration,
}

impl TokenBucket {
    /// A full bucket. A `qps` that is not a positive finite number means no limit; a burst of 0 is
    /// taken as 1 (x/time/rate would refuse every reservation, which a queue cannot express).
    pub fn new(qps: f64, burst: u32) -> Self {
        let interval = (qps.is_finite() && qps > 0.0)
            .then(|| Duration::try_from_secs_f64(1.0 / qps).ok())
            .flatten()
            .filter(|d| !d.is_zero());
        Self {
            interval,
            burst: burst.max(1),
            full_at: Duration::ZERO,
        }
    }

    /// Refills at `qps` from now on; tokens already reserved keep their times.
    pub fn set_qps(&mut self, qps: f64) {
        let burst = self.burst;
        let full_at = self.full_at;
        *self = TokenBucket::new(qps, burst);
        self.full_at = full_at;
    }

    /// Reserves one token at `now` and returns how long to wait for it (zero when one is available).
    pub fn reserve(&mut self, now: Duration) -> Duration {
        let Some(interval) = self.interval else {
            return Duration::ZERO;
        };
        // A bucket that has been idle is full, never fuller: that is the max with now.
        let full_at = self.full_at.max(now).saturating_add(interval);
        self.full_at = full_at;
        let available_at = full_at.saturating_sub(interval.saturating_mul(self.burst));
        available_at.saturating_sub(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn backoff_doubles_and_caps() {
        let got: Vec<u64> = (0..15)
            .map(|f| exponential_backoff(S, 1000 * S, f).as_secs())
            .collect();
        assert_eq!(
            got,
            [
                1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000, 1000, 1000, 1000
            ]
        );
        assert_eq!(exponential_backoff(S, 1000 * S, 31), 1000 * S);
        assert_eq!(exponential_backoff(S, 1000 * S, 32), 1000 * S);
        assert_eq!(exponential_backoff(S, 1000 * S, u32::MAX), 1000 * S);
        assert_eq!(
            exponential_backoff(Duration::MAX, Duration::MAX, 3),
            Duration::MAX
        );
    }

    #[test]
    fn bucket_burst_then_spacing_then_refill() {
        let mut b = TokenBucket::new(10.0, 100);
        let t0 = Duration::ZERO;
        for _ in 0..100 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        for k in 1..=50u32 {
            assert_eq!(b.reserve(t0), Duration::from_millis(100) * k);
        }
        // x/time/rate: 150 taken at t=0, so at t=1s the bucket holds 100 - 150 + 10 = -40 tokens.
        assert_eq!(b.reserve(S), Duration::from_millis(4100));
    }

    #[test]
    fn idle_bucket_refills_to_burst_only() {
        let mut b = TokenBucket::new(10.0, 100);
        for _ in 0..100 {
            b.reserve(Duration::ZERO);
        }
        // Ten seconds refill 100 tokens; an hour refills no more than the burst.
        let later = Duration::from_secs(3600);
        for _ in 0..100 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert_eq!(b.reserve(later), Duration::from_millis(100));
    }

    #[test]
    fn unlimited_and_degenerate_buckets() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut b = TokenBucket::new(qps, 1);
            for _ in 0..1000 {
                assert_eq!(b.reserve(Duration::ZERO), Duration::ZERO);
            }
        }
        let mut b = TokenBucket::new(1.0, 0);
        assert_eq!(b.reserve(Duration::ZERO), Duration::ZERO);
        assert_eq!(b.reserve(Duration::ZERO), S);
    }
}

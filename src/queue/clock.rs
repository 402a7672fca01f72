//! Clocks for the work queue: real time for the controller, virtual time for tests and the simulator.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A source of time, as the duration since an arbitrary start.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Duration;

    /// Whether time moves only when someone moves it. A blocking pop must not wait in real time for a
    /// virtual deadline: nobody may advance the clock while it waits.
    fn is_virtual(&self) -> bool {
        false
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }

    fn is_virtual(&self) -> bool {
        (**self).is_virtual()
    }
}

/// Real monotonic time, measured from an `Instant`.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock that starts now.
    pub fn new() -> Self {
        Self::since(Instant::now())
    }

    /// A clock measured from `start`.
    pub fn since(start: Instant) -> Self {
        Self { start }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

/// Time that moves only when told to. Clones share the same time, so a test keeps one handle and
/// gives another to the queue.
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    nanos: Arc<AtomicU64>,
}

impl VirtualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock at time `t`.
    pub fn at(t: Duration) -> Self {
        let clock = Self::new();
        clock.set(t);
        clock
    }

    /// Moves time forward by `d` (saturating, after about 584 years).
    pub fn advance(&self, d: Duration) {
        let d = to_nanos(d);
        // fetch_update cannot fail here: the closure always returns Some.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(d))
            });
    }

    /// Sets the time. Moving it backwards is allowed, but delays already computed are not shortened.
    pub fn set(&self, t: Duration) {
        self.nanos.store(to_nanos(t), Ordering::Release);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }

    fn is_virtual(&self) -> bool {
        true
    }
}

fn to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_clock_is_shared_and_saturates() {
        let a = VirtualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(3));
        assert_eq!(b.now(), Duration::from_secs(3));
        b.set(Duration::from_millis(1500));
        assert_eq!(a.now(), Duration::from_millis(1500));
        a.advance(Duration::MAX);
        assert_eq!(a.now(), Duration::from_nanos(u64::MAX));
        assert!(a.is_virtual());
        assert!(!SystemClock::new().is_virtual());
    }

    #[test]
    fn system_clock_moves_forward() {
        let c = SystemClock::new();
        let t0 = c.now();
        assert!(c.now() >= t0);
    }
}

//! Fault profiles: how often the API server, the watches and other actors misbehave in a replay.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Rates of every fault a replay can inject. Per-write and per-event rates are shares (0 to 1);
/// scheduled faults are a Poisson process with the given mean count per virtual minute.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultProfile {
    pub name: &'static str,
    /// Writes refused without landing: 409 Conflict, 429, 500, 503, or a 504 timeout.
    pub refused: f64,
    /// Writes that land but whose answer is lost (a 504 timeout after the server stored it).
    pub answer_lost: f64,
    /// Writes that take long, up to `slow_max`: the world moves on while they are made.
    pub slow: f64,
    pub slow_max: Duration,
    /// Every watch event is late by up to this (each watch keeps its order).
    pub watch_lag_max: Duration,
    /// Watch events delivered a second time.
    pub duplicated: f64,
    /// Watches that end with 410 Gone, lose what was in flight, and relist.
    pub expiries_per_minute: f64,
    /// Edits, deletions, duplicates and recreations of managed slices and Endpoints by others.
    pub edits_per_minute: f64,
    /// Services deleted and at once created again under their name (`kubectl replace --force`):
    /// a new uid, while the garbage collector removes the old one's slices.
    pub service_recreations_per_minute: f64,
    /// Informer resyncs: every Service delivered again, every controller syncing each once.
    pub resyncs_per_minute: f64,
    /// Process restarts: every cache rebuilt from lists, every tracker empty.
    pub restarts_per_minute: f64,
    /// The leader goes; the standby, whose caches are warm, takes over.
    pub leader_changes_per_minute: f64,
    /// The most the garbage collector lags behind an owner's deletion.
    pub gc_lag_max: Duration,
}

impl FaultProfile {
    pub const NAMES: [&'static str; 3] = ["none", "flaky-api", "chaos"];

    /// No faults: every write lands and is answered, every watch event arrives at once.
    pub fn none() -> FaultProfile {
        FaultProfile {
            name: "none",
            refused: 0.0,
            answer_lost: 0.0,
            slow: 0.0,
            slow_max: Duration::ZERO,
            watch_lag_max: Duration::ZERO,
            duplicated: 0.0,
            expiries_per_minute: 0.0,
            edits_per_minute: 0.0,
            service_recreations_per_minute: 0.0,
            resyncs_per_minute: 0.0,
            restarts_per_minute: 0.0,
            leader_changes_per_minute: 0.0,
            gc_lag_max: Duration::ZERO,
        }
    }

    /// An API server under load: refused, lost and slow writes, late watches that sometimes
    /// expire.
    pub fn flaky_api() -> FaultProfile {
        FaultProfile {
            name: "flaky-api",
            refused: 0.05,
            answer_lost: 0.01,
            slow: 0.05,
            slow_max: Duration::from_secs(2),
            watch_lag_max: Duration::from_millis(200),
            duplicated: 0.01,
            expiries_per_minute: 0.5,
            ..FaultProfile::none()
        }
    }

    /// Everything at once: a flakier API server, others editing and deleting managed objects, a
    /// lagging garbage collector, resyncs, restarts and leader changes.
    pub fn chaos() -> FaultProfile {
        FaultProfile {
            name: "chaos",
            refused: 0.1,
            answer_lost: 0.03,
            slow: 0.1,
            slow_max: Duration::from_secs(5),
            watch_lag_max: Duration::from_secs(2),
            duplicated: 0.03,
            expiries_per_minute: 2.0,
            edits_per_minute: 6.0,
            service_recreations_per_minute: 1.0,
            resyncs_per_minute: 0.5,
            restarts_per_minute: 0.5,
            leader_changes_per_minute: 0.5,
            gc_lag_max: Duration::from_secs(30),
        }
    }

    /// Whether anything is ever injected.
    pub fn is_none(&self) -> bool {
        *self
            == FaultProfile {
                name: self.name,
                ..FaultProfile::none()
            }
    }

    /// Whether objects must be kept to be listed again (by a relist, a restart or a standby).
    pub fn lists(&self) -> bool {
        self.expiries_per_minute > 0.0
            || self.restarts_per_minute > 0.0
            || self.leader_changes_per_minute > 0.0
    }
}

impl Default for FaultProfile {
    fn default() -> Self {
        FaultProfile::none()
    }
}

impl fmt::Display for FaultProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// A profile name that is not one of [`FaultProfile::NAMES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault profile {0:?}: want none, flaky-api or chaos")]
pub struct UnknownProfile(pub String);

impl FromStr for FaultProfile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(FaultProfile::none()),
            "flaky-api" => Ok(FaultProfile::flaky_api()),
            "chaos" => Ok(FaultProfile::chaos()),
            other => Err(UnknownProfile(other.to_string())),
        }
    }
}

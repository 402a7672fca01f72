//! Leader election over a coordination.k8s.io Lease, with client-go's rules: a lease is taken over
//! only when its holder has not renewed it for a whole lease duration as measured by our own clock
//! (never by comparing clocks), a leader that cannot renew within the renew deadline stops, and a
//! leader that stops cleanly releases the lease so that another replica takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Client, Error};

use super::api_sink::WriteGate;
use super::watch::{RequestError, describe, within};

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This replica's identity: its holderIdentity.
    pub identity: String,
    /// `--leader-elect-lease-duration`: how long a silent holder keeps the lease.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`: how long a leader keeps trying to renew before it stops.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`: the pause between attempts.
    pub retry_period: Duration,
}

/// client-go's `JitterFactor`: acquire attempts are spread over `retry * (1 + 1.2 * rand)`, and
/// the renew deadline must exceed `1.2 * retry`.
const JITTER_FACTOR_TENTHS: u32 = 12;

/// A lease configuration client-go's `NewLeaderElector` would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseConfigError {
    #[error(
        "--leader-elect-lease-duration ({lease:?}) must be greater than --leader-elect-renew-deadline ({renew:?})"
    )]
    LeaseNotAboveRenew { lease: Duration, renew: Duration },
    #[error(
        "--leader-elect-renew-deadline ({renew:?}) must be greater than 1.2 times --leader-elect-retry-period ({retry:?})"
    )]
    RenewNotAboveRetry { renew: Duration, retry: Duration },
    #[error("--leader-elect-{flag} must be greater than zero")]
    Zero { flag: &'static str },
}

impl LeaseConfig {
    /// client-go's rules, in its order: lease duration > renew deadline > 1.2 * retry period, and
    /// each above zero. A zero retry period would send requests as fast as the server answers.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        let (lease, renew, retry) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if lease <= renew {
            return Err(LeaseConfigError::LeaseNotAboveRenew { lease, renew });
        }
        // Exactly 1.2 times, without floats; beyond Duration's range no deadline is above it.
        let jittered = retry.checked_mul(JITTER_FACTOR_TENTHS).map(|d| d / 10);
        if jittered.is_none_or(|j| renew <= j) {
            return Err(LeaseConfigError::RenewNotAboveRetry { renew, retry });
        }
        for (value, flag) in [
            (lease, "lease-duration"),
            (renew, "renew-deadline"),
            (retry, "retry-period"),
        ] {
            if value.is_zero() {
                return Err(LeaseConfigError::Zero { flag });
            }
        }
        Ok(())
    }

    /// How long one lease request may take: client-go's `NewFromKubeconfig` gives the leader
    /// election client max(1 s, renew deadline / 2), so one hung request cannot cost the lease.
    pub fn request_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(Duration::from_secs(1))
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why leading ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lost the leader lease {namespace}/{name}: not renewed within {deadline:?}")]
    Lost {
        namespace: String,
        name: String,
        deadline: Duration,
    },
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The lease as last seen, and when we first saw it in that state.
    observed: Option<(LeaseState, Instant)>,
    /// Whether this replica ever held the lease: only then is there anything to release.
    held: bool,
    rng: crate::sim::Rng,
}

/// What one attempt to take or renew the lease was doing when it failed.
#[derive(Debug, thiserror::Error)]
#[error("{request} the lease {lease}: {source}")]
pub struct AttemptError {
    request: &'static str,
    lease: String,
    #[source]
    source: RequestError,
}

impl AttemptError {
    /// The request and the whole error chain, for a log line.
    pub fn describe(&self) -> String {
        describe(self)
    }

    fn is_conflict(&self) -> bool {
        self.source.is_conflict()
    }
}

/// What identifies a renewal: a holder that renews changes its renew time.
#[derive(Clone, Debug, PartialEq)]
struct LeaseState {
    holder: String,
    renew_time: Option<MicroTime>,
    duration: Option<i32>,
}

impl LeaseState {
    fn of(lease: &Lease) -> LeaseState {
        let spec = lease.spec.as_ref();
        LeaseState {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default(),
            renew_time: spec.and_then(|s| s.renew_time.clone()),
            duration: spec.and_then(|s| s.lease_duration_seconds),
        }
    }
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// Replicas started together draw different jitter.
fn seed_of(identity: &str) -> u64 {
    identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `d * f`, saturating instead of panicking on overflow.
fn scaled(d: Duration, f: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * f).unwrap_or(Duration::MAX)
}

/// The count after one more change of holder. client-go adds one to an int32 and the API server
/// then refuses the negative count, so such a lease could never change hands; here it stays at
/// the largest count.
fn next_transitions(transitions: Option<i32>) -> i32 {
    transitions.unwrap_or(0).max(0).saturating_add(1)
}

impl LeaderElector {
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            observed: None,
            held: false,
            rng: crate::sim::Rng::new(seed_of(&config.identity)),
            config,
        }
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Whether this replica has held the lease at some point.
    pub fn has_held(&self) -> bool {
        self.held
    }

    /// One request about the lease, bounded by `limit`.
    async fn request<T>(
        &self,
        request: &'static str,
        limit: Duration,
        fut: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, AttemptError> {
        within(limit, fut).await.map_err(|source| AttemptError {
            request,
            lease: self.config.describe(),
            source,
        })
    }

    /// One attempt to take or renew the lease: `Ok(true)` when this replica holds it afterwards.
    /// Each request is bounded by `limit`.
    pub async fn try_acquire_or_renew(&mut self, limit: Duration) -> Result<bool, AttemptError> {
        let held = self.try_once(limit).await;
        if matches!(held, Ok(true)) {
            self.held = true;
        }
        held
    }

    async fn try_once(&mut self, limit: Duration) -> Result<bool, AttemptError> {
        let identity = self.config.identity.clone();
        let api = self.api.clone();
        let name = self.config.name.clone();
        let current = self.request("getting", limit, api.get_opt(&name)).await?;
        let lease = match current {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec(None, 0)),
                };
                let params = PostParams::default();
                return match self
                    .request("creating", limit, api.create(&params, &lease))
                    .await
                {
                    Ok(created) => {
                        self.observe(&created);
                        Ok(true)
                    }
                    // Another replica created it first.
                    Err(e) if e.is_conflict() => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let state = LeaseState::of(&lease);
        self.observe(&lease);
        let held_by_us = state.holder == identity;
        if !held_by_us && !state.holder.is_empty() && !self.expired(&state) {
            return Ok(false);
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let transitions = spec.lease_transitions;
        let mut updated = lease.clone();
        updated.spec = Some(if held_by_us {
            LeaseSpec {
                renew_time: Some(now()),
                lease_duration_seconds: Some(seconds(self.config.lease_duration)),
                ..spec
            }
        } else {
            self.spec(None, next_transitions(transitions))
        });
        let params = PostParams::default();
        match self
            .request("updating", limit, api.replace(&name, &params, &updated))
            .await
        {
            Ok(stored) => {
                self.observe(&stored);
                Ok(true)
            }
            // Someone else wrote the lease since we read it: they won this round.
            Err(e) if e.is_conflict() => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn spec(&self, acquire: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = now();
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(seconds(self.config.lease_duration)),
            acquire_time: Some(acquire.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn observe(&mut self, lease: &Lease) {
        let state = LeaseState::of(lease);
        if self.observed.as_ref().is_none_or(|(s, _)| *s != state) {
            self.observed = Some((state, Instant::now()));
        }
    }

    /// Not renewed for the holder's lease duration, counted from when we saw its last renewal.
    fn expired(&self, state: &LeaseState) -> bool {
        let duration = state
            .duration
            .and_then(|d| u64::try_from(d).ok())
            .map_or(self.config.lease_duration, Duration::from_secs);
        self.observed
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= duration)
    }

    /// client-go's `wait.Jitter(retry, 1.2)`: the retry period plus up to 1.2 times it.
    fn jittered(&mut self, period: Duration) -> Duration {
        let factor = f64::from(JITTER_FACTOR_TENTHS) / 10.0 * self.rng.unit();
        let wait = period.saturating_add(scaled(period, factor));
        // Whole milliseconds: they read better in the log.
        Duration::from_millis(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
    }

    /// Waits until this replica holds the lease. Attempts are a jittered retry period apart, as
    /// client-go's; after failed requests the pause doubles, up to a lease duration (a longer
    /// wait would add more to a takeover than an expiry does), and each failure is logged once.
    pub async fn acquire(&mut self) {
        let limit = self.config.request_timeout();
        let mut failures: u32 = 0;
        loop {
            let period = match self.try_acquire_or_renew(limit).await {
                Ok(true) => return,
                Ok(false) => {
                    failures = 0;
                    self.config.retry_period
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let doubled = 2u32
                        .checked_pow(failures - 1)
                        .and_then(|f| self.config.retry_period.checked_mul(f))
                        .unwrap_or(Duration::MAX);
                    let cap = self.config.lease_duration.max(self.config.retry_period);
                    let wait = self.jittered(doubled.min(cap));
                    tracing::warn!(retry_in = ?wait, "leader election: {}", e.describe());
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            tokio::time::sleep(self.jittered(period)).await;
        }
    }

    /// Renews the lease every retry period until it cannot be renewed within the renew deadline;
    /// then closes `gate` at once and returns. Runs until cancelled otherwise. Each attempt is
    /// bounded by what is left of the deadline, as client-go's, so a hung request cannot keep a
    /// leader writing past it.
    pub async fn keep(&mut self, gate: &WriteGate) -> LeaseError {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
            let limit = left.min(self.config.request_timeout());
            match self.try_acquire_or_renew(limit).await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => {
                    // Someone else holds it: stop writing now.
                    gate.set(false);
                    return self.lost();
                }
                Err(e) => tracing::warn!(
                    deadline_in = ?self.config.renew_deadline.saturating_sub(renewed.elapsed()),
                    "leader election: {}",
                    e.describe()
                ),
            }
            if renewed.elapsed() >= self.config.renew_deadline {
                gate.set(false);
                return self.lost();
            }
        }
    }

    fn lost(&self) -> LeaseError {
        LeaseError::Lost {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            deadline: self.config.renew_deadline,
        }
    }

    /// Gives the lease up if we hold it: the holder cleared and the duration cut to one second,
    /// as client-go's ReleaseOnCancel does. A replica that never held it sends nothing; one that
    /// did spends at most one lease request timeout on it, so that shutdown stays prompt.
    pub async fn release(&mut self) -> Result<(), AttemptError> {
        if !self.held {
            return Ok(());
        }
        let limit = self.config.request_timeout();
        let started = Instant::now();
        let api = self.api.clone();
        let name = self.config.name.clone();
        let Some(lease) = self.request("getting", limit, api.get_opt(&name)).await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let mut released = lease;
        released.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(now()),
            ..spec
        });
        let left = limit.saturating_sub(started.elapsed());
        let params = PostParams::default();
        self.request("releasing", left, api.replace(&name, &params, &released))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lease: u64, renew: u64, retry: u64) -> LeaseConfig {
        LeaseConfig {
            name: "sliced".to_string(),
            namespace: "kube-system".to_string(),
            identity: "me".to_string(),
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
        }
    }

    #[test]
    fn lease_flags_are_checked_as_client_go_checks_them() {
        assert_eq!(config(15_000, 10_000, 2_000).validate(), Ok(()));
        assert!(matches!(
            config(10_000, 10_000, 2_000).validate(),
            Err(LeaseConfigError::LeaseNotAboveRenew { .. })
        ));
        // 1.2 * 2 s is 2.4 s: a deadline of exactly that is refused, a nanosecond more is not.
        assert!(matches!(
            config(15_000, 2_400, 2_000).validate(),
            Err(LeaseConfigError::RenewNotAboveRetry { .. })
        ));
        let mut above = config(15_000, 2_400, 2_000);
        above.renew_deadline += Duration::from_nanos(1);
        assert_eq!(above.validate(), Ok(()));
        assert_eq!(
            config(15_000, 10_000, 0).validate(),
            Err(LeaseConfigError::Zero {
                flag: "retry-period"
            })
        );
        let mut huge = config(15_000, 10_000, 0);
        huge.retry_period = Duration::MAX;
        huge.renew_deadline = Duration::MAX;
        assert!(huge.validate().is_err());
        let message = config(15_000, 10_000, 0)
            .validate()
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("--leader-elect-retry-period must be greater than zero")
        );
    }

    #[test]
    fn the_transitions_count_stops_at_its_largest_value() {
        assert_eq!(next_transitions(None), 1);
        assert_eq!(next_transitions(Some(4)), 5);
        assert_eq!(next_transitions(Some(i32::MAX)), i32::MAX);
        assert_eq!(next_transitions(Some(-3)), 1);
    }

    #[test]
    fn lease_requests_time_out_at_half_the_renew_deadline_and_at_least_a_second() {
        assert_eq!(
            config(15_000, 10_000, 2_000).request_timeout(),
            Duration::from_secs(5)
        );
        assert_eq!(
            config(3_000, 1_000, 100).request_timeout(),
            Duration::from_secs(1)
        );
    }
}

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

impl LeaderElector {
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// One attempt to take or renew the lease: `Ok(true)` when this replica holds it afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, Error> {
        let identity = self.config.identity.clone();
        let lease = match self.api.get_opt(&self.config.name).await? {
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
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        self.observe(&created);
                        Ok(true)
                    }
                    // Another replica created it first.
                    Err(Error::Api(s)) if s.code == 409 => Ok(false),
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
        let transitions = spec.lease_transitions.unwrap_or(0);
        let mut updated = lease.clone();
        updated.spec = Some(if held_by_us {
            LeaseSpec {
                renew_time: Some(now()),
                lease_duration_seconds: Some(seconds(self.config.lease_duration)),
                ..spec
            }
        } else {
            self.spec(None, transitions + 1)
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &updated)
            .await
        {
            Ok(stored) => {
                self.observe(&stored);
                Ok(true)
            }
            // Someone else wrote the lease since we read it: they won this round.
            Err(Error::Api(s)) if s.code == 409 => Ok(false),
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

    /// Waits until this replica holds the lease, trying every retry period.
    pub async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "leader election: could not read or write the lease")
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the lease every retry period until it cannot be renewed within the renew deadline;
    /// then closes `gate` at once and returns. Runs until cancelled otherwise.
    pub async fn keep(&mut self, gate: &WriteGate) -> LeaseError {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => {
                    // Someone else holds it: stop writing now.
                    gate.set(false);
                    return self.lost();
                }
                Err(e) => tracing::warn!(error = %e, "leader election: renewing the lease failed"),
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
    /// as client-go's ReleaseOnCancel does.
    pub async fn release(&mut self) -> Result<(), Error> {
        let Some(lease) = self.api.get_opt(&self.config.name).await? else {
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
        self.api
            .replace(&self.config.name, &PostParams::default(), &released)
            .await?;
        Ok(())
    }
}

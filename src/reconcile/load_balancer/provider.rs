//! What the service controller asks of whoever makes load balancers: upstream's `LoadBalancer`
//! interface of `cloud-provider/cloud.go`, with its two special answers.

use std::time::Duration;

use super::pools::Pool;
use super::rules::HostSet;
use crate::model::{Labels, LoadBalancerIngress, Service};
use crate::reconcile::Event;

/// A provider's refusal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Try again after `after`, without counting a failure (upstream's `RetryError`).
    #[error("{message} (retrying after {after:?})")]
    Retry { after: Duration, message: String },
    /// Another controller handles this Service's load balancer (upstream's `ImplementedElsewhere`):
    /// the sync succeeds without a status.
    #[error("implemented elsewhere")]
    ImplementedElsewhere,
    /// A failure, retried with backoff. `events` are recorded on the Service before upstream's
    /// own (an address pool's `AllocationFailed`, with its reason). `withdrawn`: the load
    /// balancer in the Service's status is no longer its own (an address its pool stopped
    /// allowing), so the status ingress is emptied, as MetalLB clears it; otherwise the status
    /// stays as it is, as upstream leaves it.
    #[error("{message}")]
    Failed {
        message: String,
        events: Vec<Event>,
        withdrawn: bool,
    },
}

impl ProviderError {
    pub fn failed(message: impl Into<String>) -> Self {
        ProviderError::Failed {
            message: message.into(),
            events: Vec::new(),
            withdrawn: false,
        }
    }
}

/// A load balancer as the provider ensured it: the ingress to put in the Service's status, and
/// what it has to tell about it as events (an address pool's `IPAllocated`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ensured {
    pub ingress: Vec<LoadBalancerIngress>,
    pub events: Vec<Event>,
}

/// Upstream's five operations. The Service and hosts are read-only; a provider that keeps state
/// keeps it behind its own lock, as workers call it concurrently for different Services.
pub trait LoadBalancerProvider: Send + Sync {
    /// The provider's name, as `sliced reconcile` and the metrics show it.
    fn provider_name(&self) -> &'static str;

    /// The load balancer's name: upstream's default, `a` and the UID without dashes, cut to 32.
    fn load_balancer_name(&self, service: &Service) -> String {
        let mut name = String::with_capacity(32);
        name.push('a');
        name.extend(service.meta.uid.chars().filter(|c| *c != '-'));
        name.truncate(32);
        name
    }

    /// The status of the load balancer made for `service`, or `None` when there is none.
    fn get(&self, service: &Service) -> Result<Option<Vec<LoadBalancerIngress>>, ProviderError>;

    /// Makes or updates the load balancer of `service` with `hosts` as its backends.
    fn ensure(&self, service: &Service, hosts: &HostSet) -> Result<Ensured, ProviderError>;

    /// Changes only the backends of an existing load balancer.
    fn update_hosts(&self, service: &Service, hosts: &HostSet) -> Result<(), ProviderError>;

    /// Deletes the load balancer of `service`; nothing to delete is a success.
    fn ensure_deleted(&self, service: &Service) -> Result<(), ProviderError>;

    /// Every Service as the cluster holds it, so that a provider that hands out addresses takes
    /// back those already in status before it gives out new ones: before the first `ensure`, and
    /// again when its pools change.
    fn restore(&self, _services: &[&Service]) {}

    /// New address pools (the cluster's `IPAddressPool`s changed). False from a provider that
    /// has none.
    fn set_pools(&self, _pools: Vec<Pool>) -> bool {
        false
    }

    /// The labels of `namespace` are now `labels` (None: it is gone). True when its Services'
    /// load balancers may change with them, as an address pool selects namespaces by label.
    fn namespace_labels(&self, _namespace: &str, _labels: Option<&Labels>) -> bool {
        false
    }
}

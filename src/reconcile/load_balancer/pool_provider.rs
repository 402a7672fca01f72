//! The built-in provider: addresses out of MetalLB-style `IPAddressPool`s, read by MetalLB's
//! annotations, so that a cluster without a cloud needs no other controller.
//!
//! Two deliberate differences from MetalLB's controller: a Service whose new request cannot be
//! met keeps the addresses it had (MetalLB clears them first and leaves it with none), and the
//! pool an address came from is not written to an annotation (the provider interface writes
//! status only; [`PoolProvider::pool_of`] answers it).

use std::collections::HashMap;
use std::net::IpAddr;

use parking_lot::Mutex;

use super::pools::{
    AllocationError, Allocator, Claim, FamilyPolicy, LabelSource, NoLabels, Note, Pool,
};
use super::provider::{Ensured, LoadBalancerProvider, ProviderError};
use super::rules::HostSet;
use crate::model::{
    IpFamily, IpFamilyPolicy, Labels, LoadBalancerIngress, Name, Protocol, Service, TrafficPolicy,
};
use crate::reconcile::Event;

/// The annotations MetalLB reads, each with its older `metallb.universe.tf/` spelling.
pub const ANNOTATION_LOAD_BALANCER_IPS: &str = "metallb.io/loadBalancerIPs";
pub const ANNOTATION_ADDRESS_POOL: &str = "metallb.io/address-pool";
pub const ANNOTATION_ALLOW_SHARED_IP: &str = "metallb.io/allow-shared-ip";
const DEPRECATED_PREFIX: &str = "metallb.universe.tf/";

struct State {
    allocator: Allocator,
    /// Namespace labels, for pools pinned by namespace selector.
    namespaces: HashMap<Name, Labels>,
}

/// Addresses out of pools; one lock over the allocator, as allocations must be made one at a
/// time to stay lowest-first.
pub struct PoolProvider {
    state: Mutex<State>,
}

impl Default for PoolProvider {
    /// No pool: every Service fails with a clear reason until pools are given.
    fn default() -> Self {
        PoolProvider::new(Vec::new())
    }
}

impl PoolProvider {
    /// A provider over `pools`; namespace labels arrive through `namespace_labels`.
    pub fn new(pools: Vec<Pool>) -> Self {
        PoolProvider {
            state: Mutex::new(State {
                allocator: Allocator::new(pools),
                namespaces: HashMap::new(),
            }),
        }
    }

    /// The pool `ip` belongs to.
    pub fn pool_of(&self, ip: IpAddr) -> Option<String> {
        self.state.lock().allocator.pool_of(ip).map(str::to_owned)
    }

    /// The addresses `service` (`namespace/name`) holds.
    pub fn addresses_of(&self, service: &str) -> Vec<IpAddr> {
        let st = self.state.lock();
        st.allocator
            .addresses_of(service)
            .map(<[IpAddr]>::to_vec)
            .unwrap_or_default()
    }
}

impl LabelSource for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(|v| v.as_str())
    }
}

/// An annotation by its `metallb.io/` name, or else its deprecated spelling.
fn annotation<'a>(service: &'a Service, name: &str) -> Option<&'a str> {
    let annotations = &service.meta.annotations;
    annotations.get(name).map(|v| v.as_str()).or_else(|| {
        let suffix = name.strip_prefix("metallb.io/")?;
        annotations
            .get(&format!("{DEPRECATED_PREFIX}{suffix}"))
            .map(|v| v.as_str())
    })
}

/// The families a Service's addresses take: from its policy and cluster IPs, as MetalLB reads
/// them. A Service given without cluster IPs (a hand-written file) takes its first IP family,
/// else IPv4, where MetalLB would refuse it.
fn families(service: &Service) -> FamilyPolicy {
    let lb = service.load_balancer.as_deref();
    let cluster_ips = lb.map(|lb| lb.cluster_ips.as_slice()).unwrap_or_default();
    let first = cluster_ips
        .first()
        .map(IpFamily::of)
        .or_else(|| service.ip_families.first().copied())
        .unwrap_or(IpFamily::V4);
    match lb.map(|lb| lb.ip_family_policy).unwrap_or_default() {
        IpFamilyPolicy::RequireDualStack => FamilyPolicy::RequireDual,
        IpFamilyPolicy::PreferDualStack if cluster_ips.len() >= 2 => {
            FamilyPolicy::PreferDual(first)
        }
        _ => FamilyPolicy::Single(first),
    }
}

/// MetalLB's backend key: the selector as Kubernetes prints a label set, for Local traffic only.
fn backend_key(service: &Service) -> Option<String> {
    let local = service
        .load_balancer
        .as_deref()
        .is_some_and(|lb| lb.external_traffic_policy == TrafficPolicy::Local);
    local.then(|| {
        let mut pairs: Vec<String> = service
            .selector
            .iter()
            .flat_map(|s| s.iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.sort();
        pairs.join(",")
    })
}

/// The addresses a Service asks for: the annotation, or `spec.loadBalancerIP`; both is an error,
/// as in MetalLB.
fn requested(service: &Service) -> Result<Vec<IpAddr>, String> {
    let from_spec = service
        .load_balancer
        .as_deref()
        .and_then(|lb| lb.load_balancer_ip.as_ref());
    let from_annotation = annotation(service, ANNOTATION_LOAD_BALANCER_IPS);
    let text = match (from_annotation, from_spec) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "service can not have both {ANNOTATION_LOAD_BALANCER_IPS} and spec.loadBalancerIP"
            ));
        }
        (Some(list), None) => list,
        (None, Some(ip)) => ip.as_str(),
        (None, None) => return Ok(Vec::new()),
    };
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpAddr>()
                .map_err(|_| format!("invalid requested address {s:?}"))
        })
        .collect()
}

/// MetalLB's warning for each annotation read under its old `metallb.universe.tf/` name.
fn deprecated_annotations(service: &Service) -> Vec<Event> {
    let annotations = &service.meta.annotations;
    if !annotations
        .iter()
        .any(|(k, _)| k.starts_with(DEPRECATED_PREFIX))
    {
        return Vec::new();
    }
    [
        ANNOTATION_LOAD_BALANCER_IPS,
        ANNOTATION_ADDRESS_POOL,
        ANNOTATION_ALLOW_SHARED_IP,
    ]
    .iter()
    .filter(|name| annotations.get(name).is_none())
    .filter_map(|name| {
        let old = format!("{DEPRECATED_PREFIX}{}", name.strip_prefix("metallb.io/")?);
        annotations.get(&old)?;
        Some(Event::warning(
            "deprecatedAnnotation",
            format!("Service uses deprecated annotation {old}, use {name} instead"),
        ))
    })
    .collect()
}

fn events(notes: Vec<Note>) -> Vec<Event> {
    notes
        .into_iter()
        .map(|n| {
            if n.reason.is_warning() {
                Event::warning(n.reason.as_str(), n.message)
            } else {
                Event::normal(n.reason.as_str(), n.message)
            }
        })
        .collect()
}

fn failed(reason: &'static str, message: String, mut before: Vec<Event>) -> ProviderError {
    if !before.iter().any(|e| e.reason == reason) {
        before.push(Event::warning(reason, message.clone()));
    }
    ProviderError::Failed {
        message,
        events: before,
        withdrawn: false,
    }
}

/// The IPs of a Service's status.
fn status_ips(service: &Service) -> Vec<IpAddr> {
    service
        .load_balancer
        .as_deref()
        .into_iter()
        .flat_map(|lb| lb.ingress.iter())
        .filter_map(|i| i.ip)
        .collect()
}

impl State {
    /// Runs `f` with the Service's claim.
    fn with_claim<R>(
        &mut self,
        service: &Service,
        f: impl FnOnce(&mut Allocator, &Claim) -> R,
    ) -> R {
        let key = service.meta.key();
        let ports: Vec<(Protocol, i32)> =
            service.ports.iter().map(|p| (p.protocol, p.port)).collect();
        let backend = backend_key(service);
        let namespace_labels: &dyn LabelSource = match self.namespaces.get(&service.meta.namespace)
        {
            Some(labels) => labels,
            None => &NoLabels,
        };
        let claim = Claim {
            service: &key,
            namespace: &service.meta.namespace,
            service_labels: &service.meta.labels,
            namespace_labels,
            families: families(service),
            ports: &ports,
            sharing_key: annotation(service, ANNOTATION_ALLOW_SHARED_IP),
            backend_key: backend.as_deref(),
            pool: annotation(service, ANNOTATION_ADDRESS_POOL),
        };
        f(&mut self.allocator, &claim)
    }
}

impl LoadBalancerProvider for PoolProvider {
    fn provider_name(&self) -> &'static str {
        "address-pools"
    }

    /// Held by the allocator, or else in the Service's status and inside a pool (an address
    /// given before this process started, which it has not taken back).
    fn get(&self, service: &Service) -> Result<Option<Vec<LoadBalancerIngress>>, ProviderError> {
        let st = self.state.lock();
        let ips = match st.allocator.addresses_of(&service.meta.key()) {
            Some(held) => held.to_vec(),
            None => {
                let mut ips = status_ips(service);
                ips.retain(|ip| st.allocator.pool_of(*ip).is_some());
                ips
            }
        };
        Ok((!ips.is_empty()).then(|| ips.into_iter().map(LoadBalancerIngress::ip).collect()))
    }

    fn ensure(&self, service: &Service, _hosts: &HostSet) -> Result<Ensured, ProviderError> {
        let current = status_ips(service);
        let desired = requested(service).map_err(|m| {
            // MetalLB's words: refused as it stands when it holds addresses, as a failed
            // allocation when it has none yet.
            if current.is_empty() {
                let message = format!("Failed to allocate IP for {:?}: {m}", service.meta.key());
                failed("AllocationFailed", message, Vec::new())
            } else {
                failed("LoadBalancerFailed", m, Vec::new())
            }
        })?;
        let mut st = self.state.lock();
        st.with_claim(service, |allocator, claim| {
            let held = allocator
                .addresses_of(claim.service)
                .map(<[IpAddr]>::to_vec);
            match allocator.converge(claim, &current, &desired) {
                Ok(converged) => {
                    let mut events = events(converged.notes);
                    events.extend(deprecated_annotations(service));
                    Ok(Ensured {
                        ingress: converged
                            .addresses
                            .iter()
                            .map(|ip| LoadBalancerIngress::ip(*ip))
                            .collect(),
                        events,
                    })
                }
                Err(error) => {
                    // Keep what it had, where its pools still allow it.
                    if let Some(held) = held.filter(|h| !h.is_empty()) {
                        let _ = allocator.assign(claim, &held);
                    }
                    let message = match error.error.as_ref() {
                        AllocationError::NoPools => {
                            "no address pool is configured (give IPAddressPool objects with \
                             --lb-pools)"
                                .to_owned()
                        }
                        other => other.to_string(),
                    };
                    let mut error = failed("AllocationFailed", message, events(error.notes));
                    // Addresses in status that it cannot hold may be given to another Service:
                    // they go. With no pool at all, nothing is given out, and they stay.
                    let holds = allocator
                        .addresses_of(claim.service)
                        .is_some_and(|a| !a.is_empty());
                    if let ProviderError::Failed { withdrawn, .. } = &mut error {
                        *withdrawn =
                            !current.is_empty() && !holds && allocator.pools().next().is_some();
                    }
                    Err(error)
                }
            }
        })
    }

    fn update_hosts(&self, _service: &Service, _hosts: &HostSet) -> Result<(), ProviderError> {
        // An address does not depend on the nodes behind it.
        Ok(())
    }

    /// Addresses no pool holds any more are let go; the controller converges every Service after.
    fn set_pools(&self, pools: Vec<Pool>) -> bool {
        self.state.lock().allocator.set_pools(pools);
        true
    }

    fn namespace_labels(&self, namespace: &str, labels: Option<&Labels>) -> bool {
        let mut st = self.state.lock();
        let changed = match labels {
            Some(labels) => match st.namespaces.get_mut(namespace) {
                Some(held) if held == labels => false,
                Some(held) => {
                    held.clone_from(labels);
                    true
                }
                None => {
                    st.namespaces.insert(Name::from(namespace), labels.clone());
                    true
                }
            },
            None => st.namespaces.remove(namespace).is_some(),
        };
        changed
            && st.allocator.pools().any(|pool| {
                pool.allocation
                    .as_ref()
                    .is_some_and(|a| !a.namespace_selectors.is_empty())
            })
    }

    fn ensure_deleted(&self, service: &Service) -> Result<(), ProviderError> {
        self.state.lock().allocator.release(&service.meta.key());
        Ok(())
    }

    /// MetalLB's start-up order: Services holding the most addresses claim them first, so that
    /// no Service waiting for one can take another's.
    fn restore(&self, services: &[&Service]) {
        let mut holding: Vec<(&Service, Vec<IpAddr>)> = services
            .iter()
            .map(|s| (*s, status_ips(s)))
            .filter(|(_, ips)| !ips.is_empty())
            .collect();
        holding.sort_by_key(|(_, ips)| std::cmp::Reverse(ips.len()));
        let mut st = self.state.lock();
        for (service, ips) in holding {
            // One refused here is converged, and told of, at its first ensure.
            let _ = st.with_claim(service, |allocator, claim| allocator.assign(claim, &ips));
        }
    }
}

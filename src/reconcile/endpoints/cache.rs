//! A large service's desired addresses, kept in address order between syncs: a sync where a few
//! pods changed edits them, and reads only the pods it writes, instead of reading and sorting
//! every pod of the service. Kept only where one subset holds every address (a service whose
//! ports are all numbers) and no two pods share an identity; otherwise the caller builds in full.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::sync::Arc;

use ahash::RandomState;

use super::desired::{Desired, pod_in_endpoints, pod_ip};
use super::repack::IpKey;
use crate::model::{Name, Pod, Service, Uid};
use crate::reconcile::ports::numeric_only;

/// One address, with what ordering and finding it needs, so that neither reads the pod.
struct Address {
    uid: Uid,
    /// The hash of the pod's name: a changed pod is found without reading every name.
    name_hash: u64,
    ip: IpAddr,
    ready: bool,
    pod: Arc<Pod>,
}

/// Upstream's address order: the IP's text, then the pod's UID.
fn order(a: &Address, b: &Address) -> Ordering {
    IpKey::of_ip(&a.ip)
        .cmp(&IpKey::of_ip(&b.ip))
        .then_with(|| a.uid.cmp(&b.uid))
}

/// The desired addresses of one service, in address order.
pub struct AddressCache {
    addresses: Vec<Address>,
    hasher: RandomState,
}

impl AddressCache {
    /// Whether `service`'s addresses can be kept this way: every pod serves the same ports.
    pub fn fits(service: &Service) -> bool {
        !service.ports.is_empty() && numeric_only(&service.ports)
    }

    fn address(&self, service: &Service, pod: &Arc<Pod>) -> Option<Address> {
        if !pod_in_endpoints(pod, service.publish_not_ready_addresses) {
            return None;
        }
        let ip = pod_ip(service, pod)?;
        Some(Address {
            uid: pod.meta.uid(),
            name_hash: self.hasher.hash_one(pod.meta.name.as_str()),
            ip,
            ready: service.publish_not_ready_addresses || pod.ready,
            pod: Arc::clone(pod),
        })
    }

    /// The addresses of `pods`, the pods `service` selects. `None` when the service does not fit
    /// or two pods share an identity.
    pub fn build(service: &Service, pods: &[Arc<Pod>]) -> Option<AddressCache> {
        if !Self::fits(service) {
            return None;
        }
        let mut cache = AddressCache {
            addresses: Vec::with_capacity(pods.len()),
            hasher: RandomState::new(),
        };
        let addresses: Vec<Address> = pods
            .iter()
            .filter_map(|pod| cache.address(service, pod))
            .collect();
        cache.addresses = addresses;
        cache
            .addresses
            .sort_by_cached_key(|a| (IpKey::of_ip(&a.ip), a.uid.clone()));
        let shared = cache
            .addresses
            .windows(2)
            .any(|w| order(&w[0], &w[1]) == Ordering::Equal);
        (!shared).then_some(cache)
    }

    /// Takes in the pods changed since the last sync, each as it is now (`None`: deleted or no
    /// longer selected). `false` when the addresses no longer fit: the caller drops the cache.
    pub fn apply(&mut self, service: &Service, changed: &[(Name, Option<Arc<Pod>>)]) -> bool {
        if !Self::fits(service) {
            return false;
        }
        let hashes: Vec<u64> = changed
            .iter()
            .map(|(name, _)| self.hasher.hash_one(name.as_str()))
            .collect();
        self.addresses.retain(|a| {
            !hashes
                .iter()
                .zip(changed)
                .any(|(h, (name, _))| *h == a.name_hash && *name == a.pod.meta.name)
        });
        for (_, pod) in changed {
            let Some(address) = pod.as_ref().and_then(|p| self.address(service, p)) else {
                continue;
            };
            match self
                .addresses
                .binary_search_by(|held| order(held, &address))
            {
                Ok(_) => return false,
                Err(at) => self.addresses.insert(at, address),
            }
        }
        true
    }

    /// The desired subsets, as [`Desired::build`] gives them from the same pods.
    pub(crate) fn desired<'a>(&'a self, service: &'a Service) -> Desired<'a> {
        Desired::from_ordered(
            service,
            self.addresses.iter().map(|a| (&*a.pod, a.ip, a.ready)),
        )
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }
}

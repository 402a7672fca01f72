//! A service's desired addresses, kept in address order between syncs: a sync where a few pods
//! changed edits them, and reads only the pods it writes, instead of reading and sorting every pod
//! of the service. And when those edits leave every address as it was (or, over the cap, move
//! only addresses past the last one the cut keeps), and the Endpoints object is still the one the
//! last sync found right, the sync is decided without reading any other pod.
//! Kept only where no two pods share an identity; otherwise the caller builds in full.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::sync::Arc;

use ahash::RandomState;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::capacity::MAX_CAPACITY;
use super::desired::{Desired, hostname, pod_in_endpoints, pod_ip, pod_ports};
use super::memo::SubsetMemo;
use super::repack::IpKey;
use crate::model::{ContainerPort, Endpoints, EndpointsPort, Name, Pod, Service, Uid};

/// The most port sets one service's pods may serve (one per pod template in use, as a rule): a
/// cache holding more is dropped and built again from the pods there are.
const MAX_PORT_SETS: usize = 16;

/// One address, with what ordering and finding it needs, so that neither reads the pod.
struct Address {
    uid: Uid,
    ip: IpAddr,
    /// The first 16 bytes of the IP's text ([`IpKey::head_of`]), in halves: all of an IPv4
    /// address's, so that ordering two of them formats neither.
    head: (u64, u64),
    ready: bool,
    /// Index into [`AddressCache::port_sets`].
    ports: u32,
    pod: Arc<Pod>,
}

impl Address {
    /// The two give the same address record under the same ports.
    fn same_record(&self, other: &Address, service: &Service) -> bool {
        self.ip == other.ip
            && self.ready == other.ready
            && self.ports == other.ports
            && self.uid == other.uid
            && self.pod.meta.namespace == other.pod.meta.namespace
            && self.pod.node_name == other.pod.node_name
            && hostname(service, &self.pod) == hostname(service, &other.pod)
    }
}

/// Upstream's address order: the IP's text, then the pod's UID.
fn order(a: &Address, b: &Address) -> Ordering {
    let ips = match a.head.cmp(&b.head) {
        // Equal heads leave the rest of two IPv6 texts to compare.
        Ordering::Equal if a.ip.is_ipv6() || b.ip.is_ipv6() => {
            IpKey::of_ip(&a.ip).cmp(&IpKey::of_ip(&b.ip))
        }
        ips => ips,
    };
    ips.then_with(|| a.uid.cmp(&b.uid))
}

/// What taking in a sync's changed pods did to the addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// They can no longer be kept this way: the caller drops the cache.
    Unfit,
    /// Some address came, went or changed.
    Moved,
    /// Every address is as it was.
    Kept,
    /// Addresses moved, but only past the last one the settled object's 1,000-address cut keeps:
    /// that object is still the one to have, and the settled counts are brought up to date.
    PastCut,
}

/// The Endpoints object a full sync of the addresses held wrote, or found right as it was.
#[derive(Clone, Debug)]
pub struct Settled {
    /// Its resourceVersion: an object of another version was changed by someone else.
    pub version: Name,
    /// The service synced: one replaced since (its labels, ports, anything) settles nothing.
    pub service: Arc<Service>,
    /// The plan's counts of ready and not-ready addresses, and whether it cut them to the cap.
    pub ready: usize,
    pub not_ready: usize,
    pub truncated: bool,
}

/// The desired addresses of one service, in address order.
pub struct AddressCache {
    addresses: Vec<Address>,
    /// The hash of each address's pod name, in the same order: a changed pod is found by a scan
    /// of these alone, 8 bytes an address, without reading every address.
    name_hashes: Vec<u64>,
    /// The ports the pods serve, each set once; one set when the service's ports are all numbers.
    port_sets: Vec<SmallVec<[EndpointsPort; 2]>>,
    /// How many addresses serve each port set, and how many are ready: kept with every edit, so
    /// that a sync of a large service reads neither from the addresses.
    serving: Vec<usize>,
    ready: usize,
    hasher: RandomState,
    settled: Option<Settled>,
    /// What was settled before the last edit that moved an address (the addresses have not
    /// moved since): that object's subsets are not the desired ones.
    moved_from: Option<Settled>,
    /// The index of the [`MAX_CAPACITY`]th ready address, once found: kept while no edit moves an
    /// address at or before it, so that a large service's edits do not walk to it every time.
    cut_end: Option<usize>,
    /// The hashes that ordered the subsets at the last sync, while the pods serve several port
    /// sets. Behind a lock because syncs read the cache shared; one service's syncs never run at
    /// once, so it is never waited on.
    memo: Mutex<SubsetMemo>,
}

impl AddressCache {
    /// Whether `service`'s addresses can be kept this way: it has ports (a headless service
    /// without any has addresses of no port).
    pub fn fits(service: &Service) -> bool {
        !service.ports.is_empty()
    }

    /// The index of the ports `named` resolves to, added when new; `None` when the pod serves
    /// none of the service's ports.
    fn port_set(&mut self, service: &Service, named: &[ContainerPort]) -> Option<u32> {
        let ports = pod_ports(service, named);
        if ports.is_empty() {
            return None;
        }
        let at = match self.port_sets.iter().position(|p| *p == ports) {
            Some(at) => at,
            None => {
                self.port_sets.push(ports);
                self.serving.push(0);
                self.port_sets.len() - 1
            }
        };
        u32::try_from(at).ok()
    }

    /// Counts `address` in (`held`) or out of the addresses held.
    fn count(&mut self, address: &Address, held: bool) {
        let (serving, ready) = (&mut self.serving[address.ports as usize], &mut self.ready);
        if held {
            *serving += 1;
            *ready += usize::from(address.ready);
        } else {
            *serving -= 1;
            *ready -= usize::from(address.ready);
        }
    }

    /// The address `pod` backs, if any. `last` remembers the previous pod's template: pods of
    /// one template share their named ports, resolved once per run of them.
    fn address(
        &mut self,
        service: &Service,
        pod: &Arc<Pod>,
        last: &mut Option<(*const ContainerPort, Option<u32>)>,
    ) -> Option<Address> {
        if !pod_in_endpoints(pod, service.publish_not_ready_addresses) {
            return None;
        }
        let ip = pod_ip(service, pod)?;
        let template = pod.named_ports.as_ptr();
        let ports = match *last {
            Some((t, ports)) if t == template => ports,
            _ => {
                let ports = self.port_set(service, &pod.named_ports);
                *last = Some((template, ports));
                ports
            }
        }?;
        let head = IpKey::head_of(&ip);
        Some(Address {
            uid: pod.meta.uid(),
            ip,
            head: ((head >> 64) as u64, head as u64),
            ready: service.publish_not_ready_addresses || pod.ready,
            ports,
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
            port_sets: Vec::new(),
            serving: Vec::new(),
            ready: 0,
            name_hashes: Vec::new(),
            hasher: RandomState::new(),
            settled: None,
            moved_from: None,
            cut_end: None,
            memo: Mutex::default(),
        };
        let mut last = None;
        for pod in pods {
            if let Some(address) = cache.address(service, pod, &mut last) {
                cache.count(&address, true);
                cache.addresses.push(address);
            }
        }
        if cache.port_sets.len() > MAX_PORT_SETS {
            return None;
        }
        cache
            .addresses
            .sort_by_cached_key(|a| (IpKey::of_ip(&a.ip), a.uid.clone()));
        let shared = cache
            .addresses
            .windows(2)
            .any(|w| order(&w[0], &w[1]) == Ordering::Equal);
        if shared {
            return None;
        }
        cache.name_hashes = cache
            .addresses
            .iter()
            .map(|a| cache.hasher.hash_one(a.pod.meta.name.as_str()))
            .collect();
        Some(cache)
    }

    /// Takes in the pods changed since the last sync, each as it is now (`None`: deleted or no
    /// longer selected).
    pub fn apply(&mut self, service: &Service, changed: &[(Name, Option<Arc<Pod>>)]) -> Edit {
        if !Self::fits(service) {
            return Edit::Unfit;
        }
        let mut moved = false;
        // Past this index, a move leaves the settled object as it should be.
        let cut_end = self.settled_cut_end();
        let mut moved_in_cut = false;
        let in_cut = |at: usize| cut_end.is_none_or(|end| at <= end);
        // A pod whose address keeps its place (same IP and UID: a readiness flip, a label or a
        // status change) is replaced where it is, without moving the others.
        let mut rest: Vec<(&Name, Option<Address>)> = Vec::new();
        let mut last = None;
        for (name, pod) in changed {
            let address = pod
                .as_ref()
                .and_then(|p| self.address(service, p, &mut last));
            let place = address
                .as_ref()
                .and_then(|a| self.addresses.binary_search_by(|h| order(h, a)).ok())
                .filter(|&at| self.addresses[at].pod.meta.name == *name);
            match (place, address) {
                (Some(at), Some(address)) => {
                    let same = self.addresses[at].same_record(&address, service);
                    moved |= !same;
                    moved_in_cut |= !same && in_cut(at);
                    self.count(&address, true);
                    let old = std::mem::replace(&mut self.addresses[at], address);
                    self.count(&old, false);
                }
                (_, address) => rest.push((name, address)),
            }
        }
        if !rest.is_empty() {
            // Each pod name is held once at most: the address it had (if any) leaves, and the
            // one it has now (if any) goes in at its place in the order.
            let mut gone: Vec<Address> = Vec::new();
            let mut hashes: SmallVec<[u64; 4]> = SmallVec::with_capacity(rest.len());
            for (name, _) in &rest {
                let hash = self.hasher.hash_one(name.as_str());
                hashes.push(hash);
                let held = self
                    .name_hashes
                    .iter()
                    .zip(&self.addresses)
                    .position(|(&h, a)| h == hash && a.pod.meta.name == **name);
                if let Some(at) = held {
                    moved_in_cut |= in_cut(at);
                    self.name_hashes.remove(at);
                    let address = self.addresses.remove(at);
                    self.count(&address, false);
                    gone.push(address);
                }
            }
            for ((_, address), hash) in rest.into_iter().zip(hashes) {
                let Some(address) = address else {
                    continue;
                };
                match gone
                    .iter()
                    .position(|g| g.pod.meta.name == address.pod.meta.name)
                {
                    Some(at) => moved |= !gone.swap_remove(at).same_record(&address, service),
                    None => moved = true,
                }
                match self
                    .addresses
                    .binary_search_by(|held| order(held, &address))
                {
                    Ok(_) => return Edit::Unfit,
                    Err(at) => {
                        moved_in_cut |= in_cut(at);
                        self.count(&address, true);
                        self.addresses.insert(at, address);
                        self.name_hashes.insert(at, hash);
                    }
                }
            }
            moved |= !gone.is_empty();
        }
        if self.port_sets.len() > MAX_PORT_SETS {
            return Edit::Unfit;
        }
        if !moved {
            self.cut_end = cut_end;
            return Edit::Kept;
        }
        if !moved_in_cut && self.cut_keeps_ready_only() {
            self.cut_end = cut_end;
            if let Some(settled) = &mut self.settled {
                settled.ready = self.ready;
                settled.not_ready = self.addresses.len() - self.ready;
            }
            // The addresses moved since that object was settled, so it says nothing now.
            self.moved_from = None;
            return Edit::PastCut;
        }
        // One edit from a settled object only: a second could move an address back.
        self.moved_from = self.settled.take();
        self.cut_end = None;
        Edit::Moved
    }

    /// The addresses are over the cap, of one port set, with enough ready ones to fill it: the
    /// cut keeps the first [`MAX_CAPACITY`] ready addresses and nothing else
    /// ([`Desired::from_ordered`]).
    fn cut_keeps_ready_only(&self) -> bool {
        let first = self.addresses.first().map_or(0, |a| a.ports);
        self.addresses.len() > MAX_CAPACITY
            && self.ready >= MAX_CAPACITY
            && self.serving.get(first as usize) == Some(&self.addresses.len())
    }

    /// The index of the last address the settled object holds, when it was cut keeping ready
    /// addresses alone: none before it or at it may move, any after it may.
    fn settled_cut_end(&self) -> Option<usize> {
        if !self.settled.as_ref().is_some_and(|s| s.truncated) || !self.cut_keeps_ready_only() {
            return None;
        }
        if self.cut_end.is_some() {
            return self.cut_end;
        }
        let mut ready = 0;
        self.addresses.iter().position(|a| {
            ready += usize::from(a.ready);
            ready == MAX_CAPACITY
        })
    }

    /// The desired subsets, as [`Desired::build`] gives them from the same pods.
    pub(crate) fn desired<'a>(&'a self, service: &'a Service) -> Desired<'a> {
        let first = self.addresses.first().map_or(0, |a| a.ports);
        let serving = self.serving.get(first as usize).copied().unwrap_or(0);
        if serving == self.addresses.len() {
            self.memo.lock().clear();
            let ports = self
                .port_sets
                .get(first as usize)
                .map_or(&[][..], |p| p.as_slice());
            return Desired::from_ordered(
                service,
                ports,
                self.addresses.iter().map(|a| (&*a.pod, a.ip, a.ready)),
                self.ready,
            );
        }
        // Pods serving different ports: grouped into subsets as a full build does.
        let pods: Vec<&Pod> = self.addresses.iter().map(|a| &*a.pod).collect();
        Desired::build_remembering(service, &pods, &mut self.memo.lock(), || {
            self.addresses.iter().map(|a| Arc::clone(&a.pod)).collect()
        })
    }

    /// The Endpoints object a full sync of these addresses leaves as it is, if known.
    pub fn settled(&self) -> Option<&Settled> {
        self.settled.as_ref()
    }

    /// Records that a full sync of these addresses wrote, or found right, `settled`.
    pub fn settle(&mut self, settled: Option<Settled>) {
        self.settled = settled;
    }

    /// Whether `current` is known to differ from the desired subsets without comparing them: it
    /// is the object settled (not cut) for the very same `service` before one edit moved an
    /// address. Every field of an address record is in what [`Desired`] gives, so a moved
    /// record changes the subsets.
    pub fn moved_since(&self, current: &Endpoints, service: &Service) -> bool {
        self.moved_from.as_ref().is_some_and(|from| {
            !from.truncated
                && !from.version.is_empty()
                && from.version == current.meta.resource_version
                && std::ptr::eq(Arc::as_ptr(&from.service), service)
        })
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }
}

//! The desired subsets of a service, built straight into the canonical layout that repacking the
//! controller's one-address subsets would give. Addresses are kept as indices into the selected
//! pods until a write needs them, so that a sync that changes nothing allocates almost nothing.

use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use smallvec::SmallVec;

use super::capacity::MAX_CAPACITY;
use super::compare::{same_ports, text};
use super::memo::{AddressKey, Remembered, SubsetMemo};
use super::repack::sort_addresses;
use crate::model::{
    ClusterIp, ContainerPort, EndpointAddress, EndpointSubset, EndpointsPort, IpFamily, Name, Pod,
    Service, TargetRef, Uid, intern,
};
use crate::reconcile::hash_order::{
    self, AddressFields, AddressText, HashKey, Resume, TargetFields,
};
use crate::reconcile::ports::{numeric_only, target_port_number};
use crate::reconcile::slices::pod_has_endpoint;

static POD_KIND: LazyLock<Name> = LazyLock::new(|| intern("Pod"));
static EMPTY: LazyLock<Name> = LazyLock::new(|| intern(""));

/// One pod that backs an address.
struct Entry<'a> {
    pod: &'a Pod,
    ip: IpAddr,
    ready: bool,
    /// Index into `Desired::port_sets`.
    ports: u32,
}

/// One subset: its ports and its addresses as indices into the entries, in canonical order.
#[derive(Debug, Default)]
pub(crate) struct Group {
    pub ports: Vec<EndpointsPort>,
    pub ready: Vec<u32>,
    pub not_ready: Vec<u32>,
}

pub(crate) struct Desired<'a> {
    service: &'a Service,
    entries: Vec<Entry<'a>>,
    pub groups: Vec<Group>,
    /// Built already cut to the 1,000-address cap ([`Desired::from_ordered`]): the counts of ready
    /// and not-ready addresses before the cut.
    cut_from: Option<(usize, usize)>,
}

/// Upstream's `ShouldPodBeInEndpoints`: not terminal, has an IP, and not being deleted unless the
/// service publishes not-ready addresses.
pub fn pod_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    pod_has_endpoint(pod) && (include_terminating || pod.meta.deletion_timestamp().is_none())
}

/// The pod's address for this service: the first pod IP of the service's primary family. Without
/// `ipFamilies` (an API server from before dual stack) the family is the cluster IP's, or for a
/// headless service the pod's primary IP's.
pub(crate) fn pod_ip(service: &Service, pod: &Pod) -> Option<IpAddr> {
    let family = match (service.ip_families.first(), &service.cluster_ip) {
        (Some(family), _) => *family,
        (None, ClusterIp::Ip(ip)) => IpFamily::of(ip),
        (None, _) => match pod.ips().first() {
            Some(IpAddr::V6(_)) => IpFamily::V6,
            _ => IpFamily::V4,
        },
    };
    pod.ips()
        .iter()
        .copied()
        .find(|ip| IpFamily::of(ip) == family)
}

/// The hostname an address carries: the pod's, when its subdomain names this service in the same
/// namespace.
pub(crate) fn hostname<'a>(service: &Service, pod: &'a Pod) -> Option<&'a Name> {
    pod.hostname().filter(|h| {
        !h.is_empty()
            && pod.subdomain() == Some(&service.meta.name)
            && pod.meta.namespace == service.meta.namespace
    })
}

/// The Endpoints ports a pod serves: one per service port whose target resolves on it.
pub(crate) fn pod_ports(
    service: &Service,
    named: &[ContainerPort],
) -> SmallVec<[EndpointsPort; 2]> {
    service
        .ports
        .iter()
        .filter_map(|sp| {
            Some(EndpointsPort {
                name: (!sp.name.is_empty()).then(|| sp.name.clone()),
                port: target_port_number(named, sp)?,
                protocol: Some(sp.protocol),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

impl<'a> Desired<'a> {
    /// The desired subsets of `service` from the pods its selector matches.
    pub(crate) fn build(service: &'a Service, pods: &[&'a Pod]) -> Desired<'a> {
        Self::build_with(service, pods, None)
    }

    /// [`Desired::build`], ordering several subsets by hashes resumed from `memo`, which is left
    /// holding this build's: `alive` gives the pods (held by the caller) `pods` point into.
    pub(crate) fn build_remembering(
        service: &'a Service,
        pods: &[&'a Pod],
        memo: &mut SubsetMemo,
        alive: impl FnOnce() -> Vec<Arc<Pod>>,
    ) -> Desired<'a> {
        let mut remembered = None;
        let desired = Self::build_with(service, pods, Some((&*memo, &mut remembered)));
        match remembered {
            Some(subsets) => memo.remember(subsets, alive()),
            None => memo.clear(),
        }
        desired
    }

    fn build_with(
        service: &'a Service,
        pods: &[&'a Pod],
        memo: Option<(&SubsetMemo, &mut Option<Vec<Remembered>>)>,
    ) -> Desired<'a> {
        let mut desired = Desired {
            service,
            entries: Vec::with_capacity(pods.len()),
            groups: Vec::new(),
            cut_from: None,
        };
        // A service without ports has endpoints only when it is headless ("None" exactly).
        if service.ports.is_empty() && service.cluster_ip != ClusterIp::Headless {
            return desired;
        }
        let mut port_sets: Vec<SmallVec<[EndpointsPort; 2]>> = Vec::new();
        let numeric = numeric_only(&service.ports);
        // Pods of one template share their named ports: remember the last few resolutions.
        let mut seen: SmallVec<[(*const ContainerPort, u32); 8]> = SmallVec::new();
        for &pod in pods {
            if !pod_in_endpoints(pod, service.publish_not_ready_addresses) {
                continue;
            }
            let Some(ip) = pod_ip(service, pod) else {
                continue;
            };
            let template = if numeric {
                std::ptr::null()
            } else {
                pod.named_ports.as_ptr()
            };
            let set = match seen.iter().find(|(t, _)| *t == template) {
                Some((_, set)) => *set,
                None => {
                    let ports = pod_ports(service, &pod.named_ports);
                    let set = match port_sets.iter().position(|p| *p == ports) {
                        Some(i) => i as u32,
                        None => {
                            port_sets.push(ports);
                            (port_sets.len() - 1) as u32
                        }
                    };
                    if seen.len() == seen.inline_size() {
                        seen.remove(0);
                    }
                    seen.push((template, set));
                    set
                }
            };
            // A pod that serves none of the service's ports backs no address.
            if !service.ports.is_empty() && port_sets[set as usize].is_empty() {
                continue;
            }
            desired.entries.push(Entry {
                pod,
                ip,
                ready: service.publish_not_ready_addresses || pod.ready,
                ports: set,
            });
        }
        desired.group(&port_sets, memo);
        desired
    }

    /// What [`Desired::build`] gives when every pod serves the same `ports` (as it does when the
    /// service's ports are all numbers), from the addresses already in address order, each of
    /// another identity (IP and pod UID): one subset, and no pod read.
    ///
    /// Over the cap, only the addresses the cut keeps are taken: with one subset, the cut keeps
    /// the first ready addresses up to the cap, then the first not-ready ones up to what is left
    /// of it ([`super::capacity::truncate`]'s shares of a single subset). A 5,000-pod service
    /// then builds 1,000. `ready` is how many of the addresses are ready.
    pub(crate) fn from_ordered(
        service: &'a Service,
        ports: &[EndpointsPort],
        ordered: impl ExactSizeIterator<Item = (&'a Pod, IpAddr, bool)>,
        ready: usize,
    ) -> Desired<'a> {
        let total = ordered.len();
        let (mut keep_ready, mut keep_not_ready) = (usize::MAX, usize::MAX);
        let mut cut_from = None;
        if total > MAX_CAPACITY {
            keep_ready = ready.min(MAX_CAPACITY);
            keep_not_ready = MAX_CAPACITY - keep_ready;
            cut_from = Some((ready, total - ready));
        }
        let mut desired = Desired {
            service,
            entries: Vec::with_capacity(total.min(MAX_CAPACITY)),
            groups: Vec::new(),
            cut_from,
        };
        let mut group = Group {
            ports: ports.to_vec(),
            ..Group::default()
        };
        for (pod, ip, ready) in ordered {
            let i = desired.entries.len() as u32;
            if ready && group.ready.len() < keep_ready {
                group.ready.push(i);
            } else if !ready && group.not_ready.len() < keep_not_ready {
                group.not_ready.push(i);
            } else if group.ready.len() == keep_ready && group.not_ready.len() == keep_not_ready {
                break;
            } else {
                continue;
            }
            desired.entries.push(Entry {
                pod,
                ip,
                ready,
                ports: 0,
            });
        }
        if desired.entries.is_empty() {
            return desired;
        }
        hash_order::sort_endpoints_ports(&mut group.ports);
        group.ports.dedup_by(|a, b| a == b);
        desired.groups.push(group);
        desired
    }

    /// Packs the entries into subsets, as repacking would.
    /// With a memo, the subsets' hashes resume from it, and those of this build are put in the
    /// second member.
    fn group(
        &mut self,
        port_sets: &[SmallVec<[EndpointsPort; 2]>],
        memo: Option<(&SubsetMemo, &mut Option<Vec<Remembered>>)>,
    ) {
        let entries = &self.entries;
        if entries.is_empty() {
            return;
        }
        let order = sort_addresses(
            entries.len(),
            |i| entries[i as usize].ip,
            |i| entries[i as usize].pod.meta.uid(),
        );
        // Runs of one identity (IP and pod UID): duplicates collapse into their first pod.
        let mut runs: Vec<(u32, u32)> = Vec::with_capacity(order.len());
        let mut start = 0;
        for i in 1..=order.len() {
            let same = i < order.len() && {
                let (x, y) = (&entries[order[start] as usize], &entries[order[i] as usize]);
                x.ip == y.ip && x.pod.meta.same_uid(&y.pod.meta)
            };
            if !same {
                runs.push((start as u32, i as u32));
                start = i;
            }
        }

        // Ports served by the same port sets serve the same addresses.
        let mut classes: Vec<(SmallVec<[u64; 1]>, Vec<EndpointsPort>)> = Vec::new();
        if port_sets.len() == 1 {
            classes.push((SmallVec::from_elem(1, 1), port_sets[0].to_vec()));
        } else {
            let words = port_sets.len().div_ceil(64);
            let mut ports: Vec<(&EndpointsPort, SmallVec<[u64; 1]>)> = Vec::new();
            for (s, set) in port_sets.iter().enumerate() {
                for port in set {
                    let i = match ports.iter().position(|(p, _)| *p == port) {
                        Some(i) => i,
                        None => {
                            ports.push((port, SmallVec::from_elem(0, words)));
                            ports.len() - 1
                        }
                    };
                    ports[i].1[s / 64] |= 1 << (s % 64);
                }
            }
            for (port, bits) in ports {
                match classes.iter_mut().find(|(b, _)| *b == bits) {
                    Some((_, list)) => list.push(port.clone()),
                    None => classes.push((bits, vec![port.clone()])),
                }
            }
        }

        for (bits, ports) in classes {
            let in_class = |e: &Entry| bits[e.ports as usize / 64] & (1 << (e.ports % 64)) != 0;
            let mut group = Group::default();
            for &(from, to) in &runs {
                let mut first = None;
                let mut ready = true;
                for &i in &order[from as usize..to as usize] {
                    let e = &entries[i as usize];
                    if in_class(e) {
                        // Not ready under this port anywhere wins over ready.
                        ready &= e.ready;
                        first = first.or(Some(i));
                    }
                }
                // The record is the identity's first pod, whichever ports it serves.
                if first.is_some() {
                    let rep = order[from as usize];
                    if ready {
                        group.ready.push(rep);
                    } else {
                        group.not_ready.push(rep);
                    }
                }
            }
            // Two classes can end up with the same addresses when one identity backs several pods.
            match self
                .groups
                .iter_mut()
                .find(|g| g.ready == group.ready && g.not_ready == group.not_ready)
            {
                Some(g) => g.ports.extend(ports),
                None => {
                    group.ports = ports;
                    self.groups.push(group);
                }
            }
        }
        for g in &mut self.groups {
            hash_order::sort_endpoints_ports(&mut g.ports);
            g.ports.dedup_by(|a, b| a == b);
        }
        if self.groups.len() > 1 {
            // Upstream orders subsets by a hash of the whole subset, so each is printed once.
            let hashes: Vec<HashKey> = match memo {
                Some((memo, to)) => {
                    let subsets = self.remembered(memo);
                    let hashes = subsets.iter().map(|r| r.hash).collect();
                    *to = Some(subsets);
                    hashes
                }
                None => self.groups.iter().map(|g| self.subset_hash(g)).collect(),
            };
            let groups = std::mem::take(&mut self.groups);
            let mut keyed: Vec<(HashKey, Group)> = hashes.into_iter().zip(groups).collect();
            keyed.sort_by_key(|(hash, _)| *hash);
            self.groups = keyed.into_iter().map(|(_, g)| g).collect();
        }
    }

    /// Ready addresses, before any cut.
    pub(crate) fn ready_count(&self) -> usize {
        match self.cut_from {
            Some((ready, _)) => ready,
            None => self.groups.iter().map(|g| g.ready.len()).sum(),
        }
    }

    /// Not-ready addresses, before any cut.
    pub(crate) fn not_ready_count(&self) -> usize {
        match self.cut_from {
            Some((_, not_ready)) => not_ready,
            None => self.groups.iter().map(|g| g.not_ready.len()).sum(),
        }
    }

    /// Built already cut to the cap: the groups hold what [`super::capacity::truncate`] would
    /// keep.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut_from.is_some()
    }

    /// The desired subsets are semantically those of `current`, in the same order, as upstream's
    /// comparison sees them (the caller also tries `current` repacked, as upstream does).
    pub(crate) fn same_as(&self, current: &[EndpointSubset]) -> bool {
        current.len() == self.groups.len()
            && self.groups.iter().zip(current).all(|(g, s)| {
                same_ports(&g.ports, &s.ports)
                    && self.same_list(&g.ready, &s.addresses)
                    && self.same_list(&g.not_ready, &s.not_ready_addresses)
            })
    }

    fn same_list(&self, want: &[u32], have: &[Arc<EndpointAddress>]) -> bool {
        want.len() == have.len()
            && want
                .iter()
                .zip(have)
                .all(|(&i, a)| self.same_address(&self.entries[i as usize], a))
    }

    /// The address an entry gives equals `a`, the target's resourceVersion aside. Names are compared
    /// as `Name`s, so that interned ones (kind, namespace, node) compare by pointer.
    fn same_address(&self, e: &Entry, a: &EndpointAddress) -> bool {
        let pod = e.pod;
        // An absent string field equals an empty one.
        let same = |have: &Option<Name>, want: &Name| {
            have.as_ref().map_or(want.is_empty(), |have| have == want)
        };
        let node = pod.node_name.as_ref().unwrap_or(&EMPTY);
        matches!(&a.ip, crate::model::Address::Ip(ip) if *ip == e.ip)
            && a.node_name.as_ref() == Some(node)
            && a.target_ref.as_ref().is_some_and(|t| {
                t.uid.as_ref().unwrap_or(&Uid::EMPTY) == &pod.meta.uid()
                    && same(&t.name, &pod.meta.name)
                    && same(&t.namespace, &pod.meta.namespace)
                    && same(&t.kind, &POD_KIND)
                    && text(&t.api_version).is_empty()
            })
            && {
                // Not a comparison of two (usually empty) strs: libc's memcmp of zero bytes costs
                // more than all the rest of this function together.
                let have = a.hostname.as_ref().filter(|h| !h.is_empty());
                have == hostname(self.service, pod)
            }
    }

    /// `a` is exactly the address [`Desired::address`] builds for entry `i` (every field, unlike
    /// [`Desired::same_address`]), so that it can be written in its place.
    fn builds(&self, i: u32, a: &EndpointAddress) -> bool {
        let e = &self.entries[i as usize];
        let pod = e.pod;
        fn non_empty(n: &Name) -> Option<&Name> {
            (!n.is_empty()).then_some(n)
        }
        matches!(&a.ip, crate::model::Address::Ip(ip) if *ip == e.ip)
            && a.node_name.as_ref() == Some(pod.node_name.as_ref().unwrap_or(&EMPTY))
            && a.target_ref.as_ref().is_some_and(|t| {
                t.uid.as_ref() == Some(&pod.meta.uid()).filter(|u| !u.is_empty())
                    && t.name.as_ref() == non_empty(&pod.meta.name)
                    && t.namespace.as_ref() == non_empty(&pod.meta.namespace)
                    && t.kind.as_ref() == Some(&*POD_KIND)
                    && t.api_version.is_none()
                    && t.resource_version.is_none()
            })
            && a.hostname.as_ref() == hostname(self.service, pod)
    }

    fn address(&self, i: u32) -> EndpointAddress {
        let e = &self.entries[i as usize];
        let pod = e.pod;
        let non_empty = |n: &Name| (!n.is_empty()).then(|| n.clone());
        EndpointAddress {
            ip: crate::model::Address::Ip(e.ip),
            hostname: hostname(self.service, pod).cloned(),
            // Upstream always points nodeName at the pod's, empty or not.
            node_name: Some(pod.node_name.clone().unwrap_or_else(|| EMPTY.clone())),
            target_ref: Some(TargetRef {
                kind: Some(POD_KIND.clone()),
                namespace: non_empty(&pod.meta.namespace),
                name: non_empty(&pod.meta.name),
                uid: Some(pod.meta.uid()).filter(|u| !u.is_empty()),
                api_version: None,
                resource_version: None,
            }),
        }
    }

    /// What [`Desired::address`] gives, read from the pod: what the print of the address reads.
    fn address_fields(&self, i: u32) -> AddressFields<'_> {
        let e = &self.entries[i as usize];
        let pod = e.pod;
        AddressFields {
            ip: AddressText::Ip(e.ip),
            hostname: hostname(self.service, pod).map_or("", |h| h.as_str()),
            node_name: Some(pod.node_name.as_deref().unwrap_or("")),
            target: Some(TargetFields {
                kind: POD_KIND.as_str(),
                namespace: pod.meta.namespace.as_str(),
                name: pod.meta.name.as_str(),
                uid: Some(pod.meta.uid()),
                api_version: "",
                resource_version: "",
            }),
        }
    }

    /// The hash that orders `g` among the subsets: that of [`Desired::subset`]'s print.
    fn subset_hash(&self, g: &Group) -> HashKey {
        hash_order::subset_fields_hash(
            g.ready.iter().map(|&i| self.address_fields(i)),
            g.not_ready.iter().map(|&i| self.address_fields(i)),
            &g.ports,
        )
    }

    /// Each subset with its hash, resumed from the subset of `memo` it shares the most first
    /// addresses with.
    fn remembered(&self, memo: &SubsetMemo) -> Vec<Remembered> {
        let key = |&i: &u32| {
            let e = &self.entries[i as usize];
            AddressKey::of(e.pod, e.ip)
        };
        let fields = |&i: &u32| self.address_fields(i);
        self.groups
            .iter()
            .map(|g| {
                let ready: Vec<AddressKey> = g.ready.iter().map(key).collect();
                let not_ready: Vec<AddressKey> = g.not_ready.iter().map(key).collect();
                let start = memo.start(&ready, &not_ready, &g.ports);
                let mut states = Vec::with_capacity(ready.len() + not_ready.len());
                states.extend_from_slice(start.states);
                let hash = start.hash.unwrap_or_else(|| {
                    let (ready_from, not_ready_from) = match start.from {
                        Resume::Start => (0, 0),
                        Resume::Ready(n) => (n, 0),
                        Resume::NotReady(n) => (g.ready.len(), n),
                    };
                    hash_order::subset_fields_hash_resumed(
                        start.from,
                        start.state,
                        (g.ready.len(), g.ready[ready_from..].iter().map(fields)),
                        (
                            g.not_ready.len(),
                            g.not_ready[not_ready_from..].iter().map(fields),
                        ),
                        &g.ports,
                        &mut states,
                    )
                });
                Remembered {
                    ready,
                    not_ready,
                    ports: g.ports.clone(),
                    states,
                    hash,
                }
            })
            .collect()
    }

    /// For each subset: the print and hash made from the pods, and those of the built subset.
    #[cfg(test)]
    pub(crate) fn prints(&self) -> Vec<((String, HashKey), (String, HashKey))> {
        self.groups
            .iter()
            .map(|g| {
                let from_pods = hash_order::print_subset_fields(
                    g.ready.iter().map(|&i| self.address_fields(i)),
                    g.not_ready.iter().map(|&i| self.address_fields(i)),
                    &g.ports,
                );
                let subset = self.subset(g, None);
                (
                    (from_pods.as_str().to_owned(), self.subset_hash(g)),
                    (
                        hash_order::print_subset(&subset).as_str().to_owned(),
                        hash_order::subset_hash(&subset),
                    ),
                )
            })
            .collect()
    }

    /// The subset of `g`, sharing the addresses of `current` (the subset at its place in the
    /// object written before) that are exactly those it would build.
    fn subset(&self, g: &Group, current: Option<&EndpointSubset>) -> EndpointSubset {
        EndpointSubset {
            addresses: self.addresses(&g.ready, current.map_or(&[], |c| &c.addresses)),
            not_ready_addresses: self.addresses(
                &g.not_ready,
                current.map_or(&[], |c| &c.not_ready_addresses),
            ),
            ports: g.ports.clone(),
        }
    }

    /// The addresses of entries `want`. Both lists are in address order, so an unchanged address
    /// is where the one before it was found, or a few places on when addresses went between
    /// them: it is looked for there alone, and shared when it is exactly what would be built.
    fn addresses(&self, want: &[u32], have: &[Arc<EndpointAddress>]) -> Vec<Arc<EndpointAddress>> {
        /// How many addresses of `have` may have gone between two found: further, the rest is
        /// built (an object of other addresses costs that many comparisons an address at most).
        const LOOK_AHEAD: usize = 4;
        let mut next = 0;
        want.iter()
            .map(|&i| {
                let ahead = have.get(next..).unwrap_or(&[]).iter().take(LOOK_AHEAD);
                for (k, a) in ahead.enumerate() {
                    if self.builds(i, a) {
                        next += k + 1;
                        return Arc::clone(a);
                    }
                }
                Arc::new(self.address(i))
            })
            .collect()
    }

    /// The subsets to write, sharing with `current` (the subsets of the object there is) every
    /// address it already holds as it would be built.
    pub(crate) fn to_subsets(&self, current: &[EndpointSubset]) -> Vec<EndpointSubset> {
        self.groups
            .iter()
            .enumerate()
            .map(|(k, g)| self.subset(g, current.get(k)))
            .collect()
    }
}

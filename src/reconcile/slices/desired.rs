//! The desired endpoints of a service for one address type, grouped by port mapping.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock};

use ahash::RandomState;
use hashbrown::HashTable;
use smallvec::SmallVec;

use super::NodeLookup;
use crate::model::{
    Address, ClusterIp, Conditions, ContainerPort, Endpoint, EndpointPort, IpFamily, Name, Pod,
    PodPhase, Service, TargetRef, intern,
};
use crate::reconcile::ports::{numeric_only, target_port_number};

static POD_KIND: LazyLock<Name> = LazyLock::new(|| intern("Pod"));

/// Fixed seeds: plans must not depend on a per-process random state.
fn identity_hasher() -> RandomState {
    RandomState::with_seeds(0x5ca1ab1e, 0x51ced, 0xe1d5, 0x7a6e)
}

/// The ports of a port group in canonical form: sorted, so that order does not matter, with a nil list
/// and an empty list the same.
pub(crate) fn port_key(ports: &[EndpointPort]) -> SmallVec<[EndpointPort; 4]> {
    let mut key: SmallVec<[EndpointPort; 4]> = ports.iter().cloned().collect();
    key.sort_unstable();
    key
}

/// A desired endpoint before it is built: the pod, its addresses of this family and what the
/// endpoint's attributes derive from. Most syncs find most endpoints unchanged, so only those placed
/// or rewritten are ever built.
pub(crate) struct Candidate<'a> {
    pod: &'a Pod,
    addresses: SmallVec<[Address; 1]>,
    hostname: Option<&'a Name>,
    zone: Option<&'a Name>,
    conditions: Conditions,
}

impl Candidate<'_> {
    /// The endpoint as upstream builds it from the pod.
    pub(crate) fn to_endpoint(&self) -> Endpoint {
        let pod = self.pod;
        let addresses = match self.addresses.as_slice() {
            // The common case, one address, without SmallVec's generic clone.
            [one] => smallvec::smallvec![one.clone()],
            many => many.iter().cloned().collect(),
        };
        Endpoint {
            addresses,
            conditions: self.conditions,
            hostname: self.hostname.cloned(),
            target_ref: Some(TargetRef {
                kind: Some(POD_KIND.clone()),
                namespace: Some(pod.meta.namespace.clone()),
                name: Some(pod.meta.name.clone()),
                uid: Some(pod.meta.uid()).filter(|u| !u.is_empty()),
                api_version: None,
                resource_version: None,
            }),
            node_name: pod.node_name.as_ref().and_then(non_empty).cloned(),
            zone: self.zone.cloned(),
            hints: None,
        }
    }

    /// The endpoint to write where `existing` stands: `existing` itself, shared, when it is exactly
    /// what [`Self::to_endpoint`] would build; else that build.
    pub(crate) fn endpoint_for(&self, existing: &Arc<Endpoint>) -> Arc<Endpoint> {
        if self.builds(existing) {
            Arc::clone(existing)
        } else {
            Arc::new(self.to_endpoint())
        }
    }

    /// `ep` equals what [`Self::to_endpoint`] builds, field for field.
    fn builds(&self, ep: &Endpoint) -> bool {
        ep.hints.is_none()
            && ep.hostname.as_ref() == self.hostname
            && ep.addresses == self.addresses
            && ep
                .target_ref
                .as_ref()
                .is_some_and(|t| t.resource_version.is_none())
            && self.same_attributes(ep)
    }

    /// Upstream's "equal beyond hash" between this desired endpoint and an existing one: node, zone,
    /// conditions and target (without resourceVersion). Hints and address order are not compared.
    pub(crate) fn same_attributes(&self, ep: &Endpoint) -> bool {
        let pod = self.pod;
        ep.conditions == self.conditions
            && ep.node_name.as_ref() == pod.node_name.as_ref().and_then(non_empty)
            && ep.zone.as_ref() == self.zone
            && ep.target_ref.as_ref().is_some_and(|t| {
                t.kind.as_ref() == Some(&*POD_KIND)
                    && t.namespace.as_ref() == Some(&pod.meta.namespace)
                    && t.name.as_ref() == Some(&pod.meta.name)
                    && {
                        let uid = pod.meta.uid();
                        t.uid.as_ref() == (!uid.is_empty()).then_some(&uid)
                    }
                    && t.api_version.is_none()
            })
    }
}

fn non_empty(n: &Name) -> Option<&Name> {
    (!n.is_empty()).then_some(n)
}

/// The hash of an endpoint's identity. Upstream's identity is the sorted addresses, the hostname and
/// the target's namespace and name; hashing the addresses and the name spreads entries as well, and
/// equality still checks every part.
fn identity_hash(state: &RandomState, addresses: &[Address], name: &str) -> u64 {
    let mut h = state.build_hasher();
    if addresses.len() <= 1 {
        addresses.hash(&mut h);
    } else {
        let mut sorted: SmallVec<[&Address; 4]> = addresses.iter().collect();
        sorted.sort_unstable();
        sorted.len().hash(&mut h);
        for a in sorted {
            a.hash(&mut h);
        }
    }
    name.hash(&mut h);
    h.finish()
}

fn same_addresses(a: &[Address], b: &[Address]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() <= 1 {
        return a == b;
    }
    let mut x: SmallVec<[&Address; 4]> = a.iter().collect();
    let mut y: SmallVec<[&Address; 4]> = b.iter().collect();
    x.sort_unstable();
    y.sort_unstable();
    x == y
}

/// The identity parts of an existing endpoint: hostname, target namespace and name ("" if absent).
fn existing_identity(ep: &Endpoint) -> (Option<&Name>, Option<&Name>, Option<&Name>) {
    let target = ep.target_ref.as_ref();
    (
        ep.hostname.as_ref().and_then(non_empty),
        target
            .and_then(|t| t.namespace.as_ref())
            .and_then(non_empty),
        target.and_then(|t| t.name.as_ref()).and_then(non_empty),
    )
}

pub(crate) fn is_same_endpoint(c: &Candidate, ep: &Endpoint) -> bool {
    let (hostname, namespace, name) = existing_identity(ep);
    hostname == c.hostname.and_then(non_empty)
        && namespace == non_empty(&c.pod.meta.namespace)
        && name == non_empty(&c.pod.meta.name)
        && same_addresses(&c.addresses, &ep.addresses)
}

fn is_same_candidate(a: &Candidate, b: &Candidate) -> bool {
    a.hostname.and_then(non_empty) == b.hostname.and_then(non_empty)
        && a.pod.meta.namespace == b.pod.meta.namespace
        && a.pod.meta.name == b.pod.meta.name
        && same_addresses(&a.addresses, &b.addresses)
}

/// A set of desired endpoints keyed by identity, that hands out the endpoints not yet placed in the
/// order they were inserted (pod order), so that placement is deterministic. The identity table is
/// built on the first lookup: a service with no slices yet never needs it.
pub(crate) struct DesiredSet<'a> {
    candidates: Vec<Candidate<'a>>,
    taken: Vec<bool>,
    table: Option<HashTable<(u64, u32)>>,
    state: RandomState,
    remaining: usize,
    cursor: usize,
}

impl<'a> DesiredSet<'a> {
    fn with_capacity(n: usize) -> Self {
        DesiredSet {
            candidates: Vec::with_capacity(n),
            taken: Vec::with_capacity(n),
            table: None,
            state: identity_hasher(),
            remaining: 0,
            cursor: 0,
        }
    }

    fn insert(&mut self, c: Candidate<'a>) {
        self.candidates.push(c);
        self.taken.push(false);
        self.remaining += 1;
    }

    /// Indexes every candidate by identity. Two of one identity: the later wins, as in a map.
    fn build_table(&mut self) -> HashTable<(u64, u32)> {
        let mut table: HashTable<(u64, u32)> = HashTable::with_capacity(self.candidates.len());
        for (i, c) in self.candidates.iter().enumerate() {
            if self.taken[i] {
                continue;
            }
            let hash = identity_hash(&self.state, &c.addresses, &c.pod.meta.name);
            let candidates = &self.candidates;
            match table.find_mut(hash, |&(h, j)| {
                h == hash && is_same_candidate(&candidates[j as usize], c)
            }) {
                Some(slot) => {
                    self.taken[slot.1 as usize] = true;
                    self.remaining -= 1;
                    slot.1 = i as u32;
                }
                None => {
                    table.insert_unique(hash, (hash, i as u32), |&(h, _)| h);
                }
            }
        }
        table
    }

    /// Marks as placed the desired endpoint with the identity of `existing`; returns its index.
    pub(crate) fn take(&mut self, existing: &Endpoint) -> Option<u32> {
        if self.remaining == 0 {
            return None;
        }
        if self.table.is_none() {
            self.table = Some(self.build_table());
        }
        let (_, _, name) = existing_identity(existing);
        let hash = identity_hash(
            &self.state,
            &existing.addresses,
            name.map_or("", |n| n.as_str()),
        );
        let candidates = &self.candidates;
        let table = self.table.as_mut()?;
        let entry = table
            .find_entry(hash, |&(h, i)| {
                h == hash && is_same_endpoint(&candidates[i as usize], existing)
            })
            .ok()?;
        let ((_, index), _) = entry.remove();
        self.remaining -= 1;
        self.taken[index as usize] = true;
        Some(index)
    }

    pub(crate) fn get(&self, index: u32) -> &Candidate<'a> {
        &self.candidates[index as usize]
    }

    /// The next desired endpoint not yet placed, built.
    pub(crate) fn pop(&mut self) -> Option<Endpoint> {
        while self.cursor < self.candidates.len() {
            let i = self.cursor;
            self.cursor += 1;
            if !self.taken[i] {
                self.taken[i] = true;
                self.remaining -= 1;
                return Some(self.candidates[i].to_endpoint());
            }
        }
        None
    }

    pub(crate) fn len(&self) -> usize {
        self.remaining
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

/// Desired endpoints sharing one set of ports.
pub(crate) struct PortGroup<'a> {
    /// The canonical form, compared with existing slices' ports.
    pub key: SmallVec<[EndpointPort; 4]>,
    /// The ports in service order, written on new slices.
    pub ports: Vec<EndpointPort>,
    pub desired: DesiredSet<'a>,
    /// How many endpoints the group had before placement took any.
    pub total: usize,
}

#[derive(Default)]
pub(crate) struct Desired<'a> {
    pub groups: Vec<PortGroup<'a>>,
    /// Pods skipped because their node does not exist: the error of each, and its name.
    pub errors: Vec<String>,
    pub left_out: Vec<Name>,
}

/// Upstream's rule for which pods can back an endpoint: not terminal, and with an IP. Terminating pods
/// are kept.
pub fn pod_has_endpoint(pod: &Pod) -> bool {
    !matches!(pod.phase, PodPhase::Failed | PodPhase::Succeeded)
        && (pod.has_pod_ip || !pod.ips().is_empty())
}

/// The endpoint ports for a pod: one per service port that resolves; a port whose named target the pod
/// lacks is left out.
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    ports_with(service, &pod.named_ports)
}

/// [`endpoint_ports`] given the pod's named container ports: with only numeric target ports, the
/// same for every pod.
pub(crate) fn ports_with(service: &Service, named: &[ContainerPort]) -> Vec<EndpointPort> {
    if service.ports.is_empty() && service.cluster_ip == ClusterIp::Headless {
        return Vec::new();
    }
    service
        .ports
        .iter()
        .filter_map(|sp| {
            let number = target_port_number(named, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone()),
                port: Some(number),
                protocol: Some(sp.protocol),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// The desired endpoint a pod gives for one IP family, or `None` when it has no address of that
/// family.
pub(crate) fn candidate<'a>(
    service: &Service,
    pod: &'a Pod,
    zone: Option<&'a Name>,
    family: IpFamily,
) -> Option<Candidate<'a>> {
    let addresses: SmallVec<[Address; 1]> = pod
        .ips()
        .iter()
        .filter(|ip| IpFamily::of(ip) == family)
        .map(|ip| Address::Ip(*ip))
        .collect();
    if addresses.is_empty() {
        return None;
    }
    let serving = pod.ready;
    let terminating = pod.meta.deletion_timestamp().is_some();
    let ready = service.publish_not_ready_addresses || (serving && !terminating);
    let hostname = pod.hostname().filter(|h| {
        !h.is_empty()
            && pod.subdomain() == Some(&service.meta.name)
            && pod.meta.namespace == service.meta.namespace
    });
    Some(Candidate {
        pod,
        addresses,
        hostname,
        zone,
        conditions: Conditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        },
    })
}

/// The zone of the pod's node, or the error that skips the pod: its node does not exist and the
/// service does not publish not-ready addresses.
pub(crate) fn pod_zone<'a>(
    service: &Service,
    pod: &Pod,
    nodes: &'a dyn NodeLookup,
) -> Result<Option<&'a Name>, String> {
    let node_name = pod.node_name.as_deref().unwrap_or("");
    let node = nodes.node(node_name);
    if node.is_none() && !service.publish_not_ready_addresses {
        return Err(format!(
            "skipping Pod {} for Service {}/{}: Node {} Not Found",
            pod.meta.name, service.meta.namespace, service.meta.name, node_name
        ));
    }
    Ok(node.and_then(|n| n.zone()))
}

/// Builds the desired endpoints of `service` for one address family from the pods its selector
/// matches.
pub(crate) fn desired_endpoints<'a>(
    service: &Service,
    pods: &[&'a Pod],
    nodes: &'a dyn NodeLookup,
    family: IpFamily,
) -> Desired<'a> {
    let mut groups: Vec<PortGroup> = Vec::new();
    let mut errors = Vec::new();
    let mut left_out = Vec::new();
    // Pods of one template share their named ports; remember the group of the last one seen.
    let numeric_only = numeric_only(&service.ports);
    let mut last: Option<(*const ContainerPort, usize)> = None;

    for &pod in pods {
        if !pod_has_endpoint(pod) {
            continue;
        }
        let template = Arc::as_ptr(&pod.named_ports) as *const ContainerPort;
        let group = match last {
            Some((t, g)) if numeric_only || t == template => g,
            _ => {
                let ports = endpoint_ports(service, pod);
                let key = port_key(&ports);
                let g = match groups.iter().position(|g| g.key == key) {
                    Some(g) => g,
                    None => {
                        groups.push(PortGroup {
                            key,
                            ports,
                            desired: DesiredSet::with_capacity(pods.len()),
                            total: 0,
                        });
                        groups.len() - 1
                    }
                };
                last = Some((template, g));
                g
            }
        };

        let zone = match pod_zone(service, pod, nodes) {
            Ok(zone) => zone,
            Err(error) => {
                errors.push(error);
                left_out.push(pod.meta.name.clone());
                continue;
            }
        };
        if let Some(c) = candidate(service, pod, zone, family) {
            groups[group].desired.insert(c);
        }
    }
    for g in &mut groups {
        g.total = g.desired.len();
    }
    Desired {
        groups,
        errors,
        left_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IpFamily, intern};

    /// An endpoint is shared only when it is exactly what would be built: any field apart, and a
    /// new one is built.
    #[test]
    fn an_existing_endpoint_is_kept_only_when_equal_to_the_build() {
        let scenario = crate::sim::single_service(3);
        let pod = &scenario.pods[0];
        let zone = intern("zone-a");
        let c = candidate(&scenario.service, pod, Some(&zone), IpFamily::V4)
            .unwrap_or_else(|| panic!("the pod has an endpoint"));
        let built = Arc::new(c.to_endpoint());
        let kept = c.endpoint_for(&built);
        assert!(Arc::ptr_eq(&kept, &built), "equal: shared");

        type Edit = fn(&mut Endpoint);
        let edits: [(&str, Edit); 8] = [
            ("hints", |e| e.hints = Some(Box::default())),
            ("hostname", |e| e.hostname = Some(Name::new("h"))),
            ("addresses", |e| e.addresses.clear()),
            ("target resourceVersion", |e| {
                if let Some(t) = e.target_ref.as_mut() {
                    t.resource_version = Some(Name::new("7"));
                }
            }),
            ("target uid", |e| {
                if let Some(t) = e.target_ref.as_mut() {
                    t.uid = None;
                }
            }),
            ("conditions", |e| e.conditions.ready = Some(false)),
            ("node", |e| e.node_name = None),
            ("zone", |e| e.zone = Some(intern("zone-b"))),
        ];
        for (what, edit) in edits {
            let mut other = (*built).clone();
            edit(&mut other);
            assert_ne!(other, *built, "{what}: the edit changes the endpoint");
            let other = Arc::new(other);
            let written = c.endpoint_for(&other);
            assert!(
                !Arc::ptr_eq(&written, &other),
                "{what}: a new endpoint is built"
            );
            assert_eq!(*written, *built, "{what}: the build, not the existing one");
        }
    }
}

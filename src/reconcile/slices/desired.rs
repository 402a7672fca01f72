//! The desired endpoints of a service for one address type, grouped by port mapping.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock};

use ahash::RandomState;
use hashbrown::HashTable;
use smallvec::SmallVec;

use super::NodeLookup;
use crate::model::{
    Address, ClusterIp, Conditions, ContainerPort, Endpoint, EndpointPort, IpFamily, Name, Pod,
    PodPhase, Service, TargetPort, TargetRef, intern,
};

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

/// Upstream's endpoint identity: the sorted addresses, the hostname and the target's namespace and
/// name. Conditions, node, zone and the pod UID are attributes, not identity.
fn identity_hash(state: &RandomState, ep: &Endpoint) -> u64 {
    let mut h = state.build_hasher();
    if ep.addresses.len() <= 1 {
        ep.addresses.hash(&mut h);
    } else {
        let mut sorted: SmallVec<[&Address; 4]> = ep.addresses.iter().collect();
        sorted.sort_unstable();
        sorted.len().hash(&mut h);
        for a in sorted {
            a.hash(&mut h);
        }
    }
    hostname_of(ep).hash(&mut h);
    let (ns, name) = target_of(ep);
    ns.hash(&mut h);
    name.hash(&mut h);
    h.finish()
}

fn hostname_of(ep: &Endpoint) -> &str {
    ep.hostname.as_deref().unwrap_or("")
}

fn target_of(ep: &Endpoint) -> (&str, &str) {
    match &ep.target_ref {
        Some(t) => (
            t.namespace.as_deref().unwrap_or(""),
            t.name.as_deref().unwrap_or(""),
        ),
        None => ("", ""),
    }
}

fn same_identity(a: &Endpoint, b: &Endpoint) -> bool {
    if hostname_of(a) != hostname_of(b) || target_of(a) != target_of(b) {
        return false;
    }
    if a.addresses.len() != b.addresses.len() {
        return false;
    }
    if a.addresses.len() <= 1 {
        return a.addresses == b.addresses;
    }
    let mut x: SmallVec<[&Address; 4]> = a.addresses.iter().collect();
    let mut y: SmallVec<[&Address; 4]> = b.addresses.iter().collect();
    x.sort_unstable();
    y.sort_unstable();
    x == y
}

/// A set of desired endpoints keyed by identity, that hands out the endpoints not yet placed in the
/// order they were inserted (pod order), so that placement is deterministic.
pub(crate) struct DesiredSet {
    endpoints: Vec<Option<Endpoint>>,
    table: HashTable<u32>,
    state: RandomState,
    remaining: usize,
    cursor: usize,
}

impl DesiredSet {
    fn new() -> Self {
        DesiredSet {
            endpoints: Vec::new(),
            table: HashTable::new(),
            state: identity_hasher(),
            remaining: 0,
            cursor: 0,
        }
    }

    fn insert(&mut self, ep: Endpoint) {
        let hash = identity_hash(&self.state, &ep);
        let endpoints = &self.endpoints;
        let found = self.table.find(hash, |&i| {
            endpoints[i as usize]
                .as_ref()
                .is_some_and(|e| same_identity(e, &ep))
        });
        if let Some(&i) = found {
            // The same identity twice: the later one wins, as in a map.
            self.endpoints[i as usize] = Some(ep);
            return;
        }
        let index = self.endpoints.len() as u32;
        self.endpoints.push(Some(ep));
        let endpoints = &self.endpoints;
        let state = &self.state;
        self.table.insert_unique(hash, index, |&i| {
            endpoints[i as usize]
                .as_ref()
                .map_or(0, |e| identity_hash(state, e))
        });
        self.remaining += 1;
    }

    /// Removes and returns the desired endpoint with the identity of `existing`.
    pub(crate) fn take(&mut self, existing: &Endpoint) -> Option<Endpoint> {
        if self.remaining == 0 {
            return None;
        }
        let hash = identity_hash(&self.state, existing);
        let endpoints = &self.endpoints;
        let entry = self
            .table
            .find_entry(hash, |&i| {
                endpoints[i as usize]
                    .as_ref()
                    .is_some_and(|e| same_identity(e, existing))
            })
            .ok()?;
        let (index, _) = entry.remove();
        self.remaining -= 1;
        self.endpoints[index as usize].take()
    }

    /// The next desired endpoint not yet placed.
    pub(crate) fn pop(&mut self) -> Option<Endpoint> {
        while self.cursor < self.endpoints.len() {
            let i = self.cursor;
            self.cursor += 1;
            if let Some(ep) = self.endpoints[i].take() {
                self.remaining -= 1;
                return Some(ep);
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
pub(crate) struct PortGroup {
    /// The canonical form, compared with existing slices' ports.
    pub key: SmallVec<[EndpointPort; 4]>,
    /// The ports in service order, written on new slices.
    pub ports: Vec<EndpointPort>,
    pub desired: DesiredSet,
    /// How many endpoints the group had before placement took any.
    pub total: usize,
}

pub(crate) struct Desired {
    pub groups: Vec<PortGroup>,
    /// Pods skipped because their node does not exist.
    pub errors: Vec<String>,
}

/// Upstream's rule for which pods can back an endpoint: not terminal, and with an IP. Terminating pods
/// are kept.
pub fn pod_has_endpoint(pod: &Pod) -> bool {
    !matches!(pod.phase, PodPhase::Failed | PodPhase::Succeeded)
        && (pod.has_pod_ip || !pod.ips.is_empty())
}

/// Resolves a named target port in the pod's containers: regular containers first, then sidecars; the
/// name and the protocol must both match.
fn find_named_port(
    named: &[ContainerPort],
    port: &crate::model::ServicePort,
    name: &str,
) -> Option<i32> {
    named
        .iter()
        .find(|c| !c.sidecar && c.name.as_str() == name && c.protocol == port.protocol)
        .or_else(|| {
            named
                .iter()
                .find(|c| c.sidecar && c.name.as_str() == name && c.protocol == port.protocol)
        })
        .map(|c| c.port)
}

/// The endpoint ports for a pod: one per service port that resolves; a port whose named target the pod
/// lacks is left out.
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    if service.ports.is_empty() && service.cluster_ip == ClusterIp::Headless {
        return Vec::new();
    }
    service
        .ports
        .iter()
        .filter_map(|sp| {
            let number = match &sp.target_port {
                TargetPort::Number(n) => *n,
                TargetPort::Name(name) => find_named_port(&pod.named_ports, sp, name)?,
            };
            Some(EndpointPort {
                name: Some(sp.name.clone()),
                port: Some(number),
                protocol: Some(sp.protocol),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// The endpoint a pod gives for one IP family, or `None` when it has no address of that family.
pub(crate) fn pod_endpoint(
    service: &Service,
    pod: &Pod,
    node_zone: Option<&Name>,
    family: IpFamily,
) -> Option<Endpoint> {
    let addresses: SmallVec<[Address; 1]> = pod
        .ips
        .iter()
        .filter(|ip| IpFamily::of(ip) == family)
        .map(|ip| Address::Ip(*ip))
        .collect();
    if addresses.is_empty() {
        return None;
    }
    let serving = pod.ready;
    let terminating = pod.meta.deletion_timestamp.is_some();
    let ready = service.publish_not_ready_addresses || (serving && !terminating);
    let hostname = pod
        .hostname
        .as_ref()
        .filter(|h| {
            !h.is_empty()
                && pod.subdomain.as_ref() == Some(&service.meta.name)
                && pod.meta.namespace == service.meta.namespace
        })
        .cloned();
    Some(Endpoint {
        addresses,
        conditions: Conditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        },
        hostname,
        target_ref: Some(TargetRef {
            kind: Some(POD_KIND.clone()),
            namespace: Some(pod.meta.namespace.clone()),
            name: Some(pod.meta.name.clone()),
            uid: (!pod.meta.uid.is_empty()).then(|| pod.meta.uid.clone()),
            api_version: None,
            resource_version: None,
        }),
        node_name: pod.node_name.clone().filter(|n| !n.is_empty()),
        zone: node_zone.cloned(),
        hints: None,
    })
}

/// Builds the desired endpoints of `service` for one address family from the pods its selector
/// matches.
pub(crate) fn desired_endpoints(
    service: &Service,
    pods: &[&Pod],
    nodes: &dyn NodeLookup,
    family: IpFamily,
) -> Desired {
    let mut groups: Vec<PortGroup> = Vec::new();
    let mut errors = Vec::new();
    // Pods of one template share their named ports; remember the group of the last one seen.
    let numeric_only = service
        .ports
        .iter()
        .all(|p| matches!(p.target_port, TargetPort::Number(_)));
    let mut last: Option<(*const ContainerPort, usize)> = None;

    for pod in pods {
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
                            desired: DesiredSet::new(),
                            total: 0,
                        });
                        groups.len() - 1
                    }
                };
                last = Some((template, g));
                g
            }
        };

        let node_name = pod.node_name.as_deref().unwrap_or("");
        let node = nodes.node(node_name);
        if node.is_none() && !service.publish_not_ready_addresses {
            errors.push(format!(
                "skipping Pod {} for Service {}/{}: Node {} Not Found",
                pod.meta.name, service.meta.namespace, service.meta.name, node_name
            ));
            continue;
        }
        let zone = node.and_then(|n| n.zone());
        if let Some(ep) = pod_endpoint(service, pod, zone, family) {
            groups[group].desired.insert(ep);
        }
    }
    for g in &mut groups {
        g.total = g.desired.len();
    }
    Desired { groups, errors }
}

//! The desired endpoints of a mirrored Endpoints: one set per (address type, ports) key, built from
//! the repacked subsets with the per-subset cap.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::IpAddr;

use ahash::RandomState;
use smallvec::SmallVec;

use crate::model::{
    Address, AddressType, Conditions, Endpoint, EndpointAddress, EndpointPort, EndpointSubset,
    EndpointsPort, IpFamily, Name, Protocol, intern,
};
use crate::reconcile::endpoints::repack;

/// The ports of a key in canonical form: sorted, unnamed as "", protocol defaulted to TCP as the
/// API server defaults it. Existing slices are grouped by the same form.
pub(crate) fn port_key(ports: &[EndpointPort]) -> Vec<EndpointPort> {
    let mut key: Vec<EndpointPort> = ports
        .iter()
        .map(|p| EndpointPort {
            name: Some(p.name.clone().unwrap_or_default()),
            port: p.port,
            protocol: Some(p.protocol.unwrap_or_default()),
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    key.sort_unstable();
    key
}

/// A v1 port as a slice port: name and protocol always set, as upstream writes them.
fn slice_port(p: &EndpointsPort) -> EndpointPort {
    EndpointPort {
        name: Some(p.name.clone().unwrap_or_else(|| intern(""))),
        port: Some(p.port),
        protocol: Some(p.protocol.unwrap_or(Protocol::Tcp)),
        app_protocol: p.app_protocol.clone(),
    }
}

/// An endpoint's identity, upstream's endpoint hash: sorted addresses, hostname, and the target's
/// namespace and name ("" when absent).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    addresses: SmallVec<[Address; 1]>,
    hostname: Name,
    namespace: Name,
    name: Name,
}

pub(crate) fn identity(ep: &Endpoint) -> Identity {
    let mut addresses = ep.addresses.clone();
    addresses.sort_unstable();
    let target = ep.target_ref.as_ref();
    Identity {
        addresses,
        hostname: ep.hostname.clone().unwrap_or_default(),
        namespace: target.and_then(|t| t.namespace.clone()).unwrap_or_default(),
        name: target.and_then(|t| t.name.clone()).unwrap_or_default(),
    }
}

/// The desired endpoints of one key, in the order first inserted, each identity once.
pub(crate) struct Group {
    pub address_type: AddressType,
    /// Canonical ports, compared with existing slices' [`port_key`].
    pub key: Vec<EndpointPort>,
    /// Ports as written on a new slice.
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
    index: HashMap<Identity, usize, RandomState>,
}

impl Group {
    fn new(address_type: AddressType, mut ports: Vec<EndpointPort>) -> Group {
        // Upstream writes mirrored slices' ports in its hash order too.
        crate::reconcile::hash_order::sort_slice_ports(&mut ports);
        Group {
            address_type,
            key: port_key(&ports),
            ports,
            endpoints: Vec::new(),
            index: HashMap::default(),
        }
    }

    /// Two addresses of one identity collapse; the later one's attributes win, as in upstream's
    /// set, but the endpoint keeps the first one's place.
    fn insert(&mut self, ep: Endpoint) {
        match self.index.entry(identity(&ep)) {
            Entry::Occupied(at) => self.endpoints[*at.get()] = ep,
            Entry::Vacant(at) => {
                at.insert(self.endpoints.len());
                self.endpoints.push(ep);
            }
        }
    }

    /// Keeps the first `max` endpoints. Only ports that differ in a field the API server would
    /// default (an absent name or protocol) can bring two subsets' endpoints into one key and past
    /// the cap; a slice holds no more.
    fn truncate(&mut self, max: usize) {
        if self.endpoints.len() > max {
            self.endpoints.truncate(max);
            self.index.retain(|_, i| *i < max);
        }
    }

    /// The desired endpoint with the identity of `ep`, and its position.
    pub fn find(&self, ep: &Endpoint) -> Option<(usize, &Endpoint)> {
        self.index
            .get(&identity(ep))
            .map(|&i| (i, &self.endpoints[i]))
    }
}

pub(crate) struct Desired {
    /// Per repacked subset, IPv4 then IPv6, whether or not it has endpoints of that family: a key
    /// with no endpoints deletes its slices.
    pub groups: Vec<Group>,
    /// Addresses that are not IPs.
    pub invalid: usize,
    /// Addresses not mirrored: over the cap, or invalid.
    pub skipped: usize,
}

/// The IP of an Endpoints address, if it has one. An IPv4-mapped IPv6 address is IPv4, as Go
/// reads it. Text that reaches here was not accepted by the adapter's parser and gets one more
/// strict try.
fn address_ip(a: &Address) -> Option<IpAddr> {
    let ip = match a {
        Address::Ip(ip) => *ip,
        Address::Text(t) => t.parse::<IpAddr>().ok()?,
    };
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

/// The endpoint mirrored from one address. Only `ready` is set: custom Endpoints say nothing of
/// serving or terminating.
fn to_endpoint(a: &EndpointAddress, ip: IpAddr, ready: bool) -> Endpoint {
    Endpoint {
        addresses: smallvec::smallvec![Address::Ip(ip)],
        conditions: Conditions {
            ready: Some(ready),
            serving: None,
            terminating: None,
        },
        hostname: a.hostname.clone().filter(|h| !h.is_empty()),
        target_ref: a.target_ref.clone(),
        node_name: a.node_name.clone(),
        zone: None,
        hints: None,
    }
}

/// Builds the desired endpoints of `subsets`, taking at most `max` valid addresses per repacked
/// subset: ready ones first, both families counting against one cap.
pub(crate) fn desired_endpoints(subsets: &[EndpointSubset], max: usize) -> Desired {
    let mut desired = Desired {
        groups: Vec::new(),
        invalid: 0,
        skipped: 0,
    };
    for subset in repack(subsets) {
        let ports: Vec<EndpointPort> = subset.ports.iter().map(slice_port).collect();
        let v4 = group_for(&mut desired.groups, AddressType::IPv4, &ports);
        let v6 = group_for(&mut desired.groups, AddressType::IPv6, &ports);

        let total = subset.addresses.len() + subset.not_ready_addresses.len();
        let mut accepted = 0;
        let ready = subset.addresses.iter().map(|a| (a, true));
        let not_ready = subset.not_ready_addresses.iter().map(|a| (a, false));
        for (address, is_ready) in ready.chain(not_ready) {
            if accepted >= max {
                break;
            }
            let Some(ip) = address_ip(&address.ip) else {
                desired.invalid += 1;
                continue;
            };
            accepted += 1;
            let group = match IpFamily::of(&ip) {
                IpFamily::V4 => v4,
                IpFamily::V6 => v6,
            };
            desired.groups[group].insert(to_endpoint(address, ip, is_ready));
        }
        desired.skipped += total - accepted;
    }
    for group in &mut desired.groups {
        group.truncate(max);
    }
    desired
}

fn group_for(groups: &mut Vec<Group>, address_type: AddressType, ports: &[EndpointPort]) -> usize {
    let key = port_key(ports);
    match groups
        .iter()
        .position(|g| g.address_type == address_type && g.key == key)
    {
        Some(i) => i,
        None => {
            groups.push(Group::new(address_type, ports.to_vec()));
            groups.len() - 1
        }
    }
}

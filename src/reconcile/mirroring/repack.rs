//! Upstream's `RepackSubsets`: any list of Endpoints subsets rewritten in canonical form, so that
//! one address with one set of ports is stated once. Mirroring repacks custom Endpoints before
//! reading them, which merges redundant subsets and drops duplicate addresses.
//!
//! Upstream orders ports and subsets by hashes of Go's debug dump, which no one can reproduce; the
//! order here is our own total order. Addresses are ordered as upstream orders them: by IP text
//! byte-wise, then those without a target first, then by target UID.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Address, EndpointAddress, EndpointSubset, EndpointsPort};

/// Address id (in order of first mention) -> ready, for one port.
type Readiness = BTreeMap<u32, bool>;

/// A subset in canonical form, borrowing the addresses of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepackedSubset<'a> {
    pub addresses: Vec<&'a EndpointAddress>,
    pub not_ready_addresses: Vec<&'a EndpointAddress>,
    /// Empty for addresses that were listed without ports.
    pub ports: Vec<&'a EndpointsPort>,
}

impl RepackedSubset<'_> {
    /// An owned v1 subset.
    pub fn to_subset(&self) -> EndpointSubset {
        EndpointSubset {
            addresses: self.addresses.iter().map(|a| (*a).clone()).collect(),
            not_ready_addresses: self
                .not_ready_addresses
                .iter()
                .map(|a| (*a).clone())
                .collect(),
            ports: self.ports.iter().map(|p| (*p).clone()).collect(),
        }
    }
}

/// An address's identity in a repack: its IP and its target's UID. The first address seen with an
/// identity stands for all later ones.
fn identity(a: &EndpointAddress) -> (&Address, &str) {
    let uid = a
        .target_ref
        .as_ref()
        .and_then(|t| t.uid.as_ref())
        .map_or("", |u| u.as_str());
    (&a.ip, uid)
}

/// The sort key of an address: IP text, then "has a target", then target UID.
fn address_order(a: &EndpointAddress) -> (String, bool, String) {
    let (_, uid) = identity(a);
    (a.ip.to_string(), a.target_ref.is_some(), uid.to_string())
}

fn port_order(p: &EndpointsPort) -> (&str, i32, &str, &str) {
    (
        p.name.as_deref().unwrap_or(""),
        p.port,
        p.protocol.map_or("", |p| p.as_str()),
        p.app_protocol.as_deref().unwrap_or(""),
    )
}

/// Repacks `subsets`. A subset without ports keeps its addresses under "no port"; readiness is
/// merged per port and address, not-ready winning; ports whose addresses (with readiness) are the
/// same end up in one subset.
pub fn repack_subsets(subsets: &[EndpointSubset]) -> Vec<RepackedSubset<'_>> {
    let mut ids: HashMap<(&Address, &str), u32> = HashMap::new();
    let mut first: Vec<&EndpointAddress> = Vec::new();
    // Per port (None: the "no port" sentinel), address id -> ready.
    let mut by_port: Vec<(Option<&EndpointsPort>, Readiness)> = Vec::new();

    for subset in subsets {
        let ports: Vec<Option<&EndpointsPort>> = if subset.ports.is_empty() {
            vec![None]
        } else {
            subset.ports.iter().map(Some).collect()
        };
        for port in ports {
            let slot = match by_port.iter().position(|(p, _)| *p == port) {
                Some(i) => i,
                None => {
                    by_port.push((port, Readiness::new()));
                    by_port.len() - 1
                }
            };
            let ready = subset.addresses.iter().map(|a| (a, true));
            let not_ready = subset.not_ready_addresses.iter().map(|a| (a, false));
            for (address, is_ready) in ready.chain(not_ready) {
                let next = first.len() as u32;
                let id = *ids.entry(identity(address)).or_insert(next);
                if id == next {
                    first.push(address);
                }
                // The first mention decides, except that not-ready always wins.
                by_port[slot]
                    .1
                    .entry(id)
                    .and_modify(|r| *r &= is_ready)
                    .or_insert(is_ready);
            }
        }
    }

    // Ports with identical address sets share a subset; a port without addresses has none.
    let mut groups: Vec<(&Readiness, Vec<Option<&EndpointsPort>>)> = Vec::new();
    let mut group_of: HashMap<&Readiness, usize> = HashMap::new();
    for (port, addresses) in &by_port {
        if addresses.is_empty() {
            continue;
        }
        let g = *group_of.entry(addresses).or_insert_with(|| {
            groups.push((addresses, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(*port);
    }

    let mut out: Vec<RepackedSubset> = groups
        .into_iter()
        .map(|(addresses, ports)| {
            let pick = |want: bool| {
                let mut list: Vec<&EndpointAddress> = addresses
                    .iter()
                    .filter(|&(_, &ready)| ready == want)
                    .map(|(&id, _)| first[id as usize])
                    .collect();
                list.sort_by_cached_key(|a| address_order(a));
                list
            };
            let mut ports: Vec<&EndpointsPort> = ports.into_iter().flatten().collect();
            ports.sort_by(|a, b| port_order(a).cmp(&port_order(b)));
            RepackedSubset {
                addresses: pick(true),
                not_ready_addresses: pick(false),
                ports,
            }
        })
        .collect();
    out.sort_by_cached_key(|s| {
        (
            s.addresses.first().map(|a| address_order(a)),
            s.not_ready_addresses.first().map(|a| address_order(a)),
            s.ports
                .iter()
                .map(|p| {
                    let (n, port, proto, app) = port_order(p);
                    (n.to_string(), port, proto, app.to_string())
                })
                .collect::<Vec<_>>(),
        )
    });
    out
}

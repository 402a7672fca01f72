//! The canonical layout of Endpoints subsets, as upstream's `RepackSubsets` defines it: every
//! address once per port, ports that serve exactly the same addresses (with the same readiness)
//! gathered into one subset, addresses sorted by their IP text and then the target's UID.
//!
//! Upstream orders ports within a subset, and the subsets themselves, by an MD5 of a Go debug dump
//! of the struct, which no other implementation can reproduce (and which changed between releases).
//! We order ports by (name, port, protocol, appProtocol) and subsets by their ports instead, and
//! compare subsets and ports order-insensitively (see `compare`), so an Endpoints object written by
//! upstream is not rewritten for its order alone.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write;
use std::net::IpAddr;

use ahash::RandomState;

use crate::model::{Address, EndpointAddress, EndpointSubset, EndpointsPort};

/// An address's text as a zero-padded byte string. Comparing two keys compares the texts byte by
/// byte, shorter first on a common prefix, as upstream sorts addresses ("10.0.0.10" < "10.0.0.2").
/// The longest IPv6 text is 39 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct IpKey([u8; 40]);

impl IpKey {
    pub(crate) fn of_ip(ip: &IpAddr) -> IpKey {
        let mut out = [0u8; 40];
        match ip {
            IpAddr::V4(v4) => {
                // The common case, formatted by hand: this runs once per pod per sync.
                let mut i = 0;
                for (n, &o) in v4.octets().iter().enumerate() {
                    if n > 0 {
                        out[i] = b'.';
                        i += 1;
                    }
                    if o >= 100 {
                        out[i] = b'0' + o / 100;
                        i += 1;
                    }
                    if o >= 10 {
                        out[i] = b'0' + (o / 10) % 10;
                        i += 1;
                    }
                    out[i] = b'0' + o % 10;
                    i += 1;
                }
            }
            IpAddr::V6(v6) => {
                let mut w = FixedWriter {
                    buf: &mut out,
                    len: 0,
                };
                // Cannot overflow: Display never writes more than 39 bytes for an IPv6 address.
                let _ = write!(w, "{v6}");
            }
        }
        IpKey(out)
    }

    pub(crate) fn of_address(address: &Address) -> IpKey {
        match address {
            Address::Ip(ip) => IpKey::of_ip(ip),
            Address::Text(text) => {
                let mut out = [0u8; 40];
                let bytes = text.as_bytes();
                let n = bytes.len().min(out.len());
                out[..n].copy_from_slice(&bytes[..n]);
                IpKey(out)
            }
        }
    }

    /// The first 16 bytes as one integer: enough to order most IPv4 addresses in one comparison.
    pub(crate) fn head(&self) -> u128 {
        let mut head = [0u8; 16];
        head.copy_from_slice(&self.0[..16]);
        u128::from_be_bytes(head)
    }
}

struct FixedWriter<'a> {
    buf: &'a mut [u8; 40],
    len: usize,
}

impl Write for FixedWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn uid_of(a: &EndpointAddress) -> Option<&str> {
    a.target_ref
        .as_ref()
        .map(|t| t.uid.as_ref().map_or("", |u| u.as_str()))
}

/// Upstream's address order: IP text byte-wise, then an address without a target first, then the
/// target's UID.
pub fn address_order(a: &EndpointAddress, b: &EndpointAddress) -> Ordering {
    IpKey::of_address(&a.ip)
        .cmp(&IpKey::of_address(&b.ip))
        .then_with(|| uid_of(a).cmp(&uid_of(b)))
}

fn name_str(n: &Option<crate::model::Name>) -> &str {
    n.as_ref().map_or("", |n| n.as_str())
}

/// Our order of ports within a subset: name, number, protocol, appProtocol.
pub fn port_order(a: &EndpointsPort, b: &EndpointsPort) -> Ordering {
    name_str(&a.name)
        .cmp(name_str(&b.name))
        .then(a.port.cmp(&b.port))
        .then(a.protocol.cmp(&b.protocol))
        .then_with(|| a.app_protocol.cmp(&b.app_protocol))
}

/// Our order of subsets: by their (sorted) ports. In a repacked list every port is in exactly one
/// subset and at most one subset has no ports, so this alone is total there; addresses break ties
/// for lists that are not repacked.
pub fn subset_order(a: &EndpointSubset, b: &EndpointSubset) -> Ordering {
    fn list<T>(x: &[T], y: &[T], f: impl Fn(&T, &T) -> Ordering) -> Ordering {
        for (p, q) in x.iter().zip(y) {
            match f(p, q) {
                Ordering::Equal => {}
                other => return other,
            }
        }
        x.len().cmp(&y.len())
    }
    list(&a.ports, &b.ports, port_order)
        .then_with(|| list(&a.addresses, &b.addresses, address_order))
        .then_with(|| {
            list(
                &a.not_ready_addresses,
                &b.not_ready_addresses,
                address_order,
            )
        })
}

/// Upstream's `RepackSubsets` for any list of subsets: expands it to (port, address, ready) and
/// packs that back into the canonical layout. An address is identified by its IP and target UID;
/// its first occurrence supplies the whole record. Not ready for any occurrence under a port wins
/// over ready. A subset without ports keeps its addresses in a subset without ports.
pub fn repack(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    // Identities in order of first appearance.
    let mut ids: HashMap<(IpKey, Option<&str>), usize, RandomState> = HashMap::default();
    let mut records: Vec<&EndpointAddress> = Vec::new();
    // Ports in order of first appearance; `None` stands for "no ports".
    let mut ports: Vec<Option<&EndpointsPort>> = Vec::new();
    // Per port: the readiness of each identity it serves.
    let mut served: Vec<HashMap<usize, bool, RandomState>> = Vec::new();

    for subset in subsets {
        let subset_ports: Vec<Option<&EndpointsPort>> = if subset.ports.is_empty() {
            vec![None]
        } else {
            subset.ports.iter().map(Some).collect()
        };
        for port in subset_ports {
            let p = match ports.iter().position(|q| same_port_key(*q, port)) {
                Some(p) => p,
                None => {
                    ports.push(port);
                    served.push(HashMap::default());
                    ports.len() - 1
                }
            };
            let ready = subset.addresses.iter().map(|a| (a, true));
            let not_ready = subset.not_ready_addresses.iter().map(|a| (a, false));
            for (address, is_ready) in ready.chain(not_ready) {
                let key = (IpKey::of_address(&address.ip), uid_of(address));
                let id = *ids.entry(key).or_insert_with(|| {
                    records.push(address);
                    records.len() - 1
                });
                served[p]
                    .entry(id)
                    .and_modify(|r| *r = *r && is_ready)
                    .or_insert(is_ready);
            }
        }
    }

    // Ports serving the same addresses with the same readiness share a subset.
    let mut groups: Vec<PortGroup> = Vec::new();
    for (port, map) in ports.iter().zip(&served) {
        let mut members: Vec<(usize, bool)> = map.iter().map(|(id, r)| (*id, *r)).collect();
        members.sort_unstable();
        let g = match groups.iter().position(|g| g.members == members) {
            Some(g) => g,
            None => {
                groups.push(PortGroup {
                    members,
                    ports: Vec::new(),
                });
                groups.len() - 1
            }
        };
        // The "no ports" marker is dropped: its addresses are the group's.
        if let Some(port) = port {
            groups[g].ports.push(port);
        }
    }

    let mut out: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|PortGroup { members, ports }| {
            let mut subset = EndpointSubset::default();
            for (id, ready) in members {
                let record = records[id].clone();
                if ready {
                    subset.addresses.push(record);
                } else {
                    subset.not_ready_addresses.push(record);
                }
            }
            subset.addresses.sort_by(address_order);
            subset.not_ready_addresses.sort_by(address_order);
            subset.ports = ports.into_iter().cloned().collect();
            subset.ports.sort_by(port_order);
            subset
        })
        .collect();
    out.sort_by(subset_order);
    out
}

/// Ports that serve the same identities with the same readiness.
struct PortGroup<'a> {
    /// (identity, ready), sorted by identity.
    members: Vec<(usize, bool)>,
    ports: Vec<&'a EndpointsPort>,
}

/// Upstream keys ports by the whole struct; an empty name is the same as none.
fn same_port_key(a: Option<&EndpointsPort>, b: Option<&EndpointsPort>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => super::compare::same_port(a, b),
        _ => false,
    }
}

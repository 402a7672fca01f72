//! The canonical layout of Endpoints subsets, as upstream's `RepackSubsets` defines it: every
//! address once per port, ports that serve exactly the same addresses (with the same readiness)
//! gathered into one subset, addresses sorted by their IP text and then the target's UID.
//!
//! Ports within a subset, and the subsets themselves, are in upstream's hash order (see
//! `hash_order`).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use ahash::RandomState;

use crate::model::{Address, EndpointAddress, EndpointSubset, EndpointsPort, Uid};
use crate::reconcile::hash_order;

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
                write_v4(v4.octets(), &mut out);
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

    /// The first 16 bytes of the key as one integer: all of an IPv4 address's text, the start of
    /// an IPv6 one's.
    pub(crate) fn head_of(ip: &IpAddr) -> u128 {
        let mut head = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => {
                write_v4(v4.octets(), &mut head);
            }
            IpAddr::V6(_) => head.copy_from_slice(&IpKey::of_ip(ip).0[..16]),
        }
        u128::from_be_bytes(head)
    }
}

/// Writes dotted-quad text by hand, as Go prints it: this runs once per pod per sync. At most 15
/// bytes; returns how many.
pub(crate) fn write_v4(octets: [u8; 4], out: &mut [u8]) -> usize {
    let mut i = 0;
    for (n, o) in octets.into_iter().enumerate() {
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
    i
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

/// The rank of each octet's decimal text among those of 0..=255 in byte order ("0" < "1" < "10" <
/// "100" < ... < "99"). Since '.' sorts before every digit, comparing two IPv4 texts byte-wise is
/// comparing their octets' ranks in turn.
static OCTET_RANK: LazyLock<[u8; 256]> = LazyLock::new(|| {
    let mut texts: Vec<(String, u8)> = (0..=255u8).map(|o| (o.to_string(), o)).collect();
    texts.sort();
    let mut rank = [0u8; 256];
    for (r, (_, o)) in texts.into_iter().enumerate() {
        rank[usize::from(o)] = r as u8;
    }
    rank
});

/// The canonical order of `n` addresses (by IP text, then target UID, then index): the indices in
/// order. `ip` and `uid` give each one's IP and target UID.
pub(crate) fn sort_addresses<K: Ord>(
    n: usize,
    ip: impl Fn(u32) -> IpAddr,
    uid: impl Fn(u32) -> K,
) -> Vec<u32> {
    let all_v4 = (0..n as u32).all(|i| ip(i).is_ipv4());
    if all_v4 {
        // One u64 per address: the octet ranks, then the index.
        let rank = &*OCTET_RANK;
        let mut keys: Vec<u64> = (0..n as u32)
            .map(|i| {
                let o = match ip(i) {
                    IpAddr::V4(v4) => v4.octets(),
                    IpAddr::V6(_) => [0; 4],
                };
                let r = u32::from_be_bytes(o.map(|b| rank[usize::from(b)]));
                (u64::from(r) << 32) | u64::from(i)
            })
            .collect();
        keys.sort_unstable();
        let mut order: Vec<u32> = keys.iter().map(|k| *k as u32).collect();
        // One IP for several pods (host network): by UID, then index.
        let mut i = 0;
        while i < keys.len() {
            let j = i + keys[i..]
                .iter()
                .take_while(|k| *k >> 32 == keys[i] >> 32)
                .count();
            if j - i > 1 {
                order[i..j].sort_by(|a, b| uid(*a).cmp(&uid(*b)).then(a.cmp(b)));
            }
            i = j;
        }
        return order;
    }
    // Any IPv6: by the full text. The first 16 bytes decide most comparisons.
    let mut keys: Vec<(u128, u32)> = (0..n as u32).map(|i| (IpKey::head_of(&ip(i)), i)).collect();
    keys.sort_unstable();
    let mut i = 0;
    while i < keys.len() {
        let j = i + keys[i..].iter().take_while(|k| k.0 == keys[i].0).count();
        if j - i > 1 {
            let mut run: Vec<(IpKey, u32)> = keys[i..j]
                .iter()
                .map(|&(_, k)| (IpKey::of_ip(&ip(k)), k))
                .collect();
            run.sort_unstable_by(|a, b| {
                a.0.cmp(&b.0)
                    .then_with(|| uid(a.1).cmp(&uid(b.1)))
                    .then(a.1.cmp(&b.1))
            });
            for (slot, (_, k)) in keys[i..j].iter_mut().zip(run) {
                slot.1 = k;
            }
        }
        i = j;
    }
    keys.into_iter().map(|(_, k)| k).collect()
}

/// The target's UID, absent counting as empty; `None` without a target.
fn uid_of(a: &EndpointAddress) -> Option<&Uid> {
    static EMPTY: Uid = Uid::EMPTY;
    a.target_ref
        .as_ref()
        .map(|t| t.uid.as_ref().unwrap_or(&EMPTY))
}

/// Upstream's address order: IP text byte-wise, then an address without a target first, then the
/// target's UID.
pub fn address_order(a: &EndpointAddress, b: &EndpointAddress) -> Ordering {
    IpKey::of_address(&a.ip)
        .cmp(&IpKey::of_address(&b.ip))
        .then_with(|| uid_of(a).cmp(&uid_of(b)))
}

/// Upstream's `RepackSubsets` for any list of subsets: expands it to (port, address, ready) and
/// packs that back into the canonical layout. An address is identified by its IP and target UID;
/// its first occurrence supplies the whole record. Not ready for any occurrence under a port wins
/// over ready. A subset without ports keeps its addresses in a subset without ports.
pub fn repack(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let addresses: usize = subsets
        .iter()
        .map(|s| s.addresses.len() + s.not_ready_addresses.len())
        .sum();
    // Identities in order of first appearance.
    let mut ids: HashMap<(IpKey, Option<&Uid>), usize, RandomState> =
        HashMap::with_capacity_and_hasher(addresses, RandomState::default());
    let mut records: Vec<&Arc<EndpointAddress>> = Vec::with_capacity(addresses);
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
                    served.push(HashMap::with_capacity_and_hasher(
                        addresses,
                        RandomState::default(),
                    ));
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
                let record = Arc::clone(records[id]);
                if ready {
                    subset.addresses.push(record);
                } else {
                    subset.not_ready_addresses.push(record);
                }
            }
            subset.addresses.sort_by(|a, b| address_order(a, b));
            subset
                .not_ready_addresses
                .sort_by(|a, b| address_order(a, b));
            subset.ports = ports.into_iter().cloned().collect();
            hash_order::sort_endpoints_ports(&mut subset.ports);
            subset
        })
        .collect();
    hash_order::sort_subsets(&mut out);
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

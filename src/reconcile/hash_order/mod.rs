//! The order upstream gives the ports of an Endpoints subset, the subsets themselves, and the
//! ports of an EndpointSlice: ascending by the 128-bit FNV-1a hash of each struct's Go debug print
//! (go-spew's `%#v` with methods disabled, which `DeepHashObject` feeds to the hash; MD5 until
//! Kubernetes 1.35). Objects in that order are byte for byte what kube-controller-manager writes,
//! so neither controller's objects differ from the other's.
//!
//! The printed form is small and deterministic: a struct is `(pkg.Type){Field:value ...}`, every
//! value is prefixed by its Go type in parentheses except inside a list (`[a b]`), a nil pointer
//! or list prints `<nil>`, strings print bare. `tests/vectors/go_hash.json` holds prints and
//! hashes made by go-spew and Go's `hash/fnv` themselves, which `tests.rs` compares byte for byte.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use crate::model::{
    Address, EndpointAddress, EndpointPort, EndpointSubset, EndpointsPort, Name, TargetRef, Uid,
};

mod fnv;

use fnv::{FNV128_OFFSET, Literal};
pub use fnv::{HashKey, fnv128a};

/// Where a print goes: kept as text (the tests compare it with go-spew's), or folded into its
/// hash as it is written, which is all a sort needs: a subset of thousands of addresses prints
/// hundreds of kilobytes, and no `String` of them is built.
pub(crate) enum GoPrint {
    #[cfg(test)]
    Text(String),
    Hash(HashKey),
}

#[cfg(test)]
impl Default for GoPrint {
    fn default() -> Self {
        GoPrint::Text(String::new())
    }
}

impl std::fmt::Write for GoPrint {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        match self {
            #[cfg(test)]
            GoPrint::Text(text) => text.push_str(s),
            GoPrint::Hash(h) => *h = fnv::fold(*h, s.as_bytes()),
        }
        Ok(())
    }
}

impl GoPrint {
    fn hashing() -> Self {
        GoPrint::Hash(FNV128_OFFSET)
    }

    fn raw(&mut self, s: &str) {
        let _ = self.write_str(s);
    }

    fn literal(&mut self, literal: &Literal) {
        match self {
            #[cfg(test)]
            GoPrint::Text(text) => text.push_str(literal.text),
            GoPrint::Hash(h) => *h = literal.fold(*h),
        }
    }

    /// An IPv4 address as Go's `net.IP.String` writes it, without `fmt`.
    fn ipv4(&mut self, ip: Ipv4Addr) {
        let mut text = [0u8; 15];
        let at = crate::reconcile::endpoints::write_v4(ip.octets(), &mut text);
        self.ascii(&text[..at]);
    }

    /// Text known to be ASCII, folded without a UTF-8 check.
    fn ascii(&mut self, bytes: &[u8]) {
        match self {
            #[cfg(test)]
            GoPrint::Text(text) => text.extend(bytes.iter().map(|&b| char::from(b))),
            GoPrint::Hash(h) => *h = fnv::fold(*h, bytes),
        }
    }

    /// A UID as written: a UUID held as 16 bytes is folded digit by digit, never formatted.
    fn uid(&mut self, uid: &Uid) {
        match uid.uuid() {
            Some(bytes) => self.ascii(&crate::model::uuid_ascii(&bytes)),
            None => self.raw(&uid.as_str()),
        }
    }

    /// `(type)value` for a Go string-kinded field.
    fn string(&mut self, field: &str, go_type: &str, value: &str) {
        let _ = write!(self, "{field}:({go_type}){value}");
    }

    /// `(*type)value`, or `(*type)<nil>` for a nil pointer.
    fn pointer(&mut self, field: &str, go_type: &str, value: Option<&str>) {
        let _ = write!(self, "{field}:(*{go_type}){}", value.unwrap_or("<nil>"));
    }

    fn int32(&mut self, field: &str, value: i32) {
        let _ = write!(self, "{field}:(int32){value}");
    }

    fn hash(&self) -> HashKey {
        match self {
            #[cfg(test)]
            GoPrint::Text(text) => fnv128a(text.as_bytes()),
            GoPrint::Hash(h) => *h,
        }
    }

    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            GoPrint::Text(text) => text,
            GoPrint::Hash(_) => "",
        }
    }
}

fn text(n: &Option<Name>) -> &str {
    n.as_ref().map_or("", |n| n.as_str())
}

/// core/v1 `EndpointPort`: `Name string, Port int32, Protocol Protocol, AppProtocol *string`.
fn endpoints_port_fields(out: &mut GoPrint, p: &EndpointsPort) {
    out.raw("{");
    out.string("Name", "string", text(&p.name));
    out.raw(" ");
    out.int32("Port", p.port);
    out.raw(" ");
    out.string(
        "Protocol",
        "v1.Protocol",
        p.protocol.map_or("", |p| p.as_str()),
    );
    out.raw(" ");
    out.pointer("AppProtocol", "string", p.app_protocol.as_deref());
    out.raw("}");
}

/// The print of a core/v1 `EndpointPort`, as upstream hashes it.
#[cfg(test)]
pub(crate) fn print_endpoints_port(p: &EndpointsPort) -> GoPrint {
    endpoints_port_into(GoPrint::default(), p)
}

fn endpoints_port_into(mut out: GoPrint, p: &EndpointsPort) -> GoPrint {
    out.raw("(v1.EndpointPort)");
    endpoints_port_fields(&mut out, p);
    out
}

/// The print of a discovery/v1 `EndpointPort`: `Name *string, Protocol *v1.Protocol, Port *int32,
/// AppProtocol *string`.
#[cfg(test)]
pub(crate) fn print_slice_port(p: &EndpointPort) -> GoPrint {
    slice_port_into(GoPrint::default(), p)
}

fn slice_port_into(mut out: GoPrint, p: &EndpointPort) -> GoPrint {
    out.raw("(v1.EndpointPort){");
    out.pointer("Name", "string", p.name.as_deref());
    out.raw(" ");
    out.pointer("Protocol", "v1.Protocol", p.protocol.map(|p| p.as_str()));
    out.raw(" ");
    let port = p.port.map(|n| n.to_string());
    out.pointer("Port", "int32", port.as_deref());
    out.raw(" ");
    out.pointer("AppProtocol", "string", p.app_protocol.as_deref());
    out.raw("}");
    out
}

static ADDRESS_IP: Literal = Literal::new("{IP:(string)");
static ADDRESS_HOSTNAME: Literal = Literal::new(" Hostname:(string)");
static ADDRESS_NODE_NAME: Literal = Literal::new(" NodeName:(*string)");
static ADDRESS_NO_TARGET: Literal = Literal::new(" TargetRef:(*v1.ObjectReference)<nil>}");
static TARGET_KIND: Literal = Literal::new(" TargetRef:(*v1.ObjectReference){Kind:(string)");
static TARGET_NAMESPACE: Literal = Literal::new(" Namespace:(string)");
static TARGET_NAME: Literal = Literal::new(" Name:(string)");
static TARGET_UID: Literal = Literal::new(" UID:(types.UID)");
static TARGET_API_VERSION: Literal = Literal::new(" APIVersion:(string)");
static TARGET_RESOURCE_VERSION: Literal = Literal::new(" ResourceVersion:(string)");
// The model keeps no fieldPath: no controller sets one.
static TARGET_FIELD_PATH: Literal = Literal::new(" FieldPath:(string)}}");
/// The three above, for a target of no apiVersion or resourceVersion, as the controller writes.
static TARGET_REST_EMPTY: Literal =
    Literal::new(" APIVersion:(string) ResourceVersion:(string) FieldPath:(string)}}");
static SUBSET_ADDRESSES: Literal =
    Literal::new("(v1.EndpointSubset){Addresses:([]v1.EndpointAddress)");
static SUBSET_NOT_READY: Literal = Literal::new(" NotReadyAddresses:([]v1.EndpointAddress)");
static SUBSET_PORTS: Literal = Literal::new(" Ports:([]v1.EndpointPort)");

/// What the print of a core/v1 `EndpointAddress` reads: taken from a model address, or straight
/// from the pod behind a desired one.
pub(crate) struct AddressFields<'a> {
    pub ip: AddressText<'a>,
    pub hostname: &'a str,
    pub node_name: Option<&'a str>,
    pub target: Option<TargetFields<'a>>,
}

pub(crate) enum AddressText<'a> {
    Ip(IpAddr),
    Text(&'a str),
}

/// An `ObjectReference`'s fields; an absent string is an empty one.
pub(crate) struct TargetFields<'a> {
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<Uid>,
    pub api_version: &'a str,
    pub resource_version: &'a str,
}

impl<'a> From<&'a std::sync::Arc<EndpointAddress>> for AddressFields<'a> {
    fn from(a: &'a std::sync::Arc<EndpointAddress>) -> Self {
        AddressFields::from(&**a)
    }
}

impl<'a> From<&'a EndpointAddress> for AddressFields<'a> {
    fn from(a: &'a EndpointAddress) -> Self {
        AddressFields {
            ip: match &a.ip {
                Address::Ip(ip) => AddressText::Ip(*ip),
                Address::Text(t) => AddressText::Text(t),
            },
            hostname: text(&a.hostname),
            node_name: a.node_name.as_deref(),
            target: a.target_ref.as_ref().map(|t: &'a TargetRef| TargetFields {
                kind: text(&t.kind),
                namespace: text(&t.namespace),
                name: text(&t.name),
                uid: t.uid.clone(),
                api_version: text(&t.api_version),
                resource_version: text(&t.resource_version),
            }),
        }
    }
}

/// core/v1 `EndpointAddress`: `IP string, Hostname string, NodeName *string, TargetRef
/// *ObjectReference`, and the `ObjectReference`'s `Kind, Namespace, Name string, UID types.UID,
/// APIVersion, ResourceVersion, FieldPath string`.
fn address_fields(out: &mut GoPrint, a: AddressFields<'_>) {
    out.literal(&ADDRESS_IP);
    match a.ip {
        AddressText::Ip(IpAddr::V4(ip)) => out.ipv4(ip),
        AddressText::Ip(ip) => {
            let _ = write!(out, "{ip}");
        }
        AddressText::Text(t) => out.raw(t),
    }
    out.literal(&ADDRESS_HOSTNAME);
    out.raw(a.hostname);
    out.literal(&ADDRESS_NODE_NAME);
    out.raw(a.node_name.unwrap_or("<nil>"));
    let Some(t) = a.target else {
        out.literal(&ADDRESS_NO_TARGET);
        return;
    };
    out.literal(&TARGET_KIND);
    out.raw(t.kind);
    out.literal(&TARGET_NAMESPACE);
    out.raw(t.namespace);
    out.literal(&TARGET_NAME);
    out.raw(t.name);
    out.literal(&TARGET_UID);
    if let Some(uid) = &t.uid {
        out.uid(uid);
    }
    if t.api_version.is_empty() && t.resource_version.is_empty() {
        out.literal(&TARGET_REST_EMPTY);
    } else {
        out.literal(&TARGET_API_VERSION);
        out.raw(t.api_version);
        out.literal(&TARGET_RESOURCE_VERSION);
        out.raw(t.resource_version);
        out.literal(&TARGET_FIELD_PATH);
    }
}

/// A list field's value: `<nil>` when empty (upstream's repacked subsets hold nil, never empty,
/// lists), else `[a b]`.
fn list<T>(out: &mut GoPrint, items: impl ExactSizeIterator<Item = T>, each: fn(&mut GoPrint, T)) {
    if items.len() == 0 {
        out.raw("<nil>");
        return;
    }
    out.raw("[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.raw(" ");
        }
        each(out, item);
    }
    out.raw("]");
}

/// An address list's value, from its address `from` on (the earlier ones are in `out` already),
/// with the state after each address pushed to `states`. Empty prints `<nil>`: upstream's
/// repacked subsets hold nil, never empty, lists.
fn addresses<'a>(
    out: &mut GoPrint,
    len: usize,
    from: usize,
    rest: impl Iterator<Item = AddressFields<'a>>,
    mut states: Option<&mut Vec<HashKey>>,
) {
    if len == 0 {
        out.raw("<nil>");
        return;
    }
    for (i, a) in (from..len).zip(rest) {
        out.raw(if i == 0 { "[" } else { " " });
        address_fields(out, a);
        if let Some(states) = states.as_deref_mut() {
            states.push(out.hash());
        }
    }
    out.raw("]");
}

/// The print of a core/v1 `EndpointSubset`, as upstream hashes it.
#[cfg(test)]
pub(crate) fn print_subset(s: &EndpointSubset) -> GoPrint {
    subset_into(GoPrint::default(), s)
}

fn subset_into(out: GoPrint, s: &EndpointSubset) -> GoPrint {
    subset_fields_into(
        out,
        s.addresses.iter().map(AddressFields::from),
        s.not_ready_addresses.iter().map(AddressFields::from),
        &s.ports,
    )
}

fn subset_fields_into<'a>(
    out: GoPrint,
    ready: impl ExactSizeIterator<Item = AddressFields<'a>>,
    not_ready: impl ExactSizeIterator<Item = AddressFields<'a>>,
    ports: &[EndpointsPort],
) -> GoPrint {
    let (ready, not_ready) = ((ready.len(), ready), (not_ready.len(), not_ready));
    subset_fields_from(out, Resume::Start, ready, not_ready, ports, None)
}

/// Where a subset's print resumes: the print before it is already in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    Start,
    /// After the first `n` ready addresses (at least one).
    Ready(usize),
    /// After every ready address and the first `n` not-ready ones (at least one).
    NotReady(usize),
}

/// A subset's print from `from` on. Each list is its length and its addresses from the resume
/// point on; the state after each address printed is pushed to `states`.
fn subset_fields_from<'a>(
    mut out: GoPrint,
    from: Resume,
    (ready, ready_rest): (usize, impl Iterator<Item = AddressFields<'a>>),
    (not_ready, not_ready_rest): (usize, impl Iterator<Item = AddressFields<'a>>),
    ports: &[EndpointsPort],
    mut states: Option<&mut Vec<HashKey>>,
) -> GoPrint {
    let (ready_from, not_ready_from) = match from {
        Resume::Start => {
            out.literal(&SUBSET_ADDRESSES);
            (Some(0), 0)
        }
        Resume::Ready(n) => (Some(n), 0),
        Resume::NotReady(n) => (None, n),
    };
    if let Some(n) = ready_from {
        addresses(&mut out, ready, n, ready_rest, states.as_deref_mut());
        out.literal(&SUBSET_NOT_READY);
    }
    addresses(&mut out, not_ready, not_ready_from, not_ready_rest, states);
    out.literal(&SUBSET_PORTS);
    list(&mut out, ports.iter(), endpoints_port_fields);
    out.raw("}");
    out
}

/// The hash of a subset's print resumed at `from`, where the print so far hashed to `state`
/// (ignored at the start), pushing to `states` the state after each address it prints: ready
/// ones, then not-ready ones. A later subset whose addresses begin with the same ones resumes
/// from those states instead of printing them again.
pub(crate) fn subset_fields_hash_resumed<'a>(
    from: Resume,
    state: HashKey,
    ready: (usize, impl Iterator<Item = AddressFields<'a>>),
    not_ready: (usize, impl Iterator<Item = AddressFields<'a>>),
    ports: &[EndpointsPort],
    states: &mut Vec<HashKey>,
) -> HashKey {
    let out = match from {
        Resume::Start => GoPrint::hashing(),
        _ => GoPrint::Hash(state),
    };
    subset_fields_from(out, from, ready, not_ready, ports, Some(states)).hash()
}

/// The hash of the subset of these addresses and ports, with each address's fields read where
/// they are: no `EndpointAddress` need be built to order subsets.
pub(crate) fn subset_fields_hash<'a>(
    ready: impl ExactSizeIterator<Item = AddressFields<'a>>,
    not_ready: impl ExactSizeIterator<Item = AddressFields<'a>>,
    ports: &[EndpointsPort],
) -> HashKey {
    subset_fields_into(GoPrint::hashing(), ready, not_ready, ports).hash()
}

/// The print of a subset of these addresses and ports.
#[cfg(test)]
pub(crate) fn print_subset_fields<'a>(
    ready: impl ExactSizeIterator<Item = AddressFields<'a>>,
    not_ready: impl ExactSizeIterator<Item = AddressFields<'a>>,
    ports: &[EndpointsPort],
) -> GoPrint {
    subset_fields_into(GoPrint::default(), ready, not_ready, ports)
}

pub fn endpoints_port_hash(p: &EndpointsPort) -> HashKey {
    endpoints_port_into(GoPrint::hashing(), p).hash()
}

pub fn slice_port_hash(p: &EndpointPort) -> HashKey {
    slice_port_into(GoPrint::hashing(), p).hash()
}

pub fn subset_hash(s: &EndpointSubset) -> HashKey {
    subset_into(GoPrint::hashing(), s).hash()
}

/// Sorts by a key computed once per item. Upstream's sort is not stable, but only equal prints
/// (equal items) can tie.
fn sort_by_hash<T>(items: &mut [T], hash: impl Fn(&T) -> HashKey) {
    if items.len() < 2 {
        return;
    }
    items.sort_by_cached_key(hash);
}

/// Upstream's order of one subset's ports.
pub fn sort_endpoints_ports(ports: &mut [EndpointsPort]) {
    sort_by_hash(ports, endpoints_port_hash);
}

/// Upstream's order of subsets; each subset's addresses and ports must already be in order.
pub fn sort_subsets(subsets: &mut [EndpointSubset]) {
    sort_by_hash(subsets, subset_hash);
}

/// Upstream's order of an EndpointSlice's ports.
pub fn sort_slice_ports(ports: &mut [EndpointPort]) {
    sort_by_hash(ports, slice_port_hash);
}

/// The two ports in upstream's order of a slice's ports.
pub fn slice_port_order(a: &EndpointPort, b: &EndpointPort) -> Ordering {
    slice_port_hash(a).cmp(&slice_port_hash(b))
}

/// True when the ports are in upstream's order.
pub fn slice_ports_in_order(ports: &[EndpointPort]) -> bool {
    ports.len() < 2
        || ports
            .windows(2)
            .all(|w| slice_port_order(&w[0], &w[1]).is_le())
}

#[cfg(test)]
mod tests;

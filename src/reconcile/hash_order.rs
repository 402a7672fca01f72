//! The order upstream gives the ports of an Endpoints subset, the subsets themselves, and the
//! ports of an EndpointSlice: ascending by the 128-bit FNV-1a hash of each struct's Go debug print
//! (go-spew's `%#v` with methods disabled, which `DeepHashObject` feeds to the hash; MD5 until
//! Kubernetes 1.35). Objects in that order are byte for byte what kube-controller-manager writes,
//! so neither controller's objects differ from the other's.
//!
//! The printed form is small and deterministic: a struct is `(pkg.Type){Field:value ...}`, every
//! value is prefixed by its Go type in parentheses except inside a list (`[a b]`), a nil pointer
//! or list prints `<nil>`, strings print bare. `tests/vectors/go_hash.json` holds prints and
//! hashes made by go-spew and Go's `hash/fnv` themselves, which the tests below compare byte for byte.

use std::cmp::Ordering;
use std::fmt::Write as _;

use crate::model::{
    Address, EndpointAddress, EndpointPort, EndpointSubset, EndpointsPort, Name, TargetRef,
};

/// A 128-bit FNV-1a hash: the sort key. Go compares the big-endian bytes, which is comparing the
/// numbers.
pub type HashKey = u128;

const FNV128_OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
const FNV128_PRIME: u128 = 0x0000000001000000000000000000013b;

/// Go's `fnv.New128a()` over `bytes`.
pub fn fnv128a(bytes: &[u8]) -> HashKey {
    fnv128a_fold(FNV128_OFFSET, bytes)
}

/// FNV-1a from state `h`. The prime is 2^88 + 0x13b, so the multiply is a shift and a small
/// multiply: a fraction of a full 128-bit one, on a chain as long as the print.
fn fnv128a_fold(h: HashKey, bytes: &[u8]) -> HashKey {
    const LOW: u128 = FNV128_PRIME - (1 << 88);
    bytes.iter().fold(h, |h, &b| {
        let h = h ^ u128::from(b);
        (h << 88).wrapping_add(h.wrapping_mul(LOW))
    })
}

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
            GoPrint::Hash(h) => *h = fnv128a_fold(*h, s.as_bytes()),
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

fn target_fields(out: &mut GoPrint, t: &TargetRef) {
    out.raw("{");
    out.string("Kind", "string", text(&t.kind));
    out.raw(" ");
    out.string("Namespace", "string", text(&t.namespace));
    out.raw(" ");
    out.string("Name", "string", text(&t.name));
    out.raw(" ");
    let uid = t.uid.as_ref().map(|u| u.as_str());
    out.string("UID", "types.UID", uid.as_deref().unwrap_or(""));
    out.raw(" ");
    out.string("APIVersion", "string", text(&t.api_version));
    out.raw(" ");
    out.string("ResourceVersion", "string", text(&t.resource_version));
    // The model keeps no fieldPath: no controller sets one.
    out.raw(" FieldPath:(string)}");
}

/// core/v1 `EndpointAddress`: `IP string, Hostname string, NodeName *string, TargetRef
/// *ObjectReference`.
fn address_fields(out: &mut GoPrint, a: &EndpointAddress) {
    out.raw("{IP:(string)");
    match &a.ip {
        Address::Ip(ip) => {
            let _ = write!(out, "{ip}");
        }
        Address::Text(t) => out.raw(t),
    }
    out.raw(" ");
    out.string("Hostname", "string", text(&a.hostname));
    out.raw(" ");
    out.pointer("NodeName", "string", a.node_name.as_deref());
    out.raw(" TargetRef:(*v1.ObjectReference)");
    match &a.target_ref {
        Some(t) => target_fields(out, t),
        None => out.raw("<nil>"),
    }
    out.raw("}");
}

/// A list field: `(type)<nil>` when empty (upstream's repacked subsets hold nil, never empty,
/// lists), else `(type)[a b]`.
fn list<T>(out: &mut GoPrint, field: &str, go_type: &str, items: &[T], each: fn(&mut GoPrint, &T)) {
    let _ = write!(out, "{field}:({go_type})");
    if items.is_empty() {
        out.raw("<nil>");
        return;
    }
    out.raw("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.raw(" ");
        }
        each(out, item);
    }
    out.raw("]");
}

/// The print of a core/v1 `EndpointSubset`, as upstream hashes it.
#[cfg(test)]
pub(crate) fn print_subset(s: &EndpointSubset) -> GoPrint {
    subset_into(GoPrint::default(), s)
}

fn subset_into(mut out: GoPrint, s: &EndpointSubset) -> GoPrint {
    out.raw("(v1.EndpointSubset){");
    list(
        &mut out,
        "Addresses",
        "[]v1.EndpointAddress",
        &s.addresses,
        address_fields,
    );
    out.raw(" ");
    list(
        &mut out,
        "NotReadyAddresses",
        "[]v1.EndpointAddress",
        &s.not_ready_addresses,
        address_fields,
    );
    out.raw(" ");
    list(
        &mut out,
        "Ports",
        "[]v1.EndpointPort",
        &s.ports,
        endpoints_port_fields,
    );
    out.raw("}");
    out
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
mod tests {
    use super::*;
    use crate::model::{Protocol, Uid, intern};

    // Prints and hashes made by go-spew (DeepHashObject's settings) and Go's fnv.New128a() over
    // structs with upstream's field order and package names.
    #[test]
    fn prints_and_hashes_are_go_spew_and_fnv128a() {
        let port = EndpointsPort {
            name: Some(intern("https")),
            port: 8443,
            protocol: Some(Protocol::Tcp),
            app_protocol: Some(intern("kubernetes.io/h2c")),
        };
        assert_eq!(
            print_endpoints_port(&port).as_str(),
            "(v1.EndpointPort){Name:(string)https Port:(int32)8443 Protocol:(v1.Protocol)TCP AppProtocol:(*string)kubernetes.io/h2c}"
        );
        assert_eq!(
            endpoints_port_hash(&port),
            0xf39f05385df1c5146bde870d0bd7c0e6
        );

        let slice_port = EndpointPort {
            name: Some(intern("http")),
            port: Some(53),
            protocol: Some(Protocol::Udp),
            app_protocol: None,
        };
        assert_eq!(
            print_slice_port(&slice_port).as_str(),
            "(v1.EndpointPort){Name:(*string)http Protocol:(*v1.Protocol)UDP Port:(*int32)53 AppProtocol:(*string)<nil>}"
        );
        assert_eq!(
            slice_port_hash(&slice_port),
            0xb86ad2b9cc5020b12db2e867e72c9d73
        );
        let unset = EndpointPort {
            name: None,
            port: None,
            protocol: None,
            app_protocol: None,
        };
        assert_eq!(slice_port_hash(&unset), 0xad866eb7cd5162a9e20434ebd9deeacd);

        let subset = EndpointSubset {
            addresses: vec![
                EndpointAddress {
                    ip: Address::Ip("10.0.0.1".parse().unwrap()),
                    hostname: Some(intern("db-0")),
                    node_name: Some(intern("node-a")),
                    target_ref: Some(TargetRef {
                        kind: Some(intern("Pod")),
                        namespace: Some(intern("ns")),
                        name: Some(intern("db-0")),
                        uid: Some(Uid::new("u-1")),
                        api_version: None,
                        resource_version: None,
                    }),
                },
                EndpointAddress {
                    ip: Address::Ip("fd00::1".parse().unwrap()),
                    hostname: None,
                    node_name: Some(intern("")),
                    target_ref: None,
                },
            ],
            not_ready_addresses: Vec::new(),
            ports: vec![EndpointsPort {
                name: None,
                port: 80,
                protocol: Some(Protocol::Tcp),
                app_protocol: None,
            }],
        };
        assert_eq!(
            print_subset(&subset).as_str(),
            "(v1.EndpointSubset){Addresses:([]v1.EndpointAddress)[{IP:(string)10.0.0.1 Hostname:(string)db-0 NodeName:(*string)node-a TargetRef:(*v1.ObjectReference){Kind:(string)Pod Namespace:(string)ns Name:(string)db-0 UID:(types.UID)u-1 APIVersion:(string) ResourceVersion:(string) FieldPath:(string)}} {IP:(string)fd00::1 Hostname:(string) NodeName:(*string) TargetRef:(*v1.ObjectReference)<nil>}] NotReadyAddresses:([]v1.EndpointAddress)<nil> Ports:([]v1.EndpointPort)[{Name:(string) Port:(int32)80 Protocol:(v1.Protocol)TCP AppProtocol:(*string)<nil>}]}"
        );
        assert_eq!(subset_hash(&subset), 0xce59a5d9ddfd08be08084d18e50eb39f);
    }

    /// `tests/vectors/go_hash.json`: objects, their go-spew prints and FNV-1a hashes, made by Go
    /// (see its README).
    fn vectors() -> serde_json::Value {
        serde_json::from_str(include_str!("../../tests/vectors/go_hash.json")).unwrap()
    }

    fn go_hash(v: &serde_json::Value) -> u128 {
        u128::from_str_radix(v.as_str().unwrap(), 16).unwrap()
    }

    /// The model of the vector's object; `None` when sliced refuses it (a port out of range),
    /// so it can never be printed.
    fn endpoints_of(subsets: Vec<serde_json::Value>) -> Option<crate::model::Endpoints> {
        let object = serde_json::json!({
            "metadata": {"name": "v", "namespace": "v"},
            "subsets": subsets,
        });
        crate::kube::convert::endpoints_from_k8s(&serde_json::from_value(object).unwrap()).ok()
    }

    fn slice_ports_of(ports: Vec<serde_json::Value>) -> Option<Vec<EndpointPort>> {
        let object = serde_json::json!({
            "metadata": {"name": "v", "namespace": "v"},
            "addressType": "IPv4",
            "endpoints": [],
            "ports": ports,
        });
        let k8s = serde_json::from_value(object).unwrap();
        crate::kube::convert::endpoint_slice_from_k8s(&k8s)
            .ok()
            .map(|s| s.ports)
    }

    /// A slice port whose protocol is set to "": the API server refuses it (not TCP, UDP or
    /// SCTP) and the model cannot hold it, so such vectors are skipped.
    fn has_empty_slice_protocol(objects: &serde_json::Value) -> bool {
        objects.to_string().contains("\"protocol\":\"\"")
    }

    /// Vectors the model cannot hold as given are skipped: a `fieldPath` (the model keeps none, no
    /// controller sets one), or an IP in a non-canonical text (`fd00::0`; sliced keeps IPs as
    /// addresses and writes them canonical, as pods report them).
    fn unrepresentable(subset: &serde_json::Value) -> bool {
        let non_canonical = ["addresses", "notReadyAddresses"].iter().any(|list| {
            subset[list].as_array().is_some_and(|a| {
                a.iter().any(|address| {
                    let text = address["ip"].as_str().unwrap_or("");
                    text.parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.to_string() != text)
                })
            })
        });
        non_canonical || subset.to_string().contains("fieldPath")
    }

    #[test]
    fn every_go_vector_prints_and_hashes_the_same() {
        let v = vectors();
        let mut checked = 0;
        for case in v["core_ports"].as_array().unwrap() {
            let Some(e) = endpoints_of(vec![
                serde_json::json!({"addresses": [{"ip": "10.0.0.1"}], "ports": [case["object"]]}),
            ]) else {
                continue;
            };
            let port = &e.subsets[0].ports[0];
            assert_eq!(print_endpoints_port(port).as_str(), case["spew"], "{case}");
            assert_eq!(
                endpoints_port_hash(port),
                go_hash(&case["fnv128a"]),
                "{case}"
            );
            checked += 1;
        }
        for case in v["slice_ports"].as_array().unwrap() {
            if has_empty_slice_protocol(&case["object"]) {
                continue;
            }
            let Some(ports) = slice_ports_of(vec![case["object"].clone()]) else {
                continue;
            };
            let port = &ports[0];
            assert_eq!(print_slice_port(port).as_str(), case["spew"], "{case}");
            assert_eq!(slice_port_hash(port), go_hash(&case["fnv128a"]), "{case}");
            checked += 1;
        }
        for case in v["subsets"].as_array().unwrap() {
            if unrepresentable(&case["object"]) {
                continue;
            }
            let Some(e) = endpoints_of(vec![case["object"].clone()]) else {
                continue;
            };
            assert_eq!(print_subset(&e.subsets[0]).as_str(), case["spew"], "{case}");
            assert_eq!(
                subset_hash(&e.subsets[0]),
                go_hash(&case["fnv128a"]),
                "{case}"
            );
            checked += 1;
        }
        // Most vectors are valid objects; the rest hold ports out of range, which sliced refuses.
        assert!(checked > 300, "{checked} vectors checked");
    }

    #[test]
    fn sorting_gives_gos_order() {
        let v = vectors();
        let order = |case: &serde_json::Value| -> Vec<usize> {
            case["order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_u64().unwrap() as usize)
                .collect()
        };
        for case in v["sorted"]["core_ports"].as_array().unwrap() {
            let objects = case["objects"].as_array().unwrap().clone();
            let Some(e) = endpoints_of(vec![
                serde_json::json!({"addresses": [{"ip": "10.0.0.1"}], "ports": objects}),
            ]) else {
                continue;
            };
            let given = e.subsets[0].ports.clone();
            let mut sorted = given.clone();
            sort_endpoints_ports(&mut sorted);
            let want: Vec<EndpointsPort> = order(case).iter().map(|&i| given[i].clone()).collect();
            assert_eq!(sorted, want, "{case}");
        }
        for case in v["sorted"]["slice_ports"].as_array().unwrap() {
            if has_empty_slice_protocol(&case["objects"]) {
                continue;
            }
            let Some(given) = slice_ports_of(case["objects"].as_array().unwrap().clone()) else {
                continue;
            };
            let mut sorted = given.clone();
            sort_slice_ports(&mut sorted);
            let want: Vec<EndpointPort> = order(case).iter().map(|&i| given[i].clone()).collect();
            assert_eq!(sorted, want, "{case}");
        }
        for case in v["sorted"]["subsets"].as_array().unwrap() {
            let objects = case["objects"].as_array().unwrap().clone();
            if objects.iter().any(unrepresentable) {
                continue;
            }
            let Some(e) = endpoints_of(objects) else {
                continue;
            };
            let given = e.subsets;
            let mut sorted = given.clone();
            sort_subsets(&mut sorted);
            let want: Vec<EndpointSubset> = order(case).iter().map(|&i| given[i].clone()).collect();
            assert_eq!(sorted, want, "{case}");
        }
    }

    #[test]
    fn fnv128a_of_nothing_is_the_offset_basis() {
        assert_eq!(fnv128a(b""), FNV128_OFFSET);
        // Go: fnv.New128a() over "a".
        assert_eq!(fnv128a(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
    }
}

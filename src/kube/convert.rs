//! Conversions between k8s-openapi objects and the model.
//!
//! Reading (`*_from_k8s`) validates what the reconcilers rely on: names, IPs, ports, protocols and
//! enumerations. Each failure is a [`ConvertError`] naming the field path, such as
//! `spec.ports[0].port`. Writing (`*_to_k8s`) cannot fail.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::model::{
    Labels, Meta, Name, OwnerReference, Protocol, TargetRef, Timestamp, Uid, intern,
};
use crate::sink::Object;

mod borrowed_pod;
mod inputs;
mod object_json;
mod objects;
mod pod;
mod slice;

pub use borrowed_pod::pod_from_json_text;
pub use inputs::{NamespaceJson, NodeJson, PodJson, ServiceJson};
pub use object_json::ObjectJson;
pub use objects::{
    WatchedContainer, WatchedPod, WatchedPodSpec, WatchedPodStatus, namespace_from_k8s,
    node_from_k8s, pod_from_k8s, service_from_k8s,
};
pub use pod::{
    ContainerFields, PodFields, PortFields, ReadyCondition, pod_from_fields, pod_from_watched,
};
pub use slice::{
    endpoint_slice_from_k8s, endpoint_slice_to_k8s, endpoints_from_k8s, endpoints_to_k8s,
};

/// A field that does not convert: its path from the object root and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConvertError {
    /// Dotted path with list indexes, such as `spec.ports[0].port`.
    pub path: String,
    pub message: String,
}

impl ConvertError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConvertError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The object as the API server would serve it, with `apiVersion` and `kind` set.
pub fn object_to_json(object: &Object) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::to_value(ObjectJson(object))
}

/// The object as k8s-openapi's type, which serialises as the API server serves it. What
/// [`ObjectJson`] prints without building it.
pub fn object_to_k8s(object: &Object) -> K8sObject {
    match object {
        Object::EndpointSlice(slice) => K8sObject::EndpointSlice(endpoint_slice_to_k8s(slice)),
        Object::Endpoints(endpoints) => K8sObject::Endpoints(endpoints_to_k8s(endpoints)),
    }
}

/// An object sliced writes, as k8s-openapi's type.
#[derive(Clone, Debug)]
pub enum K8sObject {
    EndpointSlice(k8s_openapi::api::discovery::v1::EndpointSlice),
    Endpoints(k8s_openapi::api::core::v1::Endpoints),
}

impl serde::Serialize for K8sObject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            K8sObject::EndpointSlice(o) => o.serialize(serializer),
            K8sObject::Endpoints(o) => o.serialize(serializer),
        }
    }
}

/// Parses an IP address the way Go's `net.ParseIP` did before Go 1.17 (`netutils.ParseIPSloppy`):
/// IPv4 fields may have leading zeros and are read as decimal. An IPv4-mapped IPv6 address becomes
/// the IPv4 address, as Go treats it.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    let ip = match s.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => match s.rsplit_once(':') {
            // An IPv6 address whose dotted IPv4 tail has leading zeros.
            Some((head, tail)) if tail.contains('.') => {
                let v4 = parse_ipv4_sloppy(tail)?;
                IpAddr::V6(format!("{head}:{v4}").parse::<Ipv6Addr>().ok()?)
            }
            Some(_) => return None,
            None => IpAddr::V4(parse_ipv4_sloppy(s)?),
        },
    };
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

fn parse_ipv4_sloppy(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Leading zeros are decimal, and any number of them is fine; the value must fit a byte.
        let digits = part.trim_start_matches('0');
        *octet = if digits.is_empty() {
            0
        } else {
            digits.parse::<u8>().ok()?
        };
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

/// Parses a CPU quantity ("2", "1.5", "500m", "2k", "1Ki", "1e3") into millicores, rounding up
/// like `Quantity.MilliValue`. Negative values are 0; values beyond an i64 saturate, however many
/// digits or however large an exponent they have (upstream parses any size exactly). `None` when
/// the text is not a quantity.
pub fn parse_cpu_millis(q: &str) -> Option<i64> {
    let (negative, rest) = match q.as_bytes().first() {
        Some(b'-') => (true, &q[1..]),
        Some(b'+') => (false, &q[1..]),
        _ => (false, q),
    };
    let num_len = rest
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_len);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !frac_part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The number is digits * 2^exp2 * 10^exp10; exponents are i64 and saturate, so no text can
    // overflow them.
    let (exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.starts_with(['e', 'E']) => (decimal_exponent(&s[1..])?, 0),
        _ => return None,
    };
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    for _ in 0..exp2 / 10 {
        multiply_digits(&mut digits, 1024);
    }
    let first = digits.iter().position(|&d| d != 0);
    let Some(first) = first else {
        return Some(0);
    };
    if negative {
        return Some(0);
    }
    let digits = &digits[first..];
    // Millicores: digits * 10^exp, and the integer part has `whole` digits.
    let scale = i64::try_from(frac_part.len()).unwrap_or(i64::MAX);
    let exp = exp10.saturating_add(3).saturating_sub(scale);
    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let whole = len.saturating_add(exp);
    // At least 10^19 > i64::MAX.
    if whole > 19 {
        return Some(i64::MAX);
    }
    // Between 0 and 1: rounds up to one millicore.
    if whole <= 0 {
        return Some(1);
    }
    let whole = usize::try_from(whole).ok()?;
    let (int_digits, fraction) = digits.split_at(whole.min(digits.len()));
    let padding = whole.saturating_sub(int_digits.len());
    // At most 19 digits: fits a u64.
    let mut value: u64 = 0;
    for &d in int_digits.iter().chain(std::iter::repeat_n(&0, padding)) {
        value = value.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    if fraction.iter().any(|&d| d != 0) {
        value = value.saturating_add(1);
    }
    Some(i64::try_from(value).unwrap_or(i64::MAX))
}

/// The exponent of `1e3`, `1E-3`: an optionally signed decimal integer; beyond an i64 it saturates
/// (the value is then 0 or infinite either way).
fn decimal_exponent(e: &str) -> Option<i64> {
    let (negative, digits) = match e.as_bytes().first() {
        Some(b'-') => (true, &e[1..]),
        Some(b'+') => (false, &e[1..]),
        _ => (false, e),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude = digits.parse::<i64>().unwrap_or(i64::MAX);
    Some(if negative { -magnitude } else { magnitude })
}

/// Multiplies a big-endian decimal digit string by `by` in place.
fn multiply_digits(digits: &mut Vec<u8>, by: u32) {
    let mut carry: u32 = 0;
    for d in digits.iter_mut().rev() {
        let v = u32::from(*d) * by + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// How an object's metadata is read.
#[derive(Clone, Copy)]
pub(crate) struct MetaRules {
    /// Namespaced kinds default their namespace to "default".
    pub namespaced: bool,
    /// Intern the name: it repeats (a Service's name is also its Endpoints' name and its slices'
    /// label value).
    pub intern_name: bool,
    /// A name may be missing when generateName is set (slices not yet created).
    pub generate_name: bool,
}

pub(crate) fn meta_from_k8s(m: &ObjectMeta, rules: MetaRules) -> Result<Meta, ConvertError> {
    let (namespace, name) = namespace_and_name(m, rules)?;
    Ok(Meta {
        namespace,
        name,
        uid: m.uid.as_deref().map(Name::new).unwrap_or_default(),
        resource_version: m
            .resource_version
            .as_deref()
            .map(Name::new)
            .unwrap_or_default(),
        generation: m.generation.unwrap_or(0),
        creation_timestamp: time(&m.creation_timestamp),
        deletion_timestamp: time(&m.deletion_timestamp),
        labels: labels(&m.labels),
        annotations: annotations(&m.annotations),
    })
}

fn namespace_and_name(m: &ObjectMeta, rules: MetaRules) -> Result<(Name, Name), ConvertError> {
    let name = m.name.as_deref().unwrap_or("");
    let has_generate_name =
        rules.generate_name && m.generate_name.as_deref().is_some_and(|g| !g.is_empty());
    if name.is_empty() && !has_generate_name {
        let what = if rules.generate_name {
            "name or generateName is required"
        } else {
            "name is required"
        };
        return Err(ConvertError::new("metadata.name", what));
    }
    let namespace = match m.namespace.as_deref() {
        Some(ns) if !ns.is_empty() && rules.namespaced => intern(ns),
        _ if rules.namespaced => intern("default"),
        _ => Name::default(),
    };
    let name = if rules.intern_name {
        intern(name)
    } else {
        Name::new(name)
    };
    Ok((namespace, name))
}

/// Metadata as the API server would serve it: empty and zero fields omitted.
pub(crate) fn meta_to_k8s(
    meta: &Meta,
    generate_name: Option<&Name>,
    owners: &[OwnerReference],
) -> ObjectMeta {
    ObjectMeta {
        name: non_empty(&meta.name),
        generate_name: generate_name.map(|g| g.to_string()),
        namespace: non_empty(&meta.namespace),
        uid: non_empty(&meta.uid),
        resource_version: non_empty(&meta.resource_version),
        generation: (meta.generation != 0).then_some(meta.generation),
        creation_timestamp: meta.creation_timestamp.map(Time),
        deletion_timestamp: meta.deletion_timestamp.map(Time),
        labels: labels_to_k8s(&meta.labels),
        annotations: labels_to_k8s(&meta.annotations),
        owner_references: (!owners.is_empty()).then(|| {
            owners
                .iter()
                .map(
                    |o| k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: o.api_version.to_string(),
                        kind: o.kind.to_string(),
                        name: o.name.to_string(),
                        uid: o.uid.to_string(),
                        controller: o.controller,
                        block_owner_deletion: o.block_owner_deletion,
                    },
                )
                .collect()
        }),
        ..ObjectMeta::default()
    }
}

pub(crate) fn owner_references(m: &ObjectMeta) -> Vec<OwnerReference> {
    m.owner_references
        .iter()
        .flatten()
        .map(|o| OwnerReference {
            api_version: intern(&o.api_version),
            kind: intern(&o.kind),
            name: intern(&o.name),
            uid: Name::new(&o.uid),
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        })
        .collect()
}

fn non_empty(n: &Name) -> Option<String> {
    (!n.is_empty()).then(|| n.to_string())
}

pub(crate) fn time(t: &Option<Time>) -> Option<Timestamp> {
    t.as_ref().map(|t| t.0)
}

pub(crate) fn labels(m: &Option<BTreeMap<String, String>>) -> Labels {
    m.as_ref().map(Labels::from_pairs).unwrap_or_default()
}

pub(crate) fn annotations(m: &Option<BTreeMap<String, String>>) -> Labels {
    m.as_ref()
        .map(Labels::annotations_from_pairs)
        .unwrap_or_default()
}

pub(crate) fn labels_to_k8s(l: &Labels) -> Option<BTreeMap<String, String>> {
    (!l.is_empty()).then(|| {
        l.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

pub(crate) fn opt_intern(s: &Option<String>) -> Option<Name> {
    s.as_deref().map(intern)
}

pub(crate) fn opt_name(s: &Option<String>) -> Option<Name> {
    s.as_deref().map(Name::new)
}

/// `None` for an absent or empty string.
pub(crate) fn non_empty_intern(s: &Option<String>) -> Option<Name> {
    s.as_deref().filter(|s| !s.is_empty()).map(intern)
}

pub(crate) fn opt_string(n: &Option<Name>) -> Option<String> {
    n.as_ref().map(|n| n.to_string())
}

/// An IP address; `path` is only formatted on failure.
pub(crate) fn ip(s: &str, path: impl FnOnce() -> String) -> Result<IpAddr, ConvertError> {
    parse_ip(s).ok_or_else(|| ConvertError::new(path(), format!("{s:?} is not a valid IP address")))
}

/// A port number in `min..=65535`.
pub(crate) fn port(n: i32, min: i32, path: impl FnOnce() -> String) -> Result<i32, ConvertError> {
    if (min..=65535).contains(&n) {
        Ok(n)
    } else {
        Err(ConvertError::new(
            path(),
            format!("{n} is not a valid port number ({min}-65535)"),
        ))
    }
}

/// A protocol; absent or empty is `None` (the caller applies the default).
pub(crate) fn protocol(
    p: &str,
    path: impl FnOnce() -> String,
) -> Result<Option<Protocol>, ConvertError> {
    match p {
        "" => Ok(None),
        s => Protocol::parse(s).map(Some).ok_or_else(|| {
            ConvertError::new(
                path(),
                format!("unknown protocol {s:?} (want TCP, UDP or SCTP)"),
            )
        }),
    }
}

pub(crate) fn target_ref_from_k8s(r: &core::ObjectReference) -> TargetRef {
    TargetRef {
        kind: opt_intern(&r.kind),
        namespace: opt_intern(&r.namespace),
        name: opt_name(&r.name),
        uid: r.uid.as_deref().map(Uid::new),
        api_version: opt_intern(&r.api_version),
        resource_version: opt_name(&r.resource_version),
    }
}

pub(crate) fn target_ref_to_k8s(r: &TargetRef) -> core::ObjectReference {
    core::ObjectReference {
        kind: opt_string(&r.kind),
        namespace: opt_string(&r.namespace),
        name: opt_string(&r.name),
        uid: r.uid.as_ref().map(Uid::to_string),
        api_version: opt_string(&r.api_version),
        resource_version: opt_string(&r.resource_version),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_ref_uids_round_trip_exactly() {
        for uid in [
            None,
            Some(""),
            Some("6f1c3c1e-4d2a-4b8e-9f00-0123456789ab"),
            Some("6F1C3C1E-4D2A-4B8E-9F00-0123456789AB"),
            Some("pod-uid-1"),
        ] {
            let r = core::ObjectReference {
                kind: Some("Pod".to_owned()),
                uid: uid.map(str::to_owned),
                ..core::ObjectReference::default()
            };
            let model = target_ref_from_k8s(&r);
            assert_eq!(
                model.uid.as_ref().map(|u| u.is_compact()),
                uid.map(|u| u.starts_with("6f"))
            );
            assert_eq!(target_ref_to_k8s(&model), r);
        }
    }

    #[test]
    fn sloppy_ip_parsing() {
        let v4 = |s: &str| parse_ip(s).map(|ip| ip.to_string());
        assert_eq!(v4("10.1.2.3").as_deref(), Some("10.1.2.3"));
        assert_eq!(v4("010.001.002.003").as_deref(), Some("10.1.2.3"));
        assert_eq!(v4("0000.0.0.0001").as_deref(), Some("0.0.0.1"));
        assert_eq!(v4("::ffff:10.1.2.3").as_deref(), Some("10.1.2.3"));
        assert_eq!(v4("::ffff:010.1.2.3").as_deref(), Some("10.1.2.3"));
        assert_eq!(v4("fd00:0:0:0:0:0:0:1").as_deref(), Some("fd00::1"));
        for bad in [
            "",
            "10.0.0.300",
            "10.0.0",
            "10.0.0.1.2",
            "+1.2.3.4",
            "1..2.3",
            "fe80::1%eth0",
            "abc",
            "1.2.3.4 ",
            ":::",
            "fd00::g",
        ] {
            assert_eq!(parse_ip(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cpu_quantities() {
        let cases = [
            ("2", Some(2000)),
            ("500m", Some(500)),
            ("1.5", Some(1500)),
            (".5", Some(500)),
            ("4k", Some(4_000_000)),
            ("1Ki", Some(1_024_000)),
            ("1e3", Some(1_000_000)),
            ("1E-3", Some(1)),
            ("0.0001", Some(1)),
            ("0", Some(0)),
            ("-1", Some(0)),
            ("99999999999999999999", Some(i64::MAX)),
            ("1e999999", Some(i64::MAX)),
            ("1e-99999", Some(1)),
            ("", None),
            ("m", None),
            ("1.2.3", None),
            ("2 cores", None),
            ("1x", None),
        ];
        for (q, want) in cases {
            assert_eq!(parse_cpu_millis(q), want, "{q:?}");
        }
    }

    /// Upstream reads a quantity of any size exactly, so a huge one is huge: never negative, never
    /// unreadable (which would count as no capacity and turn topology hints off).
    #[test]
    fn huge_cpu_quantities_saturate() {
        let nines = "9".repeat(39);
        let max = i128::MAX.to_string();
        let big = format!("1{}e-41", "0".repeat(38));
        let cases = [
            (nines.as_str(), Some(i64::MAX)),
            (max.as_str(), Some(i64::MAX)),
            (&format!("{max}e-5"), Some(i64::MAX)),
            (&format!("{max}m"), Some(i64::MAX)),
            (&format!("{max}Ei"), Some(i64::MAX)),
            (&format!("0.{nines}"), Some(1000)),
            (&format!("{nines}e-39"), Some(1000)),
            (&format!("{nines}e-40"), Some(100)),
            // 10^38 * 10^-41 cores: 1 millicore (this wrapped to -1).
            (&big, Some(1)),
            (&format!("0.{}1", "0".repeat(100)), Some(1)),
            (&format!("{}1", "0".repeat(100)), Some(1000)),
            ("9223372036854775807m", Some(i64::MAX)),
            ("9223372036854775808m", Some(i64::MAX)),
            ("9223372036854775.807", Some(i64::MAX)),
            ("9223372036854775.806", Some(i64::MAX - 1)),
            ("8Ei", Some(i64::MAX)),
            ("1Ei", Some(i64::MAX)),
            ("0.001Ki", Some(1024)),
            ("1e99999999999999999999999", Some(i64::MAX)),
            ("1e-99999999999999999999999", Some(1)),
            (&format!("-{nines}"), Some(0)),
            ("0e99999999999999999999", Some(0)),
        ];
        for (q, want) in cases {
            assert_eq!(parse_cpu_millis(q), want, "{q:?}");
        }
    }
}

//! MetalLB `IPAddressPool` objects, their validation, and the pools built from them.

use std::net::IpAddr;

use serde::{Deserialize, Deserializer, Serialize};

use super::range::{AddrRange, RangeError, is_buggy};
use super::selector::{LabelSelector, LabelSource};
use crate::model::IpFamily;

/// The API version MetalLB serves `IPAddressPool` under.
pub const API_VERSION: &str = "metallb.io/v1beta1";
/// The kind of the object.
pub const KIND: &str = "IPAddressPool";

/// A MetalLB `IPAddressPool` object as it is stored (YAML or JSON). Unknown fields are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressPoolObject {
    /// `metallb.io/v1beta1`; may be left empty by a caller that already filtered on it.
    #[serde(default)]
    pub api_version: String,
    /// `IPAddressPool`; may be left empty likewise.
    #[serde(default)]
    pub kind: String,
    /// Only the name is used.
    #[serde(default)]
    pub metadata: PoolMetadata,
    /// The pool's settings.
    #[serde(default)]
    pub spec: IpAddressPoolSpec,
}

/// The parts of `metadata` a pool needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolMetadata {
    /// The pool's name, which the `metallb.io/address-pool` annotation refers to.
    #[serde(default)]
    pub name: String,
    /// The namespace the object lives in (MetalLB's own); not used for allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `spec` of an `IPAddressPool`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressPoolSpec {
    /// CIDRs (`192.168.10.0/24`, `fc00::/120`) and ranges (`192.168.9.1-192.168.9.5`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub addresses: Vec<String>,
    /// Whether addresses are handed out without a pool annotation; true when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_assign: Option<bool>,
    /// Whether IPv4 addresses ending in `.0` and `.255` are left out.
    #[serde(default, rename = "avoidBuggyIPs")]
    pub avoid_buggy_ips: bool,
    /// Restricts the pool to some namespaces or services, and orders pinned pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_allocation: Option<ServiceAllocation>,
}

/// `spec.serviceAllocation`: which Services may take the pool's addresses, and the pool's
/// priority among the pools pinned to a Service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAllocation {
    /// Lower is tried first; 0 (unset) and below come after every positive priority.
    #[serde(default)]
    pub priority: i64,
    /// Namespaces whose Services may use the pool.
    #[serde(default, deserialize_with = "null_as_default")]
    pub namespaces: Vec<String>,
    /// Namespaces selected by their labels, in addition to `namespaces`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub namespace_selectors: Vec<LabelSelector>,
    /// Services selected by their labels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub service_selectors: Vec<LabelSelector>,
}

/// A validated address pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The pool's name.
    pub name: String,
    /// Address ranges in configuration order, one per `spec.addresses` entry.
    pub ranges: Vec<AddrRange>,
    /// Whether the pool serves Services that name no pool.
    pub auto_assign: bool,
    /// Whether IPv4 addresses ending in `.0` and `.255` are left out.
    pub avoid_buggy_ips: bool,
    /// The `serviceAllocation` restriction, if any.
    pub allocation: Option<ServiceAllocation>,
}

/// A configuration error, naming the pool and the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("IPAddressPool {pool:?}: {path}: {problem}")]
pub struct PoolError {
    /// The pool's name (empty when the name itself is missing).
    pub pool: String,
    /// The field, e.g. `spec.addresses[2]`.
    pub path: String,
    /// What is wrong there.
    pub problem: PoolProblem,
}

/// What is wrong with a pool field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolProblem {
    /// The object is of another kind or API version.
    #[error("{0:?} is not {API_VERSION} {KIND}")]
    WrongKind(String),
    /// A required field is empty.
    #[error("must not be empty")]
    Missing,
    /// An address entry does not parse.
    #[error("{text:?}: {error}")]
    Address {
        /// The entry as written.
        text: String,
        /// Why it was refused.
        error: RangeError,
    },
    /// Two address ranges share addresses.
    #[error("{0}")]
    Overlap(Box<Overlap>),
    /// Two pools have the same name.
    #[error("defined twice")]
    DuplicateName,
    /// A namespace is listed twice.
    #[error("namespace {0:?} listed twice")]
    DuplicateNamespace(String),
    /// A selector is listed twice.
    #[error("the same selector is listed twice")]
    DuplicateSelector,
    /// A selector Kubernetes would refuse.
    #[error("{0}")]
    Selector(String),
}

/// Two ranges sharing addresses: the one the error names, and the other.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{range} overlaps {other_range} (IPAddressPool {other_pool:?}, {other_path})")]
pub struct Overlap {
    /// This field's range.
    pub range: AddrRange,
    /// The range it collides with.
    pub other_range: AddrRange,
    /// The pool holding the other range.
    pub other_pool: String,
    /// The field of the other range.
    pub other_path: String,
}

/// Builds a pool from its object, refusing what MetalLB's configuration parsing refuses: no name,
/// no addresses, an entry neither CIDR nor range, a range whose first address is after its last,
/// overlapping entries, duplicate namespaces or selectors, selectors Kubernetes refuses. It also
/// refuses a range mixing IPv4 and IPv6 (MetalLB keeps no address of it, silently) and an object
/// of another kind or API version. Host bits of a CIDR are cleared, as MetalLB does; any size is
/// accepted, up to the whole IPv6 space. Overlaps with other pools are checked by
/// [`check_pools`].
pub fn pool_from_object(doc: IpAddressPoolObject) -> Result<Pool, PoolError> {
    let name = doc.metadata.name;
    let fail = |path: &str, problem| PoolError {
        pool: name.clone(),
        path: path.to_string(),
        problem,
    };
    if !doc.api_version.is_empty() && doc.api_version != API_VERSION {
        return Err(fail("apiVersion", PoolProblem::WrongKind(doc.api_version)));
    }
    if !doc.kind.is_empty() && doc.kind != KIND {
        return Err(fail("kind", PoolProblem::WrongKind(doc.kind)));
    }
    if name.is_empty() {
        return Err(fail("metadata.name", PoolProblem::Missing));
    }
    let spec = doc.spec;
    if spec.addresses.is_empty() {
        return Err(fail("spec.addresses", PoolProblem::Missing));
    }
    let mut ranges = Vec::with_capacity(spec.addresses.len());
    for (i, text) in spec.addresses.iter().enumerate() {
        match AddrRange::parse(text) {
            Ok(r) => ranges.push(r),
            Err(error) => {
                let text = text.clone();
                let problem = PoolProblem::Address { text, error };
                return Err(fail(&format!("spec.addresses[{i}]"), problem));
            }
        }
    }
    if let Some(a) = &spec.service_allocation {
        check_allocation(a).map_err(|(path, problem)| fail(&path, problem))?;
    }
    let pool = Pool {
        name: name.clone(),
        ranges,
        auto_assign: spec.auto_assign.unwrap_or(true),
        avoid_buggy_ips: spec.avoid_buggy_ips,
        allocation: spec.service_allocation,
    };
    check_pools(std::slice::from_ref(&pool))?;
    Ok(pool)
}

fn check_allocation(a: &ServiceAllocation) -> Result<(), (String, PoolProblem)> {
    let base = "spec.serviceAllocation";
    for (i, ns) in a.namespaces.iter().enumerate() {
        if a.namespaces[..i].contains(ns) {
            let problem = PoolProblem::DuplicateNamespace(ns.clone());
            return Err((format!("{base}.namespaces[{i}]"), problem));
        }
    }
    let lists = [
        ("namespaceSelectors", &a.namespace_selectors),
        ("serviceSelectors", &a.service_selectors),
    ];
    for (field, list) in lists {
        for (i, s) in list.iter().enumerate() {
            let at = format!("{base}.{field}[{i}]");
            if let Some(f) = s.fault() {
                return Err((format!("{at}.{}", f.path), PoolProblem::Selector(f.reason)));
            }
            if list[..i].contains(s) {
                return Err((at, PoolProblem::DuplicateSelector));
            }
        }
    }
    Ok(())
}

/// Checks a set of pools together: names are unique and no two address ranges overlap, within a
/// pool or across pools (MetalLB refuses the whole configuration then).
pub fn check_pools(pools: &[Pool]) -> Result<(), PoolError> {
    for (i, p) in pools.iter().enumerate() {
        if pools[..i].iter().any(|q| q.name == p.name) {
            return Err(PoolError {
                pool: p.name.clone(),
                path: "metadata.name".into(),
                problem: PoolProblem::DuplicateName,
            });
        }
    }
    // Sorted by start, a range overlaps an earlier one iff it starts at or before the highest
    // end seen so far.
    let mut all: Vec<(AddrRange, usize, usize)> = pools
        .iter()
        .enumerate()
        .flat_map(|(p, pool)| pool.ranges.iter().enumerate().map(move |(r, &x)| (x, p, r)))
        .collect();
    all.sort_by_key(|&(r, p, i)| (r.family(), r.lo(), p, i));
    let mut reach: Option<(AddrRange, usize, usize)> = None;
    for &(range, p, i) in &all {
        if let Some((top, tp, ti)) = reach
            && top.overlaps(&range)
        {
            // Blame whichever of the two comes later in the configuration.
            let ((a, ap, ai), (b, bp, bi)) = if (tp, ti) < (p, i) {
                ((range, p, i), (top, tp, ti))
            } else {
                ((top, tp, ti), (range, p, i))
            };
            return Err(PoolError {
                pool: pools[ap].name.clone(),
                path: format!("spec.addresses[{ai}]"),
                problem: PoolProblem::Overlap(Box::new(Overlap {
                    range: a,
                    other_range: b,
                    other_pool: pools[bp].name.clone(),
                    other_path: format!("spec.addresses[{bi}]"),
                })),
            });
        }
        if reach.is_none_or(|(top, _, _)| top.family() != range.family() || range.hi() > top.hi()) {
            reach = Some((range, p, i));
        }
    }
    Ok(())
}

impl Pool {
    /// Whether `ip` is one of the pool's addresses (IPv4 `.0`/`.255` excluded when the pool
    /// avoids buggy addresses, as MetalLB's lookup of an address's pool does).
    pub fn contains(&self, ip: IpAddr) -> bool {
        !(self.avoid_buggy_ips && is_buggy(ip)) && self.ranges.iter().any(|r| r.contains(ip))
    }

    /// Whether the pool has a range of `family`.
    pub fn has_family(&self, family: IpFamily) -> bool {
        self.ranges.iter().any(|r| r.family() == family)
    }
}

impl ServiceAllocation {
    /// Whether the restriction names Services at all (by namespace or by service labels). A pool
    /// whose `serviceAllocation` names none is never picked without an annotation or a requested
    /// address, as in MetalLB.
    pub fn pins(&self) -> bool {
        self.has_namespace_rule() || !self.service_selectors.is_empty()
    }

    fn has_namespace_rule(&self) -> bool {
        !self.namespaces.is_empty() || !self.namespace_selectors.is_empty()
    }

    /// Whether a Service of `namespace` may hold the pool's addresses: the namespace rule (listed,
    /// or selected by a namespace selector) and the service rule (selected by a service selector)
    /// must both hold where set. `Err` says why not.
    ///
    /// MetalLB resolves namespace selectors against the namespaces existing when it loads the
    /// configuration, and a pool whose selectors match no namespace then admits every namespace;
    /// here selectors are matched against the Service's namespace labels when asked, and a
    /// selector matching nothing admits nothing.
    pub fn admits(
        &self,
        namespace: &str,
        namespace_labels: &dyn LabelSource,
        service_labels: &dyn LabelSource,
    ) -> Result<(), String> {
        if self.has_namespace_rule()
            && !self.namespaces.iter().any(|n| n == namespace)
            && !self
                .namespace_selectors
                .iter()
                .any(|s| s.matches(namespace_labels))
        {
            return Err(format!(
                "namespace {namespace:?} is not in its serviceAllocation.namespaces \
                 nor selected by its namespaceSelectors"
            ));
        }
        if !self.service_selectors.is_empty()
            && !self
                .service_selectors
                .iter()
                .any(|s| s.matches(service_labels))
        {
            return Err(
                "the service's labels match none of its serviceAllocation.serviceSelectors".into(),
            );
        }
        Ok(())
    }
}

/// Reads an absent or `null` field as its default.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

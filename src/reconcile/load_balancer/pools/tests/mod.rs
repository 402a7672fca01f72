//! Tests of the pools and the allocator. Expected results come from MetalLB's rules, worked out
//! by hand (or, in `prop`, by a brute-force model), never from the code under test.

use std::net::IpAddr;

use super::*;
use crate::model::IpFamily;

mod allocate;
mod config;
mod converge;
mod pinning;
mod prop;
mod scale;
mod sharing;

/// An address.
pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Addresses.
pub(super) fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| ip(s)).collect()
}

/// Pools from a multi-document YAML of `IPAddressPool` objects, checked together.
pub(super) fn pools(yaml: &str) -> Vec<Pool> {
    let docs: Vec<IpAddressPoolObject> = serde_saphyr::from_multiple(yaml).unwrap();
    let pools: Vec<Pool> = docs
        .into_iter()
        .map(|d| pool_from_object(d).unwrap())
        .collect();
    check_pools(&pools).unwrap();
    pools
}

/// An allocator over the pools of a YAML text.
pub(super) fn allocator(yaml: &str) -> Allocator {
    Allocator::new(pools(yaml))
}

/// A one-range pool in YAML.
pub(super) fn pool_yaml(name: &str, addresses: &[&str]) -> String {
    let mut s = format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata:\n  name: {name}\nspec:\n  addresses:\n"
    );
    for a in addresses {
        s.push_str(&format!("  - \"{a}\"\n"));
    }
    s
}

/// The namespace part of `namespace/name`.
pub(super) fn ns(service: &str) -> &str {
    service.split_once('/').map_or("", |(n, _)| n)
}

/// A single-family claim with nothing else set.
pub(super) fn single<'a>(service: &'a str, family: IpFamily) -> Claim<'a> {
    Claim::new(service, ns(service), FamilyPolicy::Single(family))
}

/// An IPv4 claim with nothing else set.
pub(super) fn v4(service: &str) -> Claim<'_> {
    single(service, IpFamily::V4)
}

//! The address allocator: who holds which LoadBalancer address, and which address a Service gets
//! next, by MetalLB's rules.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use super::config::Pool;
use super::error::{AllocationError, Wanted};
use super::range::family_of;
use super::selector::{LabelSource, NoLabels};
use super::state::{
    AddrState, Holding, Occupied, PoolSlot, RangeIndex, ShareKey, SharedIndex, fam,
};
use crate::model::{IpFamily, Protocol};

/// The address families a Service's load balancer takes, from its `ipFamilyPolicy` and cluster IPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FamilyPolicy {
    /// One address of this family: SingleStack, or any policy with a single cluster IP.
    Single(IpFamily),
    /// RequireDualStack: one address of each family, from one pool.
    RequireDual,
    /// PreferDualStack with two cluster IPs: both families if one pool has both, else one address;
    /// the family is the first of `spec.ipFamilies` when the pools offer only one family each.
    PreferDual(IpFamily),
}

impl FamilyPolicy {
    /// What the policy asks for, as errors name it.
    pub fn wanted(self) -> Wanted {
        match self {
            FamilyPolicy::Single(f) => Wanted::One(f),
            FamilyPolicy::RequireDual => Wanted::Both,
            FamilyPolicy::PreferDual(_) => Wanted::Either,
        }
    }

    /// Whether `ips` (at most one per family) fit the policy, as MetalLB's check of the current
    /// addresses against the cluster IPs' families.
    pub fn fits(self, ips: &[IpAddr]) -> bool {
        let families: Vec<IpFamily> = ips.iter().map(|&ip| family_of(ip)).collect();
        match (self, families.as_slice()) {
            (FamilyPolicy::Single(f), [g]) => f == *g,
            (FamilyPolicy::RequireDual, [a, b]) => a != b,
            (FamilyPolicy::PreferDual(_), [_]) => true,
            (FamilyPolicy::PreferDual(_), [a, b]) => a != b,
            _ => false,
        }
    }
}

/// Who asks, and what constrains the addresses it may hold.
#[derive(Clone, Copy)]
pub struct Claim<'a> {
    /// `namespace/name`: the holder's identity.
    pub service: &'a str,
    /// The Service's namespace, for `serviceAllocation.namespaces`.
    pub namespace: &'a str,
    /// The Service's labels, for `serviceAllocation.serviceSelectors`.
    pub service_labels: &'a dyn LabelSource,
    /// The namespace's labels, for `serviceAllocation.namespaceSelectors`.
    pub namespace_labels: &'a dyn LabelSource,
    /// The families to take.
    pub families: FamilyPolicy,
    /// The Service's ports, which a shared address must not already serve.
    pub ports: &'a [(Protocol, i32)],
    /// Annotation `metallb.io/allow-shared-ip`; empty reads as absent.
    pub sharing_key: Option<&'a str>,
    /// The selector string when `externalTrafficPolicy` is Local, else `None`; empty reads as
    /// absent.
    pub backend_key: Option<&'a str>,
    /// Annotation `metallb.io/address-pool`; empty reads as absent.
    pub pool: Option<&'a str>,
}

impl<'a> Claim<'a> {
    /// A claim with no labels, ports, sharing key, backend key or pool annotation.
    pub fn new(service: &'a str, namespace: &'a str, families: FamilyPolicy) -> Self {
        Claim {
            service,
            namespace,
            service_labels: &NoLabels,
            namespace_labels: &NoLabels,
            families,
            ports: &[],
            sharing_key: None,
            backend_key: None,
            pool: None,
        }
    }

    /// The pool annotation, if set and not empty.
    pub(crate) fn pool_name(&self) -> Option<&'a str> {
        self.pool.filter(|p| !p.is_empty())
    }
}

impl fmt::Debug for Claim<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claim")
            .field("service", &self.service)
            .field("families", &self.families)
            .field("ports", &self.ports)
            .field("sharing_key", &self.sharing_key)
            .field("backend_key", &self.backend_key)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

/// Addresses of one pool, for metrics (MetalLB's `metallb_allocator_*` gauges).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolUsage {
    /// The pool.
    pub pool: String,
    /// Usable IPv4 addresses (`.0`/`.255` left out when the pool avoids them).
    pub ipv4_total: u128,
    /// Usable IPv6 addresses, saturating at `u128::MAX`.
    pub ipv6_total: u128,
    /// IPv4 addresses held by at least one Service.
    pub ipv4_in_use: u128,
    /// IPv6 addresses held by at least one Service.
    pub ipv6_in_use: u128,
    /// Services holding addresses of the pool.
    pub services: usize,
}

/// Tracks the pools and who holds which address. Pure state: no I/O, no clock.
///
/// Pools are kept in name order, which is also the order among pools MetalLB would try in an
/// unspecified (hash map) order. Pools are expected to have passed [`super::check_pools`]; of two
/// pools with one name only the first is kept, and an address in ranges of two pools belongs to
/// the one first in name order.
#[derive(Clone, Debug, Default)]
pub struct Allocator {
    pub(crate) pools: Vec<PoolSlot>,
    pub(crate) by_name: HashMap<String, usize>,
    pub(crate) index: RangeIndex,
    pub(crate) holdings: HashMap<String, Holding>,
    pub(crate) addrs: HashMap<IpAddr, AddrState>,
    pub(crate) occupied: Occupied,
    pub(crate) shared: SharedIndex,
}

impl Allocator {
    /// An allocator over `pools`, holding nothing.
    pub fn new(pools: Vec<Pool>) -> Self {
        let mut a = Allocator::default();
        a.install(pools);
        a
    }

    fn install(&mut self, mut pools: Vec<Pool>) {
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        pools.dedup_by(|later, first| later.name == first.name);
        self.pools = pools
            .into_iter()
            .map(|pool| {
                let mut totals = [0u128; 2];
                for r in &pool.ranges {
                    let buggy = if pool.avoid_buggy_ips {
                        r.buggy_count()
                    } else {
                        0
                    };
                    let t = &mut totals[fam(r.family())];
                    *t = t.saturating_add(r.size() - buggy);
                }
                let hints = pool.ranges.iter().map(|r| r.lo()).collect();
                PoolSlot {
                    pool,
                    totals,
                    in_use: [0, 0],
                    services: 0,
                    hints,
                }
            })
            .collect();
        self.by_name = self
            .pools
            .iter()
            .enumerate()
            .map(|(i, s)| (s.pool.name.clone(), i))
            .collect();
        self.index = RangeIndex::build(&self.pools);
    }

    /// Replaces the pools: holders of addresses no pool has any more are released (returned,
    /// sorted), the rest kept and attributed to the pool now holding their addresses. The pools'
    /// `serviceAllocation` is not re-checked here: converging each Service again does that, as
    /// MetalLB's reprocessing after a configuration change does.
    pub fn set_pools(&mut self, pools: Vec<Pool>) -> Vec<String> {
        let holdings = self.take_holdings();
        self.install(pools);
        let mut services: Vec<(String, Holding)> = holdings.into_iter().collect();
        services.sort_by(|a, b| a.0.cmp(&b.0));
        let mut released = Vec::new();
        for (service, mut holding) in services {
            let owners: Vec<Option<usize>> = holding.ips.iter().map(|&ip| self.owner(ip)).collect();
            match owners.first().copied().flatten() {
                Some(p) if owners.iter().all(|&o| o == Some(p)) => {
                    holding.pool = p;
                    self.insert_holding(&service, holding);
                }
                _ => released.push(service),
            }
        }
        released
    }

    /// Takes exactly `ips` for the claim (a restart reloading status, or requested addresses):
    /// each must be in one pool the claim may use (pool annotation, `serviceAllocation`), at most
    /// one per family, fitting the claim's families, and shareable with their holders. On success
    /// the claim holds exactly these (its previous holding released first); on error nothing
    /// changes.
    pub fn assign(&mut self, claim: &Claim<'_>, ips: &[IpAddr]) -> Result<(), AllocationError> {
        check_shape(ips)?;
        if !claim.families.fits(ips) {
            let wanted = claim.families.wanted();
            return Err(AllocationError::FamilyMismatch {
                ips: ips.to_vec(),
                wanted,
            });
        }
        let pool = self.validate(claim, ips, true)?;
        self.commit(claim, ips, pool);
        Ok(())
    }

    /// Checks `ips` for the claim without the family check; the pool they belong to.
    pub(crate) fn validate(
        &self,
        claim: &Claim<'_>,
        ips: &[IpAddr],
        check_annotation: bool,
    ) -> Result<usize, AllocationError> {
        check_shape(ips)?;
        let mut pool = None;
        for &ip in ips {
            let p = self.owner_or_why(ip)?;
            match pool {
                Some((q, other)) if q != p => {
                    let name = |i: usize| self.pools[i].pool.name.clone();
                    return Err(AllocationError::SplitAcrossPools(
                        other,
                        name(q),
                        ip,
                        name(p),
                    ));
                }
                _ => pool = Some((p, ip)),
            }
        }
        let Some((pool, _)) = pool else {
            return Err(AllocationError::NoAddresses);
        };
        self.admits(pool, claim)?;
        if check_annotation
            && let Some(wanted) = claim.pool_name()
            && wanted != self.pools[pool].pool.name
        {
            if !self.by_name.contains_key(wanted) {
                return Err(AllocationError::UnknownPool(wanted.to_string()));
            }
            return Err(AllocationError::PoolMismatch {
                ips: ips.to_vec(),
                actual: self.pools[pool].pool.name.clone(),
                requested: wanted.to_string(),
            });
        }
        let key = ShareKey::of(claim);
        for &ip in ips {
            self.check_usable(ip, claim.service, &key, claim.ports)
                .map_err(|(holder, why)| AllocationError::InUse { ip, holder, why })?;
        }
        Ok(pool)
    }

    /// Makes the claim hold exactly `ips` of pool `pool`; `validate` has accepted them.
    pub(crate) fn commit(&mut self, claim: &Claim<'_>, ips: &[IpAddr], pool: usize) {
        self.remove_holding(claim.service);
        let holding = Holding {
            pool,
            ips: ips.to_vec(),
            ports: claim.ports.to_vec(),
            key: ShareKey::of(claim),
        };
        self.insert_holding(claim.service, holding);
    }

    /// New addresses for the claim: from the annotation's pool if set, else by MetalLB's pool
    /// order (pinned pools by priority, then every auto-assign pool without `serviceAllocation`),
    /// the lowest usable address of each family the policy asks for. A claim already holding
    /// addresses keeps them if they are still valid for it. On error nothing changes.
    pub fn allocate(&mut self, claim: &Claim<'_>) -> Result<Vec<IpAddr>, AllocationError> {
        if self.pools.is_empty() {
            return Err(AllocationError::NoPools);
        }
        if let Some(held) = self.holdings.get(claim.service) {
            let ips = held.ips.clone();
            self.assign(claim, &ips)?;
            return Ok(ips);
        }
        let ips = match claim.pool_name() {
            Some(name) => {
                let Some(&p) = self.by_name.get(name) else {
                    return Err(AllocationError::UnknownPool(name.to_string()));
                };
                self.admits(p, claim)?;
                self.pick_from_pool(p, claim)?
            }
            None => self.pick_any(claim)?,
        };
        let pool = self.validate(claim, &ips, false)?;
        self.commit(claim, &ips, pool);
        Ok(ips)
    }

    /// Releases what the Service holds (nothing if it holds nothing).
    pub fn release(&mut self, service: &str) {
        self.remove_holding(service);
    }

    /// The addresses the Service holds, in the order taken (IPv4 first for a fresh dual pair).
    pub fn addresses_of(&self, service: &str) -> Option<&[IpAddr]> {
        self.holdings.get(service).map(|h| h.ips.as_slice())
    }

    /// The pool the Service's addresses belong to.
    pub fn pool_of_service(&self, service: &str) -> Option<&str> {
        let h = self.holdings.get(service)?;
        Some(self.pools[h.pool].pool.name.as_str())
    }

    /// The pool an address belongs to (`.0`/`.255` of a pool avoiding them belong to none).
    pub fn pool_of(&self, ip: IpAddr) -> Option<&str> {
        self.owner(ip).map(|p| self.pools[p].pool.name.as_str())
    }

    /// The Services holding an address, sorted.
    pub fn holders_of(&self, ip: IpAddr) -> Vec<&str> {
        let mut v: Vec<&str> = match self.addrs.get(&ip) {
            Some(s) => s.holders.iter().map(String::as_str).collect(),
            None => Vec::new(),
        };
        v.sort_unstable();
        v
    }

    /// The pools, in name order.
    pub fn pools(&self) -> impl Iterator<Item = &Pool> {
        self.pools.iter().map(|s| &s.pool)
    }

    /// Per pool, in name order: addresses in total and in use per family, Services holding them.
    pub fn usage(&self) -> Vec<PoolUsage> {
        self.pools
            .iter()
            .map(|s| PoolUsage {
                pool: s.pool.name.clone(),
                ipv4_total: s.totals[0],
                ipv6_total: s.totals[1],
                ipv4_in_use: s.in_use[0],
                ipv6_in_use: s.in_use[1],
                services: s.services,
            })
            .collect()
    }
}

/// At least one address, at most two, of different families.
pub(crate) fn check_shape(ips: &[IpAddr]) -> Result<(), AllocationError> {
    match ips {
        [] => Err(AllocationError::NoAddresses),
        [_] => Ok(()),
        [a, b] if family_of(*a) == family_of(*b) => Err(AllocationError::SameFamily(*a, *b)),
        [_, _] => Ok(()),
        _ => Err(AllocationError::TooManyAddresses(ips.to_vec())),
    }
}

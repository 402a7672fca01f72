//! The allocator's book-keeping: which Service holds which addresses, who holds each address,
//! which addresses are held (as runs, per family), and which addresses each sharing key holds.
//!
//! All of it is kept in step by [`Allocator::insert_holding`] and [`Allocator::remove_holding`];
//! an address nobody holds has no entry anywhere.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use super::allocator::{Allocator, Claim};
use super::config::Pool;
use super::error::{AllocationError, SharingRefusal};
use super::occupancy::RunSet;
use super::range::{family_of, is_buggy, to_u128};
use crate::model::{IpFamily, Protocol};

/// The sharing annotation and backend key of a holder; empty strings read as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct ShareKey {
    pub(crate) sharing: Option<String>,
    pub(crate) backend: Option<String>,
}

impl ShareKey {
    pub(crate) fn of(claim: &Claim<'_>) -> Self {
        let own = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
        ShareKey {
            sharing: own(claim.sharing_key),
            backend: own(claim.backend_key),
        }
    }
}

/// What one Service holds.
#[derive(Clone, Debug)]
pub(crate) struct Holding {
    pub(crate) pool: usize,
    pub(crate) ips: Vec<IpAddr>,
    pub(crate) ports: Vec<(Protocol, i32)>,
    pub(crate) key: ShareKey,
}

/// Who holds one address. All holders have the same key.
#[derive(Clone, Debug)]
pub(crate) struct AddrState {
    pub(crate) key: ShareKey,
    pub(crate) holders: Vec<String>,
}

/// A pool with its counters.
#[derive(Clone, Debug)]
pub(crate) struct PoolSlot {
    pub(crate) pool: Pool,
    pub(crate) totals: [u128; 2],
    pub(crate) in_use: [u128; 2],
    pub(crate) services: usize,
    /// Per range: no free usable address lies below this one (a lower bound for the next scan).
    pub(crate) hints: Vec<u128>,
}

/// The slot of a family in per-family arrays.
pub(crate) fn fam(f: IpFamily) -> usize {
    match f {
        IpFamily::V4 => 0,
        IpFamily::V6 => 1,
    }
}

/// Every range of every pool, sorted by start, per family: `(lo, hi, pool, range)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct RangeIndex {
    pub(crate) ranges: [Vec<(u128, u128, usize, usize)>; 2],
    /// Whether no two ranges overlap (so one binary search answers a lookup).
    pub(crate) disjoint: bool,
}

impl RangeIndex {
    pub(crate) fn build(pools: &[PoolSlot]) -> Self {
        let mut ranges: [Vec<(u128, u128, usize, usize)>; 2] = Default::default();
        for (p, slot) in pools.iter().enumerate() {
            for (i, r) in slot.pool.ranges.iter().enumerate() {
                ranges[fam(r.family())].push((r.lo(), r.hi(), p, i));
            }
        }
        let mut disjoint = true;
        for list in &mut ranges {
            list.sort_unstable();
            disjoint &= list.windows(2).all(|w| w[0].1 < w[1].0);
        }
        RangeIndex { ranges, disjoint }
    }

    /// The `(pool, range)` pairs whose range contains `ip`, lowest pool first.
    fn containing(&self, ip: IpAddr) -> Vec<(usize, usize)> {
        let x = to_u128(ip);
        let list = &self.ranges[fam(family_of(ip))];
        let n = list.partition_point(|e| e.0 <= x);
        let from = if self.disjoint {
            n.saturating_sub(1)
        } else {
            0
        };
        let mut found: Vec<(usize, usize)> = list[from..n]
            .iter()
            .filter(|e| e.1 >= x)
            .map(|e| (e.2, e.3))
            .collect();
        found.sort_unstable();
        found
    }
}

impl Allocator {
    /// The pool owning `ip`, leaving out `.0`/`.255` of pools that avoid them.
    pub(crate) fn owner(&self, ip: IpAddr) -> Option<usize> {
        self.index
            .containing(ip)
            .into_iter()
            .map(|(p, _)| p)
            .find(|&p| !(self.pools[p].pool.avoid_buggy_ips && is_buggy(ip)))
    }

    /// The pool owning `ip`, or why there is none.
    pub(crate) fn owner_or_why(&self, ip: IpAddr) -> Result<usize, AllocationError> {
        if let Some(p) = self.owner(ip) {
            return Ok(p);
        }
        match self.index.containing(ip).first() {
            Some(&(p, _)) => Err(AllocationError::AvoidedAddress {
                ip,
                pool: self.pools[p].pool.name.clone(),
            }),
            None => Err(AllocationError::NotInAnyPool(ip)),
        }
    }

    /// Whether the claim's Service may use pool `p` (its `serviceAllocation`).
    pub(crate) fn admits(&self, p: usize, claim: &Claim<'_>) -> Result<(), AllocationError> {
        let pool = &self.pools[p].pool;
        let Some(rule) = &pool.allocation else {
            return Ok(());
        };
        rule.admits(
            claim.namespace,
            claim.namespace_labels,
            claim.service_labels,
        )
        .map_err(|why| AllocationError::PoolNotAllowed {
            pool: pool.name.clone(),
            service: claim.service.to_string(),
            why,
        })
    }

    /// Whether `service` with `key` and `ports` may hold `ip` next to its current holders.
    pub(crate) fn check_usable(
        &self,
        ip: IpAddr,
        service: &str,
        key: &ShareKey,
        ports: &[(Protocol, i32)],
    ) -> Result<(), (String, SharingRefusal)> {
        let Some(state) = self.addrs.get(&ip) else {
            return Ok(());
        };
        let mut others: Vec<&String> = state.holders.iter().filter(|h| *h != service).collect();
        others.sort();
        let Some(&first) = others.first() else {
            return Ok(());
        };
        let refuse = |why| Err((first.clone(), why));
        let (theirs, ours) = (&state.key, key);
        let Some(their_key) = &theirs.sharing else {
            return refuse(SharingRefusal::HolderDoesNotShare);
        };
        let Some(our_key) = &ours.sharing else {
            return refuse(SharingRefusal::ClaimDoesNotShare);
        };
        if our_key != their_key {
            let (ours, theirs) = (our_key.clone(), their_key.clone());
            return refuse(SharingRefusal::KeyDiffers { ours, theirs });
        }
        if ours.backend != theirs.backend {
            return refuse(SharingRefusal::BackendDiffers {
                ours: ours.backend.clone().unwrap_or_default(),
                theirs: theirs.backend.clone().unwrap_or_default(),
            });
        }
        for other in others {
            let Some(h) = self.holdings.get(other) else {
                continue;
            };
            if let Some(&(proto, port)) = ports.iter().find(|p| h.ports.contains(p)) {
                return Err((other.clone(), SharingRefusal::PortInUse(proto, port)));
            }
        }
        Ok(())
    }

    /// Records `holding` for `service`, which must hold nothing.
    pub(crate) fn insert_holding(&mut self, service: &str, holding: Holding) {
        for &ip in &holding.ips {
            let f = fam(family_of(ip));
            match self.addrs.get_mut(&ip) {
                Some(state) => state.holders.push(service.to_string()),
                None => {
                    let state = AddrState {
                        key: holding.key.clone(),
                        holders: vec![service.to_string()],
                    };
                    self.addrs.insert(ip, state);
                    self.occupied[f].insert(to_u128(ip));
                    self.pools[holding.pool].in_use[f] += 1;
                    if holding.key.sharing.is_some() {
                        let set = self.shared.entry(holding.key.clone()).or_default();
                        set.insert(ip);
                    }
                }
            }
        }
        self.pools[holding.pool].services += 1;
        self.holdings.insert(service.to_string(), holding);
    }

    /// Forgets what `service` holds, freeing the addresses nobody else holds.
    pub(crate) fn remove_holding(&mut self, service: &str) -> Option<Holding> {
        let holding = self.holdings.remove(service)?;
        for &ip in &holding.ips {
            let Some(state) = self.addrs.get_mut(&ip) else {
                continue;
            };
            state.holders.retain(|h| h != service);
            if !state.holders.is_empty() {
                continue;
            }
            let key = self.addrs.remove(&ip).map(|s| s.key).unwrap_or_default();
            let f = fam(family_of(ip));
            self.occupied[f].remove(to_u128(ip));
            for (p, r) in self.index.containing(ip) {
                let hint = &mut self.pools[p].hints[r];
                *hint = (*hint).min(to_u128(ip));
            }
            let slot = &mut self.pools[holding.pool];
            slot.in_use[f] = slot.in_use[f].saturating_sub(1);
            if let Some(set) = self.shared.get_mut(&key) {
                set.remove(&ip);
                if set.is_empty() {
                    self.shared.remove(&key);
                }
            }
        }
        let slot = &mut self.pools[holding.pool];
        slot.services = slot.services.saturating_sub(1);
        Some(holding)
    }

    /// Drops every holding and returns them.
    pub(crate) fn take_holdings(&mut self) -> HashMap<String, Holding> {
        self.addrs.clear();
        self.occupied = Default::default();
        self.shared.clear();
        for slot in &mut self.pools {
            slot.in_use = [0, 0];
            slot.services = 0;
        }
        std::mem::take(&mut self.holdings)
    }
}

/// Per-family run sets of held addresses.
pub(crate) type Occupied = [RunSet; 2];
/// Addresses held under each sharing key that allows sharing.
pub(crate) type SharedIndex = HashMap<ShareKey, BTreeSet<IpAddr>>;

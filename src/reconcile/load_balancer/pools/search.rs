//! Which pools a claim tries, in which order, and the lowest usable address of a range.
//!
//! A range is never walked address by address: the lowest free address comes from the run set
//! of held addresses, starting at the range's hint (below which nothing is free), and for a claim
//! with a sharing key the addresses already held under that key come from the sharing index. The
//! lower of the two usable candidates wins, which is the address MetalLB's ascending scan stops
//! at. Scans take `&mut self` only to move hints up.

use std::net::IpAddr;

use super::allocator::{Allocator, Claim, FamilyPolicy};
use super::error::AllocationError;
use super::range::{from_u128, is_buggy};
use super::state::{ShareKey, fam};
use crate::model::IpFamily;

const FAMILIES: [IpFamily; 2] = [IpFamily::V4, IpFamily::V6];

impl Allocator {
    /// The pools to try without a pool annotation, in order: first the pools pinned to the
    /// Service (a `serviceAllocation` that names it by namespace or labels, autoAssign on) by
    /// positive priority ascending, then priority 0 (unset) or below; then every autoAssign pool
    /// without `serviceAllocation`. Pools of equal rank are in name order (MetalLB: random).
    pub(crate) fn tiers(&self, claim: &Claim<'_>) -> [Vec<usize>; 2] {
        let mut pinned = Vec::new();
        let mut open = Vec::new();
        for (p, slot) in self.pools.iter().enumerate() {
            if !slot.pool.auto_assign {
                continue;
            }
            match &slot.pool.allocation {
                None => open.push(p),
                Some(rule) if rule.pins() && self.admits(p, claim).is_ok() => pinned.push(p),
                Some(_) => {}
            }
        }
        let rank = |p: &usize| match self.pools[*p].pool.allocation.as_ref().map(|a| a.priority) {
            Some(n) if n > 0 => (0, n),
            _ => (1, 0),
        };
        pinned.sort_by_key(rank);
        [pinned, open]
    }

    /// Picks addresses for a claim without a pool annotation, as MetalLB's `Allocate`.
    pub(crate) fn pick_any(&mut self, claim: &Claim<'_>) -> Result<Vec<IpAddr>, AllocationError> {
        let tiers = self.tiers(claim);
        for tier in &tiers {
            if let Some(ips) = self.pick_from_tier(tier, claim) {
                return Ok(ips);
            }
        }
        let tried = tiers
            .iter()
            .flatten()
            .map(|&p| self.pools[p].pool.name.clone())
            .collect();
        let wanted = claim.families.wanted();
        Err(AllocationError::NoAvailableIps { wanted, tried })
    }

    /// The first pool of the tier that satisfies the policy. For PreferDual, a pool with both
    /// families wins; failing that, the first pool offering the preferred family, then the first
    /// offering the other.
    fn pick_from_tier(&mut self, tier: &[usize], claim: &Claim<'_>) -> Option<Vec<IpAddr>> {
        let mut fallback: [Option<IpAddr>; 2] = [None, None];
        for &p in tier {
            let [v4, v6] = self.offer(p, claim);
            match (claim.families, v4, v6) {
                (FamilyPolicy::Single(IpFamily::V4), Some(a), _) => return Some(vec![a]),
                (FamilyPolicy::Single(IpFamily::V6), _, Some(b)) => return Some(vec![b]),
                (FamilyPolicy::RequireDual | FamilyPolicy::PreferDual(_), Some(a), Some(b)) => {
                    return Some(vec![a, b]);
                }
                (FamilyPolicy::PreferDual(_), a, b) => {
                    fallback[0] = fallback[0].or(a);
                    fallback[1] = fallback[1].or(b);
                }
                _ => {}
            }
        }
        let FamilyPolicy::PreferDual(first) = claim.families else {
            return None;
        };
        let other = 1 - fam(first);
        fallback[fam(first)].or(fallback[other]).map(|ip| vec![ip])
    }

    /// Picks addresses from one pool, as MetalLB's `AllocateFromPool`: PreferDual takes both
    /// families if the pool has both free, else IPv4, else IPv6.
    pub(crate) fn pick_from_pool(
        &mut self,
        p: usize,
        claim: &Claim<'_>,
    ) -> Result<Vec<IpAddr>, AllocationError> {
        let [v4, v6] = self.offer(p, claim);
        let got = |f: IpFamily| [v4, v6][fam(f)];
        let missing = match claim.families {
            FamilyPolicy::Single(f) => match got(f) {
                Some(ip) => return Ok(vec![ip]),
                None => f,
            },
            FamilyPolicy::RequireDual => match (v4, v6) {
                (Some(a), Some(b)) => return Ok(vec![a, b]),
                (None, _) => IpFamily::V4,
                (_, None) => IpFamily::V6,
            },
            FamilyPolicy::PreferDual(_) => match (v4, v6) {
                (Some(a), Some(b)) => return Ok(vec![a, b]),
                (Some(a), None) | (None, Some(a)) => return Ok(vec![a]),
                (None, None) => {
                    let pool = self.pools[p].pool.name.clone();
                    let wanted = claim.families.wanted();
                    return Err(AllocationError::PoolExhausted { pool, wanted });
                }
            },
        };
        Err(self.shortage(p, missing, claim.families))
    }

    /// The error for pool `p` lacking an address of `family`.
    pub(crate) fn shortage(
        &self,
        p: usize,
        family: IpFamily,
        policy: FamilyPolicy,
    ) -> AllocationError {
        let pool = &self.pools[p].pool;
        let name = pool.name.clone();
        let wanted = policy.wanted();
        if pool.has_family(family) {
            AllocationError::PoolExhausted { pool: name, wanted }
        } else {
            AllocationError::PoolLacksFamily {
                pool: name,
                family,
                wanted,
            }
        }
    }

    /// The lowest usable address of each family the policy needs in pool `p`.
    fn offer(&mut self, p: usize, claim: &Claim<'_>) -> [Option<IpAddr>; 2] {
        let need = match claim.families {
            FamilyPolicy::Single(f) => [f == IpFamily::V4, f == IpFamily::V6],
            _ => [true, true],
        };
        let key = ShareKey::of(claim);
        FAMILIES.map(|f| {
            if need[fam(f)] {
                self.lowest_usable(p, f, claim, &key)
            } else {
                None
            }
        })
    }

    /// The lowest usable address of `family` in pool `p`: ranges in configuration order, the
    /// first range with one wins.
    pub(crate) fn lowest_usable(
        &mut self,
        p: usize,
        family: IpFamily,
        claim: &Claim<'_>,
        key: &ShareKey,
    ) -> Option<IpAddr> {
        for r in 0..self.pools[p].pool.ranges.len() {
            if self.pools[p].pool.ranges[r].family() != family {
                continue;
            }
            if let Some(ip) = self.lowest_in_range(p, r, claim, key) {
                return Some(ip);
            }
        }
        None
    }

    fn lowest_in_range(
        &mut self,
        p: usize,
        r: usize,
        claim: &Claim<'_>,
        key: &ShareKey,
    ) -> Option<IpAddr> {
        let free = self.lowest_free(p, r);
        if key.sharing.is_none() {
            return free;
        }
        // An address held under the same key, below the free one, may be shared.
        let pool = &self.pools[p].pool;
        let range = pool.ranges[r];
        let upper = free.unwrap_or_else(|| range.last());
        let Some(set) = self.shared.get(key) else {
            return free;
        };
        let shared = set
            .range(range.first()..=upper)
            .copied()
            .filter(|&ip| !(pool.avoid_buggy_ips && is_buggy(ip)))
            .find(|&ip| {
                self.check_usable(ip, claim.service, key, claim.ports)
                    .is_ok()
            });
        shared.or(free)
    }

    /// The lowest address of range `r` of pool `p` nobody holds (and not `.0`/`.255` if the pool
    /// avoids them), starting from the range's hint and moving the hint up to where it stopped.
    fn lowest_free(&mut self, p: usize, r: usize) -> Option<IpAddr> {
        let slot = &self.pools[p];
        let range = slot.pool.ranges[r];
        let avoid = slot.pool.avoid_buggy_ips;
        let family = range.family();
        let runs = &self.occupied[fam(family)];
        // Below `x` nothing is free and usable.
        let mut x = slot.hints[r].max(range.lo());
        let found = loop {
            let Some(y) = runs.first_free_from(x) else {
                break None;
            };
            if y > range.hi() {
                break None;
            }
            x = y;
            let ip = from_u128(family, y)?;
            if !(avoid && is_buggy(ip)) {
                break Some(ip);
            }
            match y.checked_add(1) {
                Some(z) if z <= range.hi() => x = z,
                _ => break None,
            }
        };
        self.pools[p].hints[r] = x;
        found
    }
}

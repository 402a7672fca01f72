//! Random sequences of operations against a brute-force model: allocation results must match a
//! plain address-by-address scan of MetalLB's rules, assignments must succeed exactly when the
//! rules allow, and the allocator's maps must agree with the model after every step.

use std::collections::{BTreeMap, BTreeSet};

use proptest::collection::vec as vec_of;
use proptest::prelude::{
    ProptestConfig, Strategy, TestCaseError, prop_assert, prop_assert_eq, prop_oneof, proptest,
};

use super::super::range::{family_of, from_u128, is_buggy, to_u128};
use super::*;
use crate::model::Protocol;

const CONFIGS: [&str; 2] = [
    "metadata: {name: a}\nspec:\n  avoidBuggyIPs: true\n  addresses: [10.0.0.254-10.0.1.1, 10.0.2.0/30]\n---\n\
     metadata: {name: b}\nspec:\n  addresses: [fc00::/126, 10.1.0.0/30]\n  serviceAllocation: {priority: 1, namespaces: [x]}\n---\n\
     metadata: {name: c}\nspec:\n  autoAssign: false\n  addresses: [fc00:1::/127]\n",
    "metadata: {name: a}\nspec:\n  addresses: [10.0.2.0/31]\n---\n\
     metadata: {name: b}\nspec:\n  addresses: [fc00::/126, 10.1.0.0/30]\n  serviceAllocation: {priority: 1, namespaces: [x]}\n---\n\
     metadata: {name: c}\nspec:\n  addresses: [fc00:1::/127, 10.0.1.0/31]\n",
];

const UNIVERSE: [&str; 17] = [
    "10.0.0.254",
    "10.0.0.255",
    "10.0.1.0",
    "10.0.1.1",
    "10.0.2.0",
    "10.0.2.1",
    "10.0.2.3",
    "10.1.0.0",
    "10.1.0.1",
    "10.1.0.3",
    "fc00::",
    "fc00::1",
    "fc00::3",
    "fc00:1::",
    "fc00:1::1",
    "10.9.9.9",
    "fd00::9",
];

const PORTS: [(Protocol, i32); 3] = [
    (Protocol::Tcp, 80),
    (Protocol::Tcp, 443),
    (Protocol::Udp, 53),
];

#[derive(Clone, Debug)]
struct Svc {
    name: String,
    policy: FamilyPolicy,
    key: Option<&'static str>,
    backend: Option<&'static str>,
    ports: Vec<(Protocol, i32)>,
    pool: Option<&'static str>,
}

impl Svc {
    fn claim(&self) -> Claim<'_> {
        Claim {
            sharing_key: self.key,
            backend_key: self.backend,
            ports: &self.ports,
            pool: self.pool,
            ..Claim::new(&self.name, ns(&self.name), self.policy)
        }
    }
}

fn svc_strategy(i: usize) -> impl Strategy<Value = Svc> {
    (
        0..2usize,
        0..4usize,
        0..4usize,
        0..3usize,
        1..8usize,
        0..5usize,
    )
        .prop_map(move |(n, f, k, b, ports, p)| Svc {
            name: format!("{}/s{i}", ["x", "y"][n]),
            policy: [
                FamilyPolicy::Single(IpFamily::V4),
                FamilyPolicy::Single(IpFamily::V6),
                FamilyPolicy::RequireDual,
                FamilyPolicy::PreferDual(IpFamily::V6),
            ][f],
            key: [None, Some("k1"), Some("k1"), Some("k2")][k],
            backend: [None, None, Some("app=z")][b],
            ports: (0..3)
                .filter(|j| ports & (1 << j) != 0)
                .map(|j| PORTS[j])
                .collect(),
            pool: [None, None, None, Some("a"), Some("c")][p],
        })
}

#[derive(Clone, Debug)]
enum Op {
    Allocate(usize),
    Release(usize),
    Assign(usize, Vec<usize>),
    Converge(usize, Vec<usize>, Vec<usize>),
    SetPools(usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let addrs = || vec_of(0..UNIVERSE.len(), 0..3);
    prop_oneof![
        4 => (0..6usize).prop_map(Op::Allocate),
        2 => (0..6usize).prop_map(Op::Release),
        3 => (0..6usize, addrs()).prop_map(|(s, a)| Op::Assign(s, a)),
        3 => (0..6usize, addrs(), addrs()).prop_map(|(s, c, d)| Op::Converge(s, c, d)),
        1 => (0..2usize).prop_map(Op::SetPools),
    ]
}

/// The model: the pools in force and who holds what.
struct Model {
    pools: Vec<Pool>,
    held: BTreeMap<String, Vec<IpAddr>>,
}

impl Model {
    /// The pool (index in name order) owning `ip`, scanning every range.
    fn owner(&self, ip: IpAddr) -> Option<usize> {
        self.pools.iter().position(|p| {
            !(p.avoid_buggy_ips && is_buggy(ip))
                && p.ranges.iter().any(|r| {
                    family_of(ip) == r.family()
                        && to_u128(r.first()) <= to_u128(ip)
                        && to_u128(ip) <= to_u128(r.last())
                })
        })
    }

    fn admitted(&self, p: usize, s: &Svc) -> bool {
        match &self.pools[p].allocation {
            None => true,
            Some(a) => a.namespaces.is_empty() || a.namespaces.iter().any(|n| n == ns(&s.name)),
        }
    }

    fn usable(&self, svcs: &[Svc], s: &Svc, ip: IpAddr) -> bool {
        svcs.iter()
            .filter(|o| o.name != s.name && self.held.get(&o.name).is_some_and(|v| v.contains(&ip)))
            .all(|o| compatible(s, o))
    }

    fn assignable(&self, svcs: &[Svc], s: &Svc, ips: &[IpAddr], annotation: bool) -> bool {
        let fams: Vec<IpFamily> = ips.iter().map(|&i| family_of(i)).collect();
        let fits = match (s.policy, fams.as_slice()) {
            (FamilyPolicy::Single(f), [g]) => f == *g,
            (FamilyPolicy::RequireDual, [a, b]) => a != b,
            (FamilyPolicy::PreferDual(_), [_]) => true,
            (FamilyPolicy::PreferDual(_), [a, b]) => a != b,
            _ => false,
        };
        let owners: BTreeSet<Option<usize>> = ips.iter().map(|&i| self.owner(i)).collect();
        let Some(&Some(p)) = owners.iter().next() else {
            return false;
        };
        fits && owners.len() == 1
            && self.admitted(p, s)
            && (!annotation || s.pool.is_none_or(|n| n == self.pools[p].name))
            && ips.iter().all(|&i| self.usable(svcs, s, i))
    }

    /// The lowest usable address of `family` in pool `p`, address by address.
    fn scan(&self, svcs: &[Svc], s: &Svc, p: usize, family: IpFamily) -> Option<IpAddr> {
        let pool = &self.pools[p];
        for r in pool.ranges.iter().filter(|r| r.family() == family) {
            let mut x = to_u128(r.first());
            loop {
                let ip = from_u128(family, x)?;
                if !(pool.avoid_buggy_ips && is_buggy(ip)) && self.usable(svcs, s, ip) {
                    return Some(ip);
                }
                if x == to_u128(r.last()) {
                    break;
                }
                x += 1;
            }
        }
        None
    }

    fn expected_allocation(&self, svcs: &[Svc], s: &Svc) -> Option<Vec<IpAddr>> {
        if let Some(v) = self.held.get(&s.name) {
            return self.assignable(svcs, s, v, true).then(|| v.clone());
        }
        let offer = |p: usize| [IpFamily::V4, IpFamily::V6].map(|f| self.scan(svcs, s, p, f));
        if let Some(name) = s.pool {
            let p = self.pools.iter().position(|q| q.name == name)?;
            if !self.admitted(p, s) {
                return None;
            }
            let [a, b] = offer(p);
            return match (s.policy, a, b) {
                (FamilyPolicy::Single(IpFamily::V4), Some(a), _) => Some(vec![a]),
                (FamilyPolicy::Single(IpFamily::V6), _, Some(b)) => Some(vec![b]),
                (FamilyPolicy::Single(_), _, _) => None,
                (_, Some(a), Some(b)) => Some(vec![a, b]),
                (FamilyPolicy::RequireDual, _, _) => None,
                (_, a, b) => a.or(b).map(|x| vec![x]),
            };
        }
        let named = |p: &Pool| {
            p.allocation
                .as_ref()
                .is_some_and(|a| !a.namespaces.is_empty())
        };
        let mut pinned: Vec<usize> = (0..self.pools.len())
            .filter(|&p| self.pools[p].auto_assign && named(&self.pools[p]) && self.admitted(p, s))
            .collect();
        pinned.sort_by_key(
            |&p| match self.pools[p].allocation.as_ref().map(|a| a.priority) {
                Some(n) if n > 0 => (0, n, p),
                _ => (1, 0, p),
            },
        );
        let open: Vec<usize> = (0..self.pools.len())
            .filter(|&p| self.pools[p].auto_assign && self.pools[p].allocation.is_none())
            .collect();
        for tier in [pinned, open] {
            let mut fallback: Option<IpAddr> = None;
            for &p in &tier {
                let [a, b] = offer(p);
                match (s.policy, a, b) {
                    (FamilyPolicy::Single(IpFamily::V4), Some(a), _) => return Some(vec![a]),
                    (FamilyPolicy::Single(IpFamily::V6), _, Some(b)) => return Some(vec![b]),
                    (FamilyPolicy::Single(_), _, _) => {}
                    (_, Some(a), Some(b)) => return Some(vec![a, b]),
                    (FamilyPolicy::PreferDual(_), _, Some(b)) => fallback = fallback.or(Some(b)),
                    _ => {}
                }
            }
            // PreferDual(V6) here: the first IPv6 offer, else the first IPv4 one.
            if let FamilyPolicy::PreferDual(_) = s.policy {
                let v4 = tier.iter().find_map(|&p| offer(p)[0]);
                if let Some(x) = fallback.or(v4) {
                    return Some(vec![x]);
                }
            }
        }
        None
    }

    fn check(&self, a: &Allocator, svcs: &[Svc]) -> Result<(), TestCaseError> {
        let mut holders: BTreeMap<IpAddr, BTreeSet<&str>> = BTreeMap::new();
        for s in svcs {
            let got = a.addresses_of(&s.name).map(<[IpAddr]>::to_vec);
            prop_assert_eq!(
                &got,
                &self.held.get(&s.name).cloned(),
                "holding of {}",
                s.name
            );
            if let Some(v) = self.held.get(&s.name) {
                let owners: BTreeSet<Option<usize>> = v.iter().map(|&i| self.owner(i)).collect();
                prop_assert_eq!(owners.len(), 1, "{} spans pools", s.name);
                let p = owners.into_iter().next().flatten();
                prop_assert!(p.is_some(), "{} holds addresses outside every pool", s.name);
                let name = p.map(|p| self.pools[p].name.as_str());
                prop_assert_eq!(a.pool_of_service(&s.name), name);
                for &i in v {
                    prop_assert_eq!(a.pool_of(i), name);
                    holders.entry(i).or_default().insert(&s.name);
                }
            }
        }
        let by_name = |n: &str| svcs.iter().find(|s| s.name == n).unwrap();
        for (ip, hs) in &holders {
            for x in hs {
                for y in hs {
                    if x < y {
                        prop_assert!(
                            compatible(by_name(x), by_name(y)),
                            "{} {} share {}",
                            x,
                            y,
                            ip
                        );
                    }
                }
            }
        }
        // The allocator's own maps: exactly the held addresses, nothing left over.
        prop_assert_eq!(a.holdings.len(), self.held.len());
        prop_assert_eq!(a.addrs.len(), holders.len());
        for (ip, hs) in &holders {
            let st = &a.addrs[ip];
            let got: BTreeSet<&str> = st.holders.iter().map(String::as_str).collect();
            prop_assert_eq!(&got, hs);
            prop_assert_eq!(st.holders.len(), hs.len());
        }
        for (f, family) in [IpFamily::V4, IpFamily::V6].into_iter().enumerate() {
            let runs: BTreeSet<u128> = a.occupied[f].runs().flat_map(|(x, y)| x..=y).collect();
            let want: BTreeSet<u128> = holders
                .keys()
                .filter(|&&i| family_of(i) == family)
                .map(|&i| to_u128(i))
                .collect();
            prop_assert_eq!(runs, want);
        }
        let mut shared: BTreeMap<(String, Option<String>), BTreeSet<IpAddr>> = BTreeMap::new();
        for (ip, hs) in &holders {
            let s = by_name(hs.iter().next().unwrap());
            if let Some(k) = s.key {
                shared
                    .entry((k.into(), s.backend.map(Into::into)))
                    .or_default()
                    .insert(*ip);
            }
        }
        let got: BTreeMap<(String, Option<String>), BTreeSet<IpAddr>> = a
            .shared
            .iter()
            .map(|(k, v)| {
                (
                    (k.sharing.clone().unwrap_or_default(), k.backend.clone()),
                    v.clone(),
                )
            })
            .collect();
        prop_assert_eq!(got, shared);
        for (p, u) in a.usage().iter().enumerate() {
            let mine = |f: IpFamily| {
                holders
                    .keys()
                    .filter(|&&i| self.owner(i) == Some(p) && family_of(i) == f)
                    .count() as u128
            };
            prop_assert_eq!(
                (u.ipv4_in_use, u.ipv6_in_use),
                (mine(IpFamily::V4), mine(IpFamily::V6))
            );
            let n = self
                .held
                .values()
                .filter(|v| self.owner(v[0]) == Some(p))
                .count();
            prop_assert_eq!(u.services, n);
        }
        // Below each range's hint no address is free and usable.
        for (p, slot) in a.pools.iter().enumerate() {
            for (r, range) in slot.pool.ranges.iter().enumerate() {
                let hint = slot.hints[r];
                prop_assert!(hint >= to_u128(range.first()) && hint <= to_u128(range.last()));
                for x in to_u128(range.first())..hint {
                    let ip = from_u128(range.family(), x).unwrap();
                    let usable = !(slot.pool.avoid_buggy_ips && is_buggy(ip));
                    prop_assert!(
                        !usable || holders.contains_key(&ip),
                        "{} free below hint of {}",
                        ip,
                        p
                    );
                }
            }
        }
        if self.held.is_empty() {
            prop_assert!(a.occupied.iter().all(|r| r.is_empty()) && a.shared.is_empty());
        }
        Ok(())
    }
}

/// Whether two Services may hold one address together.
fn compatible(s: &Svc, o: &Svc) -> bool {
    s.key.is_some()
        && s.key == o.key
        && s.backend == o.backend
        && !s.ports.iter().any(|p| o.ports.contains(p))
}

fn run(svcs: Vec<Svc>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut model = Model {
        pools: pools(CONFIGS[0]),
        held: BTreeMap::new(),
    };
    let mut a = Allocator::new(model.pools.clone());
    let pick = |v: &[usize]| -> Vec<IpAddr> { v.iter().map(|&i| ip(UNIVERSE[i])).collect() };
    for op in ops {
        match op {
            Op::Allocate(i) => {
                let s = &svcs[i];
                let want = model.expected_allocation(&svcs, s);
                let got = a.allocate(&s.claim()).ok();
                prop_assert_eq!(&got, &want, "allocate {:?}", s);
                if let Some(v) = got {
                    model.held.insert(s.name.clone(), v);
                }
            }
            Op::Release(i) => {
                a.release(&svcs[i].name);
                model.held.remove(&svcs[i].name);
            }
            Op::Assign(i, addrs) => {
                let s = &svcs[i];
                let ips = pick(&addrs);
                let want = model.assignable(&svcs, s, &ips, true);
                let got = a.assign(&s.claim(), &ips);
                prop_assert_eq!(got.is_ok(), want, "assign {:?} {:?}: {:?}", s, ips, got);
                if want {
                    model.held.insert(s.name.clone(), ips);
                }
            }
            Op::Converge(i, current, desired) => {
                let s = &svcs[i];
                match a.converge(&s.claim(), &pick(&current), &pick(&desired)) {
                    Ok(c) => {
                        prop_assert_eq!(Some(c.addresses.as_slice()), a.addresses_of(&s.name));
                        model.held.insert(s.name.clone(), c.addresses);
                    }
                    Err(_) => {
                        prop_assert_eq!(a.addresses_of(&s.name), None);
                        model.held.remove(&s.name);
                    }
                }
            }
            Op::SetPools(c) => {
                model.pools = pools(CONFIGS[c]);
                let mut gone: Vec<String> = model
                    .held
                    .iter()
                    .filter(|(_, v)| {
                        let owners: BTreeSet<Option<usize>> =
                            v.iter().map(|&i| model.owner(i)).collect();
                        owners.len() != 1 || owners.contains(&None)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                gone.sort();
                prop_assert_eq!(a.set_pools(model.pools.clone()), gone.clone());
                for g in gone {
                    model.held.remove(&g);
                }
            }
        }
        model.check(&a, &svcs)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn random_operations_keep_the_invariants(
        svcs in (0..6usize).map(svc_strategy).collect::<Vec<_>>(),
        ops in vec_of(op_strategy(), 1..60),
    ) {
        run(svcs, ops)?;
    }
}

//! Allocation order, exhaustion, assignment, release and pool changes.

use super::*;

#[test]
fn lowest_free_address_in_configuration_order() {
    // Ranges in configuration order, not numeric order; ascending inside each.
    let mut a = allocator(&pool_yaml("a", &["10.0.5.0/31", "10.0.1.7-10.0.1.8"]));
    let got: Vec<IpAddr> = ["ns/s0", "ns/s1", "ns/s2", "ns/s3"]
        .iter()
        .map(|s| a.allocate(&v4(s)).unwrap()[0])
        .collect();
    assert_eq!(got, ips(&["10.0.5.0", "10.0.5.1", "10.0.1.7", "10.0.1.8"]));

    let e = a.allocate(&v4("ns/s4")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no available IPs for an IPv4 address (pools tried: \"a\")"
    );
    let named = Claim {
        pool: Some("a"),
        ..v4("ns/s4")
    };
    let e = a.allocate(&named).unwrap_err();
    assert!(
        e.to_string().starts_with("no available IPs in pool \"a\""),
        "{e}"
    );

    // Released addresses are taken again lowest first.
    a.release("ns/s2");
    a.release("ns/s0");
    assert_eq!(a.allocate(&v4("ns/s5")).unwrap(), ips(&["10.0.5.0"]));
    assert_eq!(a.allocate(&v4("ns/s6")).unwrap(), ips(&["10.0.1.7"]));
    assert_eq!(a.addresses_of("ns/s0"), None);
}

#[test]
fn allocating_again_keeps_what_is_held() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/29"]));
    assert_eq!(a.allocate(&v4("ns/x")).unwrap(), ips(&["10.0.0.0"]));
    assert_eq!(a.allocate(&v4("ns/x")).unwrap(), ips(&["10.0.0.0"]));
    assert_eq!(a.allocate(&v4("ns/y")).unwrap(), ips(&["10.0.0.1"]));
}

#[test]
fn avoid_buggy_ips_skips_dot_zero_and_dot_255() {
    let yaml = "metadata: {name: a}\nspec:\n  avoidBuggyIPs: true\n  addresses: [10.0.0.254-10.0.1.1, 10.0.2.0/24]\n";
    let mut a = allocator(yaml);
    let got: Vec<IpAddr> = (0..3)
        .map(|i| a.allocate(&v4(&format!("ns/s{i}"))).unwrap()[0])
        .collect();
    assert_eq!(got, ips(&["10.0.0.254", "10.0.1.1", "10.0.2.1"]));
    let usage = &a.usage()[0];
    assert_eq!(
        (usage.ipv4_total, usage.ipv4_in_use, usage.services),
        (2 + 254, 3, 3)
    );

    let e = a.assign(&v4("ns/t"), &ips(&["10.0.0.255"])).unwrap_err();
    assert_eq!(
        e,
        AllocationError::AvoidedAddress {
            ip: ip("10.0.0.255"),
            pool: "a".into()
        }
    );
    assert_eq!(a.pool_of(ip("10.0.0.255")), None);
    assert_eq!(a.pool_of(ip("10.0.2.255")), None);
    assert_eq!(a.pool_of(ip("10.0.2.254")), Some("a"));

    // Without avoidBuggyIPs, the network address is the first one given.
    let mut b = allocator(&pool_yaml("b", &["10.0.2.0/24"]));
    assert_eq!(b.allocate(&v4("ns/s")).unwrap(), ips(&["10.0.2.0"]));
}

#[test]
fn requested_addresses_must_be_in_a_pool() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/30", "fc00::/126"]));
    let e = a.assign(&v4("ns/s"), &ips(&["10.9.9.9"])).unwrap_err();
    assert_eq!(e, AllocationError::NotInAnyPool(ip("10.9.9.9")));
    assert_eq!(e.to_string(), "10.9.9.9 is not in any address pool");

    let dual = Claim::new("ns/d", "ns", FamilyPolicy::RequireDual);
    let e = a
        .assign(&dual, &ips(&["10.0.0.1", "10.0.0.2"]))
        .unwrap_err();
    assert_eq!(
        e,
        AllocationError::SameFamily(ip("10.0.0.1"), ip("10.0.0.2"))
    );
    let e = a.assign(&v4("ns/s"), &ips(&["fc00::1"])).unwrap_err();
    assert!(matches!(e, AllocationError::FamilyMismatch { .. }), "{e}");
    let e = a.assign(&dual, &ips(&["10.0.0.1"])).unwrap_err();
    assert!(matches!(
        e,
        AllocationError::FamilyMismatch {
            wanted: Wanted::Both,
            ..
        }
    ));
    a.assign(&dual, &ips(&["fc00::3", "10.0.0.3"])).unwrap();
    assert_eq!(
        a.addresses_of("ns/d").unwrap(),
        ips(&["fc00::3", "10.0.0.3"]).as_slice()
    );
    assert!(
        a.usage()
            .iter()
            .all(|u| u.ipv4_in_use == 1 && u.ipv6_in_use == 1)
    );
}

#[test]
fn assign_moves_a_service_and_errors_change_nothing() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/29"]));
    a.assign(&v4("ns/s"), &ips(&["10.0.0.5"])).unwrap();
    a.assign(&v4("ns/s"), &ips(&["10.0.0.6"])).unwrap();
    assert_eq!(a.holders_of(ip("10.0.0.5")), Vec::<&str>::new());
    assert_eq!(a.holders_of(ip("10.0.0.6")), ["ns/s"]);

    a.assign(&v4("ns/t"), &ips(&["10.0.0.1"])).unwrap();
    let e = a.assign(&v4("ns/s"), &ips(&["10.0.0.1"])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "10.0.0.1 is already in use by ns/t: it does not allow sharing (no metallb.io/allow-shared-ip)"
    );
    assert_eq!(
        a.addresses_of("ns/s").unwrap(),
        ips(&["10.0.0.6"]).as_slice()
    );
    assert_eq!(a.usage()[0].ipv4_in_use, 2);
}

#[test]
fn pool_annotation() {
    let yaml = format!(
        "{}---\nmetadata: {{name: b}}\nspec:\n  autoAssign: false\n  addresses: [10.0.9.0/30]\n",
        pool_yaml("a", &["10.0.0.0/30"])
    );
    let mut a = allocator(&yaml);
    // autoAssign false only keeps the pool out of the automatic order.
    assert_eq!(a.allocate(&v4("ns/s")).unwrap(), ips(&["10.0.0.0"]));
    let to_b = Claim {
        pool: Some("b"),
        ..v4("ns/t")
    };
    assert_eq!(a.allocate(&to_b).unwrap(), ips(&["10.0.9.0"]));
    assert_eq!(a.pool_of_service("ns/t"), Some("b"));

    let nowhere = Claim {
        pool: Some("zz"),
        ..v4("ns/u")
    };
    assert_eq!(
        a.allocate(&nowhere).unwrap_err(),
        AllocationError::UnknownPool("zz".into())
    );

    let e = a.assign(&to_b, &ips(&["10.0.0.3"])).unwrap_err();
    assert_eq!(
        e,
        AllocationError::PoolMismatch {
            ips: ips(&["10.0.0.3"]),
            actual: "a".into(),
            requested: "b".into()
        }
    );
    // An empty annotation reads as none.
    let empty = Claim {
        pool: Some(""),
        ..v4("ns/w")
    };
    assert_eq!(a.allocate(&empty).unwrap(), ips(&["10.0.0.1"]));
}

#[test]
fn require_and_prefer_dual() {
    let yaml = [
        pool_yaml("a-v4", &["10.0.0.0/31"]),
        pool_yaml("b-dual", &["fc00::/127", "10.0.1.0/31"]),
        pool_yaml("c-v6", &["fd00::/127"]),
    ]
    .join("---\n");
    let mut a = allocator(&yaml);
    let claim = |s, f| Claim::new(s, "ns", f);

    // RequireDual skips the single-family pool; IPv4 comes first in the result.
    let d = claim("ns/d1", FamilyPolicy::RequireDual);
    assert_eq!(a.allocate(&d).unwrap(), ips(&["10.0.1.0", "fc00::"]));
    // PreferDual takes both from a pool that has both.
    let p = claim("ns/p1", FamilyPolicy::PreferDual(IpFamily::V6));
    assert_eq!(a.allocate(&p).unwrap(), ips(&["10.0.1.1", "fc00::1"]));
    // b-dual is full now: RequireDual fails, PreferDual falls back to its first family.
    let e = a
        .allocate(&claim("ns/d2", FamilyPolicy::RequireDual))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no available IPs for an IPv4 and an IPv6 address from one pool (pools tried: \"a-v4\", \"b-dual\", \"c-v6\")"
    );
    let p6 = claim("ns/p2", FamilyPolicy::PreferDual(IpFamily::V6));
    assert_eq!(a.allocate(&p6).unwrap(), ips(&["fd00::"]));
    let p4 = claim("ns/p3", FamilyPolicy::PreferDual(IpFamily::V4));
    assert_eq!(a.allocate(&p4).unwrap(), ips(&["10.0.0.0"]));
    // Single IPv6 takes the first pool with a free IPv6 address.
    let s6 = claim("ns/s6", FamilyPolicy::Single(IpFamily::V6));
    assert_eq!(a.allocate(&s6).unwrap(), ips(&["fd00::1"]));

    // A pool named by annotation lacking a family.
    let d = Claim {
        pool: Some("a-v4"),
        ..claim("ns/d3", FamilyPolicy::RequireDual)
    };
    let e = a.allocate(&d).unwrap_err();
    assert_eq!(
        e,
        AllocationError::PoolLacksFamily {
            pool: "a-v4".into(),
            family: IpFamily::V6,
            wanted: Wanted::Both
        }
    );
    // PreferDual from one pool with only IPv4 left: the IPv4 address alone.
    let p = Claim {
        pool: Some("a-v4"),
        ..claim("ns/p4", FamilyPolicy::PreferDual(IpFamily::V6))
    };
    assert_eq!(a.allocate(&p).unwrap(), ips(&["10.0.0.1"]));
}

#[test]
fn restart_reclaims_before_allocating() {
    // MetalLB #1774 / #2443: after a restart, Services re-take their status addresses before a
    // pending Service allocates, so it cannot take theirs.
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/30"]));
    for (s, addr) in [
        ("ns/c", "10.0.0.3"),
        ("ns/a", "10.0.0.0"),
        ("ns/b", "10.0.0.2"),
    ] {
        a.assign(&v4(s), &ips(&[addr])).unwrap();
    }
    assert_eq!(a.allocate(&v4("ns/new")).unwrap(), ips(&["10.0.0.1"]));
    assert!(a.allocate(&v4("ns/newer")).is_err());

    // A single-address pool held by one Service stays with it.
    let mut b = allocator(&pool_yaml("one", &["192.168.1.10/32"]));
    b.assign(&v4("ns/owner"), &ips(&["192.168.1.10"])).unwrap();
    let e = b.allocate(&v4("ns/pending")).unwrap_err();
    assert!(matches!(e, AllocationError::NoAvailableIps { .. }));
    assert_eq!(b.holders_of(ip("192.168.1.10")), ["ns/owner"]);
}

#[test]
fn set_pools_shrinking_releases_outside_services() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/29"]));
    for i in 0..8 {
        a.allocate(&v4(&format!("ns/s{i}"))).unwrap();
    }
    let released = a.set_pools(pools(&pool_yaml("a", &["10.0.0.0/30"])));
    assert_eq!(released, ["ns/s4", "ns/s5", "ns/s6", "ns/s7"]);
    assert_eq!(
        a.addresses_of("ns/s3").unwrap(),
        ips(&["10.0.0.3"]).as_slice()
    );
    assert_eq!(a.addresses_of("ns/s4"), None);
    assert_eq!(a.usage()[0].ipv4_in_use, 4);
    assert!(a.allocate(&v4("ns/more")).is_err());

    // The same addresses under another pool's name are re-attributed, not released.
    let released = a.set_pools(pools(&pool_yaml("renamed", &["10.0.0.0/28"])));
    assert!(released.is_empty());
    assert_eq!(a.pool_of_service("ns/s0"), Some("renamed"));
    assert_eq!(a.usage()[0].services, 4);
    assert_eq!(a.allocate(&v4("ns/more")).unwrap(), ips(&["10.0.0.4"]));

    // Turning avoidBuggyIPs on releases the holder of .0.
    let yaml =
        "metadata: {name: renamed}\nspec:\n  avoidBuggyIPs: true\n  addresses: [10.0.0.0/28]\n";
    assert_eq!(a.set_pools(pools(yaml)), ["ns/s0"]);
}

#[test]
fn whole_address_spaces_do_not_overflow() {
    let mut a = allocator(&pool_yaml("all", &["::/0", "255.255.255.254/31"]));
    let six = |s| Claim::new(s, "ns", FamilyPolicy::Single(IpFamily::V6));
    assert_eq!(a.allocate(&six("ns/a")).unwrap(), ips(&["::"]));
    assert_eq!(a.allocate(&six("ns/b")).unwrap(), ips(&["::1"]));
    let top = ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    a.assign(&six("ns/top"), &[top]).unwrap();
    assert_eq!(a.allocate(&v4("ns/c")).unwrap(), ips(&["255.255.255.254"]));
    assert_eq!(a.allocate(&v4("ns/d")).unwrap(), ips(&["255.255.255.255"]));
    assert!(a.allocate(&v4("ns/e")).is_err());
    let u = &a.usage()[0];
    assert_eq!(
        (u.ipv4_total, u.ipv6_total, u.ipv6_in_use),
        (2, u128::MAX, 3)
    );

    let mut b = allocator(&pool_yaml(
        "top",
        &["ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127"],
    ));
    assert_eq!(
        b.allocate(&six("ns/a")).unwrap(),
        ips(&["ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"])
    );
    assert_eq!(b.allocate(&six("ns/b")).unwrap(), vec![top]);
    assert!(b.allocate(&six("ns/c")).is_err());
}

#[test]
fn no_pools() {
    let mut a = Allocator::new(Vec::new());
    assert_eq!(
        a.allocate(&v4("ns/s")).unwrap_err(),
        AllocationError::NoPools
    );
    assert!(a.usage().is_empty());
}

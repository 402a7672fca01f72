//! MetalLB's per-Service convergence and its events.

use super::*;

fn reasons(notes: &[Note]) -> Vec<&'static str> {
    notes.iter().map(|n| n.reason.as_str()).collect()
}

fn two_pools() -> Allocator {
    let b = "metadata: {name: b}\nspec:\n  autoAssign: false\n  addresses: [10.0.9.0/30]\n";
    allocator(&format!(
        "{}---\n{b}",
        pool_yaml("a", &["10.0.0.0/29", "fc00::/126"])
    ))
}

#[test]
fn fresh_service_gets_an_address() {
    let mut a = two_pools();
    let c = a.converge(&v4("ns/s"), &[], &[]).unwrap();
    assert_eq!(c.addresses, ips(&["10.0.0.0"]));
    assert_eq!(c.pool, "a");
    assert_eq!(reasons(&c.notes), ["IPAllocated"]);
    assert_eq!(c.notes[0].message, "Assigned IP [10.0.0.0]");

    // Converging again with that status changes nothing and says nothing.
    let again = a.converge(&v4("ns/s"), &c.addresses, &[]).unwrap();
    assert_eq!((again.addresses, again.notes), (c.addresses, vec![]));
}

#[test]
fn status_addresses_are_kept_after_a_restart() {
    let mut a = two_pools();
    let c = a.converge(&v4("ns/old"), &ips(&["10.0.0.5"]), &[]).unwrap();
    assert_eq!((c.addresses, c.notes), (ips(&["10.0.0.5"]), vec![]));
    // Status wins over whatever the allocator held for the Service before.
    a.assign(&v4("ns/moved"), &ips(&["10.0.0.1"])).unwrap();
    let c = a
        .converge(&v4("ns/moved"), &ips(&["10.0.0.2"]), &[])
        .unwrap();
    assert_eq!(c.addresses, ips(&["10.0.0.2"]));
    assert!(a.holders_of(ip("10.0.0.1")).is_empty());
}

#[test]
fn refused_status_is_cleared_with_a_note() {
    let mut a = two_pools();
    a.assign(&v4("ns/owner"), &ips(&["10.0.0.0"])).unwrap();
    let c = a
        .converge(&v4("ns/thief"), &ips(&["10.0.0.0"]), &[])
        .unwrap();
    assert_eq!(reasons(&c.notes), ["ClearAssignment", "IPAllocated"]);
    assert!(
        c.notes[0]
            .message
            .contains("10.0.0.0 is already in use by ns/owner"),
        "{:?}",
        c.notes
    );
    assert_eq!(c.addresses, ips(&["10.0.0.1"]));
    // An address no pool has any more.
    let c = a
        .converge(&v4("ns/gone"), &ips(&["192.168.0.1"]), &[])
        .unwrap();
    assert_eq!(reasons(&c.notes), ["ClearAssignment", "IPAllocated"]);
}

#[test]
fn wrong_family_is_cleared_silently() {
    let mut a = two_pools();
    let c = a.converge(&v4("ns/s"), &ips(&["fc00::1"]), &[]).unwrap();
    assert_eq!(
        (c.addresses, reasons(&c.notes)),
        (ips(&["10.0.0.0"]), vec!["IPAllocated"])
    );
    assert!(a.holders_of(ip("fc00::1")).is_empty());
}

#[test]
fn pool_annotation_change_moves_the_service() {
    let mut a = two_pools();
    let c = a.converge(&v4("ns/s"), &[], &[]).unwrap();
    let to_b = Claim {
        pool: Some("b"),
        ..v4("ns/s")
    };
    let moved = a.converge(&to_b, &c.addresses, &[]).unwrap();
    assert_eq!(
        (moved.addresses, moved.pool.as_str()),
        (ips(&["10.0.9.0"]), "b")
    );
    assert_eq!(reasons(&moved.notes), ["IPAllocated"]);
    assert!(a.holders_of(ip("10.0.0.0")).is_empty());
}

#[test]
fn requested_addresses() {
    let mut a = two_pools();
    let c = a.converge(&v4("ns/s"), &[], &ips(&["10.0.0.6"])).unwrap();
    assert_eq!(c.addresses, ips(&["10.0.0.6"]));
    // A new request replaces the current address.
    let c = a
        .converge(&v4("ns/s"), &c.addresses, &ips(&["10.0.0.7"]))
        .unwrap();
    assert_eq!(
        (c.addresses, reasons(&c.notes)),
        (ips(&["10.0.0.7"]), vec!["IPAllocated"])
    );
    assert!(a.holders_of(ip("10.0.0.6")).is_empty());

    // The request and the pool annotation disagree: nothing is held afterwards.
    let to_b = Claim {
        pool: Some("b"),
        ..v4("ns/s")
    };
    let e = a
        .converge(&to_b, &ips(&["10.0.0.7"]), &ips(&["10.0.0.7"]))
        .unwrap_err();
    assert!(
        matches!(*e.error, AllocationError::PoolMismatch { .. }),
        "{e}"
    );
    assert_eq!(reasons(&e.notes), ["AllocationFailed"]);
    assert!(e.notes[0].reason.is_warning());
    assert_eq!(a.addresses_of("ns/s"), None);

    // A requested address outside every pool.
    let e = a
        .converge(&v4("ns/t"), &[], &ips(&["172.16.0.1"]))
        .unwrap_err();
    assert_eq!(*e.error, AllocationError::NotInAnyPool(ip("172.16.0.1")));
    assert_eq!(
        e.notes[0].message,
        "Failed to allocate IP for \"ns/t\": 172.16.0.1 is not in any address pool"
    );

    // PreferDual with two cluster IPs needs a request of both families (MetalLB's rule).
    let p = Claim::new("ns/p", "ns", FamilyPolicy::PreferDual(IpFamily::V4));
    let e = a.converge(&p, &[], &ips(&["10.0.0.3"])).unwrap_err();
    assert!(matches!(
        *e.error,
        AllocationError::FamilyMismatch {
            wanted: Wanted::Both,
            ..
        }
    ));
    let c = a.converge(&p, &[], &ips(&["fc00::2", "10.0.0.3"])).unwrap();
    assert_eq!(c.addresses, ips(&["fc00::2", "10.0.0.3"]));
}

#[test]
fn prefer_dual_tops_up_from_the_same_pool() {
    let mut a = two_pools();
    let p = Claim::new("ns/p", "ns", FamilyPolicy::PreferDual(IpFamily::V4));
    let c = a.converge(&p, &ips(&["10.0.0.4"]), &[]).unwrap();
    assert_eq!(c.addresses, ips(&["10.0.0.4", "fc00::"]));
    assert_eq!(reasons(&c.notes), ["IPAllocated"]);
    assert_eq!(c.notes[0].message, "Assigned additional IP fc00::");

    // A pool with one family only: the note, and the address kept.
    let q = Claim {
        pool: Some("b"),
        ..Claim::new("ns/q", "ns", FamilyPolicy::PreferDual(IpFamily::V4))
    };
    let c = a.converge(&q, &ips(&["10.0.9.1"]), &[]).unwrap();
    assert_eq!(c.addresses, ips(&["10.0.9.1"]));
    assert_eq!(reasons(&c.notes), ["AdditionalAssignFailed"]);
    assert!(
        c.notes[0]
            .message
            .contains("pool \"b\": it has no IPv6 range"),
        "{:?}",
        c.notes
    );
}

#[test]
fn failures() {
    let mut a = allocator(&pool_yaml("tiny", &["10.0.0.0/32"]));
    a.converge(&v4("ns/a"), &[], &[]).unwrap();
    let e = a.converge(&v4("ns/b"), &[], &[]).unwrap_err();
    assert_eq!(reasons(&e.notes), ["AllocationFailed"]);
    assert!(e.to_string().starts_with("no available IPs"));

    // MetalLB #1774: a stale status naming another Service's address is cleared, and the
    // single-address pool stays with its owner.
    let e = a
        .converge(&v4("ns/b"), &ips(&["10.0.0.0"]), &[])
        .unwrap_err();
    assert_eq!(reasons(&e.notes), ["ClearAssignment", "AllocationFailed"]);
    assert_eq!(a.holders_of(ip("10.0.0.0")), ["ns/a"]);

    let mut none = Allocator::new(Vec::new());
    let e = none.converge(&v4("ns/a"), &[], &[]).unwrap_err();
    assert_eq!((*e.error, e.notes), (AllocationError::NoPools, vec![]));
}

//! Address sharing: `metallb.io/allow-shared-ip`, backend keys and ports.

use super::*;
use crate::model::Protocol::{Tcp, Udp};

const HTTP: &[(crate::model::Protocol, i32)] = &[(Tcp, 80)];
const HTTPS: &[(crate::model::Protocol, i32)] = &[(Tcp, 443)];
const DNS: &[(crate::model::Protocol, i32)] = &[(Udp, 53), (Tcp, 53)];

fn shared<'a>(
    service: &'a str,
    key: &'a str,
    ports: &'a [(crate::model::Protocol, i32)],
) -> Claim<'a> {
    Claim {
        sharing_key: Some(key),
        ports,
        ..v4(service)
    }
}

#[test]
fn same_key_and_disjoint_ports_share() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/29"]));
    assert_eq!(
        a.allocate(&shared("ns/web", "k", HTTP)).unwrap(),
        ips(&["10.0.0.0"])
    );
    assert_eq!(
        a.allocate(&shared("ns/tls", "k", HTTPS)).unwrap(),
        ips(&["10.0.0.0"])
    );
    assert_eq!(
        a.allocate(&shared("ns/dns", "k", DNS)).unwrap(),
        ips(&["10.0.0.0"])
    );
    assert_eq!(a.holders_of(ip("10.0.0.0")), ["ns/dns", "ns/tls", "ns/web"]);
    // Port 80/TCP is taken on .0, so the next one goes to a fresh address...
    assert_eq!(
        a.allocate(&shared("ns/web2", "k", HTTP)).unwrap(),
        ips(&["10.0.0.1"])
    );
    // ...and 80/UDP still fits on .0.
    let udp = [(Udp, 80)];
    assert_eq!(
        a.allocate(&shared("ns/quic", "k", &udp)).unwrap(),
        ips(&["10.0.0.0"])
    );
    // Another key starts its own address.
    assert_eq!(
        a.allocate(&shared("ns/other", "k2", HTTP)).unwrap(),
        ips(&["10.0.0.2"])
    );
    let u = &a.usage()[0];
    assert_eq!((u.ipv4_in_use, u.services), (3, 6));

    // The address is freed only when its last holder leaves.
    for s in ["ns/web", "ns/tls", "ns/dns"] {
        a.release(s);
        assert_eq!(a.pool_of(ip("10.0.0.0")), Some("a"));
    }
    assert_eq!(a.holders_of(ip("10.0.0.0")), ["ns/quic"]);
    a.release("ns/quic");
    assert_eq!(a.allocate(&v4("ns/plain")).unwrap(), ips(&["10.0.0.0"]));
}

#[test]
fn lowest_usable_address_wins_shared_or_free() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/29"]));
    a.allocate(&v4("ns/p")).unwrap(); // .0
    a.allocate(&shared("ns/q", "k", HTTP)).unwrap(); // .1
    a.release("ns/p");
    // .0 is free and below the shareable .1.
    assert_eq!(
        a.allocate(&shared("ns/r", "k", HTTPS)).unwrap(),
        ips(&["10.0.0.0"])
    );
    // .0 now holds 443 under "k"; 443 again must skip it, and .1 (80 only) fits.
    assert_eq!(
        a.allocate(&shared("ns/t", "k", HTTPS)).unwrap(),
        ips(&["10.0.0.1"])
    );
}

#[test]
fn sharing_refusals_say_why() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/29"]));
    let x = ips(&["10.0.0.4"]);
    a.assign(&shared("ns/web", "k", HTTP), &x).unwrap();
    let refusal = |a: &mut Allocator, c: &Claim| match a.assign(c, &x) {
        Err(AllocationError::InUse { holder, why, .. }) => (holder, why),
        other => panic!("expected InUse, got {other:?}"),
    };
    use SharingRefusal::*;
    assert_eq!(
        refusal(&mut a, &shared("ns/b", "other", HTTPS)),
        (
            "ns/web".into(),
            KeyDiffers {
                ours: "other".into(),
                theirs: "k".into()
            }
        )
    );
    assert_eq!(
        refusal(&mut a, &shared("ns/b", "k", HTTP)),
        ("ns/web".into(), PortInUse(Tcp, 80))
    );
    assert_eq!(
        refusal(
            &mut a,
            &Claim {
                ports: HTTPS,
                ..v4("ns/b")
            }
        ),
        ("ns/web".into(), ClaimDoesNotShare)
    );
    let local = Claim {
        backend_key: Some("app=b"),
        ..shared("ns/b", "k", HTTPS)
    };
    assert_eq!(
        refusal(&mut a, &local),
        (
            "ns/web".into(),
            BackendDiffers {
                ours: "app=b".into(),
                theirs: "".into()
            }
        )
    );
    let e = a.assign(&shared("ns/b", "k", HTTP), &x).unwrap_err();
    assert_eq!(
        e.to_string(),
        "10.0.0.4 is already in use by ns/web: it already uses port Tcp/80"
    );

    // A holder without a key refuses everyone.
    a.assign(&v4("ns/solo"), &ips(&["10.0.0.5"])).unwrap();
    let e = a
        .assign(&shared("ns/b", "k", HTTPS), &ips(&["10.0.0.5"]))
        .unwrap_err();
    assert!(matches!(
        e,
        AllocationError::InUse {
            why: HolderDoesNotShare,
            ..
        }
    ));

    // Sole holders may change their own key and ports in place.
    a.assign(&shared("ns/solo", "new", HTTPS), &ips(&["10.0.0.5"]))
        .unwrap();
    a.assign(&shared("ns/c", "new", HTTP), &ips(&["10.0.0.5"]))
        .unwrap();
    assert_eq!(a.holders_of(ip("10.0.0.5")), ["ns/c", "ns/solo"]);
}

#[test]
fn local_traffic_policy_needs_the_same_backends() {
    let mut a = allocator(&pool_yaml("a", &["10.0.0.0/30"]));
    let local = |s, sel, ports| Claim {
        backend_key: Some(sel),
        ..shared(s, "k", ports)
    };
    assert_eq!(
        a.allocate(&local("ns/a", "app=x", HTTP)).unwrap(),
        ips(&["10.0.0.0"])
    );
    assert_eq!(
        a.allocate(&local("ns/b", "app=x", HTTPS)).unwrap(),
        ips(&["10.0.0.0"])
    );
    assert_eq!(
        a.allocate(&local("ns/c", "app=y", DNS)).unwrap(),
        ips(&["10.0.0.1"])
    );
    // Cluster policy (no backend key) does not join a Local group.
    assert_eq!(
        a.allocate(&shared("ns/d", "k", DNS)).unwrap(),
        ips(&["10.0.0.2"])
    );
    // An empty backend key is the same as none.
    let empty = Claim {
        backend_key: Some(""),
        ..shared("ns/e", "k", HTTP)
    };
    assert_eq!(a.allocate(&empty).unwrap(), ips(&["10.0.0.2"]));
}

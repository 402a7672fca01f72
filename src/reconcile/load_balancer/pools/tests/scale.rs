//! 100,000 Services: allocation one after another, and re-assignment after a restart, must not
//! scan ranges from their start (these run in debug builds; the time is printed, not asserted).

use std::time::Instant;

use super::*;
use crate::model::Protocol;

const N: u32 = 100_000;

#[test]
fn hundred_thousand_services() {
    let yaml = "metadata: {name: big}\nspec:\n  avoidBuggyIPs: true\n  addresses: [10.16.0.0/12]\n";
    let names: Vec<String> = (0..N).map(|i| format!("ns/s{i}")).collect();
    let ports = [(Protocol::Tcp, 443)];

    let mut a = allocator(yaml);
    let start = Instant::now();
    let mut taken = Vec::with_capacity(names.len());
    for name in &names {
        let claim = Claim {
            ports: &ports,
            ..v4(name)
        };
        taken.push(a.allocate(&claim).unwrap()[0]);
    }
    eprintln!("allocate {N}: {:?}", start.elapsed());
    // The lowest addresses, skipping .0 and .255: 254 per /24.
    let expect = |i: u32| {
        let base = u32::from(std::net::Ipv4Addr::new(10, 16, 0, 0));
        IpAddr::from(std::net::Ipv4Addr::from(
            base + (i / 254) * 256 + i % 254 + 1,
        ))
    };
    assert!(
        taken
            .iter()
            .enumerate()
            .all(|(i, &x)| x == expect(i as u32))
    );
    assert_eq!(a.usage()[0].ipv4_in_use, u128::from(N));

    // A restart: every Service re-takes its address, in a scattered order.
    let mut b = allocator(yaml);
    let start = Instant::now();
    for k in 0..N {
        let i = (k.wrapping_mul(7919) % N) as usize;
        let claim = Claim {
            ports: &ports,
            ..v4(&names[i])
        };
        b.assign(&claim, &taken[i..=i]).unwrap();
    }
    eprintln!("assign {N}: {:?}", start.elapsed());
    let next = b.allocate(&v4("ns/new")).unwrap();
    assert_eq!(next, vec![expect(N)]);

    // Releasing every other Service frees addresses the next allocations take, lowest first.
    for name in names.iter().step_by(2) {
        b.release(name);
    }
    assert_eq!(b.allocate(&v4("ns/again")).unwrap(), vec![expect(0)]);
    assert_eq!(b.allocate(&v4("ns/again2")).unwrap(), vec![expect(2)]);
    assert_eq!(b.usage()[0].services, (N / 2 + 3) as usize);
}

#[test]
fn many_services_sharing_one_key() {
    // 2,000 Services with one key and distinct ports pile onto the lowest address.
    let mut a = allocator(&pool_yaml("p", &["10.0.0.0/24"]));
    let names: Vec<String> = (0..2000).map(|i| format!("ns/s{i}")).collect();
    let ports: Vec<[(Protocol, i32); 1]> = (0..2000).map(|i| [(Protocol::Tcp, 1000 + i)]).collect();
    for (name, p) in names.iter().zip(&ports) {
        let claim = Claim {
            sharing_key: Some("k"),
            ports: p,
            ..v4(name)
        };
        assert_eq!(a.allocate(&claim).unwrap(), ips(&["10.0.0.0"]));
    }
    assert_eq!(a.holders_of(ip("10.0.0.0")).len(), 2000);
    for name in &names {
        a.release(name);
    }
    assert!(a.addrs.is_empty() && a.shared.is_empty() && a.holdings.is_empty());
}

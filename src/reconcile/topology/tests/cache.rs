//! Node ratios and the per-service bookkeeping of the cache.

use super::*;

#[test]
fn set_nodes_ratios() {
    let nodes = [
        node("a1", Some("zone-a"), 1000, true),
        node("a2", Some("zone-a"), 1000, true),
        node("a3", Some("zone-a"), 1000, true),
        node("a4", Some("zone-a"), 2000, true),
        node("b1", Some("zone-b"), 3000, true),
        node("b2", Some("zone-b"), 1500, true),
        node("c1", Some("zone-c"), 500, true),
        // Skipped although they lack a zone: not ready, or control plane.
        node("down", None, 0, false),
        Node {
            labels: Labels::from_pairs([(keys::LABEL_CONTROL_PLANE, "")]),
            ..node("cp", None, 8000, true)
        },
        Node {
            labels: Labels::from_pairs([
                (keys::LABEL_MASTER, "true"),
                (keys::LABEL_ZONE, "zone-c"),
            ]),
            ..node("master", None, 8000, true)
        },
    ];
    let mut cache = TopologyCache::new();
    cache.set_nodes(&nodes);
    let ratios: Vec<(String, f64)> = cache
        .zone_ratios()
        .unwrap()
        .iter()
        .map(|(z, r)| (z.to_string(), *r))
        .collect();
    assert_eq!(
        ratios,
        vec![
            ("zone-a".into(), 0.50),
            ("zone-b".into(), 0.45),
            ("zone-c".into(), 0.05)
        ]
    );
}

#[test]
fn set_nodes_insufficient() {
    let mut cache = TopologyCache::new();
    assert_eq!(
        cache.zone_ratios(),
        Some(&[][..]),
        "fresh cache: empty, not insufficient"
    );
    let a = node("a", Some("zone-a"), 1000, true);
    let b = node("b", Some("zone-b"), 1000, true);
    cache.set_nodes([&a, &b]);
    assert_eq!(cache.zone_ratios().map(<[_]>::len), Some(2));

    for bad in [
        node("x", None, 1000, true),
        node("x", Some(""), 1000, true),
        node("x", Some("zone-c"), 0, true),
    ] {
        cache.set_nodes([&a, &b, &bad]);
        assert_eq!(cache.zone_ratios(), None, "{bad:?}");
    }
    // One zone, or one zone left once not-ready nodes are dropped.
    cache.set_nodes([&a, &node("a2", Some("zone-a"), 500, true)]);
    assert_eq!(cache.zone_ratios(), None);
    cache.set_nodes([&a, &node("b", Some("zone-b"), 1000, false)]);
    assert_eq!(cache.zone_ratios(), None);
    cache.set_nodes(std::iter::empty());
    assert_eq!(cache.zone_ratios(), None);
}

#[test]
fn overloaded_after_node_change() {
    let a = node("a", Some("a"), 1000, true);
    let b = node("b", Some("b"), 1000, true);
    let mut cache = TopologyCache::new();
    cache.set_nodes([&a, &b]);
    populated(&mut cache, &[("a", 2), ("b", 2)]);
    cache.apply(
        "ns/other",
        &[TopologyChange::Populated {
            address_type: V4,
            zone_counts: vec![(intern("a"), 1), (intern("b"), 3)],
        }],
    );
    // ⌈4 · 0.5 / 1.2⌉ = 2: "ns/other" has only 1 endpoint hinted for zone a.
    assert_eq!(cache.overloaded_services(), ["ns/other"]);

    // Zone b gets three times zone a's CPU: ⌈4 · 0.75 / 1.2⌉ = 3 > 2.
    cache.set_nodes([&a, &b, &node("b2", Some("b"), 2000, true)]);
    assert_eq!(cache.overloaded_services(), ["ns/svc"]);

    // A new zone no service has hints for.
    cache.set_nodes([&a, &b, &node("c", Some("c"), 1000, true)]);
    assert_eq!(cache.overloaded_services(), ["ns/other", "ns/svc"]);

    // Insufficient node information: every service with hints.
    cache.set_nodes([&a]);
    assert_eq!(cache.overloaded_services(), ["ns/other", "ns/svc"]);

    cache.remove_service("ns/other");
    cache.apply(KEY, &[removed().unwrap(), removed().unwrap()]);
    assert!(cache.overloaded_services().is_empty());
    assert!(!cache.hints_populated(KEY));
}

#[test]
fn earlier_changes_of_the_same_sync() {
    let mut cache = cache_with(&[("a", 1000), ("b", 1000)]);
    let v6 = AddressType::IPv6;
    let creates = || {
        vec![slice(
            "",
            vec![
                ep("10.0.0.1", Some("a"), true),
                ep("10.0.0.2", Some("b"), true),
            ],
        )]
    };
    let svc = auto();
    let options = Options::default();
    let input = TopologyInput {
        service: &svc,
        service_key: KEY,
        address_type: &V4,
        options: &options,
        cache: &cache,
    };
    // IPv6 was populated earlier in this sync: no second "enabled" event for IPv4.
    let earlier = [TopologyChange::Populated {
        address_type: v6.clone(),
        zone_counts: vec![(intern("a"), 1), (intern("b"), 1)],
    }];
    let (mut c, mut u) = (creates(), vec![]);
    let out = apply_hints_after(&input, &earlier, &mut c, &mut u, &[]);
    assert!(out.events.is_empty());
    let out = apply_hints(&input, &mut creates(), &mut u, &[]);
    assert_eq!(out.events.len(), 1);

    // Both types populated; removing IPv6 clears the service's flag while IPv4's counts stay, as
    // upstream's cache does. Disabling then removes IPv4 without a second event.
    cache.apply(KEY, &[out.change.unwrap(), earlier[0].clone()]);
    cache.apply(KEY, &[TopologyChange::Removed { address_type: v6 }]);
    assert!(!cache.hints_populated(KEY));
    assert!(cache.zone_counts(KEY, &V4).is_some());
    let plain = service(&[], None);
    let r = run(&plain, &cache, &options, creates(), vec![], &[]);
    assert!(r.out.events.is_empty());
    assert_eq!(r.out.change, removed());
    cache.apply(KEY, &[r.out.change.unwrap()]);
    assert_eq!(cache.zone_counts(KEY, &V4), None);
    assert!(cache.overloaded_services().is_empty());
}

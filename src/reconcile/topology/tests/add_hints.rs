//! The annotation path: allocation, redistribution, refusals, disabling.

use super::*;

#[test]
fn add_hints_three_zones() {
    let cache = cache_with(&[("zone-a", 3500), ("zone-b", 3500), ("zone-c", 3000)]);
    let creates = vec![
        slice(
            "",
            vec![
                ep("10.1.2.3", Some("zone-a"), true),
                ep("10.1.2.4", Some("zone-b"), true),
            ],
        ),
        slice(
            "",
            vec![
                ep("10.1.3.3", Some("zone-c"), true),
                ep("10.1.3.4", Some("zone-c"), true),
                ep("10.1.3.5", Some("zone-a"), true),
            ],
        ),
    ];
    let updates = vec![
        slice(
            "u1",
            vec![
                ep("10.2.2.3", Some("zone-a"), true),
                ep("10.2.2.4", Some("zone-a"), true),
            ],
        ),
        slice(
            "u2",
            vec![
                ep("10.2.3.3", Some("zone-b"), true),
                ep("10.2.3.4", Some("zone-c"), true),
                ep("10.2.3.5", Some("zone-a"), true),
                ep("10.2.3.6", Some("zone-a"), false),
            ],
        ),
    ];
    let r = run(&auto(), &cache, &Options::default(), creates, updates, &[]);
    // zone-a has 1.5 endpoints too many and zone-b 1.5 too few: the first zone-a endpoint moves.
    assert_eq!(zones(&r.creates[0]), ["zone-b", "zone-b"]);
    assert_eq!(zones(&r.creates[1]), ["zone-c", "zone-c", "zone-a"]);
    assert_eq!(zones(&r.updates[0]), ["zone-a", "zone-a"]);
    assert_eq!(zones(&r.updates[1]), ["zone-b", "zone-c", "zone-a", "-"]);
    assert_eq!(r.updates.len(), 2);
    assert_eq!(
        counts(&r.out.change),
        [
            ("zone-a".into(), 4),
            ("zone-b".into(), 3),
            ("zone-c".into(), 3)
        ]
    );
    assert_eq!(
        event(&r.out),
        (
            EventType::Normal,
            REASON_HINTS_ENABLED,
            "Topology Aware Hints has been enabled, addressType: IPv4"
        )
    );

    // Already populated: no second "enabled" event.
    let mut cache = cache;
    populated(&mut cache, &[("zone-a", 4), ("zone-b", 3), ("zone-c", 3)]);
    let creates = vec![slice(
        "",
        vec![
            ep("10.0.0.1", Some("zone-a"), true),
            ep("10.0.0.2", Some("zone-b"), true),
            ep("10.0.0.3", Some("zone-c"), true),
        ],
    )];
    let r = run(&auto(), &cache, &Options::default(), creates, vec![], &[]);
    assert!(r.out.events.is_empty());
    assert_eq!(counts(&r.out.change).len(), 3);
}

#[test]
fn redistribution_balances_zones() {
    let cache = cache_with(&[("a", 1000), ("b", 1000)]);
    let mut eps: Vec<Endpoint> = (1..=6)
        .map(|i| ep(&format!("10.0.0.{i}"), Some("a"), true))
        .collect();
    eps.push(ep("10.0.1.1", Some("b"), true));
    eps.push(ep("10.0.1.2", Some("b"), true));
    let r = run(
        &auto(),
        &cache,
        &Options::default(),
        vec![slice("", eps)],
        vec![],
        &[],
    );
    assert_eq!(
        zones(&r.creates[0]),
        ["b", "b", "a", "a", "a", "a", "b", "b"]
    );
    assert_eq!(counts(&r.out.change), [("a".into(), 4), ("b".into(), 4)]);
}

/// Sets up a refusal with an unchanged slice carrying hints, and checks that everything is
/// stripped and the cache entry dropped.
fn assert_refused(cache: &TopologyCache, creates: Vec<EndpointSlice>, message: &str) {
    let old = slice(
        "old",
        vec![hinted(ep("10.9.0.1", Some("zone-a"), true), "zone-a")],
    );
    let clean = slice("clean", vec![ep("10.9.0.2", Some("zone-a"), false)]);
    let r = run(
        &auto(),
        cache,
        &Options::default(),
        creates,
        vec![],
        &[&old, &clean],
    );
    assert_eq!(
        event(&r.out),
        (EventType::Warning, REASON_HINTS_DISABLED, message)
    );
    assert_eq!(r.out.change, removed());
    assert!(no_hints(&r.creates));
    // The hinted unchanged slice is rewritten without hints; the clean one is left alone.
    assert_eq!(r.updates.len(), 1);
    assert_eq!(r.updates[0].meta.name.as_str(), "old");
    assert_eq!(r.updates[0].meta.resource_version.as_str(), "42");
    assert!(no_hints(&r.updates));
}

#[test]
fn refusals() {
    let three = cache_with(&[("zone-a", 1000), ("zone-b", 1000), ("zone-c", 1000)]);
    let eps = |n: usize| -> Vec<Endpoint> {
        let z = ["zone-a", "zone-b", "zone-c"];
        (0..n)
            .map(|i| ep(&format!("10.0.0.{i}"), Some(z[i % 3]), true))
            .collect()
    };

    // Nodes in a single zone make the node information insufficient, as upstream reports it.
    let one_zone = cache_with(&[("zone-a", 1000), ("zone-a", 2000)]);
    assert_refused(
        &one_zone,
        vec![slice("", eps(3))],
        "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes, addressType: IPv4",
    );
    // Before any node list, upstream's cache has no zones at all.
    assert_refused(
        &TopologyCache::new(),
        vec![slice("", eps(3))],
        "Nodes only ready in one zone, addressType: IPv4",
    );
    // The unchanged slice's ready endpoint counts: 1 + 1 = 2 < 3 zones.
    assert_refused(
        &three,
        vec![slice("", eps(1))],
        "Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4",
    );
    // Issue 122437: 10 + 1 = 11 endpoints spread 4/4/3 over three equal zones.
    assert_refused(
        &three,
        vec![slice("", eps(10))],
        "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (11 endpoints, 3 zones), addressType: IPv4",
    );
    let mut missing = eps(6);
    missing[4].zone = None;
    assert_refused(
        &three,
        vec![slice("", missing)],
        "One or more endpoints do not have a zone specified, addressType: IPv4",
    );
}

#[test]
fn unchanged_slices_kept_when_hints_fit() {
    let cache = cache_with(&[("a", 1000), ("b", 1000)]);
    let good = slice(
        "good",
        vec![
            hinted(ep("10.0.0.1", Some("a"), true), "a"),
            hinted(ep("10.0.0.2", Some("b"), true), "b"),
            // Not-ready endpoints do not need hints.
            ep("10.0.0.3", Some("b"), false),
        ],
    );
    let unhinted = slice("unhinted", vec![ep("10.0.1.1", Some("a"), true)]);
    let unknown_zone = slice(
        "unknown",
        vec![hinted(ep("10.0.2.1", Some("b"), true), "zone-x")],
    );
    let creates = vec![slice(
        "",
        vec![
            ep("10.0.3.1", Some("a"), true),
            ep("10.0.3.2", Some("b"), true),
        ],
    )];
    let r = run(
        &auto(),
        &cache,
        &Options::default(),
        creates,
        vec![],
        &[&good, &unhinted, &unknown_zone],
    );
    let names: Vec<&str> = r.updates.iter().map(|s| s.meta.name.as_str()).collect();
    assert_eq!(names, ["unhinted", "unknown"]);
    assert_eq!(zones(&r.updates[0]), ["a"]);
    assert_eq!(zones(&r.updates[1]), ["b"]);
    assert_eq!(zones(&r.creates[0]), ["a", "b"]);
    assert_eq!(counts(&r.out.change), [("a".into(), 3), ("b".into(), 3)]);

    // A slice that would push a zone past its maximum is rewritten, and its endpoints rebalanced.
    // 4 endpoints over 0.5/0.5: minimum 2, maximum 2 per zone.
    let skewed = slice(
        "skewed",
        vec![
            hinted(ep("10.0.4.1", Some("a"), true), "a"),
            hinted(ep("10.0.4.2", Some("a"), true), "a"),
            hinted(ep("10.0.4.3", Some("a"), true), "a"),
        ],
    );
    let creates = vec![slice("", vec![ep("10.0.5.1", Some("b"), true)])];
    let r = run(
        &auto(),
        &cache,
        &Options::default(),
        creates,
        vec![],
        &[&skewed],
    );
    assert_eq!(r.updates.len(), 1);
    assert_eq!(zones(&r.updates[0]), ["b", "a", "a"]);
    assert_eq!(counts(&r.out.change), [("a".into(), 2), ("b".into(), 2)]);
}

#[test]
fn annotation_disabled_strips_populated_hints() {
    let mut cache = cache_with(&[("a", 1000), ("b", 1000)]);
    populated(&mut cache, &[("a", 1), ("b", 1)]);
    let svc = service(&[(keys::ANNOTATION_TOPOLOGY_MODE, "Disabled")], None);
    let old = slice("old", vec![hinted(ep("10.0.0.1", Some("a"), true), "a")]);
    let plain = slice("plain", vec![ep("10.0.0.2", Some("b"), true)]);
    let updates = vec![slice(
        "u",
        vec![hinted(ep("10.0.0.3", Some("b"), true), "b")],
    )];
    let r = run(
        &svc,
        &cache,
        &Options::default(),
        vec![],
        updates,
        &[&old, &plain],
    );
    assert_eq!(
        event(&r.out),
        (
            EventType::Warning,
            REASON_HINTS_DISABLED,
            "Topology Aware Hints has been disabled, addressType: IPv4"
        )
    );
    assert_eq!(r.out.change, removed());
    let names: Vec<&str> = r.updates.iter().map(|s| s.meta.name.as_str()).collect();
    assert_eq!(names, ["u", "old"]);
    assert!(no_hints(&r.updates));

    cache.apply(KEY, &[r.out.change.unwrap()]);
    assert!(!cache.hints_populated(KEY));
    // Nothing populated any more: no event, no change, nothing to rewrite.
    let r = run(&svc, &cache, &Options::default(), vec![], vec![], &[&plain]);
    assert!(r.out.events.is_empty());
    assert_eq!(r.out.change, None);
    assert!(r.updates.is_empty());
}

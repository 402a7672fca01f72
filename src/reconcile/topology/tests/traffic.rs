//! trafficDistribution and the choice between it and the annotation.

use super::*;

#[test]
fn prefer_close() {
    let cache = TopologyCache::new();
    let svc = service(&[], Some("PreferClose"));
    let right = slice(
        "right",
        vec![
            hinted(ep("10.0.0.1", Some("a"), true), "a"),
            ep("10.0.0.2", Some("b"), false),
        ],
    );
    let wrong = slice("wrong", vec![hinted(ep("10.0.1.1", Some("a"), true), "b")]);
    let missing = slice("missing", vec![ep("10.0.2.1", Some("b"), true)]);
    let creates = vec![slice(
        "",
        vec![
            ep("10.0.3.1", Some("a"), true),
            ep("10.0.3.2", None, true),
            ep("10.0.3.3", Some("b"), false),
        ],
    )];
    let r = run(
        &svc,
        &cache,
        &Options::default(),
        creates,
        vec![],
        &[&right, &wrong, &missing],
    );
    assert!(r.out.events.is_empty());
    assert_eq!(r.out.change, None);
    assert_eq!(zones(&r.creates[0]), ["a", "-", "-"]);
    let names: Vec<&str> = r.updates.iter().map(|s| s.meta.name.as_str()).collect();
    assert_eq!(names, ["wrong", "missing"]);
    assert_eq!(zones(&r.updates[0]), ["a"]);
    assert_eq!(zones(&r.updates[1]), ["b"]);
    // No node hints for PreferClose.
    assert!(
        r.updates
            .iter()
            .flat_map(|s| &s.endpoints)
            .all(|e| e.hints.as_ref().is_some_and(|h| h.for_nodes.is_empty()))
    );
    assert!(traffic_distribution_usable(&svc, &Options::default()));
}

#[test]
fn prefer_same_needs_the_option() {
    let cache = TopologyCache::new();
    let off = Options {
        prefer_same_traffic_distribution: false,
        ..Options::default()
    };
    // On by default, as in Kubernetes 1.34 and later.
    let on = Options::default();
    let creates = || {
        vec![slice(
            "",
            vec![hinted(ep("10.0.0.1", Some("a"), true), "a")],
        )]
    };

    for td in ["PreferSameZone", "PreferSameNode"] {
        let svc = service(&[], Some(td));
        assert!(!traffic_distribution_usable(&svc, &off));
        // Not usable: hints are stripped.
        let r = run(&svc, &cache, &off, creates(), vec![], &[]);
        assert!(no_hints(&r.creates), "{td}");
        assert!(traffic_distribution_usable(&svc, &on));
    }

    let r = run(
        &service(&[], Some("PreferSameZone")),
        &cache,
        &on,
        creates(),
        vec![],
        &[],
    );
    let hints = r.creates[0].endpoints[0].hints.as_deref().unwrap();
    assert_eq!(
        (hints.for_zones.as_slice(), hints.for_nodes.len()),
        (&[intern("a")][..], 0)
    );

    // PreferSameNode adds node hints, and rewrites an unchanged slice that lacks them.
    let zone_only = slice(
        "zone-only",
        vec![hinted(ep("10.0.1.1", Some("b"), true), "b")],
    );
    let r = run(
        &service(&[], Some("PreferSameNode")),
        &cache,
        &on,
        creates(),
        vec![],
        &[&zone_only],
    );
    let hints = r.creates[0].endpoints[0].hints.as_deref().unwrap();
    assert_eq!(hints.for_zones.as_slice(), &[intern("a")]);
    assert_eq!(hints.for_nodes.as_slice(), &[Name::new("node-10.0.0.1")]);
    assert_eq!(r.updates.len(), 1);
    let hints = r.updates[0].endpoints[0].hints.as_deref().unwrap();
    assert_eq!(hints.for_nodes.as_slice(), &[Name::new("node-10.0.1.1")]);

    // And back to PreferSameZone: stale node hints make the slice need an update.
    let r = run(
        &service(&[], Some("PreferSameZone")),
        &cache,
        &on,
        vec![],
        vec![],
        &[&r.updates[0]],
    );
    assert_eq!(r.updates.len(), 1);
    assert!(
        r.updates[0].endpoints[0]
            .hints
            .as_ref()
            .is_some_and(|h| h.for_nodes.is_empty())
    );
}

#[test]
fn invalid_traffic_distribution_strips_hints() {
    let cache = TopologyCache::new();
    let svc = service(&[], Some("Bogus"));
    assert!(!traffic_distribution_usable(&svc, &Options::default()));
    let old = slice("old", vec![hinted(ep("10.0.0.1", Some("a"), true), "a")]);
    let creates = vec![slice(
        "",
        vec![hinted(ep("10.0.1.1", Some("a"), true), "a")],
    )];
    let r = run(&svc, &cache, &Options::default(), creates, vec![], &[&old]);
    assert!(no_hints(&r.creates));
    assert_eq!(r.updates.len(), 1);
    assert!(no_hints(&r.updates));
    assert_eq!(r.out.change, None);
}

#[test]
fn annotation_wins_over_traffic_distribution() {
    let cache = cache_with(&[("a", 1000), ("b", 3000)]);
    let svc = service(
        &[(keys::ANNOTATION_TOPOLOGY_MODE, "auto")],
        Some("PreferClose"),
    );
    assert!(!traffic_distribution_usable(&svc, &Options::default()));
    let eps = (0..4)
        .map(|i| {
            ep(
                &format!("10.0.0.{i}"),
                Some(if i < 2 { "a" } else { "b" }),
                true,
            )
        })
        .collect();
    let r = run(
        &svc,
        &cache,
        &Options::default(),
        vec![slice("", eps)],
        vec![],
        &[],
    );
    // CPU-proportional, not same-zone: one of zone a's endpoints serves zone b.
    assert_eq!(zones(&r.creates[0]), ["b", "a", "b", "b"]);
    assert_eq!(counts(&r.out.change), [("a".into(), 1), ("b".into(), 3)]);
}

#[test]
fn hints_enabled_precedence() {
    let l = |pairs: &[(&str, &str)]| Labels::from_pairs(pairs.iter().copied());
    assert!(hints_enabled(&l(&[(
        keys::ANNOTATION_TOPOLOGY_MODE,
        "Auto"
    )])));
    assert!(hints_enabled(&l(&[(
        keys::ANNOTATION_TOPOLOGY_AWARE_HINTS,
        "auto"
    )])));
    assert!(!hints_enabled(&l(&[(
        keys::ANNOTATION_TOPOLOGY_MODE,
        "AUTO"
    )])));
    assert!(!hints_enabled(&l(&[])));
    assert!(!hints_enabled(&l(&[
        (keys::ANNOTATION_TOPOLOGY_AWARE_HINTS, "Disabled"),
        (keys::ANNOTATION_TOPOLOGY_MODE, "Auto"),
    ])));
    assert!(hints_enabled(&l(&[
        (keys::ANNOTATION_TOPOLOGY_AWARE_HINTS, "Auto"),
        (keys::ANNOTATION_TOPOLOGY_MODE, "Disabled"),
    ])));
}

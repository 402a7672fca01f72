//! Pod -> services lookups and service -> pods member sets, on hand-picked cases.

use sliced::index::{Index, PodProjection};
use sliced::model::intern;

use super::common::{key, keys_of, labels, names, pod, service};

#[test]
fn members_are_kept_current_and_in_name_order() {
    let index = Index::new();
    let members = |name: &str| names(&index.members(&key("ns", name))).join(",");
    index.pods().apply(pod("ns", "c", &[("app", "web")]));
    index
        .services()
        .apply(service("ns", "web", Some(&[("app", "web")])));
    index.services().apply(service("ns", "all", Some(&[])));
    index.services().apply(service("ns", "none", None));
    index
        .pods()
        .apply(pod("ns", "a", &[("app", "web"), ("tier", "fe")]));
    index.pods().apply(pod("ns", "b", &[("app", "db")]));
    index.pods().apply(pod("other", "d", &[("app", "web")]));
    assert_eq!(members("web"), "a,c");
    assert_eq!(members("all"), "a,b,c");
    assert_eq!(members("none"), "");
    assert_eq!(members("missing"), "");
    assert_eq!(index.member_count(&key("ns", "web")), 2);

    index.pods().apply(pod("ns", "c", &[("app", "db")]));
    assert_eq!(members("web"), "a");
    index
        .services()
        .apply(service("ns", "web", Some(&[("tier", "fe")])));
    assert_eq!(members("web"), "a");
    index
        .services()
        .apply(service("ns", "web", Some(&[("app", "db")])));
    assert_eq!(members("web"), "b,c");
    index.pods().delete("ns", "b");
    assert_eq!(members("web"), "c");
    assert_eq!(members("all"), "a,c");
}

#[test]
fn services_for_pod_uses_namespace_and_full_selector() {
    let index = Index::new();
    let services = index.services();
    services.apply(service("ns", "web", Some(&[("app", "web")])));
    services.apply(service(
        "ns",
        "web-fe",
        Some(&[("app", "web"), ("tier", "fe")]),
    ));
    services.apply(service("ns", "all", Some(&[])));
    services.apply(service("ns", "none", None));
    services.apply(service("other", "web", Some(&[("app", "web")])));
    let found = |pairs: &[(&str, &str)]| keys_of(&index.services_for_pod("ns", &labels(pairs)));
    assert_eq!(found(&[("app", "web")]), ["ns/all", "ns/web"]);
    assert_eq!(
        found(&[("app", "web"), ("tier", "fe"), ("z", "1")]),
        ["ns/all", "ns/web", "ns/web-fe"]
    );
    assert_eq!(found(&[]), ["ns/all"]);
    let elsewhere = index.services_for_pod("nowhere", &labels(&[("app", "web")]));
    assert!(elsewhere.is_empty());
}

#[test]
fn services_to_update_union_or_symmetric_difference() {
    let index = Index::new();
    index
        .services()
        .apply(service("ns", "a", Some(&[("app", "a")])));
    index
        .services()
        .apply(service("ns", "b", Some(&[("app", "b")])));
    index
        .services()
        .apply(service("ns", "tier", Some(&[("tier", "fe")])));
    index.services().apply(service("ns", "all", Some(&[])));
    let update = |ns: &str, old: Option<&[(&str, &str)]>, pod_changed: bool| {
        keys_of(&index.services_to_update(&PodProjection {
            namespace: intern(ns),
            labels: labels(&[("app", "b"), ("tier", "fe")]),
            old_labels: old.map(labels),
            pod_changed,
        }))
    };
    let old: &[(&str, &str)] = &[("app", "a"), ("tier", "fe")];
    // Only labels moved: services matched before and after are left alone.
    assert_eq!(update("ns", Some(old), false), ["ns/a", "ns/b"]);
    // The pod changed too: every service it was or is in.
    assert_eq!(
        update("ns", Some(old), true),
        ["ns/a", "ns/all", "ns/b", "ns/tier"]
    );
    // Add, delete, or a pod change alone: the current matches.
    assert_eq!(update("ns", None, false), ["ns/all", "ns/b", "ns/tier"]);
    // Empty old labels are upstream's nil: the new matches, not the symmetric difference.
    assert_eq!(
        update("ns", Some(&[]), false),
        ["ns/all", "ns/b", "ns/tier"]
    );
    assert!(update("nowhere", None, false).is_empty());
}

#[test]
fn concurrent_writers_and_readers_agree_at_the_end() {
    let index = Index::new();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let index = &index;
            scope.spawn(move || {
                // Two threads per namespace, so writers of one namespace contend too.
                let ns = format!("ns-{}", t % 2);
                for i in 0..300 {
                    let app = format!("app-{}", i % 7);
                    let name = format!("pod-{t}-{}", i % 40);
                    index.pods().apply(pod(&ns, &name, &[("app", &app)]));
                    if i % 11 == 0 {
                        let selector = [("app", app.as_str())];
                        let svc = format!("svc-{}", i % 5);
                        index.services().apply(service(&ns, &svc, Some(&selector)));
                    }
                    if i % 13 == 0 {
                        index
                            .pods()
                            .delete(&ns, &format!("pod-{t}-{}", (i + 7) % 40));
                    }
                }
            });
        }
        scope.spawn(|| {
            for i in 0..2000 {
                let ns = format!("ns-{}", i % 2);
                let found = index.services_for_pod(&ns, &labels(&[("app", "app-1")]));
                assert!(found.windows(2).all(|w| w[0] < w[1]));
                let members = index.members(&key(&ns, "svc-0"));
                assert!(members.windows(2).all(|w| w[0].meta.name < w[1].meta.name));
            }
        });
    });
    for ns in ["ns-0", "ns-1"] {
        for s in 0..5 {
            let name = format!("svc-{s}");
            let Some(svc) = index.services().get(ns, &name) else {
                continue;
            };
            let selector = svc
                .selector
                .clone()
                .expect("every service here has a selector");
            let mut expected: Vec<String> = Vec::new();
            for t in 0..4 {
                for i in 0..40 {
                    let pod_name = format!("pod-{t}-{i}");
                    // Matched here pair by pair, not with `Labels::matches` (which the index uses).
                    if let Some(p) = index.pods().get(ns, &pod_name)
                        && selector
                            .iter()
                            .all(|(k, v)| p.meta.labels.iter().any(|(pk, pv)| pk == k && pv == v))
                    {
                        expected.push(pod_name);
                    }
                }
            }
            expected.sort();
            assert_eq!(names(&index.members(&key(ns, &name))), expected);
        }
    }
}

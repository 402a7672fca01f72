//! `serviceAllocation`: pool order by priority, namespace and service pinning.

use super::*;

fn pinned(name: &str, addr: &str, allocation: &str, auto_assign: bool) -> String {
    format!(
        "metadata: {{name: {name}}}\nspec:\n  autoAssign: {auto_assign}\n  addresses: [{addr}]\n  serviceAllocation: {allocation}\n"
    )
}

fn cluster() -> Allocator {
    let docs = [
        pool_yaml("a-open", &["10.1.0.0/30"]),
        pinned(
            "b-prio2",
            "10.2.0.0/32",
            "{priority: 2, namespaces: [team]}",
            true,
        ),
        pinned(
            "c-prio1",
            "10.3.0.0/32",
            "{priority: 1, namespaces: [team]}",
            true,
        ),
        pinned("d-noprio", "10.4.0.0/32", "{namespaces: [team]}", true),
        pinned(
            "e-other",
            "10.5.0.0/32",
            "{priority: 1, namespaces: [other]}",
            true,
        ),
        pinned(
            "f-gold",
            "10.6.0.0/32",
            "{priority: 5, serviceSelectors: [{matchLabels: {tier: gold}}]}",
            true,
        ),
        pinned("g-prio-only", "10.7.0.0/32", "{priority: 3}", true),
        pinned(
            "h-off",
            "10.8.0.0/32",
            "{priority: 1, namespaces: [team]}",
            false,
        ),
    ];
    allocator(&docs.join("---\n"))
}

#[test]
fn priority_order_then_unpinned_pools() {
    let mut a = cluster();
    let got: Vec<IpAddr> = (1..=4)
        .map(|i| a.allocate(&v4(&format!("team/s{i}"))).unwrap()[0])
        .collect();
    // c (1), b (2), d (unset), then the pools without serviceAllocation.
    assert_eq!(got, ips(&["10.3.0.0", "10.2.0.0", "10.4.0.0", "10.1.0.0"]));
    assert_eq!(a.allocate(&v4("x/s")).unwrap(), ips(&["10.1.0.1"]));
}

#[test]
fn service_selectors_join_the_priority_order() {
    let mut a = cluster();
    let gold = [("tier", "gold")];
    let names: Vec<String> = (1..=5).map(|i| format!("team/g{i}")).collect();
    let claim = |s| Claim {
        service_labels: &gold,
        ..v4(s)
    };
    let got: Vec<IpAddr> = names
        .iter()
        .map(|n| a.allocate(&claim(n)).unwrap()[0])
        .collect();
    // c (1), b (2), f (5), d (unset), then unpinned.
    assert_eq!(
        got,
        ips(&["10.3.0.0", "10.2.0.0", "10.6.0.0", "10.4.0.0", "10.1.0.0"])
    );

    let mut a = cluster();
    assert_eq!(a.allocate(&claim("x/g")).unwrap(), ips(&["10.6.0.0"]));
    assert_eq!(a.allocate(&claim("x/g2")).unwrap(), ips(&["10.1.0.0"]));
}

#[test]
fn allocation_restricts_assignment_and_annotation() {
    let mut a = cluster();
    let e = a.assign(&v4("team/s"), &ips(&["10.5.0.0"])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pool \"e-other\" may not be used by team/s: namespace \"team\" is not in its \
         serviceAllocation.namespaces nor selected by its namespaceSelectors"
    );
    let to_e = Claim {
        pool: Some("e-other"),
        ..v4("team/s")
    };
    assert!(matches!(
        a.allocate(&to_e),
        Err(AllocationError::PoolNotAllowed { .. })
    ));
    assert_eq!(a.assign(&v4("other/s"), &ips(&["10.5.0.0"])), Ok(()));

    let e = a.assign(&v4("x/plain"), &ips(&["10.6.0.0"])).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("the service's labels match none of its serviceAllocation.serviceSelectors")
    );

    // autoAssign false: only by annotation or request, and still only for its namespace.
    let to_h = |s| Claim {
        pool: Some("h-off"),
        ..v4(s)
    };
    assert!(matches!(
        a.allocate(&to_h("x/s")),
        Err(AllocationError::PoolNotAllowed { .. })
    ));
    assert_eq!(a.allocate(&to_h("team/h")).unwrap(), ips(&["10.8.0.0"]));

    // A serviceAllocation naming nobody never serves automatically, but admits everyone.
    let mut b = allocator(&pinned("g", "10.7.0.0/32", "{priority: 3}", true));
    assert!(matches!(
        b.allocate(&v4("x/s")),
        Err(AllocationError::NoAvailableIps { .. })
    ));
    assert_eq!(
        b.allocate(&Claim {
            pool: Some("g"),
            ..v4("x/s")
        })
        .unwrap(),
        ips(&["10.7.0.0"])
    );
}

#[test]
fn namespace_selectors_and_the_and_of_both_rules() {
    let docs = [
        pool_yaml("open", &["10.1.0.0/30"]),
        pinned(
            "prod",
            "10.2.0.0/30",
            "{namespaceSelectors: [{matchLabels: {env: prod}}]}",
            true,
        ),
        pinned(
            "gold-team",
            "10.3.0.0/30",
            "{priority: 1, namespaces: [team], serviceSelectors: [{matchExpressions: [{key: tier, operator: In, values: [gold]}]}]}",
            true,
        ),
    ];
    let mut a = allocator(&docs.join("---\n"));
    let env = [("env", "prod")];
    let gold = [("tier", "gold")];

    let in_prod = Claim {
        namespace_labels: &env,
        ..v4("shop/s")
    };
    assert_eq!(a.allocate(&in_prod).unwrap(), ips(&["10.2.0.0"]));
    assert_eq!(a.allocate(&v4("dev/s")).unwrap(), ips(&["10.1.0.0"]));
    let e = a.assign(&v4("dev/t"), &ips(&["10.2.0.1"])).unwrap_err();
    assert!(matches!(e, AllocationError::PoolNotAllowed { .. }));

    // Namespace rule and service rule must both hold.
    assert_eq!(a.allocate(&v4("team/plain")).unwrap(), ips(&["10.1.0.1"]));
    let elsewhere = Claim {
        service_labels: &gold,
        ..v4("dev/gold")
    };
    assert_eq!(a.allocate(&elsewhere).unwrap(), ips(&["10.1.0.2"]));
    let both = Claim {
        service_labels: &gold,
        ..v4("team/gold")
    };
    assert_eq!(a.allocate(&both).unwrap(), ips(&["10.3.0.0"]));
}

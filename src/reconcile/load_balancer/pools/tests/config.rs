//! Parsing `IPAddressPool` objects and refusing bad ones.

use super::*;

const POOLS: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: prod
  namespace: metallb-system
  labels: {team: net}
spec:
  addresses:
  - 192.168.10.0/24
  - 192.168.9.1-192.168.9.5
  - fc00::/120
  - fc00:1::10 - fc00:1::1f
  avoidBuggyIPs: true
status:
  assignedIPv4: 3
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: reserved
spec:
  addresses: ["10.0.0.0/28"]
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: team-a
spec:
  addresses:
  - 172.16.0.0/16
  serviceAllocation:
    priority: 50
    namespaces: [team-a, team-a-staging]
    namespaceSelectors:
    - matchLabels:
        tenant: a
    serviceSelectors:
    - matchExpressions:
      - {key: tier, operator: In, values: [gold, silver]}
      - {key: legacy, operator: DoesNotExist}
      unknownField: ignored
"#;

#[test]
fn parses_real_pools() {
    let p = pools(POOLS);
    assert_eq!(p.len(), 3);

    let prod = &p[0];
    assert_eq!(prod.name, "prod");
    let shown: Vec<String> = prod.ranges.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        shown,
        [
            "192.168.10.0/24",
            "192.168.9.1-192.168.9.5",
            "fc00::/120",
            "fc00:1::10/124"
        ]
    );
    assert_eq!(prod.ranges[1].first(), ip("192.168.9.1"));
    assert_eq!(prod.ranges[1].last(), ip("192.168.9.5"));
    assert_eq!(prod.ranges[3].last(), ip("fc00:1::1f"));
    assert!(prod.auto_assign, "autoAssign defaults to true");
    assert!(prod.avoid_buggy_ips);
    assert_eq!(prod.allocation, None);
    assert!(prod.contains(ip("192.168.10.1")) && !prod.contains(ip("192.168.10.0")));
    assert!(prod.contains(ip("fc00::ff")) && !prod.contains(ip("fc00::100")));

    let reserved = &p[1];
    assert!(!reserved.auto_assign && !reserved.avoid_buggy_ips);

    let a = p[2].allocation.as_ref().unwrap();
    assert_eq!(a.priority, 50);
    assert_eq!(a.namespaces, ["team-a", "team-a-staging"]);
    assert_eq!(a.namespace_selectors[0].match_labels["tenant"], "a");
    let r = &a.service_selectors[0].match_expressions;
    assert_eq!(
        (r[0].operator.clone(), r[0].values.len()),
        (Operator::In, 2)
    );
    assert_eq!(r[1].operator, Operator::DoesNotExist);
    assert!(a.pins());
}

#[test]
fn parses_json_too() {
    let doc: IpAddressPoolObject = serde_json::from_str(
        r#"{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool",
            "metadata":{"name":"j","uid":"x"},
            "spec":{"addresses":["10.1.0.0/30"],"autoAssign":null,"serviceAllocation":{"namespaces":null}}}"#,
    )
    .unwrap();
    let p = pool_from_object(doc).unwrap();
    assert!(p.auto_assign);
    let a = p.allocation.unwrap();
    assert!(a.namespaces.is_empty() && !a.pins());
}

/// The error of the single object in `yaml`.
fn error(yaml: &str) -> PoolError {
    let doc: IpAddressPoolObject = serde_saphyr::from_str(yaml).unwrap();
    pool_from_object(doc).unwrap_err()
}

fn spec(body: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata:\n  name: prod\nspec:\n{body}"
    )
}

#[test]
fn names_pool_field_and_reason() {
    let e = error(&spec(
        "  addresses: [10.0.1.0/24, 10.0.2.0/24, 10.0.0.5-10.0.0.1]\n",
    ));
    assert_eq!(
        e.to_string(),
        r#"IPAddressPool "prod": spec.addresses[2]: "10.0.0.5-10.0.0.1": the first address is after the last"#
    );
    let problem = |yaml: &str| {
        let e = error(yaml);
        (e.path, e.problem)
    };
    let addr = |text: &str, error| PoolProblem::Address {
        text: text.into(),
        error,
    };
    assert_eq!(
        problem(&spec("  addresses: [10.0.0.0/24, 10.0.1.0/33]\n")),
        (
            "spec.addresses[1]".into(),
            addr("10.0.1.0/33", RangeError::BadPrefix("33".into(), 32))
        )
    );
    assert_eq!(
        problem(&spec("  addresses: [192.168.1.1]\n")),
        (
            "spec.addresses[0]".into(),
            addr("192.168.1.1", RangeError::Unrecognised)
        )
    );
    assert_eq!(
        problem(&spec("  addresses: [10.0.0.1-fc00::1]\n")),
        (
            "spec.addresses[0]".into(),
            addr("10.0.0.1-fc00::1", RangeError::MixedFamilies)
        )
    );
    assert_eq!(
        problem(&spec("  addresses: [10.0.0.256/24]\n")),
        (
            "spec.addresses[0]".into(),
            addr("10.0.0.256/24", RangeError::BadAddress("10.0.0.256".into()))
        )
    );
    assert_eq!(
        problem(&spec("  addresses: []\n")),
        ("spec.addresses".into(), PoolProblem::Missing)
    );
    assert_eq!(
        problem("kind: IPAddressPool\nspec:\n  addresses: [10.0.0.0/24]\n"),
        ("metadata.name".into(), PoolProblem::Missing)
    );
    assert_eq!(
        problem("kind: L2Advertisement\nmetadata: {name: x}\n"),
        (
            "kind".into(),
            PoolProblem::WrongKind("L2Advertisement".into())
        )
    );
    assert_eq!(
        problem("apiVersion: metallb.io/v1alpha1\nmetadata: {name: x}\n"),
        (
            "apiVersion".into(),
            PoolProblem::WrongKind("metallb.io/v1alpha1".into())
        )
    );
}

#[test]
fn refuses_overlaps_within_a_pool() {
    let e = error(&spec(
        "  addresses: [10.0.0.0/24, 10.0.1.0/24, 10.0.0.128-10.0.0.130]\n",
    ));
    assert_eq!(e.path, "spec.addresses[2]");
    assert_eq!(
        e.to_string(),
        "IPAddressPool \"prod\": spec.addresses[2]: 10.0.0.128-10.0.0.130 overlaps 10.0.0.0/24 \
         (IPAddressPool \"prod\", spec.addresses[0])"
    );
}

#[test]
fn refuses_bad_service_allocation() {
    let alloc = |body: &str| {
        error(&spec(&format!(
            "  addresses: [10.0.0.0/24]\n  serviceAllocation:\n{body}"
        )))
    };
    let e = alloc("    namespaces: [a, b, a]\n");
    assert_eq!(e.path, "spec.serviceAllocation.namespaces[2]");
    assert_eq!(e.problem, PoolProblem::DuplicateNamespace("a".into()));

    let e = alloc("    serviceSelectors:\n    - matchLabels: {x: y}\n    - matchLabels: {x: y}\n");
    assert_eq!(e.path, "spec.serviceAllocation.serviceSelectors[1]");
    assert_eq!(e.problem, PoolProblem::DuplicateSelector);

    let e = alloc(
        "    namespaceSelectors:\n    - matchExpressions:\n      - {key: env, operator: In}\n",
    );
    assert_eq!(
        e.path,
        "spec.serviceAllocation.namespaceSelectors[0].matchExpressions[0].values"
    );
    assert!(matches!(e.problem, PoolProblem::Selector(_)));

    let e = alloc(
        "    serviceSelectors:\n    - matchExpressions:\n      - {key: env, operator: Like, values: [x]}\n",
    );
    assert_eq!(
        e.path,
        "spec.serviceAllocation.serviceSelectors[0].matchExpressions[0].operator"
    );
    assert!(
        e.to_string().contains("\"Like\" is not a valid operator"),
        "{e}"
    );
}

#[test]
fn checks_pools_together() {
    let a = pool_yaml("a", &["10.0.0.0/24", "fc00::/64"]);
    let b = pool_yaml("b", &["10.0.1.0/24", "fc00:0:0:0:ffff::-fc00:0:0:1::"]);
    let docs: Vec<IpAddressPoolObject> =
        serde_saphyr::from_multiple(&format!("{a}---\n{b}")).unwrap();
    let set: Vec<Pool> = docs
        .into_iter()
        .map(|d| pool_from_object(d).unwrap())
        .collect();
    let e = check_pools(&set).unwrap_err();
    assert_eq!(
        e.to_string(),
        "IPAddressPool \"b\": spec.addresses[1]: fc00::ffff:0:0:0-fc00:0:0:1:: overlaps fc00::/64 \
         (IPAddressPool \"a\", spec.addresses[1])"
    );

    // Touching is not overlapping.
    let c = pool_yaml("c", &["10.0.0.0/25"]);
    let d = pool_yaml("d", &["10.0.0.128-10.0.0.255", "::/0"]);
    pools(&format!("{c}---\n{d}"));

    let twice = pools(&pool_yaml("e", &["10.9.0.0/30"]))
        .into_iter()
        .chain(pools(&pool_yaml("e", &["10.8.0.0/30"])))
        .collect::<Vec<_>>();
    let e = check_pools(&twice).unwrap_err();
    assert_eq!((e.pool.as_str(), e.path.as_str()), ("e", "metadata.name"));
    assert_eq!(e.problem, PoolProblem::DuplicateName);
}

//! `load_str` reads a pod's JSON borrowed first (`pod_from_json_text`), and decodes `WatchedPod`
//! where that read declines. Whenever the borrowed read takes a text, `WatchedPod` must take it
//! too and give the same pod, errors included; where `WatchedPod` refuses a text, the borrowed
//! read must decline it. Checked on every fixture pod, the real-shaped one, and generated pods
//! full of nulls, escapes, duplicates, wrong types and lists where mappings belong.

use proptest::prelude::*;
use sliced::kube::convert::{ConvertError, WatchedPod, pod_from_json_text, pod_from_watched};
use sliced::model::Pod;

use crate::real_pods;
use crate::watched_pod::fixture_pods;

/// The reference: `WatchedPod` (serde's derive over k8s-openapi's own types), then the conversion.
fn watched(text: &str) -> Option<Result<Pod, ConvertError>> {
    serde_json::from_str::<WatchedPod>(text)
        .ok()
        .map(|w| pod_from_watched(&w))
}

/// Whether the borrowed read took `text`; panics where it disagrees with the reference.
fn agrees(text: &str, origin: &str) -> bool {
    match pod_from_json_text(text) {
        None => false,
        Some(borrowed) => match watched(text) {
            Some(reference) => {
                assert_eq!(borrowed, reference, "{origin}: {text}");
                true
            }
            None => panic!("{origin}: the borrowed read took what WatchedPod refuses: {text}"),
        },
    }
}

#[test]
fn every_fixture_pod_is_read_borrowed_and_alike() {
    let pods = fixture_pods();
    assert!(pods.len() > 100, "only {} fixture pods found", pods.len());
    for (origin, pod) in &pods {
        assert!(
            agrees(&pod.to_string(), origin),
            "{origin}: declined a pod without escapes"
        );
    }
}

#[test]
fn a_real_shaped_pod_is_read_borrowed_and_alike() {
    let template = real_pods::template();
    for ready in [true, false] {
        let mut pod = real_pods::variant(&template, 42, 10);
        real_pods::set_ready(&mut pod, ready);
        let text = match serde_json::to_string(&pod) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        assert!(agrees(&text, "fixtures/pods/deployment-pod.yaml"));
    }
}

#[test]
fn declined_where_it_cannot_borrow_or_watched_pod_refuses() {
    // An escape in a kept string: read by WatchedPod instead.
    let escaped = [
        r#"{"metadata":{"name":"p\u0031","namespace":"ns"}}"#,
        r#"{"metadata":{"name":"p","labels":{"app":"a\"b"}}}"#,
        r#"{"metadata":{"name":"p"},"status":{"conditions":[{"type":"Re\u0061dy","status":"True"}]}}"#,
    ];
    for text in escaped {
        assert_eq!(pod_from_json_text(text), None, "{text}");
        assert!(watched(text).is_some(), "{text}");
    }
    // Refused by WatchedPod: declined here too.
    let refused = [
        r#"{"metadata":null}"#,
        r#"{"metadata":{"name":"p"},"spec":[]}"#,
        r#"{"metadata":{"name":"p"},"metadata":{"name":"q"}}"#,
        r#"{"kind":"Pod","kind":"Pod","metadata":{"name":"p"}}"#,
        r#"{"metadata":{"name":"p","labels":{"a":null}}}"#,
        r#"{"metadata":{"name":"p"},"status":{"conditions":[{"type":"Ready","message":5}]}}"#,
        r#"{"metadata":{"name":"p"},"status":{"conditions":[{"type":"Ready","lastProbeTime":"yesterday"}]}}"#,
        r#"{"metadata":{"name":"p"},"spec":{"containers":[{"ports":[{"containerPort":"80"}]}]}}"#,
        r#"{"metadata":{"name":"p"},"spec":{"containers":[{"ports":[{"containerPort":80,"hostIP":1}]}]}}"#,
        r#"{"metadata":{"name":"p"},"status":{"podIPs":[null]}}"#,
    ];
    for text in refused {
        assert_eq!(pod_from_json_text(text), None, "{text}");
        assert!(watched(text).is_none(), "{text}");
    }
    // Taken, and alike: nulls, duplicate label keys (the last wins), absent required-looking fields.
    let taken = [
        r#"{"metadata":{"name":"p","labels":null,"uid":null},"spec":null,"status":null}"#,
        r#"{"metadata":{"name":"p","labels":{"a":"1","b":"2","a":"3"}}}"#,
        r#"{"metadata":{"name":"p"},"status":{"conditions":[{"status":"True"},{"type":"Ready","status":null}],"podIPs":[{}]}}"#,
        // The first Ready condition counts, as upstream's GetPodReadyCondition takes the first.
        r#"{"metadata":{"name":"p"},"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z"},{"type":"Ready","status":"False"}]}}"#,
        r#"{"metadata":{"name":"p"},"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"Ready","status":"True"}]}}"#,
        r#"{"metadata":{"name":"p"},"spec":{"containers":[{"ports":[{"name":"h","containerPort":null}]}]}}"#,
        r#"{"metadata":{"name":"p","namespace":"ns"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","message":"a\nb","reason":null,"observedGeneration":3}]}}"#,
    ];
    for text in taken {
        assert!(agrees(text, "case"), "declined: {text}");
    }
}

/// A JSON object of the given fields, in order, duplicates kept.
fn object(fields: Vec<(String, String)>) -> String {
    let body: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("{k:?}:{v}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn one_of(values: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(values).prop_map(str::to_owned).boxed()
}

/// Any JSON value of a wrong or odd shape.
fn odd() -> BoxedStrategy<String> {
    one_of(&[
        "null",
        "5",
        "-1",
        "1.5",
        "true",
        "[]",
        "{}",
        "\"x\"",
        "[\"a\"]",
        "{\"a\":1}",
    ])
}

fn string() -> BoxedStrategy<String> {
    prop_oneof![
        4 => one_of(&[
            "\"p\"", "\"ns\"", "\"\"", "\"10.0.0.1\"", "\"fd00::1\"", "\"Ready\"", "\"True\"",
            "\"False\"", "\"Running\"", "\"Pending\"", "\"TCP\"", "\"UDP\"", "\"Always\"",
            "\"http\"", "\"node-1\"", "\"0d3c2d4e-1f2a-4b5c-8d9e-0a1b2c3d4e5f\"", "\"42\"",
        ]),
        1 => one_of(&["\"a\\u0062\"", "\"Re\\u0061dy\"", "\"x\\ny\"", "\"\\\"q\\\"\""]),
        1 => odd(),
    ]
    .boxed()
}

fn time() -> BoxedStrategy<String> {
    prop_oneof![
        3 => one_of(&["\"2026-01-02T03:04:05Z\"", "\"2026-01-02T03:04:05.123456Z\"", "null"]),
        1 => one_of(&["\"2026-13-45T00:00:00Z\"", "\"yesterday\"", "\"2026-01-02T03:04:05\\u005a\""]),
        1 => odd(),
    ]
    .boxed()
}

fn integer() -> BoxedStrategy<String> {
    prop_oneof![
        3 => one_of(&["80", "8080", "0", "null", "65535"]),
        1 => one_of(&["70000", "-1", "\"80\"", "1.5", "2147483648"]),
    ]
    .boxed()
}

type Field = BoxedStrategy<(String, String)>;

fn field(key: &'static str, value: BoxedStrategy<String>) -> Field {
    value.prop_map(move |v| (key.to_owned(), v)).boxed()
}

/// A mapping of fields drawn from `fields` (any may repeat), or now and then not a mapping.
fn mapping(fields: Vec<Field>, len: usize) -> BoxedStrategy<String> {
    let union = proptest::strategy::Union::new(fields);
    prop_oneof![
        12 => prop::collection::vec(union, 0..len).prop_map(object),
        1 => odd(),
    ]
    .boxed()
}

fn list(item: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop_oneof![
        8 => prop::collection::vec(item, 0..4).prop_map(|v| format!("[{}]", v.join(","))),
        1 => odd(),
    ]
    .boxed()
}

fn labels() -> BoxedStrategy<String> {
    let pair = (one_of(&["app", "tier", "a", "b", "x\\u0079"]), string())
        .prop_map(|(k, v)| (k.clone(), v));
    prop_oneof![
        8 => prop::collection::vec(pair, 0..5).prop_map(|pairs| {
            let body: Vec<String> = pairs.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        }),
        1 => odd(),
    ]
    .boxed()
}

fn metadata() -> BoxedStrategy<String> {
    mapping(
        vec![
            field("name", string()),
            field("name", string()),
            field("namespace", string()),
            field("uid", string()),
            field("resourceVersion", string()),
            field("labels", labels()),
            field("creationTimestamp", time()),
            field("deletionTimestamp", time()),
            field("annotations", odd()),
        ],
        7,
    )
}

fn port() -> BoxedStrategy<String> {
    mapping(
        vec![
            field("containerPort", integer()),
            field("containerPort", integer()),
            field("name", string()),
            field("protocol", string()),
            field("hostIP", string()),
            field("hostPort", integer()),
            field("other", odd()),
        ],
        5,
    )
}

fn container() -> BoxedStrategy<String> {
    mapping(
        vec![
            field("ports", list(port())),
            field("restartPolicy", string()),
            field("name", string()),
            field("image", odd()),
        ],
        4,
    )
}

fn spec() -> BoxedStrategy<String> {
    mapping(
        vec![
            field("nodeName", string()),
            field("hostname", string()),
            field("subdomain", string()),
            field("containers", list(container())),
            field("containers", list(container())),
            field("initContainers", list(container())),
            field("volumes", odd()),
        ],
        6,
    )
}

fn condition() -> BoxedStrategy<String> {
    mapping(
        vec![
            field("type", string()),
            field("type", one_of(&["\"Ready\""])),
            field("status", string()),
            field("lastTransitionTime", time()),
            field("lastProbeTime", time()),
            field("message", string()),
            field("reason", string()),
            field("observedGeneration", integer()),
        ],
        6,
    )
}

fn status() -> BoxedStrategy<String> {
    mapping(
        vec![
            field("phase", string()),
            field("podIP", string()),
            field(
                "podIPs",
                list(mapping(
                    vec![field("ip", string()), field("other", odd())],
                    3,
                )),
            ),
            field("conditions", list(condition())),
            field("conditions", list(condition())),
            field("hostIP", odd()),
        ],
        5,
    )
}

fn pod() -> BoxedStrategy<String> {
    prop::collection::vec(
        prop_oneof![
            field("apiVersion", one_of(&["\"v1\""])),
            field("kind", one_of(&["\"Pod\""])),
            field("metadata", metadata()),
            field("metadata", metadata()),
            field("spec", spec()),
            field("spec", spec()),
            field("status", status()),
            field("status", status()),
        ],
        0..6,
    )
    .prop_map(object)
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn generated_pods_read_borrowed_agree_with_watched_pod(text in pod()) {
        agrees(&text, "generated");
    }
}

/// The generated pods are not all declined (which would prove nothing) nor all well formed.
#[test]
fn generated_pods_are_taken_declined_and_refused_in_good_measure() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = pod();
    let (mut taken, mut refused, mut escaped) = (0, 0, 0);
    let cases = 2_000;
    for _ in 0..cases {
        let text = match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current(),
            Err(e) => panic!("{e}"),
        };
        if agrees(&text, "generated") {
            taken += 1;
        } else if watched(&text).is_none() {
            refused += 1;
        } else {
            escaped += 1;
        }
    }
    assert!(taken * 5 > cases, "taken {taken} of {cases}");
    assert!(
        refused * 10 > cases,
        "refused by WatchedPod {refused} of {cases}"
    );
    assert!(
        escaped * 100 > cases,
        "declined, read by WatchedPod {escaped} of {cases}"
    );
}

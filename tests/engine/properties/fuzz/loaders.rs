//! The other loaders and parsers a user feeds: trace files (`simulate --events`), cluster specs
//! (`simulate --spec`), durations (flags and trace times) and CPU quantities (nodes' allocatable).
//! Hostile and damaged input gives a value or a typed error that names the file, the step and the
//! field; never a panic, never a hang.

use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use sliced::duration::{DurationError, MAX_DURATION, parse_duration};
use sliced::kube::convert::parse_cpu_millis;
use sliced::kube::trace_file::{Trace, TraceFileError, load_trace};
use sliced::replay::{ReplayOptions, replay};
use sliced::sim::{ClusterSpec, SpecError, generate};

use super::corpus::{ByteEdit, FIXTURES, Mutation, byte_edit, damage, documents, mutate, mutation};

const FILE: &str = "fuzz.yaml";

/// A trace made of fixture `i`'s objects (of the kinds a trace holds): each applied at its own time, then one deleted, and a
/// failure injected; as a YAML block list of JSON flow items, the form a script would write.
fn trace_of(i: usize) -> Value {
    let docs = documents(&FIXTURES[i % FIXTURES.len()].1);
    let read = [
        "Service",
        "Pod",
        "Node",
        "Namespace",
        "EndpointSlice",
        "Endpoints",
    ];
    let mut steps: Vec<Value> = docs
        .into_iter()
        .filter(|d| d["kind"].as_str().is_some_and(|k| read.contains(&k)))
        .take(8)
        .enumerate()
        .map(|(n, doc)| json!({"at": format!("{}ms", n * 250), "apply": doc}))
        .collect();
    steps.push(
        json!({"at": "3s", "delete": {"kind": "Pod", "namespace": "default", "name": "web-0"}}),
    );
    steps.push(json!({"at": 4, "fail": {"verb": "update", "kind": "EndpointSlice", "status": 409, "reason": "Conflict", "times": 2}}));
    Value::Array(steps)
}

fn yaml_list(steps: &Value) -> String {
    match steps {
        Value::Array(items) => items.iter().map(|s| format!("- {s}\n")).collect(),
        other => format!("{other}\n"),
    }
}

/// Loads `text` as a trace. An error names the file, and a step error the step (counted from 1)
/// and the field, in plain words. What loads is replayed, within a deadline.
fn load_and_replay(text: &str) -> Result<(), TestCaseError> {
    match load_trace(FILE, text) {
        Ok(Trace { steps, .. }) => {
            let (send, receive) = mpsc::channel();
            std::thread::spawn(move || {
                let options = ReplayOptions {
                    keep_records: false,
                    ..ReplayOptions::default()
                };
                let _ = send.send(replay(&steps, &options).steps);
            });
            prop_assert!(
                receive.recv_timeout(Duration::from_secs(60)).is_ok(),
                "the replay of a loaded trace did not end:\n{text}"
            );
        }
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                message.starts_with(&format!("{FILE}: ")),
                "does not name the file: {message}"
            );
            // Debug formatting, an empty field, the parser's snippet.
            for bad in ["Some(\"", ": None: ", ": : ", "<input>", "panicked"] {
                prop_assert!(!message.contains(bad), "{bad:?} in: {message}");
            }
            if let TraceFileError::Step { step, .. } = &e {
                prop_assert!(*step >= 1);
                prop_assert!(
                    message.starts_with(&format!("{FILE}: step {step}: ")),
                    "{message}"
                );
            }
            if let TraceFileError::Object(e) = &e {
                prop_assert!(e.position().is_some_and(|p| p.document >= 1), "{message}");
            }
        }
    }
    Ok(())
}

/// Values a trace's own fields get wrong: times, verbs, kinds, statuses and counts.
fn hostile_step_field() -> impl Strategy<Value = (String, Value)> {
    let key = prop::sample::select(vec![
        "at",
        "apply",
        "delete",
        "fail",
        "verb",
        "kind",
        "status",
        "times",
        "reason",
        "name",
        "namespace",
        "bogus",
    ]);
    let value = prop_oneof![
        prop::sample::select(vec![
            json!("876000h"),
            json!("876000h1ns"),
            json!("1e12"),
            json!(1e20),
            json!(-1),
            json!("-1s"),
            json!("1.5.5s"),
            json!("µs"),
            json!(1.7976931348623157e308),
            json!(u64::MAX),
            json!(null),
            json!("Pod"),
            json!("patch"),
            json!(404),
            json!(503),
            json!([]),
            json!({}),
            json!(""),
        ]),
        "[0-9.eE+-]{0,8}(ns|us|ms|s|m|h|x|)".prop_map(Value::from),
    ];
    (key.prop_map(str::to_owned), value)
}

/// Sets `key` to `value` in the mapping at `path` (each index modulo the children), or in the
/// first mapping found there.
fn set_field(value: &mut Value, path: &[usize], key: &str, with: Value) {
    match (value, path.split_first()) {
        (Value::Array(items), Some((i, rest))) if !items.is_empty() => {
            let n = items.len();
            set_field(&mut items[i % n], rest, key, with);
        }
        (Value::Object(map), Some((i, rest))) if !rest.is_empty() && !map.is_empty() => {
            let n = map.len();
            if let Some((_, child)) = map.iter_mut().nth(i % n)
                && (child.is_object() || child.is_array())
            {
                set_field(child, rest, key, with);
                return;
            }
            map.insert(key.to_owned(), with);
        }
        (Value::Object(map), _) => {
            map.insert(key.to_owned(), with);
        }
        _ => {}
    }
}

/// The spec fixture, and the fields a spec has.
fn spec_text() -> &'static str {
    FIXTURES
        .iter()
        .find(|(path, _)| path.ends_with("sim/default.yaml"))
        .map(|(_, text)| text.as_str())
        .unwrap_or("pods: 100000\n")
}

const SPEC_FIELDS: [&str; 17] = [
    "seed",
    "pods",
    "services",
    "namespaces",
    "zones",
    "nodes_per_zone",
    "pods_per_node",
    "node_cpu_millis",
    "huge_services",
    "huge_service_pods",
    "tail_shape",
    "min_service_pods",
    "max_service_pods",
    "dual_stack_fraction",
    "named_port_fraction",
    "headless_fraction",
    "not_ready_fraction",
];

fn spec_number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0".to_owned(),
            "1".to_owned(),
            "-1".to_owned(),
            u64::MAX.to_string(),
            (u64::MAX - 1).to_string(),
            (u64::MAX / 3 + 1).to_string(),
            "18446744073709551616".to_owned(),
            i64::MIN.to_string(),
            "1e308".to_owned(),
            ".nan".to_owned(),
            "-.inf".to_owned(),
            "0.5".to_owned(),
            "~".to_owned(),
            "[]".to_owned(),
            "many".to_owned(),
            "*a".to_owned(),
        ]),
        (0u64..5000).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
    ]
}

/// Reads a spec; what it accepts fits in memory and builds (when small enough to build in a
/// test); what it refuses, it refuses by field or by line.
fn load_spec(text: &str) -> Result<(), TestCaseError> {
    match ClusterSpec::from_yaml(text) {
        Ok(spec) => {
            prop_assert_eq!(spec.validate_sizes(), Ok(()));
            let nodes = spec.zones.checked_mul(spec.node_count_per_zone());
            if spec.pods <= 3000 && nodes.is_some_and(|n| n <= 3000) && spec.services <= 3000 {
                let cluster = generate(&spec);
                prop_assert_eq!(cluster.snapshot.pods.len(), spec.pods);
            }
        }
        Err(SpecError::Invalid { field, message }) => {
            prop_assert!(SPEC_FIELDS.contains(&field), "{field}: {message}");
            prop_assert!(!message.is_empty());
        }
        Err(SpecError::Parse(message)) => {
            prop_assert!(!message.contains("<input>"), "{message}");
            prop_assert!(!message.is_empty());
        }
    }
    Ok(())
}

/// A quantity as a string of digits and an independent reading of it: `n` whole cores (or
/// millicores) times a suffix, in u128 arithmetic, saturated.
fn oracle_millis(n: u64, suffix: &str) -> i64 {
    let n = u128::from(n);
    let millis = match suffix {
        "m" => Some(n),
        "" => n.checked_mul(1000),
        "k" => n.checked_mul(1_000_000),
        "M" => n.checked_mul(1_000_000_000),
        "G" => n.checked_mul(1_000_000_000_000),
        "Ki" => n.checked_mul(1024 * 1000),
        "Mi" => n.checked_mul(1024 * 1024 * 1000),
        "Gi" => n.checked_mul(1024 * 1024 * 1024 * 1000),
        "Ei" => n.checked_mul(1000).and_then(|v| v.checked_mul(1 << 60)),
        _ => None,
    };
    millis
        .and_then(|m| i64::try_from(m).ok())
        .unwrap_or(i64::MAX)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Trace text broken byte by byte: bad YAML, cut steps, stray indicators.
    #[test]
    fn damaged_traces_are_read_or_refused_by_name(
        i in any::<usize>(),
        edits in prop::collection::vec(byte_edit(), 1..8),
    ) {
        let edits: Vec<ByteEdit> = edits;
        load_and_replay(&damage(&yaml_list(&trace_of(i)), &edits))?;
    }

    /// Well-formed traces with hostile objects, and steps whose own fields are wrong.
    #[test]
    fn hostile_steps_are_read_or_refused_by_name(
        i in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 0..3),
        fields in prop::collection::vec(
            (prop::collection::vec(0usize..16, 1..4), hostile_step_field()),
            0..3,
        ),
        json in any::<bool>(),
    ) {
        let mutations: Vec<Mutation> = mutations;
        let mut steps = mutate(&trace_of(i), &mutations);
        for (path, (key, value)) in fields {
            set_field(&mut steps, &path, &key, value);
        }
        let text = if json { steps.to_string() } else { yaml_list(&steps) };
        load_and_replay(&text)?;
    }

    /// Specs broken byte by byte.
    #[test]
    fn damaged_specs_are_read_or_refused_by_field(
        edits in prop::collection::vec(byte_edit(), 1..8),
    ) {
        load_spec(&damage(spec_text(), &edits))?;
    }

    /// Specs with hostile numbers in any field, sizes near and beyond the limits.
    #[test]
    fn hostile_specs_are_read_or_refused_by_field(
        values in prop::collection::vec((prop::sample::select(SPEC_FIELDS.to_vec()), spec_number()), 1..5),
    ) {
        let text: String = values.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
        load_spec(&text)?;
    }

    /// Durations as a user types them, right and wrong: within 100 years or refused, naming the
    /// input.
    #[test]
    fn durations_are_in_range_or_refused_naming_the_input(
        text in prop_oneof![
            "[0-9.eE+-]{0,24}(ns|us|µs|ms|s|m|h|x|)",
            "([0-9]{0,22}(\\.[0-9]{0,6})?(ns|us|ms|s|m|h)){1,4}",
            "\\PC{0,16}",
        ],
    ) {
        match parse_duration(&text) {
            Ok(d) => prop_assert!(d <= MAX_DURATION, "{text}: {d:?}"),
            Err(e @ (DurationError::Malformed { .. } | DurationError::TooLong { .. })) => {
                let message = e.to_string();
                prop_assert!(message.contains(&format!("{text:?}")), "{message}");
            }
        }
    }

    /// Whole hours, minutes and seconds read exactly, up to 100 years.
    #[test]
    fn whole_durations_read_exactly(h in 0u64..900_000, m in 0u64..120, s in 0u64..120) {
        let text = format!("{h}h{m}m{s}s");
        let want = Duration::from_secs(h * 3600 + m * 60 + s);
        match parse_duration(&text) {
            Ok(d) => prop_assert_eq!(d, want, "{}", text),
            Err(DurationError::TooLong { .. }) => prop_assert!(want > MAX_DURATION, "{}", text),
            Err(e) => prop_assert!(false, "{text}: {e}"),
        }
    }

    /// Any text: never a negative quantity, never a panic.
    #[test]
    fn quantities_are_never_negative(
        text in prop_oneof![
            "[+-]?[0-9.]{0,45}(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]{0,25}|[a-zA-Z]{0,3})",
            "\\PC{0,24}",
        ],
    ) {
        let value = parse_cpu_millis(&text);
        prop_assert!(value.is_none_or(|v| v >= 0), "{}: {:?}", text, value);
    }

    /// A well-formed quantity of any length and exponent is read, and is not negative.
    #[test]
    fn well_formed_quantities_are_read(
        sign in prop::sample::select(vec!["", "+", "-"]),
        whole in "[0-9]{0,45}",
        fraction in prop::option::of("[0-9]{0,45}"),
        suffix in prop_oneof![
            prop::sample::select(vec!["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
                .prop_map(str::to_owned),
            "[eE][+-]?[0-9]{1,25}",
        ],
    ) {
        let digits = whole.len() + fraction.as_ref().map_or(0, String::len);
        // A quantity has a digit somewhere.
        let whole = if digits == 0 { "0".to_owned() } else { whole };
        let fraction = fraction.map(|f| format!(".{f}")).unwrap_or_default();
        let text = format!("{sign}{whole}{fraction}{suffix}");
        let value = parse_cpu_millis(&text);
        prop_assert!(value.is_some_and(|v| v >= 0), "{}: {:?}", text, value);
        if sign == "-" {
            prop_assert_eq!(value, Some(0), "{}", text);
        }
    }

    /// Whole numbers with a suffix, against u128 arithmetic.
    #[test]
    fn quantities_match_exact_arithmetic(
        n in prop_oneof![any::<u64>(), 0u64..100_000],
        suffix in prop::sample::select(vec!["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ei"]),
        zeros in 0usize..30,
    ) {
        let text = format!("{}{n}{suffix}", "0".repeat(zeros));
        prop_assert_eq!(parse_cpu_millis(&text), Some(oracle_millis(n, suffix)), "{}", text);
    }
}

/// The trace fuzz means something only if much of what it makes is read and replayed.
#[test]
fn most_hostile_traces_still_reach_the_replay() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let loaded = (0..400)
        .filter(|_| {
            let Ok(case) =
                (any::<usize>(), prop::collection::vec(mutation(), 0..2)).new_tree(&mut runner)
            else {
                return false;
            };
            let (i, mutations) = case.current();
            load_trace(FILE, &yaml_list(&mutate(&trace_of(i), &mutations)))
                .is_ok_and(|trace| trace.steps.len() > 2)
        })
        .count();
    assert!(loaded > 80, "{loaded} of 400 hostile traces loaded");
}

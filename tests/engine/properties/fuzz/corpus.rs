//! The seeds of the mutations: every fixture of the repository, and ways to break them.

use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{Value, json};

/// Every YAML fixture: scenarios, examples, the real-shaped pod and the simulation spec.
pub static FIXTURES: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                files.push((path.display().to_string(), text));
            }
        }
    }
    files.sort();
    assert!(files.len() > 100, "fixtures not found");
    files
});

/// The documents of a fixture, parsed.
pub fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|v| !v.is_null())
        .collect()
}

/// Values a writer could mean: the shapes real objects hold, in the wrong place or combination.
fn plausible_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "10.0.0.1",
            "10.0.0.2",
            "fd00::1",
            "web",
            "http",
            "dns",
            "TCP",
            "UDP",
            "SCTP",
            "IPv4",
            "IPv6",
            "None",
            "True",
            "False",
            "Ready",
            "Running",
            "Succeeded",
            "node-a",
            "zone-a",
            "default",
            "8080",
            "Terminating",
            "PreferClose",
            "Auto",
            "Local",
        ])
        .prop_map(|s| json!(s)),
        (1i64..70000).prop_map(|n| json!(n)),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!({"app": "web"})),
        Just(json!([{"ip": "10.0.0.9"}, {"ip": "fd00::9"}])),
        Just(json!([{"name": "http", "port": 80, "targetPort": "http"}])),
        Just(json!([{"type": "Ready", "status": "True"}])),
    ]
}

/// Values a hostile or careless writer puts where another was expected.
pub fn hostile_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => plausible_value(),
        1 => Just(Value::Null),
        1 => Just(json!(true)),
        1 => Just(json!(-1)),
        1 => Just(json!(0)),
        1 => Just(json!(65536)),
        1 => Just(json!(i64::MAX)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(1e308)),
        1 => Just(json!(-0.5)),
        1 => Just(json!("")),
        1 => Just(json!("10.0.0.300")),
        1 => Just(json!("::ffff:10.0.0.1")),
        1 => Just(json!("999999999999999999999999999999999999999")),
        1 => Just(json!("1e20")),
        1 => Just(json!("None")),
        1 => Just(json!("IPv5")),
        1 => Just(json!("x".repeat(300))),
        1 => Just(json!("\u{0}\u{feff}ünïcødé")),
        1 => Just(json!([])),
        1 => Just(json!({})),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => "[a-zA-Z0-9./:_-]{0,24}".prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Replaces the node reached by following `path` (each step picks a child by index, modulo the
/// number of children) with `with`; a path that reaches a leaf early replaces that leaf.
pub fn replace_at(value: &mut Value, path: &[usize], with: Value) {
    let Some((step, rest)) = path.split_first() else {
        *value = with;
        return;
    };
    match value {
        Value::Array(items) if !items.is_empty() => {
            let n = items.len();
            replace_at(&mut items[step % n], rest, with);
        }
        Value::Object(map) if !map.is_empty() => {
            let n = map.len();
            if let Some((_, child)) = map.iter_mut().nth(step % n) {
                replace_at(child, rest, with);
            }
        }
        leaf => *leaf = with,
    }
}

/// Deletes the key reached by `path` from its map, when the path ends in a map.
pub fn remove_at(value: &mut Value, path: &[usize]) {
    match (value, path) {
        (Value::Object(map), [last]) if !map.is_empty() => {
            let n = map.len();
            if let Some(key) = map.keys().nth(last % n).cloned() {
                map.remove(&key);
            }
        }
        (Value::Object(map), [step, rest @ ..]) if !map.is_empty() => {
            let n = map.len();
            if let Some((_, child)) = map.iter_mut().nth(step % n) {
                remove_at(child, rest);
            }
        }
        (Value::Array(items), [step, rest @ ..]) if !items.is_empty() => {
            let n = items.len();
            remove_at(&mut items[step % n], rest);
        }
        _ => {}
    }
}

/// One structural mutation of a document.
#[derive(Clone, Debug)]
pub enum Mutation {
    Replace(Vec<usize>, Value),
    Remove(Vec<usize>),
    /// The document twice, as a List: duplicates.
    Duplicate,
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let path = prop::collection::vec(0usize..64, 1..7);
    prop_oneof![
        5 => (path.clone(), hostile_value()).prop_map(|(p, v)| Mutation::Replace(p, v)),
        4 => path.prop_map(Mutation::Remove),
        1 => Just(Mutation::Duplicate),
    ]
}

pub fn mutate(doc: &Value, mutations: &[Mutation]) -> Value {
    let mut doc = doc.clone();
    for m in mutations {
        match m {
            Mutation::Replace(path, with) => replace_at(&mut doc, path, with.clone()),
            Mutation::Remove(path) => remove_at(&mut doc, path),
            Mutation::Duplicate => {
                doc = json!({"apiVersion": "v1", "kind": "List", "items": [doc.clone(), doc]});
            }
        }
    }
    doc
}

/// Byte-level damage to a text: flips, deletions, insertions and a cut.
#[derive(Clone, Debug)]
pub enum ByteEdit {
    Set(usize, u8),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Truncate(usize),
}

pub fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    let special = prop::sample::select(b":-[]{}'\"\n #&*!|>%@`\t\\,?".to_vec());
    prop_oneof![
        (any::<usize>(), prop_oneof![special.clone(), any::<u8>()])
            .prop_map(|(i, b)| ByteEdit::Set(i, b)),
        (any::<usize>(), 1usize..40).prop_map(|(i, n)| ByteEdit::Delete(i, n)),
        (any::<usize>(), prop::collection::vec(special, 1..6))
            .prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        any::<usize>().prop_map(ByteEdit::Truncate),
    ]
}

pub fn damage(text: &str, edits: &[ByteEdit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for edit in edits {
        let n = bytes.len().max(1);
        match edit {
            ByteEdit::Set(i, b) => {
                if let Some(x) = bytes.get_mut(i % n) {
                    *x = *b;
                }
            }
            ByteEdit::Delete(i, len) => {
                let at = (i % n).min(bytes.len());
                let end = (at + len).min(bytes.len());
                bytes.drain(at..end);
            }
            ByteEdit::Insert(i, b) => {
                let at = (i % n).min(bytes.len());
                bytes.splice(at..at, b.iter().copied());
            }
            ByteEdit::Truncate(i) => bytes.truncate(i % n),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Documents as one YAML stream (each a JSON object, which is YAML flow style).
pub fn yaml_stream(docs: &[Value]) -> String {
    docs.iter().map(|d| format!("---\n{d}\n")).collect()
}

//! `sliced dns` scenarios: every `fixtures/dns/*.yaml` is a cluster and a ConfigMap named
//! `sliced-dns-scenario` saying what `sliced dns -f FILE ARGS -o json` must print. Its `data`:
//! - `args`: flags and a NAME, space separated.
//! - `records`: a YAML list of `{name, type, data}`: exactly the records printed (TTL always 5).
//! - `reasons`: for `--explain`, the fields of the reasons given, exactly and in order.
//! - `names`: for `--explain`, the pod's names, as `records`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

type Triple = (String, String, String);

fn triples(list: &[Value]) -> BTreeSet<Triple> {
    (list.iter())
        .map(|r| {
            let text = |k: &str| match &r[k] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (text("name"), text("type"), text("data"))
        })
        .collect()
}

fn yaml_list(path: &Path, data: &serde_json::Map<String, Value>, key: &str) -> Option<Vec<Value>> {
    let text = data.get(key)?.as_str()?;
    let value: Value = serde_saphyr::from_str(text)
        .unwrap_or_else(|e| panic!("{}: data.{key}: {e}", path.display()));
    Some(value.as_array().cloned().unwrap_or_default())
}

/// What is wrong with one scenario's output, if anything.
fn check(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let data = documents
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "sliced-dns-scenario")
        .and_then(|d| d["data"].as_object().cloned())
        .unwrap_or_else(|| panic!("{}: no ConfigMap sliced-dns-scenario", path.display()));
    let args = data.get("args").and_then(Value::as_str).unwrap_or("");
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(["dns", "-o", "json", "-f"])
        .arg(path)
        .args(args.split_whitespace())
        .output()
        .expect("run sliced");
    if !out.status.success() {
        return Some(format!(
            "exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let printed: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: output is not JSON: {e}", path.display()));
    let mut problems = Vec::new();
    let mut compare = |what: &str, expected: Vec<Value>, actual: &Value| {
        let expected = triples(&expected);
        let actual = triples(actual.as_array().map_or(&[][..], Vec::as_slice));
        let extra: Vec<_> = actual.difference(&expected).collect();
        let lacking: Vec<_> = expected.difference(&actual).collect();
        if !extra.is_empty() || !lacking.is_empty() {
            problems.push(format!("{what}: extra {extra:#?}\nmissing {lacking:#?}"));
        }
    };
    if let Some(expected) = yaml_list(path, &data, "records") {
        compare("records", expected, &printed["records"]);
    }
    if let Some(expected) = yaml_list(path, &data, "names") {
        compare("names", expected, &printed["names"]);
    }
    if let Some(expected) = yaml_list(path, &data, "reasons") {
        let actual: Vec<&Value> = (printed["reasons"].as_array().into_iter().flatten())
            .map(|r| &r["field"])
            .collect();
        if expected.iter().collect::<Vec<_>>() != actual {
            problems.push(format!(
                "reasons: want {expected:?}, got {:#?}",
                printed["reasons"]
            ));
        }
    }
    (!problems.is_empty()).then(|| problems.join("\n"))
}

#[test]
fn dns_scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/dns");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures/dns")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "{} DNS scenarios", paths.len());
    let failed: Vec<String> = (paths.iter())
        .filter_map(|p| check(p).map(|problem| format!("{}: {problem}", p.display())))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        paths.len(),
        failed.join("\n\n")
    );
}

fn dns(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sliced"))
        .arg("dns")
        .args(args)
        .output()
        .expect("run sliced")
}

#[test]
fn malformed_input_and_unknown_targets_exit_2_naming_them() {
    let dir = std::env::temp_dir().join(format!("sliced-dns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\n\
         spec: {type: Sideways}\n",
    )
    .expect("write");
    let out = dns(&["-f", bad.to_str().expect("path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("spec.type"),
        "{stderr}"
    );

    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/dns/008-explain-sidecar-not-ready.yaml");
    let fixture = fixture.to_str().expect("path");
    let out = dns(&["-f", fixture, "--explain", "default/nobody"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("default/nobody"));
    let out = dns(&["-f", fixture, "--explain", "no-slash"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The text a person reads: the sidecar named, and the way out.
#[test]
fn explain_text_names_the_sidecar_that_is_not_ready() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/dns/008-explain-sidecar-not-ready.yaml");
    let out = dns(&[
        "-f",
        fixture.to_str().expect("path"),
        "--explain",
        "default/web-1",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not ready: istio-proxy"), "{text}");
    assert!(
        text.contains("spec.publishNotReadyAddresses false"),
        "{text}"
    );
}

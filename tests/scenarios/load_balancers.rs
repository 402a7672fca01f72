//! The service controller's scenarios: every `fixtures/load-balancers/*.yaml` is a cluster (with
//! its `IPAddressPool`s) and a ConfigMap named `sliced-scenario` saying what `sliced reconcile`
//! must do with it. Its `data`:
//! - `args`: flags; default `--controllers service-lb`.
//! - `patches`: a YAML list of the Service writes expected, in order, each matched partially
//!   (see `matcher`) against `{"verb", "subresource", "object"}`.
//! - `calls`: a YAML list of the provider calls expected (`loadBalancers`), in order, each
//!   `{service, call, hosts, ingress, error}` (`error` a substring, absent meaning none).
//! - `events`: a YAML list of `{service, type, reason, message}` (`message` a substring); the
//!   events must be exactly these, in order.
//! - `errors`: a YAML list of `{service, message}` (`message` a substring); without it, none.
//! - `rerun`: unless "false", the Services are given back with the patches applied (as the API
//!   server stores them) and a second run must patch nothing, and ensure every load balancer
//!   again with the same addresses: a restart moves no address.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::matcher;

struct Scenario {
    path: PathBuf,
    documents: Vec<Value>,
    config: serde_json::Map<String, Value>,
}

impl Scenario {
    fn load(path: &Path) -> Scenario {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
        let config = documents
            .iter()
            .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "sliced-scenario")
            .and_then(|d| d["data"].as_object().cloned())
            .unwrap_or_else(|| panic!("{}: no ConfigMap sliced-scenario", path.display()));
        Scenario {
            path: path.to_path_buf(),
            documents,
            config,
        }
    }

    fn data(&self, key: &str) -> Option<&str> {
        self.config.get(key).and_then(Value::as_str)
    }

    fn list(&self, key: &str) -> Option<Vec<Value>> {
        self.data(key).map(|text| {
            let value: Value = serde_saphyr::from_str(text)
                .unwrap_or_else(|e| panic!("{}: data.{key}: {e}", self.path.display()));
            value.as_array().cloned().unwrap_or_default()
        })
    }

    /// Runs `sliced reconcile -o json` over `documents` written to a temporary file.
    fn run(&self, documents: &[Value], suffix: &str) -> Value {
        let dir = std::env::temp_dir().join(format!("sliced-lb-scenario-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let stem = self.path.file_stem().expect("file name").to_string_lossy();
        let file = dir.join(format!("{stem}{suffix}.json"));
        let list = json!({"apiVersion": "v1", "kind": "List", "items": documents});
        std::fs::write(&file, serde_json::to_vec(&list).expect("json")).expect("write temp");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sliced"));
        cmd.args(["reconcile", "-o", "json", "-f"]).arg(&file);
        let args = self.data("args").unwrap_or("--controllers service-lb");
        cmd.args(args.split_whitespace());
        let out = cmd.output().expect("run sliced");
        assert!(
            out.status.success(),
            "{}: sliced reconcile exited {:?}: {}",
            self.path.display(),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{}: output is not JSON: {e}", self.path.display());
        })
    }
}

fn service_writes(out: &Value) -> Vec<Value> {
    (out["writes"].as_array().into_iter().flatten())
        .filter(|w| w["object"]["kind"] == "Service")
        .cloned()
        .collect()
}

/// `expected` against `actual` one by one, in order.
fn in_order(expected: &[Value], actual: &[Value]) -> bool {
    expected.len() == actual.len()
        && expected
            .iter()
            .zip(actual)
            .all(|(e, a)| matcher::matches(e, a, ""))
}

/// The calls, with `error` a substring and absent meaning none.
fn calls_match(expected: &[Value], actual: &[Value]) -> bool {
    expected.len() == actual.len()
        && expected.iter().zip(actual).all(|(e, a)| {
            ["service", "call", "hosts", "ingress"]
                .iter()
                .all(|k| e[*k].is_null() || e[*k] == a[*k])
                && match (e["error"].as_str(), a["error"].as_str()) {
                    (None, None) => true,
                    (Some(want), Some(got)) => got.contains(want),
                    _ => false,
                }
        })
}

fn events_match(expected: &[Value], actual: &[Value]) -> bool {
    expected.len() == actual.len()
        && expected.iter().zip(actual).all(|(want, got)| {
            ["service", "type", "reason"]
                .iter()
                .all(|k| want[*k].is_null() || want[*k] == got[*k])
                && want["message"]
                    .as_str()
                    .is_none_or(|m| got["message"].as_str().is_some_and(|g| g.contains(m)))
        })
}

/// The Services of `documents` with `patches` applied as the API server applies them to the
/// status subresource: finalizers replaced, ingress replaced.
fn patched(documents: &[Value], patches: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = documents.to_vec();
    for patch in patches {
        let o = &patch["object"];
        let (ns, name) = (&o["metadata"]["namespace"], &o["metadata"]["name"]);
        let Some(service) = out.iter_mut().find(|d| {
            d["kind"] == "Service"
                && d["metadata"]["name"] == *name
                && d["metadata"]["namespace"].as_str().unwrap_or("default") == ns
        }) else {
            continue;
        };
        if let Some(finalizers) = o["metadata"].get("finalizers") {
            service["metadata"]["finalizers"] = finalizers.clone();
        }
        if let Some(status) = o.get("status") {
            service["status"] = status.clone();
        }
    }
    out
}

fn check(path: &Path) {
    let s = Scenario::load(path);
    let out = s.run(&s.documents, "");
    let shown = || serde_json::to_string_pretty(&out).unwrap_or_default();
    let writes = service_writes(&out);
    let calls = out["loadBalancers"].as_array().cloned().unwrap_or_default();
    let events = out["events"].as_array().cloned().unwrap_or_default();
    let errors = out["errors"].as_array().cloned().unwrap_or_default();
    if let Some(expected) = s.list("patches") {
        assert!(
            in_order(&expected, &writes),
            "{}: patches\n{}",
            path.display(),
            shown()
        );
    }
    if let Some(expected) = s.list("calls") {
        assert!(
            calls_match(&expected, &calls),
            "{}: calls\n{}",
            path.display(),
            shown()
        );
    }
    if let Some(expected) = s.list("events") {
        assert!(
            events_match(&expected, &events),
            "{}: events\n{}",
            path.display(),
            shown()
        );
    }
    let expected_errors = s.list("errors").unwrap_or_default();
    let errors_match = expected_errors.len() == errors.len()
        && expected_errors.iter().all(|want| {
            errors.iter().any(|e| {
                e["service"] == want["service"]
                    && e["message"]
                        .as_str()
                        .zip(want["message"].as_str())
                        .is_some_and(|(got, sub)| got.contains(sub))
            })
        });
    assert!(errors_match, "{}: errors\n{}", path.display(), shown());

    if s.data("rerun") != Some("false") {
        let again = s.run(&patched(&s.documents, &writes), "-rerun");
        let rewrites = service_writes(&again);
        assert!(
            rewrites.is_empty(),
            "{}: a second run patched Services again: {rewrites:#?}",
            path.display()
        );
        let first: Vec<(&Value, &Value)> = calls
            .iter()
            .filter(|c| c["call"] == "ensure" && c["error"].is_null())
            .map(|c| (&c["service"], &c["ingress"]))
            .collect();
        let second = again["loadBalancers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (service, ingress) in first {
            let same = second.iter().any(|c| {
                c["service"] == *service && c["call"] == "ensure" && c["ingress"] == *ingress
            });
            assert!(
                same,
                "{}: after a restart {service} did not keep {ingress}: {second:#?}",
                path.display()
            );
        }
    }
}

fn paths() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/load-balancers");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/load-balancers")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no load-balancer scenarios found");
    paths
}

#[test]
fn load_balancer_scenarios() {
    let only = std::env::var("SCENARIO").ok();
    let mut failures = Vec::new();
    let paths = paths();
    for path in &paths {
        if only
            .as_deref()
            .is_some_and(|o| !path.to_string_lossy().contains(o))
        {
            continue;
        }
        if let Err(e) = std::panic::catch_unwind(|| check(path)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(msg);
        }
    }
    println!("{} load-balancer scenarios checked", paths.len());
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

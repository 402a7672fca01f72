//! Scenario tests: every `fixtures/scenarios/*.yaml` is a cluster snapshot plus a ConfigMap named
//! `sliced-scenario` that says how to run `sliced reconcile` on it and what must come out.
//!
//! The ConfigMap's `data`:
//! - `args`: extra flags, e.g. `--max-endpoints-per-slice 2`.
//! - `writes`: the number of EndpointSlice writes by verb, e.g. `create=1 update=0 delete=2`.
//! - `slices`: a YAML list of partial EndpointSlices; the slices that exist afterwards must match them
//!   one to one (see `matcher`).
//! - `endpoints-writes`: the number of Endpoints writes by verb.
//! - `endpoints`: a YAML list of partial Endpoints, matched like `slices`.
//! - `endpoints-sizes`: a YAML map from "namespace/name" of an Endpoints object to the sizes of its
//!   subsets in order, each "ready/notReady" (for objects too big to spell out).
//! - `pods-generate`: copies of a Pod of the file (see `generate`).
//! - `errors`: a YAML list of `{service, message}`, `message` a substring; without it, no errors.
//! - `events`: a YAML list of `{service, type, reason, message}` (`message` a substring); when given,
//!   the events recorded must be exactly these, in order.
//! - `idempotent`: "false" when a second run is expected to write (default: it must write nothing).
//! - `rerun-writes`: for a scenario that is not idempotent, the EndpointSlice writes by verb of the
//!   second run; `endpoints-rerun-writes` the same for Endpoints (default: none).
//!
//! Besides what a scenario states, every run must order each controller's slice writes as upstream
//! does. The EndpointSlice controller's (managed-by `endpointslice-controller.k8s.io`): per service
//! and address type creates, then updates, then deletes; and the deletes of slices whose address
//! type the service no longer has after all its other writes. The mirroring controller's
//! (`endpointslicemirroring-controller.k8s.io`), whose address types come from the Endpoints and
//! not the Service: per Endpoints key creates of every address type, then updates, then deletes;
//! and every slice it creates or updates is labelled with, and owned by, the Endpoints of its key.
//!
//! The other tests of whole manifests in and out live beside the scenarios, in this binary:
//! `one_driver` (the engine's pass that `reconcile` runs, against the driver it replaced, kept as
//! an independent reference), `manifest` (loading manifests: formats, Lists, errors), `upstream_objects` (taking over from
//! kube-controller-manager and handing back with zero writes) and `deploy_manifests` (the
//! manifests in `deploy/`).

mod deploy_manifests;
mod dns;
mod generate;
mod load_balancers;
mod manifest;
mod matcher;
mod one_driver;
#[path = "../support/snapshot_reference.rs"]
mod snapshot_reference;
mod upstream_objects;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const CONFIG_NAME: &str = "sliced-scenario";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";
const MIRRORING_CONTROLLER: &str = "endpointslicemirroring-controller.k8s.io";

struct Scenario {
    path: PathBuf,
    documents: Vec<Value>,
    config: serde_json::Map<String, Value>,
}

fn load(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    let config = documents
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == CONFIG_NAME)
        .and_then(|d| d["data"].as_object().cloned())
        .unwrap_or_else(|| panic!("{}: no ConfigMap {CONFIG_NAME}", path.display()));
    let mut s = Scenario {
        path: path.to_path_buf(),
        documents,
        config,
    };
    if let Some(spec) = yaml_data(&s, "pods-generate") {
        s.documents = generate::expand(&s.documents, &spec);
    }
    s
}

/// A temporary file holding `items` as a List, named after the scenario.
fn temp_list(s: &Scenario, items: Vec<Value>, suffix: &str) -> PathBuf {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let dir = std::env::temp_dir().join(format!("sliced-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let stem = s.path.file_stem().expect("file name").to_string_lossy();
    let file = dir.join(format!("{stem}{suffix}.json"));
    std::fs::write(&file, serde_json::to_vec(&list).expect("json")).expect("write temp");
    file
}

fn data<'a>(s: &'a Scenario, key: &str) -> Option<&'a str> {
    s.config.get(key).and_then(Value::as_str)
}

fn yaml_data(s: &Scenario, key: &str) -> Option<Value> {
    data(s, key).map(|text| {
        serde_saphyr::from_str(text)
            .unwrap_or_else(|e| panic!("{}: data.{key}: {e}", s.path.display()))
    })
}

/// Runs `sliced reconcile -o json` on a file with the scenario's args; returns the parsed output.
fn run(s: &Scenario, file: &Path) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sliced"));
    cmd.args(["reconcile", "-o", "json", "-f"]).arg(file);
    if let Some(args) = data(s, "args") {
        cmd.args(args.split_whitespace());
    }
    let out = cmd.output().expect("run sliced");
    assert!(
        out.status.success(),
        "{}: sliced reconcile exited {:?}: {}",
        s.path.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: output is not JSON: {e}\n{}",
            s.path.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The writes by verb of objects of `kind`.
fn verb_counts(writes: &[Value], kind: &str) -> String {
    let count = |v: &str| {
        writes
            .iter()
            .filter(|w| w["verb"] == v && w["object"]["kind"] == kind)
            .count()
    };
    format!(
        "create={} update={} delete={}",
        count("create"),
        count("update"),
        count("delete")
    )
}

/// The address types a service's slices have, from the scenario's Service (with upstream's legacy
/// fallback when it has no ipFamilies).
fn service_address_types(s: &Scenario, namespace: &str, name: &str) -> Option<Vec<String>> {
    let svc = s.documents.iter().find(|d| {
        d["kind"] == "Service"
            && d["metadata"]["name"] == name
            && d["metadata"]["namespace"].as_str().unwrap_or("default") == namespace
    })?;
    let families: Vec<String> = svc["spec"]["ipFamilies"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if !families.is_empty() {
        return Some(families);
    }
    Some(match svc["spec"]["clusterIP"].as_str() {
        Some(ip) if !ip.is_empty() && ip != "None" => {
            vec![if ip.contains(':') { "IPv6" } else { "IPv4" }.to_string()]
        }
        _ => vec!["IPv4".into(), "IPv6".into()],
    })
}

/// The EndpointSlice writes of the controller whose managed-by value is `manager`.
fn slice_writes_of<'a>(writes: &'a [Value], manager: &'a str) -> impl Iterator<Item = &'a Value> {
    writes.iter().filter(move |w| {
        w["object"]["kind"] == "EndpointSlice"
            && w["object"]["metadata"]["labels"][MANAGED_BY] == manager
    })
}

/// Every slice write is labelled with the managed-by value of a controller sliced replaces, so
/// that the checks below see all of them.
fn check_managers(s: &Scenario, writes: &[Value]) {
    for w in writes
        .iter()
        .filter(|w| w["object"]["kind"] == "EndpointSlice")
    {
        let manager = &w["object"]["metadata"]["labels"][MANAGED_BY];
        assert!(
            *manager == ENDPOINTSLICE_CONTROLLER || *manager == MIRRORING_CONTROLLER,
            "{}: a write of a slice managed by {manager}: {w:#}",
            s.path.display()
        );
    }
}

/// The EndpointSlice controller: deletes of slices of an address type the service no longer has
/// come after its other writes.
fn check_unsupported_last(s: &Scenario, writes: &[Value]) {
    let mut done_with: Vec<String> = Vec::new();
    for w in slice_writes_of(writes, ENDPOINTSLICE_CONTROLLER) {
        let o = &w["object"];
        let ns = o["metadata"]["namespace"].as_str().unwrap_or("default");
        let svc = o["metadata"]["labels"]["kubernetes.io/service-name"]
            .as_str()
            .unwrap_or("");
        let key = format!("{ns}/{svc}");
        let Some(types) = service_address_types(s, ns, svc) else {
            continue;
        };
        let supported = types.iter().any(|t| o["addressType"] == t.as_str());
        if !supported {
            done_with.push(key);
        } else {
            assert!(
                !done_with.contains(&key),
                "{}: a write for {key} after a delete of an unsupported address type: {writes:#?}",
                s.path.display()
            );
        }
    }
}

/// Creates, then updates, then deletes: for the EndpointSlice controller within one service and
/// address type, for the mirroring controller within one Endpoints key, across address types
/// (upstream's mirroring `finalize` writes every create before any update).
fn check_order(s: &Scenario, writes: &[Value]) {
    let rank = |v: &Value| match v.as_str() {
        Some("create") => 0,
        Some("update") => 1,
        _ => 2,
    };
    let mut last: Vec<(String, i32)> = Vec::new();
    let slice_writes = slice_writes_of(writes, ENDPOINTSLICE_CONTROLLER)
        .map(|w| (w, false))
        .chain(slice_writes_of(writes, MIRRORING_CONTROLLER).map(|w| (w, true)));
    for (w, mirrored) in slice_writes {
        let o = &w["object"];
        let key = format!(
            "{}/{}/{}",
            o["metadata"]["namespace"].as_str().unwrap_or(""),
            o["metadata"]["labels"][SERVICE_NAME].as_str().unwrap_or(""),
            if mirrored {
                MIRRORING_CONTROLLER
            } else {
                o["addressType"].as_str().unwrap_or("")
            }
        );
        let r = rank(&w["verb"]);
        match last.iter_mut().find(|(k, _)| *k == key) {
            Some((_, prev)) => {
                assert!(
                    *prev <= r,
                    "{}: writes out of order for {key}: {writes:#?}",
                    s.path.display()
                );
                *prev = r;
            }
            None => last.push((key, r)),
        }
    }
}

/// The mirroring controller: a slice it creates or updates carries the name of an Endpoints of
/// the scenario as its service-name label and an owner reference to that Endpoints (its uid, as
/// the controller).
fn check_mirrored_owner(s: &Scenario, writes: &[Value]) {
    for w in slice_writes_of(writes, MIRRORING_CONTROLLER).filter(|w| w["verb"] != "delete") {
        let meta = &w["object"]["metadata"];
        let ns = meta["namespace"].as_str().unwrap_or("default");
        let name = meta["labels"][SERVICE_NAME].as_str().unwrap_or("");
        let endpoints = s.documents.iter().find(|d| {
            d["kind"] == "Endpoints"
                && d["metadata"]["name"] == name
                && d["metadata"]["namespace"].as_str().unwrap_or("default") == ns
        });
        let Some(endpoints) = endpoints else {
            panic!(
                "{}: a mirrored slice written for {ns}/{name}, which has no Endpoints: {w:#}",
                s.path.display()
            );
        };
        let owner = json!([{
            "apiVersion": "v1",
            "kind": "Endpoints",
            "name": name,
            "uid": endpoints["metadata"]["uid"].as_str().unwrap_or(""),
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
        assert!(
            meta["ownerReferences"] == owner,
            "{}: a mirrored slice of {ns}/{name} not owned by its Endpoints: {w:#}",
            s.path.display()
        );
    }
}

fn check_scenario(path: &Path) {
    let s = load(path);
    let input = if data(&s, "pods-generate").is_some() {
        temp_list(&s, s.documents.clone(), "")
    } else {
        path.to_path_buf()
    };
    let out = run(&s, &input);
    let writes = out["writes"].as_array().cloned().unwrap_or_default();
    let objects = out["objects"].as_array().cloned().unwrap_or_default();
    let errors = out["errors"].as_array().cloned().unwrap_or_default();
    let shown = || serde_json::to_string_pretty(&out).unwrap_or_default();

    if let Some(expected) = data(&s, "writes") {
        assert_eq!(
            verb_counts(&writes, "EndpointSlice"),
            expected.split_whitespace().collect::<Vec<_>>().join(" "),
            "{}: writes by verb\n{}",
            path.display(),
            shown()
        );
    }
    if let Some(expected) = data(&s, "endpoints-writes") {
        assert_eq!(
            verb_counts(&writes, "Endpoints"),
            expected.split_whitespace().collect::<Vec<_>>().join(" "),
            "{}: Endpoints writes by verb\n{}",
            path.display(),
            shown()
        );
    }
    check_managers(&s, &writes);
    check_order(&s, &writes);
    check_unsupported_last(&s, &writes);
    check_mirrored_owner(&s, &writes);

    let slices: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "EndpointSlice")
        .cloned()
        .collect();
    if let Some(expected) = yaml_data(&s, "slices") {
        let expected = expected.as_array().cloned().unwrap_or_default();
        if let Err(why) = matcher::match_all(&expected, &slices) {
            panic!("{}: slices afterwards: {why}\n{}", path.display(), shown());
        }
    }

    check_endpoints(&s, &objects, &shown);

    let expected_errors = yaml_data(&s, "errors")
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    assert_eq!(
        errors.len(),
        expected_errors.len(),
        "{}: errors\n{}",
        path.display(),
        shown()
    );
    for want in &expected_errors {
        let found = errors.iter().any(|e| {
            e["service"] == want["service"]
                && e["message"]
                    .as_str()
                    .zip(want["message"].as_str())
                    .is_some_and(|(got, sub)| got.contains(sub))
        });
        assert!(
            found,
            "{}: no error like {want}\n{}",
            path.display(),
            shown()
        );
    }

    if let Some(expected) = yaml_data(&s, "events") {
        let expected = expected.as_array().cloned().unwrap_or_default();
        let events = out["events"].as_array().cloned().unwrap_or_default();
        let same = expected.len() == events.len()
            && expected.iter().zip(&events).all(|(want, got)| {
                ["service", "type", "reason"]
                    .iter()
                    .all(|k| want[*k].is_null() || want[*k] == got[*k])
                    && want["message"]
                        .as_str()
                        .is_none_or(|m| got["message"].as_str().is_some_and(|g| g.contains(m)))
            });
        assert!(same, "{}: events\n{}", path.display(), shown());
    }

    if data(&s, "idempotent") != Some("false") || data(&s, "rerun-writes").is_some() {
        // What the first run left must need no write: upstream's "no write when unchanged".
        let mut items: Vec<Value> = s
            .documents
            .iter()
            .filter(|d| d["kind"] != "EndpointSlice" && d["kind"] != "Endpoints")
            .filter(|d| d["kind"] != "ConfigMap")
            .cloned()
            .collect();
        items.extend(objects.iter().cloned());
        let file = temp_list(&s, items, "-rerun");
        let again = run(&s, &file);
        let rewrites = again["writes"].as_array().cloned().unwrap_or_default();
        for (kind, key) in [
            ("EndpointSlice", "rerun-writes"),
            ("Endpoints", "endpoints-rerun-writes"),
        ] {
            let expected = data(&s, key).unwrap_or("create=0 update=0 delete=0");
            assert_eq!(
                verb_counts(&rewrites, kind),
                expected.split_whitespace().collect::<Vec<_>>().join(" "),
                "{}: a second run wrote {kind} again: {}",
                path.display(),
                serde_json::to_string_pretty(&rewrites).unwrap_or_default()
            );
        }
    }
}

/// The Endpoints objects afterwards: `endpoints` and `endpoints-sizes`.
fn check_endpoints(s: &Scenario, objects: &[Value], shown: &dyn Fn() -> String) {
    let endpoints: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Endpoints")
        .collect();
    if let Some(expected) = yaml_data(s, "endpoints") {
        let expected = expected.as_array().cloned().unwrap_or_default();
        let actual: Vec<Value> = endpoints.iter().map(|o| (*o).clone()).collect();
        if let Err(why) = matcher::match_all(&expected, &actual) {
            panic!(
                "{}: Endpoints afterwards: {why}\n{}",
                s.path.display(),
                shown()
            );
        }
    }
    if let Some(expected) = yaml_data(s, "endpoints-sizes") {
        for (key, want) in expected.as_object().expect("endpoints-sizes: a map") {
            let found = endpoints.iter().find(|o| {
                let m = &o["metadata"];
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap_or(""),
                    m["name"].as_str().unwrap_or("")
                ) == *key
            });
            let sizes: Vec<String> = found
                .and_then(|o| o["subsets"].as_array())
                .map(|subsets| {
                    subsets
                        .iter()
                        .map(|x| {
                            let n = |k: &str| x[k].as_array().map_or(0, Vec::len);
                            format!("{}/{}", n("addresses"), n("notReadyAddresses"))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let want: Vec<String> = want
                .as_array()
                .map(|w| {
                    w.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                found.is_some(),
                "{}: no Endpoints {key}\n{}",
                s.path.display(),
                shown()
            );
            assert_eq!(sizes, want, "{}: subset sizes of {key}", s.path.display());
        }
    }
}

/// Every `fixtures/scenarios/*.yaml`, in name order.
fn scenario_paths() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/scenarios")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no scenarios found");
    paths
}

#[test]
fn scenarios() {
    let paths = scenario_paths();
    let only = std::env::var("SCENARIO").ok();
    let mut failures = Vec::new();
    for path in &paths {
        if only
            .as_deref()
            .is_some_and(|o| !path.to_string_lossy().contains(o))
        {
            continue;
        }
        let result = std::panic::catch_unwind(|| check_scenario(path));
        if let Err(e) = result {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(msg);
        }
    }
    println!("{} scenarios checked", paths.len());
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

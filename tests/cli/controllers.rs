//! `sliced reconcile --controllers`: which controllers run, and how Endpoints appear in the output.

use std::process::{Command, Output};

use serde_json::Value;

fn sliced(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run sliced")
}

const EXAMPLE: &str = "fixtures/examples/web.yaml";

fn json(args: &[&str]) -> Value {
    let mut all = vec!["reconcile", "-o", "json", "-f", EXAMPLE];
    all.extend_from_slice(args);
    let out = sliced(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn kinds(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("array")
        .iter()
        .map(|o| {
            let o = if o["object"].is_null() {
                o
            } else {
                &o["object"]
            };
            o["kind"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

#[test]
fn by_default_every_controller_runs_and_every_object_has_its_kind() {
    let doc = json(&[]);
    assert_eq!(kinds(&doc["writes"]), ["EndpointSlice", "Endpoints"]);
    assert_eq!(kinds(&doc["objects"]), ["EndpointSlice", "Endpoints"]);
    let created = &doc["writes"][1]["object"];
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(created["metadata"]["name"], "web");
    assert!(created["metadata"]["resourceVersion"].is_null());
    assert_eq!(doc["objects"][0]["apiVersion"], "discovery.k8s.io/v1");
    assert_eq!(doc, json(&["--controllers", "all"]));
    assert_eq!(
        doc,
        json(&["--controllers", "endpointslice,endpoints,mirroring"])
    );
}

#[test]
fn one_controller_alone() {
    let doc = json(&["--controllers", "endpoints"]);
    assert_eq!(kinds(&doc["writes"]), ["Endpoints"]);
    let doc = json(&["--controllers", "endpointslice"]);
    assert_eq!(kinds(&doc["writes"]), ["EndpointSlice"]);
    // The example has no custom Endpoints: mirroring alone has nothing to write.
    let doc = json(&["--controllers", "mirroring"]);
    assert_eq!(doc["writes"], Value::Array(Vec::new()));
}

#[test]
fn yaml_lists_slices_then_endpoints() {
    let out = sliced(&["reconcile", "-f", EXAMPLE]);
    assert!(out.status.success());
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).expect("YAML");
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["EndpointSlice", "Endpoints"]);
    assert_eq!(
        docs[1]["subsets"][0]["addresses"][0]["ip"], "10.244.1.10",
        "{docs:?}"
    );
}

#[test]
fn unknown_controller_exits_2_naming_it() {
    let out = sliced(&[
        "reconcile",
        "--controllers",
        "endpoints,replicaset",
        "-f",
        EXAMPLE,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("replicaset") && err.contains("--controllers"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn mirroring_max_endpoints_per_subset_is_at_least_1() {
    for bad in ["0", "-1", "many"] {
        let flag = format!("--mirroring-max-endpoints-per-subset={bad}");
        let out = sliced(&["reconcile", &flag, "-f", EXAMPLE]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--mirroring-max-endpoints-per-subset"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    // Accepted, and without custom Endpoints it changes nothing.
    assert_eq!(
        json(&["--mirroring-max-endpoints-per-subset", "1"]),
        json(&[])
    );
}

//! `sliced reconcile` with the service controller: the README's example, the `loadBalancers` key,
//! and pool files that cannot be used exit 2 naming the file, document and field.

use std::process::{Command, Output};

use serde_json::Value;

fn sliced(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run sliced")
}

fn temp(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sliced-cli-lb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

const EXAMPLE: &str = "fixtures/examples/load-balancer.yaml";
const POOLS: &str = "fixtures/examples/pools.yaml";

#[test]
fn the_readme_example_gets_an_address_from_the_pool() {
    let out = sliced(&[
        "reconcile",
        "-f",
        EXAMPLE,
        "--lb-pools",
        POOLS,
        "--controllers",
        "service-lb",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let calls = doc["loadBalancers"].as_array().expect("loadBalancers");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["service"], "default/shop");
    assert_eq!(calls[0]["call"], "ensure");
    assert_eq!(calls[0]["hosts"], serde_json::json!(["node-a"]));
    assert_eq!(
        calls[0]["ingress"],
        serde_json::json!([{"ip": "192.0.2.1"}])
    );
    assert!(calls[0].get("error").is_none());
    let writes = doc["writes"].as_array().expect("writes");
    assert_eq!(writes.len(), 2);
    for w in writes {
        assert_eq!(w["verb"], "patch");
        assert_eq!(w["object"]["kind"], "Service");
        assert_eq!(w["object"]["apiVersion"], "v1");
    }
    assert_eq!(
        writes[1]["object"]["status"]["loadBalancer"]["ingress"][0]["ip"],
        "192.0.2.1"
    );
    // The same with the pools given as input objects, and with every controller.
    let all = sliced(&["reconcile", "-f", EXAMPLE, "-f", POOLS, "-o", "json"]);
    let all: Value = serde_json::from_slice(&all.stdout).expect("JSON");
    assert_eq!(all["loadBalancers"], doc["loadBalancers"]);
}

#[test]
fn without_pools_the_service_waits_with_a_reason() {
    let out = sliced(&["reconcile", "-f", EXAMPLE, "-o", "json"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let call = &doc["loadBalancers"][0];
    assert!(
        call["error"]
            .as_str()
            .is_some_and(|e| e.contains("--lb-pools")),
        "{call}"
    );
    assert_eq!(doc["errors"][0]["service"], "default/shop");
    let reasons: Vec<&str> = (doc["events"].as_array().into_iter().flatten())
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert_eq!(
        reasons,
        [
            "EnsuringLoadBalancer",
            "AllocationFailed",
            "SyncLoadBalancerFailed"
        ]
    );
}

#[test]
fn a_foreign_class_is_left_alone_unless_it_is_ours() {
    let example =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE))
            .expect("example");
    let classed = example.replace(
        "  type: LoadBalancer\n",
        "  type: LoadBalancer\n  loadBalancerClass: example.com/lb\n",
    );
    assert_ne!(classed, example);
    let file = temp("classed.yaml", &classed);
    let run = |extra: &[&str]| -> Value {
        let mut args = vec![
            "reconcile",
            "-f",
            &file,
            "--lb-pools",
            POOLS,
            "--controllers",
            "service-lb",
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_slice(&sliced(&args).stdout).expect("JSON")
    };
    let foreign = run(&[]);
    assert_eq!(foreign["loadBalancers"], serde_json::json!([]));
    assert_eq!(foreign["writes"], serde_json::json!([]));
    let ours = run(&["--lb-class", "example.com/lb"]);
    assert_eq!(ours["loadBalancers"][0]["ingress"][0]["ip"], "192.0.2.1");
}

#[test]
fn unusable_pools_exit_2_naming_the_place() {
    let bad_range = temp(
        "bad-range.yaml",
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\n\
         spec:\n  addresses: [192.0.2.9-192.0.2.1]\n",
    );
    let out = sliced(&["reconcile", "-f", EXAMPLE, "--lb-pools", &bad_range]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad-range.yaml"), "{err}");
    assert!(err.contains("spec.addresses[0]"), "{err}");

    let overlap = temp(
        "overlap.yaml",
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: other}\n\
         spec:\n  addresses: [192.0.2.8/29]\n",
    );
    let out = sliced(&[
        "reconcile",
        "-f",
        EXAMPLE,
        "--lb-pools",
        POOLS,
        "--lb-pools",
        &overlap,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("overlaps"), "{err}");

    let missing = sliced(&[
        "reconcile",
        "-f",
        EXAMPLE,
        "--lb-pools",
        "no/such/pools.yaml",
    ]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn no_load_balancer_service_no_key() {
    let out = sliced(&[
        "reconcile",
        "-f",
        "fixtures/examples/web.yaml",
        "-o",
        "json",
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(doc.get("loadBalancers").is_none());
}

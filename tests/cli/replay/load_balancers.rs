//! The service controller through `sliced simulate --events`: node sync calls the provider when
//! the backends move and not on a heartbeat, and a failed sync is retried with upstream's backoff
//! (5 s, doubling), for ever.

use serde_json::Value;

use super::{simulate, trace_file};

const POOLS: &str = "apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lab}
spec: {addresses: [192.0.2.0/28], avoidBuggyIPs: true}
";

fn node(at: &str, name: &str, extra: &str) -> String {
    format!(
        "- at: {at}
  apply: {{apiVersion: v1, kind: Node, metadata: {{name: {name}{extra}}}, spec: {{providerID: 'kind://{name}'}}, status: {{allocatable: {{cpu: '4'}}, conditions: [{{type: Ready, status: 'True'}}]}}}}
"
    )
}

fn lb_service(spec_extra: &str) -> String {
    format!(
        "- at: 0s
  apply:
    apiVersion: v1
    kind: Service
    metadata: {{name: web, namespace: default, uid: 7c1d2e3f-0000-4000-8000-000000000001}}
    spec: {{type: LoadBalancer, selector: {{app: web}}, clusterIP: 10.96.0.10, ipFamilies: [IPv4], ports: [{{name: http, port: 80, targetPort: 8080, nodePort: 30080}}]{spec_extra}}}
"
    )
}

/// (seconds, result) of the service controller's syncs.
fn lb_syncs(out: &Value) -> Vec<(f64, String)> {
    (out["syncs"].as_array().into_iter().flatten())
        .filter(|s| s["controller"] == "service-lb")
        .map(|s| {
            (
                s["at"].as_f64().unwrap_or(-1.0),
                s["result"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn reasons(out: &Value) -> Vec<String> {
    (out["events"].as_array().into_iter().flatten())
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn node_sync_follows_the_backends_not_the_heartbeats() {
    let pools = trace_file("lb-replay", "pools.yaml", POOLS);
    let mut events = node("0s", "n1", "") + &lb_service("");
    events += &node("10s", "n2", "");
    // A heartbeat: the allocatable CPU moved, nothing a load balancer reads.
    events += &node("20s", "n2", "").replace("cpu: '4'", "cpu: '3900m'");
    events += &node(
        "30s",
        "n1",
        ", labels: {node.kubernetes.io/exclude-from-external-load-balancers: 'true'}",
    );
    let out = simulate(
        &events,
        &[
            "--controllers",
            "service-lb",
            "--lb-pools",
            pools.to_str().expect("path"),
        ],
    );
    let ok = |at: f64| (at, "success".to_owned());
    assert_eq!(lb_syncs(&out), [ok(0.0), ok(10.0), ok(30.0)], "{out:#}");
    assert_eq!(
        reasons(&out),
        [
            "EnsuringLoadBalancer",
            "IPAllocated",
            "EnsuredLoadBalancer",
            "UpdatedLoadBalancer",
            "UpdatedLoadBalancer",
        ]
    );
}

#[test]
fn a_failed_sync_backs_off_from_five_seconds() {
    let pools = trace_file("lb-replay", "pools.yaml", POOLS);
    // An address no pool has: every sync fails, and the Service keeps waiting.
    let events = node("0s", "n1", "") + &lb_service(", loadBalancerIP: 198.51.100.7");
    let out = simulate(
        &events,
        &[
            "--controllers",
            "service-lb",
            "--lb-pools",
            pools.to_str().expect("path"),
            "--until",
            "100s",
            super::UNSETTLED,
            "default/web",
        ],
    );
    let failed = |at: f64| (at, "error".to_owned());
    assert_eq!(
        lb_syncs(&out),
        [
            failed(0.0),
            failed(5.0),
            failed(15.0),
            failed(35.0),
            failed(75.0)
        ],
        "{out:#}"
    );
    let allocation_failures = reasons(&out)
        .iter()
        .filter(|r| *r == "AllocationFailed")
        .count();
    assert_eq!(allocation_failures, 5);
}

/// Restarts, leader changes, lost and late events, refused writes and others' edits: every
/// LoadBalancer Service ends with an address, and none ever had its address replaced by another.
#[test]
fn under_chaos_every_service_gets_an_address_and_keeps_it() {
    let spec = trace_file(
        "lb-chaos",
        "spec.yaml",
        "pods: 2000\nservices: 80\nnamespaces: 4\nhuge_services: 0\nmax_service_pods: 100\nload_balancer_fraction: 0.3\n",
    );
    // Seed 9 restarts a replica while a recreated Service waits for an address: without the
    // restore from status before the first sync, two addresses move.
    for seed in ["7", "8", "9"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sliced"))
            .args([
                "simulate", "-o", "json", "--steps", "3000", "--faults", "chaos",
            ])
            .args(["--seed", seed, "--spec"])
            .arg(&spec)
            .output()
            .expect("run sliced");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "seed {seed}: {stderr}");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let lb = &doc["load_balancers"];
        let services = lb["services"].as_u64().expect("services");
        assert!(services >= 20, "seed {seed}: {lb}");
        assert_eq!(lb["with_address"], services, "seed {seed}: {lb}");
        assert_eq!(lb["moved_addresses"], 0, "seed {seed}: {lb}");
        let restarts = doc["faults"]["injected"]["restarts"].as_u64();
        assert!(restarts > Some(0), "seed {seed}");
    }
}

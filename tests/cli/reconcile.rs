//! The `sliced reconcile` command-line contract: flags, output shapes and exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn sliced(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sliced"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn sliced");
    if let Some(input) = stdin {
        // sliced may exit before reading (a usage error), closing the pipe: not a test failure.
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes());
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().expect("wait for sliced")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop, uid: 11111111-2222-4333-8444-555555555555}
spec:
  selector: {app: api}
  clusterIP: 10.96.0.20
  ipFamilies: [IPv4]
  ports: [{name: http, port: 80, targetPort: 8080}]
";

fn pod(name: &str, ip: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: shop, uid: uid-{name}, labels: {{app: api}}}}
spec: {{nodeName: n1, containers: [{{name: c, image: x}}]}}
status:
  phase: Running
  podIPs: [{{ip: {ip}}}]
  conditions: [{{type: Ready, status: \"True\"}}]
"
    )
}

const NODE: &str = "apiVersion: v1
kind: Node
metadata: {name: n1}
";

fn cluster(pods: &[(&str, &str)]) -> String {
    let mut docs = vec![NODE.to_string(), SERVICE.to_string()];
    docs.extend(pods.iter().map(|(n, ip)| pod(n, ip)));
    docs.join("---\n")
}

/// A malformed input exits 2 with a message that names the file, the document and the field.
fn assert_malformed(yaml: &str, wants: &[&str]) {
    let out = sliced(&["reconcile", "-f", "-"], Some(yaml));
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    for want in wants {
        assert!(err.contains(want), "stderr lacks {want:?}: {err}");
    }
    assert!(
        out.stdout.is_empty(),
        "nothing is printed on malformed input"
    );
}

#[test]
fn json_output_has_writes_objects_and_errors() {
    let out = sliced(
        &[
            "reconcile",
            "--controllers",
            "endpointslice",
            "-o",
            "json",
            "-f",
            "-",
        ],
        Some(&cluster(&[("api-0", "10.0.0.1"), ("api-1", "10.0.0.2")])),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let writes = doc["writes"].as_array().expect("writes");
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["verb"], "create");
    let sent = &writes[0]["object"];
    assert_eq!(sent["kind"], "EndpointSlice");
    assert_eq!(sent["metadata"]["generateName"], "api-");
    assert!(
        sent["metadata"]["name"].is_null(),
        "a create is sent without a name"
    );
    let objects = doc["objects"].as_array().expect("objects");
    assert_eq!(objects.len(), 1);
    assert!(
        objects[0]["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("api-") && n.len() == "api-".len() + 5)
    );
    assert_eq!(objects[0]["endpoints"].as_array().map(Vec::len), Some(2));
    assert_eq!(doc["errors"], Value::Array(vec![]));
}

#[test]
fn yaml_output_is_a_sorted_stream_of_slices() {
    let mut input = cluster(&[("api-0", "10.0.0.1")]);
    input.push_str(
        "---
apiVersion: v1
kind: Service
metadata: {name: aaa, namespace: shop, uid: 22222222-2222-4333-8444-555555555555}
spec: {selector: {app: none}, clusterIP: 10.96.0.21, ipFamilies: [IPv4]}
",
    );
    let out = sliced(
        &["reconcile", "--controllers", "endpointslice", "-f", "-"],
        Some(&input),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML stream");
    let names: Vec<&str> = docs
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names.len(), 2, "{text}");
    assert!(names[0].starts_with("aaa-") && names[1].starts_with("api-"));
    assert!(docs.iter().all(|d| d["kind"] == "EndpointSlice"));
}

#[test]
fn several_files_and_a_list_are_read_together() {
    let dir = std::env::temp_dir().join(format!("sliced-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let a = dir.join("a.yaml");
    let b = dir.join("b.json");
    std::fs::write(&a, format!("{NODE}---\n{SERVICE}")).expect("write");
    let pods: Value = serde_json::json!({
        "apiVersion": "v1", "kind": "List",
        "items": [serde_saphyr::from_str::<Value>(&pod("api-0", "10.0.0.1")).expect("pod")]
    });
    std::fs::write(&b, pods.to_string()).expect("write");
    let out = sliced(
        &[
            "reconcile",
            "-o",
            "json",
            "-f",
            a.to_str().expect("path"),
            "-f",
            b.to_str().expect("path"),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        doc["objects"][0]["endpoints"][0]["addresses"][0],
        "10.0.0.1"
    );
}

#[test]
fn other_kinds_are_skipped_with_a_warning() {
    let input = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: shop}}\ndata: {{a: b}}\n",
        cluster(&[])
    );
    let out = sliced(&["reconcile", "-f", "-"], Some(&input));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning") && err.contains("ConfigMap"),
        "{err}"
    );
}

#[test]
fn max_endpoints_per_slice_is_honoured_and_bounded() {
    let input = cluster(&[("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")]);
    let out = sliced(
        &[
            "reconcile",
            "--controllers",
            "endpointslice",
            "-o",
            "json",
            "--max-endpoints-per-slice",
            "2",
            "-f",
            "-",
        ],
        Some(&input),
    );
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut sizes: Vec<usize> = doc["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| o["endpoints"].as_array().map_or(0, Vec::len))
        .collect();
    sizes.sort();
    assert_eq!(sizes, vec![1, 2]);
    for bad in ["0", "1001"] {
        let out = sliced(
            &["reconcile", "--max-endpoints-per-slice", bad, "-f", "-"],
            Some(&input),
        );
        assert_eq!(out.status.code(), Some(2));
    }
}

#[test]
fn sync_errors_are_reported_not_fatal() {
    // The pod's node does not exist: the pod is skipped and the service's sync fails.
    let input = format!("{SERVICE}---\n{}", pod("api-0", "10.0.0.1"));
    let out = sliced(&["reconcile", "-o", "json", "-f", "-"], Some(&input));
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["errors"][0]["service"], "shop/api");
    let message = doc["errors"][0]["message"].as_str().expect("message");
    assert!(message.contains("Node n1 Not Found"), "{message}");
}

#[test]
fn malformed_yaml_exits_2() {
    assert_malformed(
        &format!("{SERVICE}---\nkind: Pod\nmetadata: [unclosed\n"),
        &["-", "document 2"],
    );
}

#[test]
fn invalid_pod_ip_exits_2() {
    assert_malformed(
        &cluster(&[("api-0", "10.0.0.300")]),
        &[
            "document 3",
            "Pod shop/api-0",
            "status.podIPs[0].ip",
            "10.0.0.300",
        ],
    );
}

#[test]
fn port_out_of_range_exits_2() {
    assert_malformed(
        &SERVICE.replace("port: 80,", "port: 70000,"),
        &["document 1", "spec.ports[0].port", "70000"],
    );
}

#[test]
fn unknown_ip_family_exits_2() {
    assert_malformed(
        &SERVICE.replace("[IPv4]", "[IPv5]"),
        &["document 1", "spec.ipFamilies[0]", "IPv5"],
    );
}

#[test]
fn missing_file_exits_2_naming_it() {
    let out = sliced(&["reconcile", "-f", "no/such/file.yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such/file.yaml"));
}

#[test]
fn readme_example_prints_its_slice() {
    let out = sliced(
        &[
            "reconcile",
            "--controllers",
            "endpointslice",
            "-f",
            "fixtures/examples/web.yaml",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).expect("YAML");
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["endpoints"].as_array().map(Vec::len), Some(3));
}

/// Lease flags that client-go's NewLeaderElector refuses exit 2 with a message naming them,
/// before any connection is tried (the kubeconfig named does not exist).
#[test]
fn run_refuses_the_lease_flags_client_go_refuses() {
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["--leader-elect-retry-period", "0s"],
            &["--leader-elect-retry-period", "greater than zero"],
        ),
        (
            &[
                "--leader-elect-renew-deadline",
                "10s",
                "--leader-elect-retry-period",
                "9s",
            ],
            &[
                "--leader-elect-renew-deadline",
                "--leader-elect-retry-period",
                "1.2",
            ],
        ),
        (
            &[
                "--leader-elect-lease-duration",
                "10s",
                "--leader-elect-renew-deadline",
                "10s",
            ],
            &[
                "--leader-elect-lease-duration",
                "--leader-elect-renew-deadline",
            ],
        ),
        (
            &[
                "--leader-elect-lease-duration",
                "0s",
                "--leader-elect-renew-deadline",
                "0s",
            ],
            &["--leader-elect-lease-duration"],
        ),
    ];
    for (flags, wants) in cases {
        let mut args = vec![
            "run",
            "--kubeconfig",
            "no/such/kubeconfig",
            "--metrics-bind-address",
            "",
        ];
        args.extend_from_slice(flags);
        let out = sliced(&args, None);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        for want in wants {
            assert!(
                err.contains(want),
                "{flags:?}: stderr lacks {want:?}: {err}"
            );
        }
        assert!(
            !err.contains("kubeconfig"),
            "{flags:?}: it tried to connect: {err}"
        );
    }
}

/// `sliced run` as a process, its kubeconfig pointing at `server`, its stderr in a file: not a
/// terminal.
struct RunProcess {
    child: std::process::Child,
    log: std::path::PathBuf,
}

/// Lease flags that make a lease request time out after 1 s (half the renew deadline).
const SHORT_LEASE: [&str; 6] = [
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "200ms",
];

impl RunProcess {
    fn start(name: &str, server: &str) -> RunProcess {
        let dir = std::env::temp_dir().join(format!("sliced-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\n"
            ),
        )
        .expect("kubeconfig");
        let log = dir.join("stderr");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sliced"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--metrics-bind-address", ""])
            .args(SHORT_LEASE)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn sliced run");
        RunProcess { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log has a line with every one of `wants`; false after `bound`.
    fn logs_within(&self, wants: &[&str], bound: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + bound;
        while std::time::Instant::now() < deadline {
            if self
                .log()
                .lines()
                .any(|l| wants.iter().all(|w| l.contains(w)))
            {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    }

    /// Sends SIGTERM and waits at most `bound`: its exit code, or None (then it is killed).
    fn terminate_within(&mut self, bound: std::time::Duration) -> Option<i32> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        let deadline = std::time::Instant::now() + bound;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

/// Every log line of a failed request names what failed; none comes twice (kube's own ERROR
/// line beside sliced's) and none carries colour codes.
fn assert_logged_once_without_colour(log: &str) {
    assert!(
        !log.contains('\u{1b}'),
        "colour codes off a terminal:\n{log}"
    );
    assert!(!log.contains("ERROR"), "a failure logged twice:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[cfg(unix)]
#[test]
fn run_against_nothing_listening_backs_off_and_logs_each_failure_once() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let mut run = RunProcess::start("refused", &format!("http://127.0.0.1:{port}"));
    std::thread::sleep(std::time::Duration::from_secs(3));
    let code = run.terminate_within(std::time::Duration::from_secs(2));
    let log = run.log();
    assert_eq!(code, Some(0), "no clean exit within 2 s of SIGTERM:\n{log}");
    assert_logged_once_without_colour(&log);
    let refused = |l: &&str| l.contains("Connection refused");
    // The lease: attempts a retry period apart (200 ms) at first, the pause doubling after each
    // failure; at a fixed period it would be about 15 in 3 s.
    let lease: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("getting the lease kube-system/sliced"))
        .collect();
    assert!(
        (1..=7).contains(&lease.len()) && lease.iter().all(refused),
        "{} lease failures in 3 s:\n{log}",
        lease.len()
    );
    // Each watch: its list, with exponential backoff from 0.8 s (jittered), at most 4 in 3 s.
    for kind in ["Node", "Service", "Pod", "EndpointSlice", "Endpoints"] {
        let failed: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("watch of {kind}: list failed")))
            .collect();
        assert!(
            (1..=5).contains(&failed.len()) && failed.iter().all(refused),
            "{} list failures of {kind} in 3 s:\n{log}",
            failed.len()
        );
    }
    // Nothing else failed in between.
    let unexplained: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && !l.contains("Connection refused"))
        .collect();
    assert!(unexplained.is_empty(), "{unexplained:#?}");
}

#[cfg(unix)]
#[test]
fn run_against_a_silent_server_logs_timeouts_and_stops_promptly_on_sigterm() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    // Accepts every connection and never answers.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let mut run = RunProcess::start("silent", &format!("http://{address}"));
    let timed_out = run.logs_within(
        &[
            "getting the lease kube-system/sliced",
            "no answer from the API server within 1s",
        ],
        std::time::Duration::from_secs(6),
    );
    let started = std::time::Instant::now();
    let code = run.terminate_within(std::time::Duration::from_secs(2));
    let log = run.log();
    assert!(timed_out, "no lease timeout logged in 6 s:\n{log}");
    assert_eq!(code, Some(0), "no clean exit within 2 s of SIGTERM:\n{log}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert_logged_once_without_colour(&log);
}

//! Large and hostile traces: a long trace loads (it was refused by the YAML parser's default
//! budget), absurd ones are refused cleanly, and no time a library caller can give makes the
//! replay spin at the end of virtual time.

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sliced::engine::EngineOptions;
use sliced::kube::trace_file::load_trace;
use sliced::replay::{ReplayOptions, replay};

use super::{cluster, pod_step, trace_file};

fn write(name: &str, text: &str) -> std::path::PathBuf {
    trace_file("limits", name, text)
}

/// 20,000 steps, about 2 MB: ten pods flapping ready and not ready, in block style as a tool
/// would write them.
fn long_trace() -> String {
    let mut s = cluster(10);
    for step in 0..20_000 - 12 {
        let i = step % 10;
        let ready = if (step / 10) % 2 == 0 {
            "False"
        } else {
            "True"
        };
        s.push_str(&format!(
            "- at: {at}ms
  apply:
    apiVersion: v1
    kind: Pod
    metadata:
      name: web-{i}
      namespace: default
      uid: pod-uid-{i}
      labels:
        app: web
    spec:
      nodeName: n1
      containers:
        - name: c
          image: x
    status:
      phase: Running
      podIP: 10.0.0.{ip}
      conditions:
        - type: Ready
          status: '{ready}'
",
            at = 1000 + step * 100,
            ip = i + 1,
        ));
    }
    s
}

#[test]
fn a_2_mb_trace_of_20000_steps_loads_and_replays() {
    let text = long_trace();
    assert!(text.len() > 2_000_000, "{} bytes", text.len());
    let steps = load_trace("long.yaml", &text)
        .expect("a long trace loads")
        .steps;
    assert_eq!(steps.len(), 20_000);
    let file = write("long.yaml", &text);
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(["simulate", "-o", "json", "--controllers", "endpointslice"])
        .arg("--events")
        .arg(&file)
        .output()
        .expect("run sliced");
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out["summary"]["steps"], 20_000);
}

#[test]
fn absurd_traces_are_refused_cleanly_and_quickly() {
    // A billion laughs: nine levels of ten aliases.
    let mut bomb = String::from("- &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..10 {
        let p = level - 1;
        bomb.push_str(&format!(
            "- &a{level} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let deep = format!(
        "- at: 0s\n  apply: {}{}\n",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let deep_json = format!("[{}{}]", "[".repeat(5000), "]".repeat(5000));
    for (name, text, want) in [
        (
            "bomb.yaml",
            bomb.as_str(),
            "bomb.yaml: invalid YAML: too large: more than 250000 values at line 6, column 13",
        ),
        (
            "deep.yaml",
            deep.as_str(),
            "deep.yaml: invalid YAML: recursion limit exceeded at line 2, column 265",
        ),
        (
            "deep.json",
            deep_json.as_str(),
            "deep.json: invalid YAML: recursion limit exceeded at line 1, column 256",
        ),
    ] {
        let file = write(name, text);
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
            .args(["simulate", "-o", "json", "--events"])
            .arg(&file)
            .output()
            .expect("run sliced");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        let path = file.display().to_string();
        let line = err.lines().next().unwrap_or_default().replace(&path, name);
        assert_eq!(line, format!("error: {want}"), "{name}");
        assert!(started.elapsed() < Duration::from_secs(10), "{name}");
    }
}

/// Runs `replay` on a thread: a replay that spins fails the test instead of hanging it.
fn replay_within(
    steps: Vec<sliced::replay::Step>,
    options: ReplayOptions,
    deadline: Duration,
) -> sliced::replay::ReplayResult {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(replay(&steps, &options));
    });
    receive
        .recv_timeout(deadline)
        .unwrap_or_else(|_| panic!("the replay still runs after {deadline:?}"))
}

#[test]
fn work_due_beyond_the_end_of_virtual_time_ends_the_replay() {
    const YEAR: u64 = 365 * 24 * 3600;
    // A step at 100 years, and a batch period a library caller can give (the flags refuse it):
    // the sync would be due at 600 years, past the virtual clock's 584. The replay asked for that
    // time forever.
    let text = format!("{}{}", cluster(0), pod_step("876000h", 0, true));
    let steps = load_trace("late.yaml", &text).expect("trace").steps;
    for batch in [500 * YEAR, 490 * YEAR] {
        let options = ReplayOptions {
            engine: EngineOptions {
                batch_period: Duration::from_secs(batch),
                endpoints_batch_period: Duration::from_secs(batch),
                ..EngineOptions::default()
            },
            ..ReplayOptions::default()
        };
        let result = replay_within(steps.clone(), options, Duration::from_secs(30));
        assert!(
            result.out_of_time,
            "batch {batch}s: ended at {:?}, {} syncs",
            result.ended_at, result.stats.syncs
        );
        assert!(
            result.ended_at > Duration::from_secs(584 * YEAR),
            "batch {batch}s"
        );
        assert!(result.unsettled.is_none());
    }
}

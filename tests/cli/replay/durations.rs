//! Durations a user can type or a trace can hold: beyond 100 years they are refused with exit 2
//! and a message (they used to panic, or spin the replay forever); up to it, a replay ends.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{cluster, fxhash};

/// Runs `sliced` with a deadline: a replay that spins fails the test instead of hanging it. Its
/// output goes to files, which never fill up as an unread pipe would.
fn sliced_within(args: &[&str], deadline: Duration) -> Output {
    let dir = std::env::temp_dir().join(format!("sliced-durations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let name = format!("{:x}", fxhash(&args.join(" ")));
    let (out_path, err_path) = (
        dir.join(format!("{name}.out")),
        dir.join(format!("{name}.err")),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(&out_path).expect("out")))
        .stderr(Stdio::from(std::fs::File::create(&err_path).expect("err")))
        .spawn()
        .expect("run sliced");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("sliced {args:?} still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).expect("read out"),
        stderr: std::fs::read(&err_path).expect("read err"),
    }
}

fn trace_file(text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sliced-durations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join(format!("{:x}.yaml", fxhash(text)));
    std::fs::write(&file, text).expect("write");
    file.to_string_lossy().into_owned()
}

#[test]
fn durations_beyond_a_hundred_years_exit_2_with_a_message() {
    let ok_trace = trace_file(&cluster(1));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["simulate".into(), "--batch-period".into(), "1e20".into()],
            "--batch-period",
        ),
        (
            vec!["simulate".into(), "--batch-period".into(), "1e12".into()],
            "--batch-period",
        ),
        (
            vec!["simulate".into(), "--until".into(), "1e20".into()],
            "--until",
        ),
        (
            vec![
                "run".into(),
                "--leader-elect-lease-duration".into(),
                "1e20".into(),
            ],
            "--leader-elect-lease-duration",
        ),
        (
            vec![
                "run".into(),
                "--endpointslice-updates-batch-period".into(),
                "1e20".into(),
            ],
            "--endpointslice-updates-batch-period",
        ),
        (
            vec![
                "simulate".into(),
                "--events".into(),
                ok_trace,
                "--batch-period".into(),
                "99999999999999999999h".into(),
            ],
            "--batch-period",
        ),
    ];
    let step = |at: &str| {
        format!("- at: {at}\n  apply: {{apiVersion: v1, kind: Namespace, metadata: {{name: a}}}}\n")
    };
    let mut all = cases;
    for at in ["1e20", "1e12", "300000000h", "99999999999999999999h"] {
        all.push((
            vec!["simulate".into(), "--events".into(), trace_file(&step(at))],
            "step 1: at",
        ));
    }
    for (args, names) in all {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = sliced_within(&args, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(names) && err.contains("at most 100 years") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_trace_spanning_a_hundred_years_replays_to_its_end() {
    let trace = format!(
        "{}- at: 876000h\n  apply: {{apiVersion: v1, kind: Namespace, metadata: {{name: late}}}}\n",
        cluster(3)
    );
    let file = trace_file(&trace);
    for faults in ["none", "chaos"] {
        let out = sliced_within(
            &[
                "simulate",
                "-o",
                "json",
                "--events",
                &file,
                "--batch-period",
                "876000h",
                "--faults",
                faults,
            ],
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "{faults}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let ended = summary["summary"]["ended_at"].as_f64().unwrap_or(0.0);
        assert!(ended >= 876_000.0 * 3600.0, "{faults}: ended at {ended}");
    }
}

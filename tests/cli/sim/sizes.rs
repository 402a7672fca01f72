//! Spec sizes a user can type: a cluster beyond memory is refused by name (it panicked with a
//! capacity overflow), and `simulate --spec` exits 2 naming the file and the field, as it does for
//! a spec file that is not there (it exited 1).

use std::process::Command;

use sliced::sim::{ClusterSpec, MAX_NODES, MAX_PODS, SpecError};

fn refused_field(text: &str) -> (&'static str, String) {
    match ClusterSpec::from_yaml(text) {
        Err(SpecError::Invalid { field, message }) => (field, message),
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn sizes_beyond_memory_are_refused_by_field() {
    let max = u64::MAX;
    for (text, field) in [
        (format!("nodes_per_zone: {max}\n"), "nodes_per_zone"),
        (
            format!("nodes_per_zone: {}\n", max / 3 + 1),
            "nodes_per_zone",
        ),
        (
            format!("zones: 5\nnodes_per_zone: {}\n", MAX_NODES / 5 + 1),
            "nodes_per_zone",
        ),
        (format!("pods: {max}\n"), "pods"),
        (format!("pods: {}\n", MAX_PODS + 1), "pods"),
        (format!("services: {max}\n"), "services"),
        (format!("namespaces: {max}\n"), "namespaces"),
        (format!("huge_service_pods: {max}\n"), "huge_service_pods"),
    ] {
        let (got, message) = refused_field(&text);
        assert_eq!(got, field, "{text}: {message}");
        assert!(
            message.contains("more than a simulated cluster can hold"),
            "{text}: {message}"
        );
    }
    // At the bound, the sizes are accepted (other checks aside).
    let at_bound = ClusterSpec {
        zones: 5,
        nodes_per_zone: MAX_NODES / 5,
        ..ClusterSpec::default()
    };
    assert_eq!(at_bound.validate_sizes(), Ok(()));
}

/// `sliced simulate` with `args`: exit code and standard error.
fn simulate(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("run sliced");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn spec_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sliced-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write");
    file.display().to_string()
}

#[test]
fn simulate_refuses_a_spec_beyond_memory_with_exit_2() {
    let huge = spec_file("huge.yaml", &format!("nodes_per_zone: {}\n", u64::MAX - 1));
    let (code, err) = simulate(&["--spec", &huge]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: {huge}: cluster spec: nodes_per_zone: 3 zones of {} nodes is more than a simulated cluster can hold",
            u64::MAX - 1
        )),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let (code, err) = simulate(&["--pods", &u64::MAX.to_string()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: --pods: cluster spec: pods: {} is more than a simulated cluster can hold (at most {MAX_PODS})",
            u64::MAX
        )),
        "{err}"
    );
    let small = spec_file("small.yaml", "pods: 10\nservices: 5\nhuge_services: 0\n");
    let (code, err) = simulate(&["--spec", &small, "--services", &u64::MAX.to_string()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("error: --services: cluster spec: services: "),
        "{err}"
    );
}

#[test]
fn a_missing_spec_file_exits_2_naming_it() {
    let missing = std::env::temp_dir()
        .join(format!("sliced-no-such-spec-{}.yaml", std::process::id()))
        .display()
        .to_string();
    let (code, err) = simulate(&["--spec", &missing]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(&format!("error: {missing}: cannot read the cluster spec: ")),
        "{err}"
    );
}

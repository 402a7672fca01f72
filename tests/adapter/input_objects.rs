//! Services, Pods, Nodes and Namespaces written as a recorded trace writes them
//! (`sliced::kube::convert::{PodJson, ServiceJson, NodeJson, NamespaceJson}`) read back through the
//! trace loader as exactly the objects they were: what makes the replay of a recorded trace exact.

use std::path::{Path, PathBuf};

use sliced::change::Change;
use sliced::kube::convert::{NamespaceJson, NodeJson, PodJson, ServiceJson};
use sliced::kube::trace_file::load_trace;
use sliced::sim::{ClusterSpec, generate};
use sliced::snapshot::Snapshot;

/// One step applying `object`, as the recorder writes it, loaded back.
fn read_back(object: &impl serde::Serialize) -> Change {
    let json = serde_json::to_string(object).unwrap();
    let text = format!("- {{\"at\":\"0s\",\"apply\":{json}}}\n");
    let mut steps = match load_trace("round-trip", &text) {
        Ok(trace) => trace.steps,
        Err(e) => panic!("{e}\n{json}"),
    };
    assert_eq!(steps.len(), 1);
    steps.pop().unwrap().as_change().unwrap().clone()
}

/// Every input object of `snapshot` reads back equal; returns how many were checked.
fn assert_round_trips(source: &str, snapshot: &Snapshot) -> usize {
    for pod in &snapshot.pods {
        match read_back(&PodJson(pod)) {
            Change::Pod(back) => assert_eq!(
                &back,
                pod,
                "{source}: {:?}",
                serde_json::to_string(&PodJson(pod))
            ),
            other => panic!("{source}: {other:?}"),
        }
    }
    for service in &snapshot.services {
        match read_back(&ServiceJson(service)) {
            Change::Service(back) => assert_eq!(
                &back,
                service,
                "{source}: {}",
                serde_json::to_string(&ServiceJson(service)).unwrap()
            ),
            other => panic!("{source}: {other:?}"),
        }
    }
    for node in &snapshot.nodes {
        match read_back(&NodeJson(node)) {
            Change::Node(back) => assert_eq!(&back, node, "{source}"),
            other => panic!("{source}: {other:?}"),
        }
    }
    for ns in &snapshot.namespaces {
        match read_back(&NamespaceJson(ns)) {
            Change::Namespace(back) => assert_eq!(&back, ns, "{source}"),
            other => panic!("{source}: {other:?}"),
        }
    }
    snapshot.pods.len() + snapshot.services.len() + snapshot.nodes.len() + snapshot.namespaces.len()
}

#[test]
fn generated_clusters_read_back_exactly() {
    for seed in 1..=4 {
        let spec = ClusterSpec {
            seed,
            pods: 3_000,
            services: 120,
            dual_stack_fraction: 0.3,
            named_port_fraction: 0.5,
            headless_fraction: 0.2,
            load_balancer_fraction: 0.2,
            not_ready_fraction: 0.2,
            ..ClusterSpec::default()
        };
        let cluster = generate(&spec);
        assert!(assert_round_trips(&format!("seed {seed}"), &cluster.snapshot) > 3_000);
    }
}

fn manifests(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            manifests(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
}

#[test]
fn fixtures_and_upstreams_objects_read_back_exactly() {
    let mut files = Vec::new();
    manifests(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        &mut files,
    );
    manifests(
        Path::new("/work/shared/reference/upstream-objects"),
        &mut files,
    );
    files.sort();
    let mut checked = 0;
    for file in &files {
        // Fixtures of refused input, and files of other shapes (expected outputs), are not ours.
        let Ok(manifest) = sliced::kube::manifest::load_file(file) else {
            continue;
        };
        checked += assert_round_trips(&file.display().to_string(), &manifest.objects);
    }
    assert!(checked > 1_000, "only {checked} objects checked");
}

/// What recording costs the engine's thread per pod event: the line serialised and buffered (the
/// file written a buffer at a time). Printed for the record; the bound only catches a blunder.
#[test]
fn recording_a_pod_event_is_cheap() {
    use std::sync::Arc;
    use std::time::Instant;

    use sliced::engine::{Engine, EngineOptions};
    use sliced::kube::trace_record::{Limits, RecordTrace, TraceRecorder};
    use sliced::queue::VirtualClock;

    let cluster = generate(&ClusterSpec {
        pods: 20_000,
        services: 200,
        named_port_fraction: 0.5,
        ..ClusterSpec::default()
    });
    let dir = std::env::temp_dir().join(format!("sliced-record-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.yaml");
    let mut recorder = TraceRecorder::create(&RecordTrace {
        path: path.clone(),
        limits: Limits::default(),
    })
    .unwrap();
    let engine = Engine::new(EngineOptions::default(), Arc::new(VirtualClock::new()));
    let changes: Vec<Change> = cluster
        .snapshot
        .pods
        .iter()
        .cloned()
        .map(Change::Pod)
        .collect();
    let started = Instant::now();
    for round in 0..3 {
        for change in &changes {
            recorder.change(change, &engine);
        }
        if round == 0 {
            recorder.finish();
        }
    }
    let took = started.elapsed();
    recorder.finish();
    let events = 3 * changes.len();
    let per_event = took / events as u32;
    let bytes = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "recording a pod event: {per_event:?} ({events} events, {} bytes a line)",
        bytes / events as u64
    );
    assert_eq!(recorder.steps(), events as u64);
    assert!(per_event.as_micros() < 100, "{per_event:?} per pod event");
    std::fs::remove_dir_all(&dir).unwrap();
}

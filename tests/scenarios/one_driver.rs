//! `sliced reconcile` runs the engine (`Engine::sync_once`). The driver it replaced, kept as an
//! independent reference (`tests/support/snapshot_reference.rs`), must agree with it on every
//! scenario: the same writes in the same order, the same errors, events and objects, with the
//! scenario's own flags and with every controller at once.

use sliced::kube::manifest;
use sliced::reconcile::{Options, mirroring};
use sliced::snapshot::{Controllers, SnapshotResult, reconcile_snapshot_full};

use super::snapshot_reference;
use super::{data, load, scenario_paths, temp_list};

/// The options a scenario's `args` give (the four flags scenarios use).
fn options_of(args: &str) -> (Options, mirroring::Options, Controllers) {
    let mut options = Options::default();
    let mut mirroring = mirroring::Options::default();
    let mut controllers = Controllers::ALL;
    let mut words = args.split_whitespace();
    while let Some(flag) = words.next() {
        let mut value = || words.next().expect("a value after the flag");
        match flag {
            "--controllers" => controllers = Controllers::parse(value()).expect("controllers"),
            "--max-endpoints-per-slice" => {
                options.max_endpoints_per_slice = value().parse().expect("a number");
            }
            "--mirroring-max-endpoints-per-subset" => {
                mirroring.max_endpoints_per_subset = value().parse().expect("a number");
            }
            "--prefer-same-traffic-distribution" => options.prefer_same_traffic_distribution = true,
            "--no-prefer-same-traffic-distribution" => {
                options.prefer_same_traffic_distribution = false;
            }
            other => panic!("a flag this test does not know: {other}"),
        }
    }
    (options, mirroring, controllers)
}

fn assert_same(what: &str, engine: &SnapshotResult, reference: &SnapshotResult) {
    assert_eq!(engine.writes, reference.writes, "{what}: writes");
    assert_eq!(engine.errors, reference.errors, "{what}: errors");
    assert_eq!(engine.events, reference.events, "{what}: events");
    assert_eq!(engine.objects, reference.objects, "{what}: objects");
}

#[test]
fn the_engine_pass_makes_the_reference_drivers_writes_on_every_scenario() {
    let mut compared = 0;
    for path in scenario_paths() {
        let s = load(&path);
        let file = temp_list(&s, s.documents.clone(), "-one-driver");
        let snapshot = manifest::load_file(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .objects;
        let own = options_of(data(&s, "args").unwrap_or(""));
        let all = (own.0.clone(), own.1.clone(), Controllers::ALL);
        for (options, mirroring, controllers) in [own, all] {
            let what = format!("{} with {controllers:?}", path.display());
            let engine = reconcile_snapshot_full(&snapshot, &options, &mirroring, controllers, 3);
            let reference = snapshot_reference::reconcile_snapshot(
                &snapshot,
                &options,
                &mirroring,
                controllers,
                3,
            );
            assert_same(&what, &engine, &reference);
            compared += 1;
        }
    }
    assert!(compared >= 2 * 100, "{compared} runs compared");
}

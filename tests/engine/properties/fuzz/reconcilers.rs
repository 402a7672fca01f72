//! The reconcilers on hostile snapshots: whatever the decoders accept, one sync of every
//! controller never panics, makes the writes the independent reference driver makes
//! (`tests/support/snapshot_reference.rs`), and a second sync over its result writes nothing.

use proptest::prelude::*;

use sliced::reconcile::{Options, mirroring};
use sliced::sink::Object;
use sliced::snapshot::{Controllers, Snapshot, reconcile_snapshot_full};

use super::corpus::{FIXTURES, Mutation, documents, mutate, mutation, yaml_stream};
use crate::snapshot_reference;

/// One sync of every controller over `snapshot`, then another over the objects it left: the second
/// must write nothing.
pub fn reconcile_twice(snapshot: &Snapshot) -> Result<(), TestCaseError> {
    for max in [1, 100] {
        let options = Options {
            max_endpoints_per_slice: max,
            prefer_same_traffic_distribution: true,
        };
        let mirroring = mirroring::Options {
            max_endpoints_per_subset: max,
        };
        // The reference driver knows the three controllers of endpoints.
        let endpoints = Controllers::ENDPOINT_CONTROLLERS;
        let first = reconcile_snapshot_full(snapshot, &options, &mirroring, endpoints, 1);
        let reference =
            snapshot_reference::reconcile_snapshot(snapshot, &options, &mirroring, endpoints, 1);
        prop_assert_eq!(&first.writes, &reference.writes, "max {}: writes", max);
        prop_assert_eq!(&first.errors, &reference.errors, "max {}: errors", max);
        prop_assert_eq!(&first.events, &reference.events, "max {}: events", max);
        prop_assert_eq!(&first.objects, &reference.objects, "max {}: objects", max);
        // The service controller beside them: it never panics, and changes none of their writes.
        let all = reconcile_snapshot_full(snapshot, &options, &mirroring, Controllers::ALL, 1);
        prop_assert_eq!(&all.writes, &first.writes, "max {}: writes, all", max);
        prop_assert_eq!(&all.objects, &first.objects, "max {}: objects, all", max);
        let mut again = snapshot.clone();
        again.endpoint_slices.clear();
        again.endpoints.clear();
        for object in first.objects {
            match object {
                Object::EndpointSlice(s) => again.endpoint_slices.push((*s).clone()),
                Object::Endpoints(e) => again.endpoints.push((*e).clone()),
            }
        }
        let second = reconcile_snapshot_full(&again, &options, &mirroring, endpoints, 2);
        let writes: Vec<String> = second
            .writes
            .iter()
            .map(|w| format!("{:?} {}", w.verb, w.sent.meta().name))
            .collect();
        prop_assert!(
            second.writes.is_empty(),
            "max {max}: a second sync wrote {writes:?}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Several fixtures at once, each with its objects mutated: services, pods, nodes, slices and
    /// Endpoints that meet in ways no single fixture has.
    #[test]
    fn merged_and_mutated_fixtures_reconcile_to_a_fixed_point(
        picks in prop::collection::vec((any::<usize>(), any::<usize>(), prop::collection::vec(mutation(), 0..3)), 1..4),
    ) {
        let mut all = Snapshot::default();
        for (i, which, mutations) in picks {
            let mutations: Vec<Mutation> = mutations;
            let (name, text) = &FIXTURES[i % FIXTURES.len()];
            let mut docs = documents(text);
            if docs.is_empty() {
                continue;
            }
            let n = docs.len();
            docs[which % n] = mutate(&docs[which % n], &mutations);
            if let Ok(manifest) = sliced::kube::manifest::load_str(name, &yaml_stream(&docs)) {
                all.merge(manifest.objects);
            }
        }
        reconcile_twice(&all)?;
    }
}

/// What the fuzz found first: the same Service twice in one input was synced twice, leaving a
/// stale slice and an Endpoints created then updated. The later object wins, as for every kind.
#[test]
fn the_same_service_twice_is_synced_once_as_the_later_one() {
    let (name, text) = FIXTURES
        .iter()
        .find(|(name, _)| name.ends_with("001-fresh-service-one-slice.yaml"))
        .expect("fixture");
    let docs: Vec<serde_json::Value> = documents(text)
        .iter()
        .map(|d| mutate(d, &[Mutation::Duplicate]))
        .collect();
    let manifest = sliced::kube::manifest::load_str(name, &yaml_stream(&docs)).expect("loads");
    assert!(manifest.objects.services.len() >= 2, "duplicated");
    reconcile_twice(&manifest.objects).expect("a fixed point");
}

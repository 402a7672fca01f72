//! The object decoders: the manifest loader (`sliced reconcile`'s input, and the objects of trace
//! steps) and the conversions of the API's objects that `sliced run`'s watches decode.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use proptest::prelude::*;
use serde_json::Value;

use sliced::kube::convert::{
    WatchedPod, endpoint_slice_from_k8s, endpoints_from_k8s, node_from_k8s, pod_from_fields,
    pod_from_k8s, pod_from_watched, service_from_k8s,
};
use sliced::kube::manifest::load_str;
use sliced::kube::protobuf;

use super::corpus::{
    ByteEdit, FIXTURES, Mutation, byte_edit, damage, documents, mutate, mutation, yaml_stream,
};
use super::reconcilers::reconcile_twice;

const FILE: &str = "fuzz.yaml";

/// Loads `text`; an error must name the file. What loads is reconciled, twice.
fn load_and_reconcile(text: &str) -> Result<(), TestCaseError> {
    match load_str(FILE, text) {
        Ok(manifest) => reconcile_twice(&manifest.objects),
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                message.starts_with(&format!("{FILE}:")),
                "an error that does not name the file: {message}"
            );
            Ok(())
        }
    }
}

/// Every kind the watches decode, from one document: none of them may panic, whatever it holds.
fn convert_as_every_kind(doc: &Value) {
    if let Ok(pod) = serde_json::from_value::<WatchedPod>(doc.clone()) {
        let _ = pod_from_watched(&pod);
    }
    if let Ok(pod) = serde_json::from_value::<core::Pod>(doc.clone()) {
        let _ = pod_from_k8s(&pod);
    }
    if let Ok(service) = serde_json::from_value::<core::Service>(doc.clone()) {
        let _ = service_from_k8s(&service);
    }
    if let Ok(node) = serde_json::from_value::<core::Node>(doc.clone()) {
        let _ = node_from_k8s(&node);
    }
    if let Ok(slice) = serde_json::from_value::<discovery::EndpointSlice>(doc.clone()) {
        let _ = endpoint_slice_from_k8s(&slice);
    }
    if let Ok(endpoints) = serde_json::from_value::<core::Endpoints>(doc.clone()) {
        let _ = endpoints_from_k8s(&endpoints);
    }
}

fn fixture(i: usize) -> &'static (String, String) {
    &FIXTURES[i % FIXTURES.len()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Text broken at the byte level: bad YAML, cut documents, stray indicators.
    #[test]
    fn damaged_text_is_read_or_refused_by_name(
        i in any::<usize>(),
        edits in prop::collection::vec(byte_edit(), 1..8),
    ) {
        let edits: Vec<ByteEdit> = edits;
        load_and_reconcile(&damage(&fixture(i).1, &edits))?;
    }

    /// Well-formed documents with hostile values and missing fields, as YAML (JSON flow style).
    #[test]
    fn hostile_objects_are_read_or_refused_by_name(
        i in any::<usize>(),
        which in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mutations: Vec<Mutation> = mutations;
        let mut docs = documents(&fixture(i).1);
        prop_assume!(!docs.is_empty());
        let n = docs.len();
        docs[which % n] = mutate(&docs[which % n], &mutations);
        load_and_reconcile(&yaml_stream(&docs))?;
    }

    /// The watches' conversions, on the same hostile documents.
    #[test]
    fn watch_conversions_never_panic(
        i in any::<usize>(),
        which in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let docs = documents(&fixture(i).1);
        prop_assume!(!docs.is_empty());
        let doc = mutate(&docs[which % docs.len()], &mutations);
        convert_as_every_kind(&doc);
    }

    /// The protobuf decoders on bytes of any shape, bare and enveloped: an error or an object,
    /// never a panic. (`tests/adapter/protobuf_pod.rs` cuts and flips the bytes of a real pod.)
    #[test]
    fn protobuf_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut enveloped = b"k8s\0".to_vec();
        enveloped.extend_from_slice(&bytes);
        let _ = protobuf::pod_fields(&bytes).and_then(|f| pod_from_fields(&f));
        let _ = protobuf::pod_object(&enveloped).and_then(|f| pod_from_fields(&f));
        let _ = protobuf::node(&bytes).and_then(|n| node_from_k8s(&n));
        let _ = protobuf::endpoint_slice(&bytes).and_then(|s| endpoint_slice_from_k8s(&s));
        let _ = protobuf::endpoints(&bytes).and_then(|e| endpoints_from_k8s(&e));
        let _ = protobuf::watch_event(&bytes);
        let _ = protobuf::list(&enveloped, "PodList");
        let mut frames = protobuf::Frames::default();
        frames.push(&bytes);
        while let Ok(Some(_)) = frames.next_frame() {}
    }
}

/// The fuzz means something only if much of what it makes is read: mutations that every loader
/// refuses would test the error path alone.
#[test]
fn most_mutations_still_reach_the_reconcilers() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut tree = |strategy: &dyn Fn(&mut TestRunner) -> bool| {
        let loaded = (0..1000).filter(|_| strategy(&mut runner)).count();
        loaded as f64 / 1000.0
    };
    let structural = tree(&|runner| {
        let Ok(case) = (
            any::<usize>(),
            any::<usize>(),
            prop::collection::vec(mutation(), 1..4),
        )
            .new_tree(runner)
        else {
            return false;
        };
        let (i, which, mutations) = case.current();
        let mut docs = documents(&fixture(i).1);
        let n = docs.len().max(1);
        if let Some(doc) = docs.get_mut(which % n) {
            *doc = mutate(doc, &mutations);
        }
        load_str(FILE, &yaml_stream(&docs)).is_ok_and(|m| !m.objects.is_empty())
    });
    let damaged = tree(&|runner| {
        let Ok(case) = (any::<usize>(), prop::collection::vec(byte_edit(), 1..8)).new_tree(runner)
        else {
            return false;
        };
        let (i, edits) = case.current();
        load_str(FILE, &damage(&fixture(i).1, &edits)).is_ok_and(|m| !m.objects.is_empty())
    });
    assert!(
        structural > 0.2,
        "{structural} of structural mutations read"
    );
    assert!(damaged > 0.08, "{damaged} of damaged texts read");
}

//! A pod decoded from protobuf (`src/kube/protobuf/`) converts to exactly the model pod its JSON
//! form converts to, errors included: every fixture pod, the real-shaped one, and the edge cases of
//! `watched_pod.rs`, each encoded by prost from upstream's messages. Malformed bytes are errors,
//! never panics.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use sliced::kube::convert::{pod_from_fields, pod_from_k8s};
use sliced::kube::protobuf::{self, Frames};

use crate::protobuf_objects;
use crate::real_pods;
use crate::watched_pod::fixture_pods;

fn same_conversion(pod: &core::Pod, origin: &str) {
    let bytes = protobuf_objects::pod_object(pod);
    let decoded = protobuf::pod_object(&bytes).and_then(|f| pod_from_fields(&f));
    assert_eq!(decoded, pod_from_k8s(&whole_seconds(pod)), "{origin}");
}

/// The pod with its times in whole seconds, as the API server's protobuf carries them (upstream's
/// `metav1.Time` writes no nanoseconds); a fixture may hold a fraction its JSON kept.
fn whole_seconds(pod: &core::Pod) -> core::Pod {
    let cut = |t: &mut Option<Time>| {
        if let Some(time) = t {
            time.0 = jiff::Timestamp::from_second(time.0.as_second()).unwrap_or(time.0);
        }
    };
    let mut pod = pod.clone();
    cut(&mut pod.metadata.creation_timestamp);
    cut(&mut pod.metadata.deletion_timestamp);
    for c in pod
        .status
        .iter_mut()
        .flat_map(|s| s.conditions.iter_mut().flatten())
    {
        cut(&mut c.last_transition_time);
    }
    pod
}

fn typed(value: serde_json::Value, origin: &str) -> core::Pod {
    match serde_json::from_value(value) {
        Ok(p) => p,
        Err(e) => panic!("{origin}: {e}"),
    }
}

#[test]
fn every_fixture_pod_converts_the_same_from_protobuf() {
    let pods = fixture_pods();
    assert!(pods.len() > 100, "only {} fixture pods found", pods.len());
    for (origin, pod) in pods {
        same_conversion(&typed(pod, &origin), &origin);
    }
}

#[test]
fn a_real_shaped_pod_converts_the_same_from_protobuf_ready_or_not() {
    let template = real_pods::template();
    for ready in [true, false] {
        let mut pod = real_pods::variant(&template, 42, 10);
        real_pods::set_ready(&mut pod, ready);
        same_conversion(&pod, "fixtures/pods/deployment-pod.yaml");
    }
    // Smaller than its JSON, though nothing is left out.
    let pod = real_pods::variant(&template, 42, 10);
    let (pb, text) = (
        protobuf_objects::pod_object(&pod).len(),
        serde_json::to_vec(&pod).map(|t| t.len()).unwrap_or(0),
    );
    assert!(pb < text, "{pb} bytes of protobuf against {text} of JSON");
}

#[test]
fn sidecars_hostnames_deletion_dual_stack_and_bad_fields_agree() {
    let cases = [
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"b": "2", "a": "1"},
                            "deletionTimestamp": "2026-01-02T03:04:05Z"},
               "spec": {"hostname": "h", "subdomain": "s", "nodeName": "n",
                        "containers": [{"name": "a", "ports": [{"name": "http", "containerPort": 80},
                                                               {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}],
                        "initContainers": [
                            {"name": "side", "restartPolicy": "Always", "ports": [{"name": "m", "containerPort": 9}]},
                            {"name": "init", "ports": [{"name": "x", "containerPort": 7}]}]},
               "status": {"phase": "Running", "podIP": "10.0.0.1",
                          "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                          "conditions": [{"type": "Initialized", "status": "True"},
                                         {"type": "Ready", "status": "False",
                                          "lastTransitionTime": "2026-01-02T03:04:05Z"},
                                         {"type": "Ready", "status": "True"}]}}),
        json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
        json!({"metadata": {"name": "p"}, "spec": {"containers": []},
               "status": {"phase": "Running", "podIP": "10.0.0.300"}}),
        json!({"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"phase": "Sleeping"}}),
        json!({"metadata": {"name": "p"},
               "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 0}]}]}}),
        json!({"metadata": {"name": "p"},
               "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]}}),
        json!({"metadata": {"namespace": "ns"}, "spec": {"containers": []}}),
    ];
    for (i, case) in cases.into_iter().enumerate() {
        let origin = format!("case {i}");
        same_conversion(&typed(case, &origin), &origin);
    }
}

#[test]
fn a_watch_stream_and_a_list_page_decode_to_the_same_pods() {
    let template = real_pods::template();
    let pods: Vec<core::Pod> = (0..5)
        .map(|i| real_pods::variant(&template, i, 3))
        .collect();
    let mut stream = Vec::new();
    for pod in &pods {
        stream.extend(protobuf_objects::watch_frame(
            "MODIFIED",
            protobuf_objects::pod_object(pod),
        ));
    }
    // Chunks of an awkward size, as a body arrives.
    let mut frames = Frames::default();
    let mut seen = Vec::new();
    for chunk in stream.chunks(1000) {
        frames.push(chunk);
        while let Some(frame) = frames.next_frame().unwrap() {
            let event = protobuf::watch_event(frame).unwrap();
            assert_eq!(event.event_type, "MODIFIED");
            seen.push(protobuf::pod_object(event.object).and_then(|f| pod_from_fields(&f)));
        }
    }
    let expected: Vec<_> = pods.iter().map(pod_from_k8s).collect();
    assert_eq!(seen, expected);

    let page = protobuf_objects::pod_list(&pods, "4711", "next-page");
    let list = protobuf::list(&page, "PodList").unwrap();
    assert_eq!(
        (list.resource_version, list.continue_token),
        ("4711", "next-page")
    );
    let items: Vec<_> = list
        .items
        .iter()
        .map(|item| protobuf::pod_fields(item).and_then(|f| pod_from_fields(&f)))
        .collect();
    assert_eq!(items, expected);
    assert!(protobuf::list(&page, "NodeList").is_err());
}

#[test]
fn malformed_bytes_are_errors_not_panics() {
    let pod = real_pods::variant(&real_pods::template(), 7, 3);
    let bytes = protobuf_objects::pod_object(&pod);
    // Every cut short: an error, or a pod with less in it, never a panic.
    for end in 0..bytes.len() {
        let _ = protobuf::pod_object(&bytes[..end]).and_then(|f| pod_from_fields(&f));
    }
    // Every byte changed in turn.
    let mut flipped = bytes.clone();
    for i in 4..flipped.len() {
        let kept = flipped[i];
        flipped[i] = kept ^ 0xa5;
        let _ = protobuf::pod_object(&flipped).and_then(|f| pod_from_fields(&f));
        flipped[i] = kept;
    }
    let json = serde_json::to_vec(&pod).unwrap_or_default();
    let refused = protobuf::pod_object(&json).unwrap_err();
    assert!(refused.to_string().contains("k8s"), "{refused}");
    let node = protobuf_objects::enveloped("v1", "Node", Vec::new());
    let refused = protobuf::pod_object(&node).unwrap_err();
    assert!(refused.to_string().contains("Node"), "{refused}");
}

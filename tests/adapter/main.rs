//! The kube adapter (`src/kube/`): `sliced run` end to end against an in-process fake API server
//! (`run_e2e`), the fake API server itself (`fake_api_server`), the metrics of a real engine
//! (`metrics`), the pod watch's `WatchedPod` against the full k8s-openapi `Pod` (`watched_pod`),
//! and the written objects' `ObjectJson` against k8s-openapi's types (`object_json`).

#[path = "../support/fake_api/mod.rs"]
mod fake_api;
use fake_api::protobuf_objects;
#[path = "../support/real_pods.rs"]
mod real_pods;
#[path = "../support/run_harness.rs"]
mod run_harness;
#[path = "../support/snapshot_reference.rs"]
mod snapshot_reference;

mod borrowed_pod;
mod damaged;
mod fake_api_server;
mod input_objects;
mod load_balancer_fields;
mod metrics;
mod object_json;
mod protobuf_endpoints;
mod protobuf_node;
mod protobuf_pod;
mod protobuf_slice;
mod run_e2e;
mod upstream;
mod watched_pod;

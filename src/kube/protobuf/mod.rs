//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), read in place: the
//! envelope of objects and lists, watch events and their framing ([`envelope`]), pods decoded
//! straight into the fields the controllers read ([`pod`]), and nodes ([`node`]), EndpointSlices
//! ([`slice`]) and Endpoints ([`endpoints`]) into k8s-openapi's types, the fields the conversions
//! read; every other field is passed over by its length ([`wire`]). The field numbers are those of
//! upstream's `generated.proto` files.

pub mod endpoints;
pub mod envelope;
mod meta;
pub mod node;
pub mod pod;
pub mod slice;
pub mod wire;

pub use endpoints::{endpoints, endpoints_object};
pub use envelope::{
    Frames, ListFields, MEDIA_TYPE, ProtobufError, StatusFields, Unknown, WatchEventFields, list,
    status, unknown, watch_event,
};
pub use meta::object_of_kind;
pub use node::{node, node_object};
pub use pod::{pod_fields, pod_object};
pub use slice::{endpoint_slice, endpoint_slice_object};

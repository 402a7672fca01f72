//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), read in place: the
//! envelope of objects and lists, watch events and their framing ([`envelope`]), and pods decoded
//! straight into the fields the controllers read ([`pod`]), every other field passed over by its
//! length ([`wire`]). The field numbers are those of upstream's `generated.proto` files.

pub mod envelope;
pub mod pod;
pub mod wire;

pub use envelope::{
    Frames, ListFields, MEDIA_TYPE, ProtobufError, StatusFields, Unknown, WatchEventFields, list,
    status, unknown, watch_event,
};
pub use pod::{pod_fields, pod_object};

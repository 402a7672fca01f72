//! The kinds the watches ask for as protobuf: where each is listed, how its JSON and protobuf
//! forms become the model. Services stay with kube-rs's JSON: they are few and small beside pods.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use super::Decoded;
use crate::kube::convert::{
    ConvertError, WatchedPod, endpoint_slice_from_k8s, endpoints_from_k8s, node_from_k8s,
    pod_from_fields, pod_from_watched,
};
use crate::kube::protobuf;
use crate::model::{EndpointSlice, Endpoints, Node, Pod};

/// A model type the watches fill from protobuf, or from JSON where the server offers no protobuf.
pub trait DecodedKind: Clone + Send + Sync + 'static {
    /// The JSON form, whose `Resource` constants also name the kind.
    type Json: k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static;
    /// The collection across every namespace.
    const PATH: &'static str;
    /// The protobuf list's kind.
    const LIST_KIND: &'static str;

    fn from_json(object: &Self::Json) -> Result<Self, ConvertError>;

    /// A message of the kind (a list's item, an envelope's raw bytes), decoded and converted. An
    /// error is bytes that do not decode; a conversion that fails is carried in the result.
    fn from_protobuf(message: &[u8]) -> Result<Decoded<Self>, ConvertError>;
}

impl DecodedKind for Pod {
    type Json = WatchedPod;
    const PATH: &'static str = "/api/v1/pods";
    const LIST_KIND: &'static str = "PodList";

    fn from_json(object: &WatchedPod) -> Result<Self, ConvertError> {
        pod_from_watched(object)
    }

    /// Decoded in place into the fields the controllers read: pods are most of a cluster's bytes.
    fn from_protobuf(message: &[u8]) -> Result<Decoded<Self>, ConvertError> {
        let f = protobuf::pod_fields(message)?;
        Ok(Decoded::from_key(
            f.name,
            f.namespace,
            f.uid,
            f.resource_version,
            pod_from_fields(&f),
        ))
    }
}

impl DecodedKind for Node {
    type Json = core::Node;
    const PATH: &'static str = "/api/v1/nodes";
    const LIST_KIND: &'static str = "NodeList";

    fn from_json(object: &core::Node) -> Result<Self, ConvertError> {
        node_from_k8s(object)
    }

    fn from_protobuf(message: &[u8]) -> Result<Decoded<Self>, ConvertError> {
        Ok(Decoded::converted(protobuf::node(message)?, node_from_k8s))
    }
}

impl DecodedKind for EndpointSlice {
    type Json = discovery::EndpointSlice;
    const PATH: &'static str = "/apis/discovery.k8s.io/v1/endpointslices";
    const LIST_KIND: &'static str = "EndpointSliceList";

    fn from_json(object: &discovery::EndpointSlice) -> Result<Self, ConvertError> {
        endpoint_slice_from_k8s(object)
    }

    fn from_protobuf(message: &[u8]) -> Result<Decoded<Self>, ConvertError> {
        Ok(Decoded::converted(
            protobuf::endpoint_slice(message)?,
            endpoint_slice_from_k8s,
        ))
    }
}

impl DecodedKind for Endpoints {
    type Json = core::Endpoints;
    const PATH: &'static str = "/api/v1/endpoints";
    const LIST_KIND: &'static str = "EndpointsList";

    fn from_json(object: &core::Endpoints) -> Result<Self, ConvertError> {
        endpoints_from_k8s(object)
    }

    fn from_protobuf(message: &[u8]) -> Result<Decoded<Self>, ConvertError> {
        Ok(Decoded::converted(
            protobuf::endpoints(message)?,
            endpoints_from_k8s,
        ))
    }
}

//! An Endpoints object decoded from protobuf into k8s-openapi's type, so that it converts into the
//! model by the rules its JSON form does (`convert::endpoints_from_k8s`). Like slices, most of
//! those a watch delivers are the Endpoints controller's own writes coming back.

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints};

use super::meta::{fixed, object_meta, object_of_kind, object_reference, string};
use super::wire::{Fields, WireError};
use crate::kube::convert::ConvertError;

/// The enveloped Endpoints object in `bytes` (a watch event's object, a GET's body).
pub fn endpoints_object(bytes: &[u8]) -> Result<Endpoints, ConvertError> {
    endpoints(object_of_kind(bytes, "Endpoints")?)
}

/// A `core.v1.Endpoints` message: metadata 1, subsets 2.
pub fn endpoints(bytes: &[u8]) -> Result<Endpoints, ConvertError> {
    let mut out = Endpoints::default();
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(fixed(""))? {
        match n {
            1 => out.metadata = object_meta(value.bytes(n).map_err(fixed("metadata"))?)?,
            2 => out
                .subsets
                .get_or_insert_with(Vec::new)
                .push(subset(value.bytes(n)).map_err(fixed("subsets"))?),
            _ => {}
        }
    }
    Ok(out)
}

/// A `core.v1.EndpointSubset`: addresses 1, notReadyAddresses 2, ports 3.
fn subset(bytes: Result<&[u8], WireError>) -> Result<EndpointSubset, WireError> {
    let mut out = EndpointSubset::default();
    for field in Fields::new(bytes?) {
        let (n, value) = field?;
        match n {
            1 => out
                .addresses
                .get_or_insert_with(Vec::new)
                .push(address(value.bytes(n)?)?),
            2 => out
                .not_ready_addresses
                .get_or_insert_with(Vec::new)
                .push(address(value.bytes(n)?)?),
            3 => out
                .ports
                .get_or_insert_with(Vec::new)
                .push(port(value.bytes(n)?)?),
            _ => {}
        }
    }
    Ok(out)
}

/// A `core.v1.EndpointAddress`: ip 1, targetRef 2, hostname 3, nodeName 4.
fn address(bytes: &[u8]) -> Result<EndpointAddress, WireError> {
    let mut out = EndpointAddress::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.ip = string(value, n)?,
            2 => out.target_ref = Some(object_reference(value.bytes(n)?)?),
            3 => out.hostname = Some(string(value, n)?),
            4 => out.node_name = Some(string(value, n)?),
            _ => {}
        }
    }
    Ok(out)
}

/// A `core.v1.EndpointPort`: name 1, port 2, protocol 3, appProtocol 4.
fn port(bytes: &[u8]) -> Result<EndpointPort, WireError> {
    let mut out = EndpointPort::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.name = Some(string(value, n)?),
            2 => out.port = value.int32(n)?,
            3 => out.protocol = Some(string(value, n)?),
            4 => out.app_protocol = Some(string(value, n)?),
            _ => {}
        }
    }
    Ok(out)
}

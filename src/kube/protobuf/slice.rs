//! An EndpointSlice decoded from protobuf into k8s-openapi's type, so that it converts into the
//! model by the very rules its JSON form does (`convert::endpoint_slice_from_k8s`). Only the fields
//! that conversion reads are entered; managedFields, finalizers and the rest of the metadata are
//! passed over by their length. The slices a watch delivers are mostly sliced's own writes coming
//! back, so this is the decode every write costs once more.

use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointHints, EndpointPort, EndpointSlice, ForNode, ForZone,
};

use super::meta::{fixed, object_meta, object_of_kind, object_reference, string};
use super::wire::{Fields, WireError};
use crate::kube::convert::ConvertError;

/// The enveloped EndpointSlice in `bytes` (a watch event's object, a GET's body).
pub fn endpoint_slice_object(bytes: &[u8]) -> Result<EndpointSlice, ConvertError> {
    endpoint_slice(object_of_kind(bytes, "EndpointSlice")?)
}

/// A `discovery.v1.EndpointSlice` message: metadata 1, endpoints 2, ports 3, addressType 4.
pub fn endpoint_slice(bytes: &[u8]) -> Result<EndpointSlice, ConvertError> {
    let mut out = EndpointSlice::default();
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(fixed(""))? {
        match n {
            1 => out.metadata = object_meta(value.bytes(n).map_err(fixed("metadata"))?)?,
            2 => out
                .endpoints
                .push(endpoint(value.bytes(n).map_err(fixed("endpoints"))?)?),
            3 => out
                .ports
                .get_or_insert_with(Vec::new)
                .push(port(value.bytes(n)).map_err(fixed("ports"))?),
            4 => out.address_type = string(value, n).map_err(fixed("addressType"))?,
            _ => {}
        }
    }
    Ok(out)
}

/// A `discovery.v1.Endpoint`: addresses 1, conditions 2, hostname 3, targetRef 4, nodeName 6,
/// zone 7, hints 8 (deprecatedTopology 5 is not read).
fn endpoint(bytes: &[u8]) -> Result<Endpoint, ConvertError> {
    let e = fixed("endpoints");
    let mut out = Endpoint::default();
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(&e)? {
        match n {
            1 => out.addresses.push(string(value, n).map_err(&e)?),
            2 => out.conditions = Some(conditions(value.bytes(n).map_err(&e)?).map_err(&e)?),
            3 => out.hostname = Some(string(value, n).map_err(&e)?),
            4 => out.target_ref = Some(object_reference(value.bytes(n).map_err(&e)?).map_err(&e)?),
            6 => out.node_name = Some(string(value, n).map_err(&e)?),
            7 => out.zone = Some(string(value, n).map_err(&e)?),
            8 => out.hints = Some(hints(value.bytes(n).map_err(&e)?).map_err(&e)?),
            _ => {}
        }
    }
    Ok(out)
}

/// `discovery.v1.EndpointConditions`: ready 1, serving 2, terminating 3, each present or not.
fn conditions(bytes: &[u8]) -> Result<EndpointConditions, WireError> {
    let mut out = EndpointConditions::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.ready = Some(value.bool(n)?),
            2 => out.serving = Some(value.bool(n)?),
            3 => out.terminating = Some(value.bool(n)?),
            _ => {}
        }
    }
    Ok(out)
}

/// `discovery.v1.EndpointHints`: forZones 1 and forNodes 2, each a message with name 1.
fn hints(bytes: &[u8]) -> Result<EndpointHints, WireError> {
    let mut out = EndpointHints::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.for_zones.get_or_insert_with(Vec::new).push(ForZone {
                name: named(value.bytes(n)?)?,
            }),
            2 => out.for_nodes.get_or_insert_with(Vec::new).push(ForNode {
                name: named(value.bytes(n)?)?,
            }),
            _ => {}
        }
    }
    Ok(out)
}

fn named(bytes: &[u8]) -> Result<String, WireError> {
    let mut name = String::new();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        if n == 1 {
            name = string(value, n)?;
        }
    }
    Ok(name)
}

/// A `discovery.v1.EndpointPort`: name 1, protocol 2, port 3, appProtocol 4.
fn port(value: Result<&[u8], WireError>) -> Result<EndpointPort, WireError> {
    let mut out = EndpointPort::default();
    for field in Fields::new(value?) {
        let (n, value) = field?;
        match n {
            1 => out.name = Some(string(value, n)?),
            2 => out.protocol = Some(string(value, n)?),
            3 => out.port = Some(value.int32(n)?),
            4 => out.app_protocol = Some(string(value, n)?),
            _ => {}
        }
    }
    Ok(out)
}

//! An EndpointSlice decoded from protobuf into k8s-openapi's type, so that it converts into the
//! model by the very rules its JSON form does (`convert::endpoint_slice_from_k8s`). Only the fields
//! that conversion reads are entered; managedFields, finalizers and the rest of the metadata are
//! passed over by their length. The slices a watch delivers are mostly sliced's own writes coming
//! back, so this is the decode every write costs once more.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointHints, EndpointPort, EndpointSlice, ForNode, ForZone,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::envelope::{ProtobufError, unknown};
use super::wire::{Fields, Value, WireError};
use crate::kube::convert::ConvertError;

fn fixed(path: &'static str) -> impl Fn(WireError) -> ConvertError {
    move |e| ConvertError::new(path, format!("malformed protobuf: {e}"))
}

/// The enveloped EndpointSlice in `bytes` (a watch event's object, a GET's body).
pub fn endpoint_slice_object(bytes: &[u8]) -> Result<EndpointSlice, ConvertError> {
    let object = unknown(bytes).map_err(|e| ConvertError::new("", e.to_string()))?;
    if object.kind != "EndpointSlice" {
        let e = ProtobufError::Kind {
            expected: "EndpointSlice",
            found: object.kind.to_string(),
        };
        return Err(ConvertError::new("kind", e.to_string()));
    }
    endpoint_slice(object.raw)
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

fn string(value: Value<'_>, n: u32) -> Result<String, WireError> {
    value.str(n).map(str::to_owned)
}

/// A `meta.v1.ObjectMeta`, the fields the conversion reads: name 1, generateName 2, namespace 3,
/// uid 5, resourceVersion 6, generation 7, creationTimestamp 8, deletionTimestamp 9, labels 11,
/// annotations 12, ownerReferences 13.
fn object_meta(bytes: &[u8]) -> Result<ObjectMeta, ConvertError> {
    let mut out = ObjectMeta::default();
    let e = fixed("metadata");
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(&e)? {
        match n {
            1 => out.name = Some(string(value, n).map_err(&e)?),
            2 => out.generate_name = Some(string(value, n).map_err(&e)?),
            3 => out.namespace = Some(string(value, n).map_err(&e)?),
            5 => out.uid = Some(string(value, n).map_err(&e)?),
            6 => out.resource_version = Some(string(value, n).map_err(&e)?),
            7 => out.generation = Some(value.int64(n).map_err(&e)?),
            8 => out.creation_timestamp = time(value, n, "metadata.creationTimestamp")?,
            9 => out.deletion_timestamp = time(value, n, "metadata.deletionTimestamp")?,
            11 => entry(value, n, out.labels.get_or_insert_with(BTreeMap::new)).map_err(&e)?,
            12 => {
                entry(value, n, out.annotations.get_or_insert_with(BTreeMap::new)).map_err(&e)?;
            }
            13 => out
                .owner_references
                .get_or_insert_with(Vec::new)
                .push(owner_reference(value.bytes(n).map_err(&e)?).map_err(&e)?),
            _ => {}
        }
    }
    Ok(out)
}

/// One `map<string, string>` entry (key 1, value 2) into `map`.
fn entry(value: Value<'_>, n: u32, map: &mut BTreeMap<String, String>) -> Result<(), WireError> {
    let (mut key, mut val) = ("", "");
    for field in Fields::new(value.bytes(n)?) {
        let (n, value) = field?;
        match n {
            1 => key = value.str(n)?,
            2 => val = value.str(n)?,
            _ => {}
        }
    }
    map.insert(key.to_owned(), val.to_owned());
    Ok(())
}

/// A `meta.v1.Time`: seconds 1 (upstream writes no nanoseconds). An empty message is the zero
/// time, which JSON writes as null.
fn time(value: Value<'_>, n: u32, path: &'static str) -> Result<Option<Time>, ConvertError> {
    let e = fixed(path);
    let bytes = value.bytes(n).map_err(&e)?;
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut seconds = 0i64;
    for field in Fields::new(bytes) {
        let (n, value) = field.map_err(&e)?;
        if n == 1 {
            seconds = value.int64(n).map_err(&e)?;
        }
    }
    jiff::Timestamp::from_second(seconds)
        .map(|t| Some(Time(t)))
        .map_err(|_| ConvertError::new(path, format!("{seconds} seconds is not a valid time")))
}

/// A `meta.v1.OwnerReference`: kind 1, name 3, uid 4, apiVersion 5, controller 6,
/// blockOwnerDeletion 7.
fn owner_reference(bytes: &[u8]) -> Result<OwnerReference, WireError> {
    let mut out = OwnerReference::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.kind = string(value, n)?,
            3 => out.name = string(value, n)?,
            4 => out.uid = string(value, n)?,
            5 => out.api_version = string(value, n)?,
            6 => out.controller = Some(value.bool(n)?),
            7 => out.block_owner_deletion = Some(value.bool(n)?),
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

/// A `core.v1.ObjectReference`: kind 1, namespace 2, name 3, uid 4, apiVersion 5,
/// resourceVersion 6, fieldPath 7.
fn object_reference(bytes: &[u8]) -> Result<ObjectReference, WireError> {
    let mut out = ObjectReference::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.kind = Some(string(value, n)?),
            2 => out.namespace = Some(string(value, n)?),
            3 => out.name = Some(string(value, n)?),
            4 => out.uid = Some(string(value, n)?),
            5 => out.api_version = Some(string(value, n)?),
            6 => out.resource_version = Some(string(value, n)?),
            7 => out.field_path = Some(string(value, n)?),
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

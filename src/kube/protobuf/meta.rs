//! The messages every kind's decoder reads the same way, into k8s-openapi's types: ObjectMeta
//! (the fields the conversions read), its times, maps and owner references, and an
//! ObjectReference.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::envelope::{ProtobufError, unknown};
use super::wire::{Fields, Value, WireError};
use crate::kube::convert::ConvertError;
use crate::model::Timestamp;

pub(super) fn fixed(path: &'static str) -> impl Fn(WireError) -> ConvertError {
    move |e| ConvertError::new(path, format!("malformed protobuf: {e}"))
}

/// The message of the enveloped object in `bytes` (a watch event's object, a GET's body), which
/// must be of `kind`.
pub fn object_of_kind<'a>(bytes: &'a [u8], kind: &'static str) -> Result<&'a [u8], ConvertError> {
    let object = unknown(bytes).map_err(|e| ConvertError::new("", e.to_string()))?;
    if object.kind != kind {
        let e = ProtobufError::Kind {
            expected: kind,
            found: object.kind.to_string(),
        };
        return Err(ConvertError::new("kind", e.to_string()));
    }
    Ok(object.raw)
}

pub(super) fn string(value: Value<'_>, n: u32) -> Result<String, WireError> {
    value.str(n).map(str::to_owned)
}

/// A `meta.v1.ObjectMeta`, the fields the conversion reads: name 1, generateName 2, namespace 3,
/// uid 5, resourceVersion 6, generation 7, creationTimestamp 8, deletionTimestamp 9, labels 11,
/// annotations 12, ownerReferences 13.
pub(super) fn object_meta(bytes: &[u8]) -> Result<ObjectMeta, ConvertError> {
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

/// A `meta.v1.Time`: seconds 1 (nanos 2 are not read: upstream writes none, and JSON carries
/// whole seconds). An empty message is the zero time, which JSON writes as null.
pub(super) fn timestamp(
    value: Value<'_>,
    n: u32,
    path: &'static str,
) -> Result<Option<Timestamp>, ConvertError> {
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
    Timestamp::from_second(seconds)
        .map(Some)
        .map_err(|_| ConvertError::new(path, format!("{seconds} seconds is not a valid time")))
}

fn time(value: Value<'_>, n: u32, path: &'static str) -> Result<Option<Time>, ConvertError> {
    Ok(timestamp(value, n, path)?.map(Time))
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

/// A `core.v1.ObjectReference`: kind 1, namespace 2, name 3, uid 4, apiVersion 5,
/// resourceVersion 6, fieldPath 7.
pub(super) fn object_reference(bytes: &[u8]) -> Result<ObjectReference, WireError> {
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

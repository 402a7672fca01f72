//! A node decoded from protobuf into k8s-openapi's type, so that it converts into the model by
//! the rules its JSON form does (`convert::node_from_k8s`). Nodes are large (images, volumes,
//! addresses) and their kubelets send a status every few seconds: only the labels, the provider
//! ID, the taints' keys, the Ready condition and the allocatable CPU are read, everything else is
//! passed over by its length.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::meta::{fixed, object_meta, object_of_kind, string};
use super::wire::{Fields, Value, WireError};
use crate::kube::convert::ConvertError;

/// The enveloped node in `bytes` (a watch event's object, a GET's body).
pub fn node_object(bytes: &[u8]) -> Result<Node, ConvertError> {
    node(object_of_kind(bytes, "Node")?)
}

/// A `core.v1.Node` message: metadata 1, spec 2, status 3.
pub fn node(bytes: &[u8]) -> Result<Node, ConvertError> {
    let mut out = Node::default();
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(fixed(""))? {
        match n {
            1 => out.metadata = object_meta(value.bytes(n).map_err(fixed("metadata"))?)?,
            2 => out.spec = Some(spec(value.bytes(n)).map_err(fixed("spec"))?),
            3 => out.status = Some(status(value.bytes(n)).map_err(fixed("status"))?),
            _ => {}
        }
    }
    Ok(out)
}

/// A `core.v1.NodeSpec`: providerID 3, taints 5 (of a taint, only its key 1 is read).
fn spec(bytes: Result<&[u8], WireError>) -> Result<NodeSpec, WireError> {
    let mut out = NodeSpec::default();
    for field in Fields::new(bytes?) {
        let (n, value) = field?;
        match n {
            3 => out.provider_id = Some(string(value, n)?),
            5 => {
                let mut taint = Taint::default();
                for field in Fields::new(value.bytes(n)?) {
                    let (n, value) = field?;
                    if n == 1 {
                        taint.key = string(value, n)?;
                    }
                }
                out.taints.get_or_insert_with(Vec::new).push(taint);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A `core.v1.NodeStatus`: allocatable 2, conditions 4 (capacity 1 and the rest are not read).
fn status(bytes: Result<&[u8], WireError>) -> Result<NodeStatus, WireError> {
    let mut out = NodeStatus::default();
    for field in Fields::new(bytes?) {
        let (n, value) = field?;
        match n {
            2 => quantity_entry(value, n, out.allocatable.get_or_insert_with(BTreeMap::new))?,
            4 => out
                .conditions
                .get_or_insert_with(Vec::new)
                .push(condition(value.bytes(n)?)?),
            _ => {}
        }
    }
    Ok(out)
}

/// One `map<string, Quantity>` entry (key 1, value 2; a Quantity is its string 1) into `map`.
fn quantity_entry(
    value: Value<'_>,
    n: u32,
    map: &mut BTreeMap<String, Quantity>,
) -> Result<(), WireError> {
    let (mut key, mut quantity) = ("", "");
    for field in Fields::new(value.bytes(n)?) {
        let (n, value) = field?;
        match n {
            1 => key = value.str(n)?,
            2 => {
                for field in Fields::new(value.bytes(n)?) {
                    let (n, value) = field?;
                    if n == 1 {
                        quantity = value.str(n)?;
                    }
                }
            }
            _ => {}
        }
    }
    map.insert(key.to_owned(), Quantity(quantity.to_owned()));
    Ok(())
}

/// A `core.v1.NodeCondition`: type 1, status 2 (the times, reason and message are not read).
fn condition(bytes: &[u8]) -> Result<NodeCondition, WireError> {
    let mut out = NodeCondition::default();
    for field in Fields::new(bytes) {
        let (n, value) = field?;
        match n {
            1 => out.type_ = string(value, n)?,
            2 => out.status = string(value, n)?,
            _ => {}
        }
    }
    Ok(out)
}

//! A pod decoded from protobuf straight into [`PodFields`]: only the messages that hold a field
//! the controllers read are entered (ObjectMeta, PodSpec, Container, ContainerPort, PodStatus,
//! PodCondition, PodIP); everything else, managedFields and annotations among it, is passed over
//! by its length. Strings are borrowed from the buffer, not copied.

use super::meta::{fixed, object_of_kind, timestamp};
use super::wire::{Fields, Value, WireError};
use crate::kube::convert::{ContainerFields, ConvertError, PodFields, PortFields, ReadyCondition};

/// `path` is formatted only on failure.
fn at(path: impl FnOnce() -> String) -> impl FnOnce(WireError) -> ConvertError {
    move |e| ConvertError::new(path(), format!("malformed protobuf: {e}"))
}

/// The enveloped pod in `bytes` (a watch event's object, a GET's body).
pub fn pod_object(bytes: &[u8]) -> Result<PodFields<'_>, ConvertError> {
    pod_fields(object_of_kind(bytes, "Pod")?)
}

/// A `core.v1.Pod` message (a list's item, or an envelope's raw bytes).
pub fn pod_fields(bytes: &[u8]) -> Result<PodFields<'_>, ConvertError> {
    let mut out = PodFields::default();
    let whole = fixed("");
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(&whole)? {
        match n {
            1 => object_meta(value.bytes(n).map_err(fixed("metadata"))?, &mut out)?,
            2 => pod_spec(value.bytes(n).map_err(fixed("spec"))?, &mut out)?,
            3 => pod_status(value.bytes(n).map_err(fixed("status"))?, &mut out)?,
            _ => {}
        }
    }
    Ok(out)
}

fn object_meta<'a>(bytes: &'a [u8], out: &mut PodFields<'a>) -> Result<(), ConvertError> {
    let e = fixed("metadata");
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(&e)? {
        match n {
            1 => out.name = value.str(n).map_err(fixed("metadata.name"))?,
            3 => out.namespace = value.str(n).map_err(fixed("metadata.namespace"))?,
            5 => out.uid = value.str(n).map_err(fixed("metadata.uid"))?,
            6 => {
                out.resource_version = value.str(n).map_err(fixed("metadata.resourceVersion"))?;
            }
            8 => out.creation_timestamp = timestamp(value, n, "metadata.creationTimestamp")?,
            9 => out.deletion_timestamp = timestamp(value, n, "metadata.deletionTimestamp")?,
            11 => out.labels.push(map_entry(value, n, "metadata.labels")?),
            _ => {}
        }
    }
    Ok(())
}

/// One `map<string, string>` entry: key 1, value 2.
fn map_entry<'a>(
    value: Value<'a>,
    n: u32,
    path: &'static str,
) -> Result<(&'a str, &'a str), ConvertError> {
    let e = fixed(path);
    let (mut key, mut val) = ("", "");
    for field in Fields::new(value.bytes(n).map_err(&e)?) {
        let (n, value) = field.map_err(&e)?;
        match n {
            1 => key = value.str(n).map_err(&e)?,
            2 => val = value.str(n).map_err(&e)?,
            _ => {}
        }
    }
    Ok((key, val))
}

fn pod_spec<'a>(bytes: &'a [u8], out: &mut PodFields<'a>) -> Result<(), ConvertError> {
    let e = fixed("spec");
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(&e)? {
        match n {
            2 => {
                let i = out.containers.len();
                let c = container(value, n, "containers", i)?;
                out.containers.push(c);
            }
            10 => out.node_name = value.str(n).map_err(fixed("spec.nodeName"))?,
            16 => out.hostname = value.str(n).map_err(fixed("spec.hostname"))?,
            17 => out.subdomain = value.str(n).map_err(fixed("spec.subdomain"))?,
            20 => {
                let i = out.init_containers.len();
                let c = container(value, n, "initContainers", i)?;
                out.init_containers.push(c);
            }
            _ => {}
        }
    }
    Ok(())
}

/// A `core.v1.Container`: ports 6, restartPolicy 24.
fn container<'a>(
    value: Value<'a>,
    n: u32,
    list: &'static str,
    i: usize,
) -> Result<ContainerFields<'a>, ConvertError> {
    let path = || format!("spec.{list}[{i}]");
    let mut out = ContainerFields::default();
    let mut fields = Fields::new(value.bytes(n).map_err(at(path))?);
    while let Some((n, value)) = fields.next_field().map_err(at(path))? {
        match n {
            6 => {
                let p = out.ports.len();
                let port_path = || format!("spec.{list}[{i}].ports[{p}]");
                out.ports
                    .push(container_port(value, n).map_err(at(port_path))?);
            }
            24 => out.restart_policy = value.str(n).map_err(at(path))?,
            _ => {}
        }
    }
    Ok(out)
}

/// A `core.v1.ContainerPort`: name 1, containerPort 3, protocol 4.
fn container_port(value: Value<'_>, n: u32) -> Result<PortFields<'_>, WireError> {
    let mut out = PortFields::default();
    for field in Fields::new(value.bytes(n)?) {
        let (n, value) = field?;
        match n {
            1 => out.name = value.str(n)?,
            3 => out.container_port = value.int32(n)?,
            4 => out.protocol = value.str(n)?,
            _ => {}
        }
    }
    Ok(out)
}

fn pod_status<'a>(bytes: &'a [u8], out: &mut PodFields<'a>) -> Result<(), ConvertError> {
    let e = fixed("status");
    let mut conditions = 0usize;
    let mut fields = Fields::new(bytes);
    while let Some((n, value)) = fields.next_field().map_err(&e)? {
        match n {
            1 => out.phase = value.str(n).map_err(fixed("status.phase"))?,
            2 => {
                let i = conditions;
                conditions += 1;
                let path = || format!("status.conditions[{i}]");
                if out.ready.is_none() {
                    out.ready = ready_condition(value, n, path)?;
                }
            }
            6 => out.pod_ip = value.str(n).map_err(fixed("status.podIP"))?,
            12 => {
                let i = out.pod_ips.len();
                let path = || format!("status.podIPs[{i}]");
                let mut ip = "";
                for field in Fields::new(value.bytes(n).map_err(at(path))?) {
                    let (n, value) = field.map_err(at(path))?;
                    if n == 1 {
                        ip = value.str(n).map_err(at(path))?;
                    }
                }
                out.pod_ips.push(ip);
            }
            _ => {}
        }
    }
    Ok(())
}

/// A `core.v1.PodCondition` (type 1, status 2, lastTransitionTime 4), when it is the Ready one.
fn ready_condition<'a>(
    value: Value<'a>,
    n: u32,
    path: impl Fn() -> String,
) -> Result<Option<ReadyCondition<'a>>, ConvertError> {
    let (mut kind, mut status, mut transition) = ("", "", None);
    let mut fields = Fields::new(value.bytes(n).map_err(at(&path))?);
    while let Some((n, value)) = fields.next_field().map_err(at(&path))? {
        match n {
            1 => {
                kind = value.str(n).map_err(at(&path))?;
                // Upstream writes the type first: another condition is passed over from here.
                if kind != "Ready" {
                    return Ok(None);
                }
            }
            2 => status = value.str(n).map_err(at(&path))?,
            4 => transition = Some(value),
            _ => {}
        }
    }
    if kind != "Ready" {
        return Ok(None);
    }
    let last_transition_time = match transition {
        Some(value) => timestamp(value, 4, "status.conditions.lastTransitionTime")?,
        None => None,
    };
    Ok(Some(ReadyCondition {
        status,
        last_transition_time,
    }))
}

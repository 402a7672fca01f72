//! What `reconcile` prints, rendered object by object on every core and streamed out in order:
//! no value tree of the whole output is built, and a million-pod cluster's slices are written as
//! they are rendered.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use anyhow::Context;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use sliced::engine::ProviderCall;
use sliced::kube::convert::ObjectJson;
use sliced::kube::manifest::{Given, GivenKey};
use sliced::model::LoadBalancerIngress;
use sliced::sink::{Kind, Object, ServiceChange, ServicePatch};
use sliced::snapshot::SnapshotResult;

mod pretty;
mod yaml;

/// Objects rendered in parallel at a time: bounds the text held before it is written.
const CHUNK: usize = 256;

/// An element of an array of the top-level object is two levels deep.
const ELEMENT_DEPTH: usize = 2;

/// One object of the output: as sliced wrote it, or as the file gave it.
pub enum Printed<'a> {
    Written(&'a Object),
    Given(&'a Given),
}

impl Printed<'_> {
    /// Pretty-printed as serde_json prints a value, at the depth of an element of the output's
    /// arrays.
    fn to_json(&self) -> anyhow::Result<String> {
        Ok(match self {
            Printed::Written(o) => pretty::to_string_at(&ObjectJson(o), ELEMENT_DEPTH)?,
            Printed::Given(g) => pretty::transcode_at(g.json(), ELEMENT_DEPTH)
                .context("reading an object as given")?,
        })
    }

    fn to_yaml(&self) -> anyhow::Result<String> {
        match self {
            Printed::Written(o) => yaml::to_string(&ObjectJson(o)),
            Printed::Given(g) => yaml::from_json(g.json()),
        }
        .context("writing YAML")
    }
}

/// The objects after the reconcile, in the sink's order (EndpointSlices, then Endpoints, each by
/// namespace and name): those sliced wrote as it wrote them, the others exactly as given.
pub fn final_objects<'a>(
    result: &'a SnapshotResult,
    given: &'a HashMap<GivenKey, Given>,
) -> Vec<(Kind, Printed<'a>)> {
    let key = |o: &Object| {
        let meta = o.meta();
        (o.kind(), meta.namespace.clone(), meta.name.clone())
    };
    let written: HashSet<GivenKey> = result.writes.iter().map(|w| key(&w.sent)).collect();
    result
        .objects
        .iter()
        .map(|object| {
            let k = key(object);
            let printed = match given.get(&k) {
                Some(as_given) if !written.contains(&k) => Printed::Given(as_given),
                _ => Printed::Written(object),
            };
            (object.kind(), printed)
        })
        .collect()
}

/// The EndpointSlices, then the Endpoints, each sorted by namespace and name, as a YAML stream.
pub fn yaml(out: &mut impl Write, objects: &[(Kind, Printed)]) -> anyhow::Result<()> {
    for kind in [Kind::EndpointSlice, Kind::Endpoints] {
        let of_kind: Vec<&Printed> = objects
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, p)| p)
            .collect();
        for chunk in of_kind.chunks(CHUNK) {
            let texts: Vec<String> = chunk
                .par_iter()
                .map(|p| p.to_yaml())
                .collect::<anyhow::Result<_>>()?;
            for text in texts {
                out.write_all(b"---\n")?;
                out.write_all(text.as_bytes())?;
            }
        }
    }
    Ok(())
}

/// `{"writes", "objects", "errors", "events"}`, and `"loadBalancers"` when asked, pretty-printed
/// as serde_json prints a value.
pub fn json(
    out: &mut impl Write,
    result: &SnapshotResult,
    objects: &[(Kind, Printed)],
    load_balancers: bool,
) -> anyhow::Result<()> {
    #[derive(Serialize)]
    struct Sent<'a, T> {
        verb: &'a str,
        object: T,
    }
    let errors: Vec<Value> = result
        .errors
        .iter()
        .map(|e| json!({"service": e.service, "message": e.message}))
        .collect();
    let events: Vec<Value> = result
        .events
        .iter()
        .map(|(service, e)| {
            json!({
                "service": service,
                "type": format!("{:?}", e.event_type),
                "reason": e.reason,
                "message": e.message,
            })
        })
        .collect();
    out.write_all(b"{\n")?;
    let writes: Vec<Written> = (result.writes.iter().map(Written::Object))
        .chain(result.service_patches.iter().map(Written::ServicePatch))
        .collect();
    json_array(out, "writes", &writes, false, |w| match w {
        Written::Object(w) => {
            let write = Sent {
                verb: w.verb.as_str(),
                object: ObjectJson(&w.sent),
            };
            Ok(pretty::to_string_at(&write, ELEMENT_DEPTH)?)
        }
        Written::ServicePatch(patch) => {
            Ok(pretty::to_string_at(&service_patch(patch), ELEMENT_DEPTH)?)
        }
    })?;
    json_array(out, "objects", objects, false, |(_, p)| p.to_json())?;
    json_array(out, "errors", &errors, false, |v| {
        Ok(pretty::to_string_at(v, ELEMENT_DEPTH)?)
    })?;
    let last = !load_balancers;
    json_array(out, "events", &events, last, |v| {
        Ok(pretty::to_string_at(v, ELEMENT_DEPTH)?)
    })?;
    if load_balancers {
        let calls: Vec<Value> = result.provider_calls.iter().map(provider_call).collect();
        json_array(out, "loadBalancers", &calls, true, |v| {
            Ok(pretty::to_string_at(v, ELEMENT_DEPTH)?)
        })?;
    }
    out.write_all(b"}\n")?;
    Ok(())
}

/// One entry of `writes`: an object written, or a Service patched.
enum Written<'a> {
    Object(&'a sliced::sink::WriteRecord),
    ServicePatch(&'a ServicePatch),
}

/// A patch of a Service (of its status subresource unless it is being deleted), as the object
/// it sends.
fn service_patch(patch: &ServicePatch) -> Value {
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": patch.name.as_str(), "namespace": patch.namespace.as_str()},
    });
    match &patch.change {
        ServiceChange::Finalizers(finalizers) => {
            let names: Vec<&str> = finalizers.iter().map(|f| f.as_str()).collect();
            object["metadata"]["finalizers"] = json!(names);
        }
        ServiceChange::Ingress(ingress) => {
            object["status"] = json!({"loadBalancer": {"ingress": ingress_json(ingress)}});
        }
    }
    if patch.status_subresource {
        json!({"verb": "patch", "subresource": "status", "object": object})
    } else {
        json!({"verb": "patch", "object": object})
    }
}

fn ingress_json(ingress: &[LoadBalancerIngress]) -> Vec<Value> {
    ingress
        .iter()
        .map(|i| {
            let mut entry = serde_json::Map::new();
            if let Some(ip) = i.ip {
                entry.insert("ip".into(), json!(ip.to_string()));
            }
            if let Some(hostname) = &i.hostname {
                entry.insert("hostname".into(), json!(hostname.as_str()));
            }
            if let Some(mode) = &i.ip_mode {
                entry.insert("ipMode".into(), json!(mode.as_str()));
            }
            Value::Object(entry)
        })
        .collect()
}

/// One provider call of `loadBalancers`.
fn provider_call(call: &ProviderCall) -> Value {
    let hosts: Vec<&str> = call.hosts.iter().map(|h| h.as_str()).collect();
    let mut entry = json!({
        "service": call.service.to_string(),
        "call": call.operation.as_str(),
        "hosts": hosts,
        "ingress": ingress_json(&call.ingress),
    });
    if let Some(error) = &call.error {
        entry["error"] = json!(error);
    }
    entry
}

/// One key of the top-level object and its array, each element rendered by `render` on its own,
/// at [`ELEMENT_DEPTH`].
fn json_array<T: Sync>(
    out: &mut impl Write,
    key: &str,
    items: &[T],
    last: bool,
    render: impl Fn(&T) -> anyhow::Result<String> + Sync,
) -> anyhow::Result<()> {
    write!(out, "  \"{key}\": ")?;
    if items.is_empty() {
        out.write_all(b"[]")?;
    } else {
        out.write_all(b"[")?;
        let mut first = true;
        for chunk in items.chunks(CHUNK) {
            let texts: Vec<String> = chunk
                .par_iter()
                .map(&render)
                .collect::<anyhow::Result<_>>()?;
            for text in texts {
                out.write_all(if first { b"\n    " } else { b",\n    " })?;
                first = false;
                out.write_all(text.as_bytes())?;
            }
        }
        out.write_all(b"\n  ]")?;
    }
    out.write_all(if last { b"\n" } else { b",\n" })?;
    Ok(())
}

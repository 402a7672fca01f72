//! The objects sliced writes (EndpointSlices, Endpoints) serialized in the API's shape straight
//! from the model: field for field the calls k8s-openapi's types make once
//! [`super::object_to_k8s`] has built them, so that any serializer prints the same text, without
//! an owned copy of every string first. Labels are sorted with unique keys in the model, as in
//! k8s-openapi's `BTreeMap`.

use std::fmt::Display;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

use super::inputs::{LabelMap, non_empty};
use crate::model::{
    Endpoint, EndpointAddress, EndpointPort, EndpointSlice, EndpointSubset, Endpoints,
    EndpointsPort, Hints, Meta, Name, OwnerReference, TargetRef,
};
use crate::sink::Object;

/// An object as the API server is sent it.
pub struct ObjectJson<'a>(pub &'a Object);

impl Serialize for ObjectJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Object::EndpointSlice(slice) => SliceView(slice).serialize(serializer),
            Object::Endpoints(endpoints) => EndpointsView(endpoints).serialize(serializer),
        }
    }
}

/// How many of the optional fields are there, as k8s-openapi counts a struct's length.
fn count(present: &[bool]) -> usize {
    present.iter().filter(|p| **p).count()
}

/// A value printed by its `Display`, as the string k8s-openapi would hold.
struct Shown<'a, T>(&'a T);

impl<T: Display> Serialize for Shown<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self.0)
    }
}

/// A list of items, each through a view.
struct Each<'a, T, V>(&'a [T], fn(&'a T) -> V);

impl<'a, T, V: Serialize> Serialize for Each<'a, T, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&(self.1)(item))?;
        }
        seq.end()
    }
}

struct MetaView<'a> {
    meta: &'a Meta,
    generate_name: Option<&'a Name>,
    owners: &'a [OwnerReference],
}

impl Serialize for MetaView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = self.meta;
        let (name, namespace) = (non_empty(&m.name), non_empty(&m.namespace));
        let (uid, resource_version) = (non_empty(&m.uid), non_empty(&m.resource_version));
        let generation = (m.generation != 0).then_some(m.generation);
        let labels = (!m.labels.is_empty()).then_some(&m.labels);
        let annotations = (!m.annotations.is_empty()).then_some(&m.annotations);
        let owners = (!self.owners.is_empty()).then_some(self.owners);
        let len = count(&[
            annotations.is_some(),
            m.creation_timestamp.is_some(),
            m.deletion_timestamp.is_some(),
            self.generate_name.is_some(),
            generation.is_some(),
            labels.is_some(),
            name.is_some(),
            namespace.is_some(),
            owners.is_some(),
            resource_version.is_some(),
            uid.is_some(),
        ]);
        let mut s = serializer.serialize_struct("ObjectMeta", len)?;
        if let Some(a) = annotations {
            s.serialize_field("annotations", &LabelMap(a))?;
        }
        if let Some(t) = m.creation_timestamp {
            s.serialize_field("creationTimestamp", &Time(t))?;
        }
        if let Some(t) = m.deletion_timestamp {
            s.serialize_field("deletionTimestamp", &Time(t))?;
        }
        if let Some(g) = self.generate_name {
            s.serialize_field("generateName", g.as_str())?;
        }
        if let Some(g) = &generation {
            s.serialize_field("generation", g)?;
        }
        if let Some(l) = labels {
            s.serialize_field("labels", &LabelMap(l))?;
        }
        if let Some(n) = name {
            s.serialize_field("name", n)?;
        }
        if let Some(n) = namespace {
            s.serialize_field("namespace", n)?;
        }
        if let Some(o) = owners {
            s.serialize_field("ownerReferences", &Each(o, OwnerView))?;
        }
        if let Some(r) = resource_version {
            s.serialize_field("resourceVersion", r)?;
        }
        if let Some(u) = uid {
            s.serialize_field("uid", u)?;
        }
        s.end()
    }
}

struct OwnerView<'a>(&'a OwnerReference);

impl Serialize for OwnerView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let o = self.0;
        let len = 4 + count(&[o.block_owner_deletion.is_some(), o.controller.is_some()]);
        let mut s = serializer.serialize_struct("OwnerReference", len)?;
        s.serialize_field("apiVersion", o.api_version.as_str())?;
        if let Some(b) = &o.block_owner_deletion {
            s.serialize_field("blockOwnerDeletion", b)?;
        }
        if let Some(c) = &o.controller {
            s.serialize_field("controller", c)?;
        }
        s.serialize_field("kind", o.kind.as_str())?;
        s.serialize_field("name", o.name.as_str())?;
        s.serialize_field("uid", o.uid.as_str())?;
        s.end()
    }
}

struct TargetRefView<'a>(&'a TargetRef);

impl Serialize for TargetRefView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let len = count(&[
            r.api_version.is_some(),
            r.kind.is_some(),
            r.name.is_some(),
            r.namespace.is_some(),
            r.resource_version.is_some(),
            r.uid.is_some(),
        ]);
        let mut s = serializer.serialize_struct("ObjectReference", len)?;
        let names = [
            ("apiVersion", &r.api_version),
            ("kind", &r.kind),
            ("name", &r.name),
            ("namespace", &r.namespace),
            ("resourceVersion", &r.resource_version),
        ];
        for (field, value) in names {
            if let Some(v) = value {
                s.serialize_field(field, v.as_str())?;
            }
        }
        if let Some(u) = &r.uid {
            s.serialize_field("uid", &Shown(u))?;
        }
        s.end()
    }
}

struct SliceView<'a>(&'a EndpointSlice);

impl Serialize for SliceView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let slice = self.0;
        // Ports are always a list, never null: what the controller writes.
        let mut s = serializer.serialize_struct("EndpointSlice", 5)?;
        s.serialize_field("apiVersion", "discovery.k8s.io/v1")?;
        s.serialize_field("kind", "EndpointSlice")?;
        s.serialize_field("addressType", slice.address_type.as_str())?;
        s.serialize_field(
            "endpoints",
            &Each(&slice.endpoints, |e| EndpointView(e.as_ref())),
        )?;
        s.serialize_field(
            "metadata",
            &MetaView {
                meta: &slice.meta,
                generate_name: slice.generate_name.as_ref(),
                owners: &slice.owner_references,
            },
        )?;
        s.serialize_field("ports", &Each(&slice.ports, SlicePortView))?;
        s.end()
    }
}

struct SlicePortView<'a>(&'a EndpointPort);

impl Serialize for SlicePortView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let len = count(&[
            p.app_protocol.is_some(),
            p.name.is_some(),
            p.port.is_some(),
            p.protocol.is_some(),
        ]);
        let mut s = serializer.serialize_struct("EndpointPort", len)?;
        if let Some(a) = &p.app_protocol {
            s.serialize_field("appProtocol", a.as_str())?;
        }
        if let Some(n) = &p.name {
            s.serialize_field("name", n.as_str())?;
        }
        if let Some(n) = &p.port {
            s.serialize_field("port", n)?;
        }
        if let Some(proto) = &p.protocol {
            s.serialize_field("protocol", proto.as_str())?;
        }
        s.end()
    }
}

struct EndpointView<'a>(&'a Endpoint);

impl Serialize for EndpointView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        // Go's conditions struct is never omitted: the server always serves `conditions`.
        let len = 2 + count(&[
            e.hints.is_some(),
            e.hostname.is_some(),
            e.node_name.is_some(),
            e.target_ref.is_some(),
            e.zone.is_some(),
        ]);
        let mut s = serializer.serialize_struct("Endpoint", len)?;
        s.serialize_field("addresses", &Each(&e.addresses, Shown))?;
        let c = &e.conditions;
        let conditions = ConditionsView([
            ("ready", c.ready),
            ("serving", c.serving),
            ("terminating", c.terminating),
        ]);
        s.serialize_field("conditions", &conditions)?;
        if let Some(h) = &e.hints {
            s.serialize_field("hints", &HintsView(h))?;
        }
        let names = [("hostname", &e.hostname), ("nodeName", &e.node_name)];
        for (field, value) in names {
            if let Some(v) = value {
                s.serialize_field(field, v.as_str())?;
            }
        }
        if let Some(r) = &e.target_ref {
            s.serialize_field("targetRef", &TargetRefView(r))?;
        }
        if let Some(z) = &e.zone {
            s.serialize_field("zone", z.as_str())?;
        }
        s.end()
    }
}

/// An endpoint's conditions, each left out when unknown.
struct ConditionsView([(&'static str, Option<bool>); 3]);

impl Serialize for ConditionsView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = count(&self.0.map(|(_, v)| v.is_some()));
        let mut s = serializer.serialize_struct("EndpointConditions", len)?;
        for (field, value) in &self.0 {
            if let Some(v) = value {
                s.serialize_field(field, v)?;
            }
        }
        s.end()
    }
}

struct HintsView<'a>(&'a Hints);

/// One zone or node of a hint: `{name: ...}`.
struct NamedView<'a>(&'static str, &'a Name);

impl Serialize for NamedView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct(self.0, 1)?;
        s.serialize_field("name", self.1.as_str())?;
        s.end()
    }
}

impl Serialize for HintsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let h = self.0;
        // An empty list is left out, as the conversion leaves it `None`.
        let nodes = (!h.for_nodes.is_empty()).then_some(&h.for_nodes);
        let zones = (!h.for_zones.is_empty()).then_some(&h.for_zones);
        let mut s = serializer
            .serialize_struct("EndpointHints", count(&[nodes.is_some(), zones.is_some()]))?;
        if let Some(nodes) = nodes {
            s.serialize_field("forNodes", &Each(nodes, |n| NamedView("ForNode", n)))?;
        }
        if let Some(zones) = zones {
            s.serialize_field("forZones", &Each(zones, |z| NamedView("ForZone", z)))?;
        }
        s.end()
    }
}

struct EndpointsView<'a>(&'a Endpoints);

impl Serialize for EndpointsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let subsets = (!e.subsets.is_empty()).then_some(&e.subsets);
        let mut s = serializer.serialize_struct("Endpoints", 3 + count(&[subsets.is_some()]))?;
        s.serialize_field("apiVersion", "v1")?;
        s.serialize_field("kind", "Endpoints")?;
        s.serialize_field(
            "metadata",
            &MetaView {
                meta: &e.meta,
                generate_name: None,
                owners: &[],
            },
        )?;
        if let Some(subsets) = subsets {
            s.serialize_field("subsets", &Each(subsets, SubsetView))?;
        }
        s.end()
    }
}

struct SubsetView<'a>(&'a EndpointSubset);

impl Serialize for SubsetView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let subset = self.0;
        // Empty lists are left out, as Go's omitempty does.
        let ready = (!subset.addresses.is_empty()).then_some(&subset.addresses);
        let not_ready =
            (!subset.not_ready_addresses.is_empty()).then_some(&subset.not_ready_addresses);
        let ports = (!subset.ports.is_empty()).then_some(&subset.ports);
        let len = count(&[ready.is_some(), not_ready.is_some(), ports.is_some()]);
        let mut s = serializer.serialize_struct("EndpointSubset", len)?;
        if let Some(a) = ready {
            s.serialize_field("addresses", &Each(a, AddressView))?;
        }
        if let Some(a) = not_ready {
            s.serialize_field("notReadyAddresses", &Each(a, AddressView))?;
        }
        if let Some(p) = ports {
            s.serialize_field("ports", &Each(p, EndpointsPortView))?;
        }
        s.end()
    }
}

struct AddressView<'a>(&'a Arc<EndpointAddress>);

impl Serialize for AddressView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        let len = 1 + count(&[
            a.hostname.is_some(),
            a.node_name.is_some(),
            a.target_ref.is_some(),
        ]);
        let mut s = serializer.serialize_struct("EndpointAddress", len)?;
        if let Some(h) = &a.hostname {
            s.serialize_field("hostname", h.as_str())?;
        }
        s.serialize_field("ip", &Shown(&a.ip))?;
        if let Some(n) = &a.node_name {
            s.serialize_field("nodeName", n.as_str())?;
        }
        if let Some(r) = &a.target_ref {
            s.serialize_field("targetRef", &TargetRefView(r))?;
        }
        s.end()
    }
}

struct EndpointsPortView<'a>(&'a EndpointsPort);

impl Serialize for EndpointsPortView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let len = 1 + count(&[
            p.app_protocol.is_some(),
            p.name.is_some(),
            p.protocol.is_some(),
        ]);
        let mut s = serializer.serialize_struct("EndpointPort", len)?;
        if let Some(a) = &p.app_protocol {
            s.serialize_field("appProtocol", a.as_str())?;
        }
        if let Some(n) = &p.name {
            s.serialize_field("name", n.as_str())?;
        }
        s.serialize_field("port", &p.port)?;
        if let Some(proto) = &p.protocol {
            s.serialize_field("protocol", proto.as_str())?;
        }
        s.end()
    }
}

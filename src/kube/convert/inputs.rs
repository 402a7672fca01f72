//! Services, Pods, Nodes and Namespaces written back as Kubernetes JSON, for recorded traces
//! (`sliced run --record-trace`). Each writes exactly what its `*_from_k8s` reads, and nothing
//! else, so that reading the JSON again gives an equal object: a pod is cut down to the fields the
//! controllers read, which keeps a day of a large cluster's events small. The structs borrow from
//! the model and serialise straight to a writer; no `serde_json::Value` is built.

use std::borrow::Cow;
use std::net::IpAddr;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::objects::TAINT_TO_BE_DELETED;

mod service;
use crate::model::{ContainerPort, Labels, Meta, Name, Namespace, Node, Pod, PodPhase, Timestamp};
pub use service::ServiceJson;

/// Labels (or annotations) as a JSON object; `None` when empty, so that the field is left out.
pub(super) struct LabelMap<'a>(pub(super) &'a Labels);

impl Serialize for LabelMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter() {
            map.serialize_entry(k.as_str(), v.as_str())?;
        }
        map.end()
    }
}

fn label_map(labels: &Labels) -> Option<LabelMap<'_>> {
    (!labels.is_empty()).then_some(LabelMap(labels))
}

/// A timestamp to the nanosecond (RFC 3339, as jiff writes it): k8s-openapi's `Time` writes whole
/// seconds only, which would not read back equal.
struct Time(Timestamp);

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

pub(super) fn non_empty(n: &Name) -> Option<&str> {
    (!n.is_empty()).then_some(n.as_str())
}

fn opt_str(n: &Option<Name>) -> Option<&str> {
    n.as_ref().map(Name::as_str)
}

struct Ip(IpAddr);

impl Serialize for Ip {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<LabelMap<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<LabelMap<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    finalizers: Vec<&'a str>,
}

impl<'a> Metadata<'a> {
    fn named(name: &'a Name) -> Metadata<'a> {
        Metadata {
            name: Some(name.as_str()),
            namespace: None,
            uid: None,
            resource_version: None,
            generation: None,
            creation_timestamp: None,
            deletion_timestamp: None,
            labels: None,
            annotations: None,
            finalizers: Vec::new(),
        }
    }

    fn of(m: &'a Meta) -> Metadata<'a> {
        Metadata {
            namespace: non_empty(&m.namespace),
            uid: non_empty(&m.uid).map(Cow::Borrowed),
            resource_version: non_empty(&m.resource_version).map(Cow::Borrowed),
            generation: (m.generation != 0).then_some(m.generation),
            creation_timestamp: m.creation_timestamp.map(Time),
            deletion_timestamp: m.deletion_timestamp.map(Time),
            labels: label_map(&m.labels),
            annotations: label_map(&m.annotations),
            ..Metadata::named(&m.name)
        }
    }
}

/// An object with its `apiVersion` and `kind`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a, Spec, Status> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<Spec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
}

/// A pod as JSON, cut down to what `pod_from_k8s` reads.
pub struct PodJson<'a>(pub &'a Pod);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    node_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hostname: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subdomain: Option<&'a str>,
    containers: [Container<'a>; 1],
    /// The sidecars' named ports: a restartable init container.
    #[serde(skip_serializing_if = "Option::is_none")]
    init_containers: Option<[Container<'a>; 1]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Container<'a> {
    name: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ports: Vec<Port<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_policy: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Port<'a> {
    name: &'a str,
    container_port: i32,
    protocol: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<&'static str>,
    /// Alone for a pod of one IP: the reader fills `podIPs` from it.
    #[serde(rename = "podIP", skip_serializing_if = "Option::is_none")]
    pod_ip: Option<Ip>,
    #[serde(rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pod_ips: Vec<PodIp>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    conditions: Vec<Condition>,
}

#[derive(Serialize)]
struct PodIp {
    ip: Ip,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type")]
    type_: &'static str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_transition_time: Option<Time>,
}

fn ports(list: &[ContainerPort], sidecar: bool) -> Vec<Port<'_>> {
    list.iter()
        .filter(|p| p.sidecar == sidecar)
        .map(|p| Port {
            name: p.name.as_str(),
            container_port: p.port,
            protocol: p.protocol.as_str(),
        })
        .collect()
}

impl Serialize for PodJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let pod = self.0;
        let m = &pod.meta;
        let uid = m.uid();
        let rv = m.resource_version();
        let metadata = Metadata {
            namespace: non_empty(&m.namespace),
            uid: (!uid.is_empty()).then(|| Cow::Owned(uid.as_str().into_owned())),
            resource_version: (!rv.is_empty()).then(|| Cow::Owned(rv.as_str().into_owned())),
            creation_timestamp: m.creation_timestamp().map(Time),
            deletion_timestamp: m.deletion_timestamp().map(Time),
            labels: label_map(&m.labels),
            ..Metadata::named(&m.name)
        };
        let sidecars = ports(&pod.named_ports, true);
        let spec = PodSpec {
            node_name: opt_str(&pod.node_name),
            hostname: pod.hostname().map(Name::as_str),
            subdomain: pod.subdomain().map(Name::as_str),
            containers: [Container {
                name: "c",
                ports: ports(&pod.named_ports, false),
                restart_policy: None,
            }],
            init_containers: (!sidecars.is_empty()).then_some([Container {
                name: "sidecar",
                ports: sidecars,
                restart_policy: Some("Always"),
            }]),
        };
        let ips = pod.ips();
        let ready = pod.ready || pod.ready_transition().is_some();
        let status = PodStatus {
            phase: match pod.phase {
                PodPhase::Pending => None,
                PodPhase::Running => Some("Running"),
                PodPhase::Succeeded => Some("Succeeded"),
                PodPhase::Failed => Some("Failed"),
                PodPhase::Unknown => Some("Unknown"),
            },
            pod_ip: match ips {
                [one] => Some(Ip(*one)),
                _ => None,
            },
            pod_ips: match ips {
                [_] => Vec::new(),
                many => many.iter().map(|ip| PodIp { ip: Ip(*ip) }).collect(),
            },
            conditions: ready
                .then(|| Condition {
                    type_: "Ready",
                    status: if pod.ready { "True" } else { "False" },
                    last_transition_time: pod.ready_transition().map(Time),
                })
                .into_iter()
                .collect(),
        };
        Object {
            api_version: "v1",
            kind: "Pod",
            metadata,
            spec: Some(spec),
            status: Some(status),
        }
        .serialize(s)
    }
}

/// A Node as JSON: what `node_from_k8s` reads.
pub struct NodeJson<'a>(pub &'a Node);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeSpec<'a> {
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    provider_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    taints: Option<[Taint; 1]>,
}

#[derive(Serialize)]
struct Taint {
    key: &'static str,
    effect: &'static str,
}

#[derive(Serialize)]
struct NodeStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    allocatable: Option<Allocatable>,
    conditions: [Condition; 1],
}

#[derive(Serialize)]
struct Allocatable {
    cpu: String,
}

/// What a deleting node's (or namespace's) deletionTimestamp says: only its presence is read.
const DELETING_SINCE: Timestamp = Timestamp::UNIX_EPOCH;

impl Serialize for NodeJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let node = self.0;
        let metadata = Metadata {
            labels: label_map(&node.labels),
            deletion_timestamp: node.deleting.then_some(Time(DELETING_SINCE)),
            ..Metadata::named(&node.name)
        };
        let spec = NodeSpec {
            provider_id: opt_str(&node.provider_id),
            taints: node.to_be_deleted.then_some([Taint {
                key: TAINT_TO_BE_DELETED,
                effect: "NoSchedule",
            }]),
        };
        let status = NodeStatus {
            allocatable: (node.allocatable_cpu_millis != 0).then(|| Allocatable {
                cpu: format!("{}m", node.allocatable_cpu_millis),
            }),
            conditions: [Condition {
                type_: "Ready",
                status: if node.ready { "True" } else { "False" },
                last_transition_time: None,
            }],
        };
        let spec = (spec.provider_id.is_some() || spec.taints.is_some()).then_some(spec);
        Object {
            api_version: "v1",
            kind: "Node",
            metadata,
            spec,
            status: Some(status),
        }
        .serialize(s)
    }
}

/// A Namespace as JSON: what `namespace_from_k8s` reads.
pub struct NamespaceJson<'a>(pub &'a Namespace);

#[derive(Serialize)]
struct NamespaceStatus {
    phase: &'static str,
}

impl Serialize for NamespaceJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ns = self.0;
        let metadata = Metadata {
            labels: label_map(&ns.labels),
            ..Metadata::named(&ns.name)
        };
        Object::<(), NamespaceStatus> {
            api_version: "v1",
            kind: "Namespace",
            metadata,
            spec: None,
            status: ns.terminating.then_some(NamespaceStatus {
                phase: "Terminating",
            }),
        }
        .serialize(s)
    }
}

//! A pod as the controllers read it, however it arrived. [`PodFields`] borrows the fields the
//! controllers read, from a JSON pod decoded into [`WatchedPod`] or straight from protobuf bytes
//! (`kube/protobuf/`), and one conversion makes the compact [`Pod`] of either: the two wire
//! formats cannot disagree on a rule.

use std::net::IpAddr;
use std::sync::Arc;

use smallvec::SmallVec;

use super::objects::{WatchedContainer, WatchedPod};
use super::{ConvertError, ip, port, protocol, time};
use crate::model::{
    ContainerPort, Labels, Name, Pod, PodMeta, PodPhase, Protocol, ResourceVersion, Timestamp, Uid,
    intern,
};

/// The fields of a pod the controllers read. An absent string is empty, as the API server treats
/// an empty one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodFields<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub resource_version: &'a str,
    /// In the order written; a later duplicate key wins.
    pub labels: SmallVec<[(&'a str, &'a str); 8]>,
    pub creation_timestamp: Option<Timestamp>,
    pub deletion_timestamp: Option<Timestamp>,
    pub node_name: &'a str,
    pub hostname: &'a str,
    pub subdomain: &'a str,
    pub containers: SmallVec<[ContainerFields<'a>; 2]>,
    pub init_containers: SmallVec<[ContainerFields<'a>; 2]>,
    pub phase: &'a str,
    pub pod_ip: &'a str,
    pub pod_ips: SmallVec<[&'a str; 2]>,
    /// The first condition of type Ready.
    pub ready: Option<ReadyCondition<'a>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerFields<'a> {
    pub ports: SmallVec<[PortFields<'a>; 2]>,
    pub restart_policy: &'a str,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PortFields<'a> {
    pub name: &'a str,
    pub container_port: i32,
    pub protocol: &'a str,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReadyCondition<'a> {
    pub status: &'a str,
    pub last_transition_time: Option<Timestamp>,
}

fn or_empty(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or_default()
}

fn containers<'a, const N: usize>(
    list: &'a Option<Vec<WatchedContainer>>,
) -> SmallVec<[ContainerFields<'a>; N]>
where
    [ContainerFields<'a>; N]: smallvec::Array<Item = ContainerFields<'a>>,
{
    list.iter()
        .flatten()
        .map(|c| ContainerFields {
            ports: c
                .ports
                .iter()
                .flatten()
                .map(|p| PortFields {
                    name: or_empty(&p.name),
                    container_port: p.container_port,
                    protocol: or_empty(&p.protocol),
                })
                .collect(),
            restart_policy: or_empty(&c.restart_policy),
        })
        .collect()
}

impl<'a> From<&'a WatchedPod> for PodFields<'a> {
    fn from(pod: &'a WatchedPod) -> Self {
        let m = &pod.metadata;
        let mut fields = PodFields {
            name: or_empty(&m.name),
            namespace: or_empty(&m.namespace),
            uid: or_empty(&m.uid),
            resource_version: or_empty(&m.resource_version),
            labels: m
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            creation_timestamp: time(&m.creation_timestamp),
            deletion_timestamp: time(&m.deletion_timestamp),
            ..PodFields::default()
        };
        if let Some(spec) = &pod.spec {
            fields.node_name = or_empty(&spec.node_name);
            fields.hostname = or_empty(&spec.hostname);
            fields.subdomain = or_empty(&spec.subdomain);
            fields.containers = containers(&spec.containers);
            fields.init_containers = containers(&spec.init_containers);
        }
        if let Some(status) = &pod.status {
            fields.phase = or_empty(&status.phase);
            fields.pod_ip = or_empty(&status.pod_ip);
            fields.pod_ips = status
                .pod_ips
                .iter()
                .flatten()
                .map(|p| p.ip.as_str())
                .collect();
            fields.ready = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .map(|c| ReadyCondition {
                    status: &c.status,
                    last_transition_time: time(&c.last_transition_time),
                });
        }
        fields
    }
}

pub fn pod_from_watched(pod: &WatchedPod) -> Result<Pod, ConvertError> {
    pod_from_fields(&PodFields::from(pod))
}

/// The compact pod, validated: name, IPs, ports, protocols and the phase.
pub fn pod_from_fields(f: &PodFields<'_>) -> Result<Pod, ConvertError> {
    // No controller reads a pod's annotations, and real pods carry many: not kept.
    let meta = pod_meta(f)?;
    let phase = match f.phase {
        "" | "Pending" => PodPhase::Pending,
        "Running" => PodPhase::Running,
        "Succeeded" => PodPhase::Succeeded,
        "Failed" => PodPhase::Failed,
        "Unknown" => PodPhase::Unknown,
        other => {
            return Err(ConvertError::new(
                "status.phase",
                format!(
                    "unknown pod phase {other:?} (want Pending, Running, Succeeded, Failed or Unknown)"
                ),
            ));
        }
    };

    let pod_ip = match f.pod_ip {
        "" => None,
        s => Some(ip(s, || "status.podIP".to_owned())?),
    };
    let mut ips: SmallVec<[IpAddr; 2]> = SmallVec::new();
    for (i, p) in f.pod_ips.iter().enumerate() {
        ips.push(ip(p, || format!("status.podIPs[{i}].ip"))?);
    }
    // The API server fills podIPs from podIP when only podIP is given, and podIP from podIPs[0].
    if ips.is_empty() {
        ips.extend(pod_ip);
    }

    let mut out = Pod::new(meta);
    out.node_name = (!f.node_name.is_empty()).then(|| intern(f.node_name));
    out.phase = phase;
    out.has_pod_ip = !ips.is_empty();
    out.ready = f.ready.is_some_and(|c| c.status == "True");
    out.named_ports = named_ports(f)?;
    out.set_hostname((!f.hostname.is_empty()).then(|| Name::new(f.hostname)));
    out.set_subdomain((!f.subdomain.is_empty()).then(|| intern(f.subdomain)));
    out.set_ips(ips);
    out.set_ready_transition(f.ready.and_then(|c| c.last_transition_time));
    Ok(out)
}

fn pod_meta(f: &PodFields<'_>) -> Result<PodMeta, ConvertError> {
    if f.name.is_empty() {
        return Err(ConvertError::new("metadata.name", "name is required"));
    }
    let namespace = intern(if f.namespace.is_empty() {
        "default"
    } else {
        f.namespace
    });
    let labels = Labels::from_str_pairs(&f.labels);
    let mut meta = PodMeta::new(namespace, Name::new(f.name), labels);
    meta.set_uid(Uid::new(f.uid));
    meta.set_resource_version(ResourceVersion::new(f.resource_version));
    meta.set_creation_timestamp(f.creation_timestamp);
    meta.set_deletion_timestamp(f.deletion_timestamp);
    Ok(meta)
}

/// Named ports of regular containers, then of restartable init containers (sidecars). Every port
/// is validated, named or not.
fn named_ports(f: &PodFields<'_>) -> Result<Arc<[ContainerPort]>, ConvertError> {
    let mut out = Vec::new();
    let groups = [
        ("containers", &f.containers[..], false),
        ("initContainers", &f.init_containers[..], true),
    ];
    for (field, containers, sidecars) in groups {
        for (ci, c) in containers.iter().enumerate() {
            let is_sidecar = c.restart_policy == "Always";
            for (pi, p) in c.ports.iter().enumerate() {
                let at = |f: &str| format!("spec.{field}[{ci}].ports[{pi}].{f}");
                let number = port(p.container_port, 1, || at("containerPort"))?;
                let proto = protocol(p.protocol, || at("protocol"))?.unwrap_or(Protocol::Tcp);
                if p.name.is_empty() || (sidecars && !is_sidecar) {
                    continue;
                }
                out.push(ContainerPort {
                    name: intern(p.name),
                    port: number,
                    protocol: proto,
                    sidecar: sidecars,
                });
            }
        }
    }
    Ok(out.into())
}

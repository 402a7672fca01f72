//! Services, pods, nodes and namespaces as the reconcilers see them.

use std::net::IpAddr;
use std::sync::Arc;

use smallvec::SmallVec;

use super::{Labels, Name, PodIps, Timestamp};

/// The identity and bookkeeping fields every stored object has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    pub namespace: Name,
    pub name: Name,
    pub uid: Name,
    pub resource_version: Name,
    pub generation: i64,
    pub creation_timestamp: Option<Timestamp>,
    pub deletion_timestamp: Option<Timestamp>,
    pub labels: Labels,
    pub annotations: Labels,
}

impl Meta {
    /// "namespace/name", the queue key of upstream controllers.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpFamily {
    V4,
    V6,
}

impl IpFamily {
    pub fn of(ip: &IpAddr) -> IpFamily {
        match ip {
            IpAddr::V4(_) => IpFamily::V4,
            IpAddr::V6(_) => IpFamily::V6,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }

    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetPort {
    Number(i32),
    Name(Name),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    /// Always present; "" when the port is unnamed.
    pub name: Name,
    pub port: i32,
    pub target_port: TargetPort,
    pub protocol: Protocol,
    pub app_protocol: Option<Name>,
    pub node_port: Option<i32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServiceType {
    #[default]
    ClusterIp,
    NodePort,
    LoadBalancer,
    ExternalName,
}

/// `spec.clusterIP`: absent or empty, the literal "None" (headless), or an address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClusterIp {
    #[default]
    Unset,
    Headless,
    Ip(IpAddr),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Service {
    pub meta: Meta,
    pub service_type: ServiceType,
    /// `None` for a selector-less service; `Some(empty)` selects every pod of the namespace.
    pub selector: Option<Labels>,
    pub cluster_ip: ClusterIp,
    pub ip_families: SmallVec<[IpFamily; 2]>,
    pub ports: Vec<ServicePort>,
    pub publish_not_ready_addresses: bool,
    pub traffic_distribution: Option<Name>,
}

impl Service {
    /// Headless: clusterIP "None" or empty, as the slice label rule sees it.
    pub fn is_headless(&self) -> bool {
        matches!(self.cluster_ip, ClusterIp::Headless | ClusterIp::Unset)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// A container port that a named target port can resolve to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerPort {
    pub name: Name,
    pub port: i32,
    pub protocol: Protocol,
    /// Declared by a restartable init container (a sidecar); searched after regular containers.
    pub sidecar: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    pub meta: Meta,
    pub node_name: Option<Name>,
    pub hostname: Option<Name>,
    pub subdomain: Option<Name>,
    pub phase: PodPhase,
    /// `status.podIP` is set, whether or not `podIPs` is.
    pub has_pod_ip: bool,
    /// `status.podIPs`, parsed.
    pub ips: PodIps,
    /// The Ready condition is True.
    pub ready: bool,
    /// lastTransitionTime of the Ready condition, when there is one.
    pub ready_transition: Option<Timestamp>,
    /// Named container ports only, regular containers first, then sidecars. Shared between pods of a
    /// template.
    pub named_ports: Arc<[ContainerPort]>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub name: Name,
    pub labels: Labels,
    pub ready: bool,
    pub allocatable_cpu_millis: i64,
}

impl Node {
    pub fn zone(&self) -> Option<&Name> {
        self.labels
            .get(super::keys::LABEL_ZONE)
            .filter(|z| !z.is_empty())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespace {
    pub name: Name,
    /// Phase Terminating or a deletionTimestamp: creates into it fail.
    pub terminating: bool,
}

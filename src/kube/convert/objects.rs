//! Services, Pods, Nodes and Namespaces: read only. A pod is read as the watch decodes it
//! ([`WatchedPod`]): only the fields the controllers read. The parser skips the rest of the JSON
//! (managedFields, annotations, env, probes, volumes, container statuses) without building it, so
//! a real pod decodes several times faster than into k8s-openapi's full `Pod`, and a list page of
//! 500 pods never holds 500 full objects (`benches/watch.rs`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use smallvec::SmallVec;

use super::{
    ConvertError, MetaRules, ip, labels, meta_from_k8s, non_empty_intern, opt_intern,
    parse_cpu_millis, port, protocol,
};
use crate::model::{
    ClusterIp, IpFamily, IpFamilyPolicy, LOAD_BALANCER_CLEANUP_FINALIZER, LoadBalancerIngress,
    Name, Namespace, Node, Pod, Service, ServiceLoadBalancer, ServicePort, ServiceType, TargetPort,
    TrafficPolicy, intern,
};

const SERVICE: MetaRules = MetaRules {
    namespaced: true,
    intern_name: true,
    generate_name: false,
};

pub fn service_from_k8s(svc: &core::Service) -> Result<Service, ConvertError> {
    let meta = meta_from_k8s(&svc.metadata, SERVICE)?;
    let default_spec = core::ServiceSpec::default();
    let spec = svc.spec.as_ref().unwrap_or(&default_spec);

    let service_type = match spec.type_.as_deref() {
        None | Some("") | Some("ClusterIP") => ServiceType::ClusterIp,
        Some("NodePort") => ServiceType::NodePort,
        Some("LoadBalancer") => ServiceType::LoadBalancer,
        Some("ExternalName") => ServiceType::ExternalName,
        Some(other) => {
            return Err(ConvertError::new(
                "spec.type",
                format!(
                    "unknown service type {other:?} (want ClusterIP, NodePort, LoadBalancer or ExternalName)"
                ),
            ));
        }
    };

    let cluster_ips = spec.cluster_ips.as_deref().unwrap_or_default();
    let mut first_of_cluster_ips = ClusterIp::Unset;
    let mut secondary_cluster_ip = None;
    for (i, s) in cluster_ips.iter().enumerate() {
        let parsed = cluster_ip(s, || format!("spec.clusterIPs[{i}]"))?;
        match (i, parsed) {
            (0, parsed) => first_of_cluster_ips = parsed,
            (1, ClusterIp::Ip(ip)) => secondary_cluster_ip = Some(ip),
            _ => {}
        }
    }
    // The API server fills clusterIP from clusterIPs[0] when only the list is given.
    let cluster_ip = match spec.cluster_ip.as_deref() {
        None | Some("") => first_of_cluster_ips,
        Some(s) => cluster_ip(s, || "spec.clusterIP".to_owned())?,
    };

    let mut ip_families = SmallVec::new();
    for (i, f) in spec.ip_families.iter().flatten().enumerate() {
        ip_families.push(match f.as_str() {
            "IPv4" => IpFamily::V4,
            "IPv6" => IpFamily::V6,
            other => {
                return Err(ConvertError::new(
                    format!("spec.ipFamilies[{i}]"),
                    format!("unknown IP family {other:?} (want IPv4 or IPv6)"),
                ));
            }
        });
    }

    let ports = spec
        .ports
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, p)| service_port(i, p))
        .collect::<Result<_, _>>()?;

    Ok(Service {
        meta,
        service_type,
        // The API server drops an empty selector when it stores a Service (the field is omitted
        // when empty), so `selector: {}` is a Service without a selector.
        selector: spec
            .selector
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(crate::model::Labels::from_pairs),
        cluster_ip,
        ip_families,
        ports,
        publish_not_ready_addresses: spec.publish_not_ready_addresses.unwrap_or(false),
        traffic_distribution: non_empty_intern(&spec.traffic_distribution),
        load_balancer: service_load_balancer(svc, spec, service_type)?.map(Box::new),
        secondary_cluster_ip,
        // Not interned: one Service's own, rarely repeated.
        external_name: (spec.external_name.as_deref())
            .filter(|n| service_type == ServiceType::ExternalName && !n.is_empty())
            .map(Name::new),
    })
}

/// The load-balancer fields, for a Service the service controller may have to act on: of type
/// LoadBalancer, or holding its finalizer or an ingress.
fn service_load_balancer(
    svc: &core::Service,
    spec: &core::ServiceSpec,
    service_type: ServiceType,
) -> Result<Option<ServiceLoadBalancer>, ConvertError> {
    let finalizers = svc.metadata.finalizers.as_deref().unwrap_or_default();
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    let has_finalizer = finalizers
        .iter()
        .any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER);
    if service_type != ServiceType::LoadBalancer && !has_finalizer && ingress.is_empty() {
        return Ok(None);
    }
    let external_traffic_policy = match spec.external_traffic_policy.as_deref() {
        None | Some("") | Some("Cluster") => TrafficPolicy::Cluster,
        Some("Local") => TrafficPolicy::Local,
        Some(other) => {
            return Err(ConvertError::new(
                "spec.externalTrafficPolicy",
                format!("unknown policy {other:?} (want Cluster or Local)"),
            ));
        }
    };
    let ip_family_policy = match spec.ip_family_policy.as_deref() {
        None | Some("") | Some("SingleStack") => IpFamilyPolicy::SingleStack,
        Some("PreferDualStack") => IpFamilyPolicy::PreferDualStack,
        Some("RequireDualStack") => IpFamilyPolicy::RequireDualStack,
        Some(other) => {
            return Err(ConvertError::new(
                "spec.ipFamilyPolicy",
                format!(
                    "unknown policy {other:?} (want SingleStack, PreferDualStack or RequireDualStack)"
                ),
            ));
        }
    };
    let mut cluster_ips = SmallVec::new();
    for (i, s) in spec.cluster_ips.iter().flatten().enumerate() {
        if let ClusterIp::Ip(addr) = cluster_ip(s, || format!("spec.clusterIPs[{i}]"))? {
            cluster_ips.push(addr);
        }
    }
    if cluster_ips.is_empty()
        && let Some(s) = spec.cluster_ip.as_deref()
        && let ClusterIp::Ip(addr) = cluster_ip(s, || "spec.clusterIP".to_owned())?
    {
        cluster_ips.push(addr);
    }
    let ingress = ingress
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let ip = match entry.ip.as_deref() {
                None | Some("") => None,
                Some(s) => Some(ip(s, || format!("status.loadBalancer.ingress[{i}].ip"))?),
            };
            Ok(LoadBalancerIngress {
                ip,
                hostname: non_empty_name(&entry.hostname),
                ip_mode: non_empty_intern(&entry.ip_mode),
            })
        })
        .collect::<Result<_, ConvertError>>()?;
    let names = |list: &Option<Vec<String>>| -> Vec<Name> {
        list.iter().flatten().map(|s| Name::new(s)).collect()
    };
    Ok(Some(ServiceLoadBalancer {
        class: non_empty_intern(&spec.load_balancer_class),
        finalizers: finalizers.iter().map(|f| intern(f)).collect(),
        external_traffic_policy,
        health_check_node_port: spec.health_check_node_port.filter(|p| *p != 0),
        load_balancer_ip: non_empty_name(&spec.load_balancer_ip),
        source_ranges: names(&spec.load_balancer_source_ranges),
        external_ips: names(&spec.external_ips),
        session_affinity: non_empty_intern(&spec.session_affinity),
        session_affinity_timeout: spec
            .session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds),
        ip_family_policy,
        cluster_ips,
        ingress,
    }))
}

fn cluster_ip(s: &str, path: impl FnOnce() -> String) -> Result<ClusterIp, ConvertError> {
    Ok(match s {
        "" => ClusterIp::Unset,
        "None" => ClusterIp::Headless,
        s => ClusterIp::Ip(ip(s, path)?),
    })
}

fn service_port(i: usize, p: &core::ServicePort) -> Result<ServicePort, ConvertError> {
    let at = |field: &str| format!("spec.ports[{i}].{field}");
    let number = port(p.port, 1, || at("port"))?;
    let target_port = match &p.target_port {
        // The API server defaults an absent, zero or empty targetPort to the port.
        None | Some(IntOrString::Int(0)) => TargetPort::Number(number),
        Some(IntOrString::String(s)) if s.is_empty() => TargetPort::Number(number),
        Some(IntOrString::Int(n)) => TargetPort::Number(port(*n, 1, || at("targetPort"))?),
        Some(IntOrString::String(s)) => {
            // The API server accepts only port names with a letter: a quoted number is a mistake,
            // not a name that would never resolve.
            if s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ConvertError::new(
                    at("targetPort"),
                    format!(
                        "{s:?} is not a valid port name (a name has a letter; give numbers unquoted)"
                    ),
                ));
            }
            TargetPort::Name(intern(s))
        }
    };
    let node_port = match p.node_port {
        None | Some(0) => None,
        Some(n) => Some(port(n, 1, || at("nodePort"))?),
    };
    Ok(ServicePort {
        name: p.name.as_deref().map(intern).unwrap_or_default(),
        port: number,
        target_port,
        protocol: protocol(p.protocol.as_deref().unwrap_or_default(), || at("protocol"))?
            .unwrap_or_default(),
        app_protocol: opt_intern(&p.app_protocol),
        node_port,
    })
}

/// A full pod (manifests, fixtures), through the same conversion as a watched one.
pub fn pod_from_k8s(pod: &core::Pod) -> Result<Pod, ConvertError> {
    super::pod::pod_from_watched(&WatchedPod::from(pod))
}

pub fn node_from_k8s(node: &core::Node) -> Result<Node, ConvertError> {
    let name = node.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        return Err(ConvertError::new("metadata.name", "name is required"));
    }
    let status = node.status.as_ref();
    Ok(Node {
        name: intern(name),
        labels: labels(&node.metadata.labels),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        // An unreadable quantity counts as no capacity, as for a node that reports none.
        allocatable_cpu_millis: status
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get("cpu"))
            .and_then(|q| parse_cpu_millis(&q.0))
            .unwrap_or(0),
        provider_id: node
            .spec
            .as_ref()
            .and_then(|s| non_empty_name(&s.provider_id)),
        deleting: node.metadata.deletion_timestamp.is_some(),
        to_be_deleted: node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .any(|t| t.key == TAINT_TO_BE_DELETED),
    })
}

/// A string that is unique to its object (an address, a provider ID): not interned.
fn non_empty_name(s: &Option<String>) -> Option<Name> {
    s.as_deref().filter(|s| !s.is_empty()).map(Name::new)
}

/// The cluster autoscaler's taint on a node it is about to delete.
pub const TAINT_TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";

pub fn namespace_from_k8s(ns: &core::Namespace) -> Result<Namespace, ConvertError> {
    let name = ns.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        return Err(ConvertError::new("metadata.name", "name is required"));
    }
    let phase = ns.status.as_ref().and_then(|s| s.phase.as_deref());
    Ok(Namespace {
        name: intern(name),
        terminating: phase == Some("Terminating") || ns.metadata.deletion_timestamp.is_some(),
        labels: labels(&ns.metadata.labels),
    })
}

/// `core::Pod` cut down to what [`pod_from_watched`] reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WatchedPod {
    /// Not read, but there: a repeated `kind` or `apiVersion` is refused like any repeated field,
    /// as k8s-openapi's types refuse one of another value (see `manifest::json`).
    #[serde(default, rename = "kind")]
    _kind: Option<IgnoredAny>,
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "mapping")]
    pub spec: Option<WatchedPodSpec>,
    #[serde(default, deserialize_with = "mapping")]
    pub status: Option<WatchedPodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedPodSpec {
    pub node_name: Option<String>,
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
    #[serde(default, deserialize_with = "mappings")]
    pub containers: Option<Vec<WatchedContainer>>,
    #[serde(default, deserialize_with = "mappings")]
    pub init_containers: Option<Vec<WatchedContainer>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedContainer {
    pub ports: Option<Vec<core::ContainerPort>>,
    pub restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedPodStatus {
    pub phase: Option<String>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(rename = "podIPs")]
    pub pod_ips: Option<Vec<core::PodIP>>,
    pub conditions: Option<Vec<core::PodCondition>>,
}

/// The metadata fields a pod's conversion reads; the rest is skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
}

/// A struct read from a mapping only, as k8s-openapi's types are: serde's derive also takes a
/// sequence of the fields in order, and would word a misplaced list as a mistake deeper down.
pub(super) struct Mapped<T>(pub(super) T);

/// The k8s-openapi name of the type a cut-down struct stands for, for messages.
pub(super) trait Mapping {
    const NAME: &'static str;
}

impl Mapping for WatchedPodSpec {
    const NAME: &'static str = "PodSpec";
}

impl Mapping for WatchedPodStatus {
    const NAME: &'static str = "PodStatus";
}

impl Mapping for WatchedContainer {
    const NAME: &'static str = "Container";
}

impl Mapping for PodMetadata {
    const NAME: &'static str = "ObjectMeta";
}

impl<'de, T: Deserialize<'de> + Mapping> Deserialize<'de> for Mapped<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OnlyMap<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Mapping> serde::de::Visitor<'de> for OnlyMap<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(T::NAME)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(OnlyMap(std::marker::PhantomData))
            .map(Mapped)
    }
}

pub(super) fn mapping<'de, D: Deserializer<'de>, T: Deserialize<'de> + Mapping>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(Option::<Mapped<T>>::deserialize(d)?.map(|m| m.0))
}

pub(super) fn mappings<'de, D: Deserializer<'de>, T: Deserialize<'de> + Mapping>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let list = Option::<Vec<Mapped<T>>>::deserialize(d)?;
    Ok(list.map(|l| l.into_iter().map(|m| m.0).collect()))
}

fn read_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let Mapped(m) = Mapped::<PodMetadata>::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

fn watched_containers(containers: &[core::Container]) -> Vec<WatchedContainer> {
    containers
        .iter()
        .map(|c| WatchedContainer {
            ports: c.ports.clone(),
            restart_policy: c.restart_policy.clone(),
        })
        .collect()
}

/// The same cut of a full pod (manifests, fixtures): the one conversion serves both.
impl From<&core::Pod> for WatchedPod {
    fn from(pod: &core::Pod) -> Self {
        let m = &pod.metadata;
        WatchedPod {
            _kind: None,
            _api_version: None,
            metadata: ObjectMeta {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                labels: m.labels.clone(),
                creation_timestamp: m.creation_timestamp.clone(),
                deletion_timestamp: m.deletion_timestamp.clone(),
                ..ObjectMeta::default()
            },
            spec: pod.spec.as_ref().map(|s| WatchedPodSpec {
                node_name: s.node_name.clone(),
                hostname: s.hostname.clone(),
                subdomain: s.subdomain.clone(),
                containers: Some(watched_containers(&s.containers)),
                init_containers: s.init_containers.as_deref().map(watched_containers),
            }),
            status: pod.status.as_ref().map(|s| WatchedPodStatus {
                phase: s.phase.clone(),
                pod_ip: s.pod_ip.clone(),
                pod_ips: s.pod_ips.clone(),
                conditions: s.conditions.clone(),
            }),
        }
    }
}

impl k8s_openapi::Resource for WatchedPod {
    const API_VERSION: &'static str = <core::Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <core::Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <core::Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <core::Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <core::Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for WatchedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

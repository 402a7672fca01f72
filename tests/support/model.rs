//! An independent model of what the controllers must leave in the cluster, written from upstream's
//! rules (k8s.io/endpointslice `podToEndpoint`, `getEndpointPorts`, `getAddressTypesForService`;
//! the endpoint controller's `podToEndpointAddressForService` and `addEndpointSubset`;
//! `ShouldPodBeInEndpoints` and `FindPort` in pkg/api/v1/pod). It calls none of sliced's code: a
//! bug in the reconcilers cannot hide in it.
//!
//! It describes content, not layout: for each Service, every endpoint it must publish, with the
//! ports of the slice holding it; for the Endpoints controller, every address with its ports.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use sliced::model::{
    Address, ClusterIp, EndpointSlice, Endpoints, IpFamily, Labels, Name, Node, Pod, PodPhase,
    Protocol, Service, ServiceType, TargetPort,
};
use sliced::snapshot::Snapshot;

const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const SLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";
const ZONE: &str = "topology.kubernetes.io/zone";

/// One port as a slice or an Endpoints subset carries it: (name, port, protocol).
pub type Port = (String, i32, Protocol);

/// One endpoint of a Service's slices, with the ports of its slice.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SliceEndpoint {
    pub address_type: String,
    pub pod: String,
    pub addresses: Vec<IpAddr>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub node: String,
    pub zone: String,
    pub hostname: String,
    pub ports: Vec<Port>,
}

/// One address of an Endpoints object, with the ports of its subset.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EndpointsAddress {
    pub ip: IpAddr,
    pub ready: bool,
    pub pod: String,
    pub node: String,
    pub hostname: String,
    pub ports: Vec<Port>,
}

/// "namespace/name" → what the Service must publish.
pub type SliceModel = BTreeMap<String, Vec<SliceEndpoint>>;
pub type EndpointsModel = BTreeMap<String, Vec<EndpointsAddress>>;

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn text(n: Option<&Name>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// Every label of the selector is on the pod, with the same value.
fn selects(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn is_ipv6(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(_))
}

/// `ShouldPodBeInEndpoints`: not terminal, has an IP, and not terminating unless those count.
fn in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed) {
        return false;
    }
    if !pod.has_pod_ip && pod.ips().is_empty() {
        return false;
    }
    include_terminating || pod.meta.deletion_timestamp().is_none()
}

/// `FindPort`: a number as it is; a name from the pod's container ports of the same protocol,
/// regular containers before sidecars.
fn find_port(pod: &Pod, target: &TargetPort, protocol: Protocol) -> Option<i32> {
    match target {
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => {
            let mut ports: Vec<_> = pod.named_ports.iter().collect();
            ports.sort_by_key(|p| p.sidecar);
            ports
                .iter()
                .find(|p| p.name == *name && p.protocol == protocol)
                .map(|p| p.port)
        }
    }
}

/// The service's ports that resolve for this pod.
fn resolved_ports(service: &Service, pod: &Pod) -> Vec<Port> {
    let mut ports: Vec<Port> = service
        .ports
        .iter()
        .filter_map(|p| {
            let n = find_port(pod, &p.target_port, p.protocol)?;
            Some((p.name.to_string(), n, p.protocol))
        })
        .collect();
    ports.sort();
    ports
}

fn headless(service: &Service) -> bool {
    service.cluster_ip == ClusterIp::Headless
}

/// `getAddressTypesForService`.
fn address_types(service: &Service) -> Vec<IpFamily> {
    if !service.ip_families.is_empty() {
        let mut families: Vec<IpFamily> = service.ip_families.to_vec();
        families.dedup();
        return families;
    }
    match service.cluster_ip {
        ClusterIp::Ip(ip) if is_ipv6(&ip) => vec![IpFamily::V6],
        ClusterIp::Ip(_) => vec![IpFamily::V4],
        _ => vec![IpFamily::V4, IpFamily::V6],
    }
}

fn wants_endpoints(service: &Service) -> bool {
    service.service_type != ServiceType::ExternalName && service.selector.is_some()
}

fn members<'a>(snapshot: &'a Snapshot, service: &'a Service) -> impl Iterator<Item = &'a Pod> {
    let selector = service.selector.clone().unwrap_or_default();
    snapshot.pods.iter().filter(move |p| {
        p.meta.namespace == service.meta.namespace && selects(&selector, &p.meta.labels)
    })
}

fn hostname_for(service: &Service, pod: &Pod) -> String {
    match (pod.hostname(), pod.subdomain()) {
        (Some(h), Some(sub)) if *sub == service.meta.name => h.to_string(),
        _ => String::new(),
    }
}

/// What the EndpointSlice controller must publish for every Service with a selector.
pub fn slices(snapshot: &Snapshot) -> SliceModel {
    let nodes: BTreeMap<&str, &Node> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut model = SliceModel::new();
    for service in snapshot.services.iter().filter(|s| wants_endpoints(s)) {
        let mut endpoints = Vec::new();
        for pod in members(snapshot, service) {
            if !in_endpoints(pod, true) {
                continue;
            }
            let node_name = text(pod.node_name.as_ref());
            let zone = match nodes.get(node_name.as_str()) {
                Some(node) => text(node.labels.get(ZONE)),
                // A pod on a node that does not exist is left out, unless not-ready addresses
                // are published anyway.
                None if !node_name.is_empty() && !service.publish_not_ready_addresses => continue,
                None => String::new(),
            };
            let serving = pod.ready;
            let terminating = pod.meta.deletion_timestamp().is_some();
            let ready = service.publish_not_ready_addresses || (serving && !terminating);
            let ports = if service.ports.is_empty() && headless(service) {
                Vec::new()
            } else {
                resolved_ports(service, pod)
            };
            for family in address_types(service) {
                let mut addresses: Vec<IpAddr> = pod
                    .ips()
                    .iter()
                    .copied()
                    .filter(|ip| is_ipv6(ip) == (family == IpFamily::V6))
                    .collect();
                if addresses.is_empty() {
                    continue;
                }
                addresses.sort();
                endpoints.push(SliceEndpoint {
                    address_type: if family == IpFamily::V6 {
                        "IPv6"
                    } else {
                        "IPv4"
                    }
                    .into(),
                    pod: pod.meta.name.to_string(),
                    addresses,
                    ready,
                    serving,
                    terminating,
                    node: node_name.clone(),
                    zone: zone.clone(),
                    hostname: hostname_for(service, pod),
                    ports: ports.clone(),
                });
            }
        }
        endpoints.sort();
        model.insert(key(&service.meta.namespace, &service.meta.name), endpoints);
    }
    model
}

/// What the EndpointSlice controller's slices hold, in the model's terms, for the Services of
/// `model`; and every rule a slice breaks (over `max` endpoints, wrong labels or owner).
pub fn observed_slices(
    objects: &[&EndpointSlice],
    services: &[Service],
    max: usize,
) -> (SliceModel, Vec<String>) {
    let mut broken = Vec::new();
    let mut observed = SliceModel::new();
    let uids: BTreeMap<String, &Name> = services
        .iter()
        .map(|s| (key(&s.meta.namespace, &s.meta.name), &s.meta.uid))
        .collect();
    for slice in objects {
        if slice.meta.labels.get(MANAGED_BY).map(|m| m.as_str()) != Some(SLICE_CONTROLLER) {
            continue;
        }
        let service = text(slice.meta.labels.get(SERVICE_NAME));
        let service_key = key(&slice.meta.namespace, &service);
        let name = &slice.meta.name;
        if slice.endpoints.len() > max {
            broken.push(format!("{name}: {} endpoints", slice.endpoints.len()));
        }
        match uids.get(&service_key) {
            Some(uid) if slice.owner_references.iter().any(|o| o.uid == **uid) => {}
            _ => broken.push(format!("{name}: not owned by service {service_key}")),
        }
        let mut ports: Vec<Port> = slice
            .ports
            .iter()
            .map(|p| {
                (
                    text(p.name.as_ref()),
                    p.port.unwrap_or_default(),
                    p.protocol.unwrap_or_default(),
                )
            })
            .collect();
        ports.sort();
        for e in &slice.endpoints {
            let mut addresses: Vec<IpAddr> = e
                .addresses
                .iter()
                .filter_map(|a| match a {
                    Address::Ip(ip) => Some(*ip),
                    Address::Text(_) => None,
                })
                .collect();
            addresses.sort();
            observed
                .entry(service_key.clone())
                .or_default()
                .push(SliceEndpoint {
                    address_type: slice.address_type.to_string(),
                    pod: text(e.target_ref.as_ref().and_then(|t| t.name.as_ref())),
                    addresses,
                    ready: e.conditions.ready == Some(true),
                    serving: e.conditions.serving == Some(true),
                    terminating: e.conditions.terminating == Some(true),
                    node: text(e.node_name.as_ref()),
                    zone: text(e.zone.as_ref()),
                    hostname: text(e.hostname.as_ref()),
                    ports: ports.clone(),
                });
        }
    }
    for endpoints in observed.values_mut() {
        endpoints.sort();
    }
    (observed, broken)
}

/// `podToEndpointAddressForService`'s choice of family: the Service's first, else its cluster
/// IP's, else (headless) the pod's.
fn endpoints_family(service: &Service, pod: &Pod) -> IpFamily {
    if let Some(first) = service.ip_families.first() {
        return *first;
    }
    match service.cluster_ip {
        ClusterIp::Ip(ip) if is_ipv6(&ip) => IpFamily::V6,
        ClusterIp::Ip(_) => IpFamily::V4,
        _ if pod.ips().first().is_some_and(is_ipv6) => IpFamily::V6,
        _ => IpFamily::V4,
    }
}

/// What the Endpoints controller must publish for every Service with a selector (of at most 1,000
/// addresses: beyond, the controller truncates, which the model leaves out).
pub fn endpoints(snapshot: &Snapshot) -> EndpointsModel {
    let mut model = EndpointsModel::new();
    for service in snapshot.services.iter().filter(|s| wants_endpoints(s)) {
        let publish = service.publish_not_ready_addresses;
        let mut addresses = Vec::new();
        for pod in members(snapshot, service) {
            if !in_endpoints(pod, publish) {
                continue;
            }
            let family = endpoints_family(service, pod);
            let Some(ip) = pod
                .ips()
                .iter()
                .copied()
                .find(|ip| is_ipv6(ip) == (family == IpFamily::V6))
            else {
                continue;
            };
            let ports = if service.ports.is_empty() {
                if !headless(service) {
                    continue;
                }
                Vec::new()
            } else {
                let ports = resolved_ports(service, pod);
                if ports.is_empty() {
                    continue;
                }
                ports
            };
            addresses.push(EndpointsAddress {
                ip,
                ready: publish || pod.ready,
                pod: pod.meta.name.to_string(),
                node: text(pod.node_name.as_ref()),
                hostname: hostname_for(service, pod),
                ports,
            });
        }
        addresses.sort();
        model.insert(key(&service.meta.namespace, &service.meta.name), addresses);
    }
    model
}

/// What Endpoints objects hold, in the model's terms. Addresses listed under several subsets (one
/// per port set) come together with the union of their ports.
pub fn observed_endpoints(objects: &[&Endpoints]) -> EndpointsModel {
    let mut observed = EndpointsModel::new();
    for e in objects {
        let mut by_address: BTreeMap<(IpAddr, bool, String, String, String), BTreeSet<Port>> =
            BTreeMap::new();
        for subset in &e.subsets {
            let ports: Vec<Port> = subset
                .ports
                .iter()
                .map(|p| {
                    (
                        text(p.name.as_ref()),
                        p.port,
                        p.protocol.unwrap_or_default(),
                    )
                })
                .collect();
            let groups = [
                (&subset.addresses, true),
                (&subset.not_ready_addresses, false),
            ];
            for (list, ready) in groups {
                for a in list {
                    let Address::Ip(ip) = a.ip else { continue };
                    let entry = by_address
                        .entry((
                            ip,
                            ready,
                            text(a.target_ref.as_ref().and_then(|t| t.name.as_ref())),
                            text(a.node_name.as_ref()),
                            text(a.hostname.as_ref()),
                        ))
                        .or_default();
                    entry.extend(ports.iter().cloned());
                }
            }
        }
        let mut addresses: Vec<EndpointsAddress> = by_address
            .into_iter()
            .map(
                |((ip, ready, pod, node, hostname), ports)| EndpointsAddress {
                    ip,
                    ready,
                    pod,
                    node,
                    hostname,
                    ports: ports.into_iter().collect(),
                },
            )
            .collect();
        addresses.sort();
        observed.insert(key(&e.meta.namespace, &e.meta.name), addresses);
    }
    observed
}

/// The differences between what the model wants and what is there, service by service: empty
/// when they agree.
pub fn differences<T: Ord + std::fmt::Debug>(
    want: &BTreeMap<String, Vec<T>>,
    got: &BTreeMap<String, Vec<T>>,
) -> Vec<String> {
    let mut out = Vec::new();
    let empty = Vec::new();
    for (service, wanted) in want {
        let found = got.get(service).unwrap_or(&empty);
        if wanted != found {
            let missing: Vec<&T> = wanted.iter().filter(|w| !found.contains(w)).collect();
            let extra: Vec<&T> = found.iter().filter(|f| !wanted.contains(f)).collect();
            out.push(format!(
                "{service}: {} wanted, {} found; missing {:?}; extra {:?}",
                wanted.len(),
                found.len(),
                missing.iter().take(3).collect::<Vec<_>>(),
                extra.iter().take(3).collect::<Vec<_>>()
            ));
        }
    }
    for service in got.keys().filter(|k| !want.contains_key(*k)) {
        if got.get(service).is_some_and(|v| !v.is_empty()) {
            out.push(format!(
                "{service}: endpoints for a service that wants none"
            ));
        }
    }
    out
}

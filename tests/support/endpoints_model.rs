//! An independent model of what upstream's endpoints controller writes into a v1 Endpoints object,
//! written from upstream's rules in plain types (strings, vectors, maps) and sharing no code with the
//! reconciler under test:
//!
//! - `syncService` (pkg/controller/endpoint/endpoints_controller.go): for each pod the selector
//!   matches, `ShouldPodBeInEndpoints` (pkg/controller/util/endpoint: not terminal, has an IP, not
//!   being deleted unless the service publishes not-ready addresses), `podToEndpointAddressForService`
//!   (the first `status.podIPs` entry of the service's family: `ipFamilies[0]`, else the cluster IP's,
//!   else the pod IP's), `ShouldSetHostname` (hostname set, subdomain is the service's name, same
//!   namespace), then one one-address subset per pod and resolved port (`FindPort`: a number as it
//!   is; a name in the regular containers, then in restartable init containers, same protocol too),
//!   ready when the pod is ready or the service publishes not-ready addresses; a headless service
//!   without ports gets one subset without ports per pod.
//! - `RepackSubsets` (pkg/api/v1/endpoints/util.go): addresses identified by IP and target UID, the
//!   first occurrence keeping the record; per port (the whole port struct), not ready trumps ready; a
//!   subset without ports maps to a sentinel port that is stripped again; ports serving the same
//!   addresses with the same readiness share a subset; then `SortSubsets`: addresses by IP text
//!   byte-wise then target UID, ports and subsets by the hash of the Go value.
//!
//! The one thing not re-derived here is that hash order (`sliced::reconcile::hash_order`), which its
//! own tests check against values computed by Go (tests/vectors/go_hash). The model hands its subsets
//! to it only to sort them.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use sliced::model::{
    Address, EndpointAddress, EndpointSubset, EndpointsPort, Name, Protocol, TargetRef, Uid,
};
use sliced::reconcile::hash_order;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Clone, Debug)]
pub struct MContainerPort {
    pub name: String,
    pub port: i32,
    pub protocol: &'static str,
}

/// A pod as the API server serves it, only the fields the controller reads.
#[derive(Clone, Debug)]
pub struct MPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node_name: Option<String>,
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
    pub phase: Phase,
    /// `status.podIP`.
    pub pod_ip: Option<String>,
    /// `status.podIPs`.
    pub pod_ips: Vec<String>,
    /// The Ready condition is True.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Ports of `spec.containers`, in order.
    pub containers: Vec<MContainerPort>,
    /// Ports of `spec.initContainers` with `restartPolicy: Always`, in order.
    pub sidecars: Vec<MContainerPort>,
}

#[derive(Clone, Debug)]
pub enum MTarget {
    Number(i32),
    Name(String),
}

#[derive(Clone, Debug)]
pub struct MServicePort {
    pub name: String,
    pub target: MTarget,
    pub protocol: &'static str,
    pub app_protocol: Option<String>,
}

#[derive(Clone, Debug)]
pub struct MService {
    pub namespace: String,
    pub name: String,
    /// `spec.clusterIP`: "" (unset), "None" or an address.
    pub cluster_ip: String,
    /// `spec.ipFamilies`: "IPv4" / "IPv6".
    pub ip_families: Vec<&'static str>,
    pub ports: Vec<MServicePort>,
    pub publish_not_ready_addresses: bool,
}

/// `v1.EndpointAddress` as the controller builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MAddress {
    pub ip: String,
    pub hostname: String,
    pub node_name: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// `v1.EndpointPort`: compared as a whole struct, as upstream's map key does.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MPort {
    pub name: String,
    pub port: i32,
    pub protocol: &'static str,
    pub app_protocol: Option<String>,
}

/// `v1.EndpointSubset`.
#[derive(Clone, Debug, Default)]
pub struct MSubset {
    pub addresses: Vec<MAddress>,
    pub not_ready_addresses: Vec<MAddress>,
    pub ports: Vec<MPort>,
}

fn is_v6(ip: &str) -> bool {
    ip.contains(':')
}

/// `ShouldPodBeInEndpoints`.
fn should_be_in_endpoints(pod: &MPod, include_terminating: bool) -> bool {
    if matches!(pod.phase, Phase::Succeeded | Phase::Failed) {
        return false;
    }
    if pod.pod_ip.as_deref().unwrap_or("").is_empty() && pod.pod_ips.is_empty() {
        return false;
    }
    include_terminating || !pod.deleting
}

/// `podToEndpointAddressForService`, without the hostname.
fn address_for(service: &MService, pod: &MPod) -> Option<MAddress> {
    let want_v6 = match service.ip_families.first() {
        Some(family) => *family == "IPv6",
        None if !service.cluster_ip.is_empty() && service.cluster_ip != "None" => {
            is_v6(&service.cluster_ip)
        }
        None => is_v6(pod.pod_ip.as_deref().unwrap_or("")),
    };
    let ip = pod.pod_ips.iter().find(|ip| is_v6(ip) == want_v6)?;
    Some(MAddress {
        ip: ip.clone(),
        hostname: String::new(),
        node_name: pod.node_name.clone().unwrap_or_default(),
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    })
}

/// `FindPort`.
fn find_port(pod: &MPod, port: &MServicePort) -> Option<i32> {
    match &port.target {
        MTarget::Number(n) => Some(*n),
        MTarget::Name(name) => pod
            .containers
            .iter()
            .chain(&pod.sidecars)
            .find(|c| &c.name == name && c.protocol == port.protocol)
            .map(|c| c.port),
    }
}

/// The subsets `syncService` builds before `RepackSubsets`: one address each, under one port (none
/// for a headless service without ports).
pub fn unpacked(service: &MService, pods: &[MPod]) -> Vec<MSubset> {
    let mut out = Vec::new();
    for pod in pods {
        if !should_be_in_endpoints(pod, service.publish_not_ready_addresses) {
            continue;
        }
        let Some(mut address) = address_for(service, pod) else {
            continue;
        };
        if let Some(hostname) = &pod.hostname
            && !hostname.is_empty()
            && pod.subdomain.as_deref() == Some(service.name.as_str())
            && pod.namespace == service.namespace
        {
            address.hostname = hostname.clone();
        }
        let ready = service.publish_not_ready_addresses || pod.ready;
        let subset = |ports: Vec<MPort>| {
            let (addresses, not_ready_addresses) = if ready {
                (vec![address.clone()], vec![])
            } else {
                (vec![], vec![address.clone()])
            };
            MSubset {
                addresses,
                not_ready_addresses,
                ports,
            }
        };
        if service.ports.is_empty() {
            if service.cluster_ip == "None" {
                out.push(subset(vec![]));
            }
            continue;
        }
        for sp in &service.ports {
            let Some(number) = find_port(pod, sp) else {
                continue;
            };
            out.push(subset(vec![MPort {
                name: sp.name.clone(),
                port: number,
                protocol: sp.protocol,
                app_protocol: sp.app_protocol.clone(),
            }]));
        }
    }
    out
}

/// `LessEndpointAddress`: IP text byte-wise, then target UID (every address here has a target).
fn address_less(a: &MAddress, b: &MAddress) -> std::cmp::Ordering {
    a.ip.as_bytes()
        .cmp(b.ip.as_bytes())
        .then_with(|| a.uid.cmp(&b.uid))
}

/// The model's Endpoints subsets for `service` over `pods` (the pods its selector matches, in the
/// order the lister gives them), in the crate's types for comparison.
pub fn subsets(service: &MService, pods: &[MPod]) -> Vec<EndpointSubset> {
    repack(&unpacked(service, pods))
}

/// `RepackSubsets`, in the crate's types for comparison.
pub fn repack(subsets: &[MSubset]) -> Vec<EndpointSubset> {
    // Identities (IP, target UID) in order of first occurrence, each keeping its first record.
    let mut records: Vec<MAddress> = Vec::new();
    // Per port key (the sentinel `None` for no ports): identity -> ready.
    let mut by_port: Vec<(Option<MPort>, BTreeMap<usize, bool>)> = Vec::new();
    for subset in subsets {
        let ports: Vec<Option<MPort>> = if subset.ports.is_empty() {
            vec![None]
        } else {
            subset.ports.iter().cloned().map(Some).collect()
        };
        for port in ports {
            let p = match by_port.iter().position(|(p, _)| *p == port) {
                Some(p) => p,
                None => {
                    by_port.push((port, BTreeMap::new()));
                    by_port.len() - 1
                }
            };
            let ready = subset.addresses.iter().map(|a| (a, true));
            let not_ready = subset.not_ready_addresses.iter().map(|a| (a, false));
            for (address, is_ready) in ready.chain(not_ready) {
                let id = match records
                    .iter()
                    .position(|r| r.ip == address.ip && r.uid == address.uid)
                {
                    Some(id) => id,
                    None => {
                        records.push(address.clone());
                        records.len() - 1
                    }
                };
                let was = by_port[p].1.entry(id).or_insert(is_ready);
                // Not ready trumps ready.
                *was = *was && is_ready;
            }
        }
    }
    // Ports whose address sets (with readiness) are equal share a subset.
    let mut groups: Vec<(BTreeMap<usize, bool>, Vec<MPort>)> = Vec::new();
    for (port, members) in by_port {
        let g = match groups.iter().position(|(m, _)| *m == members) {
            Some(g) => g,
            None => {
                groups.push((members, Vec::new()));
                groups.len() - 1
            }
        };
        // The sentinel is stripped.
        if let Some(port) = port {
            groups[g].1.push(port);
        }
    }
    let mut out: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|(members, ports)| {
            let mut ready: Vec<&MAddress> = Vec::new();
            let mut not_ready: Vec<&MAddress> = Vec::new();
            for (id, is_ready) in members {
                if is_ready {
                    ready.push(&records[id]);
                } else {
                    not_ready.push(&records[id]);
                }
            }
            ready.sort_by(|a, b| address_less(a, b));
            not_ready.sort_by(|a, b| address_less(a, b));
            let mut ports: Vec<EndpointsPort> = ports.iter().map(to_port).collect();
            hash_order::sort_endpoints_ports(&mut ports);
            EndpointSubset {
                addresses: ready.into_iter().map(to_address).collect(),
                not_ready_addresses: not_ready.into_iter().map(to_address).collect(),
                ports,
            }
        })
        .collect();
    hash_order::sort_subsets(&mut out);
    out
}

fn protocol(p: &str) -> Protocol {
    match p {
        "TCP" => Protocol::Tcp,
        "UDP" => Protocol::Udp,
        "SCTP" => Protocol::Sctp,
        other => panic!("protocol {other}"),
    }
}

/// Go's empty string is the crate's `None` (the field is omitted in JSON).
fn text(s: &str) -> Option<Name> {
    (!s.is_empty()).then(|| Name::new(s))
}

/// Plain conversion, no repacking: what a stored object in this layout holds.
pub fn to_subsets(subsets: &[MSubset]) -> Vec<EndpointSubset> {
    subsets
        .iter()
        .map(|s| EndpointSubset {
            addresses: s.addresses.iter().map(to_address).collect(),
            not_ready_addresses: s.not_ready_addresses.iter().map(to_address).collect(),
            ports: s.ports.iter().map(to_port).collect(),
        })
        .collect()
}

fn to_port(p: &MPort) -> EndpointsPort {
    EndpointsPort {
        name: text(&p.name),
        port: p.port,
        protocol: Some(protocol(p.protocol)),
        app_protocol: p.app_protocol.as_deref().map(Name::new),
    }
}

fn to_address(a: &MAddress) -> Arc<EndpointAddress> {
    Arc::new(EndpointAddress {
        ip: Address::Ip(a.ip.parse::<IpAddr>().expect("an IP")),
        hostname: text(&a.hostname),
        // Upstream always sets nodeName, to the pod's, empty or not.
        node_name: Some(Name::new(&a.node_name)),
        target_ref: Some(TargetRef {
            kind: Some(Name::new("Pod")),
            namespace: text(&a.namespace),
            name: text(&a.name),
            uid: (!a.uid.is_empty()).then(|| Uid::new(&a.uid)),
            api_version: None,
            resource_version: None,
        }),
    })
}

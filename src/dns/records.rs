//! The records of a view: per Service (A, AAAA, SRV, CNAME and endpoint names), PTR, and pod
//! records; all of them, or those of one name.

use std::collections::HashMap;
use std::net::IpAddr;

use super::names::{QueryScope, canonical, dashed, reverse_name, scope, undashed};
use super::{DnsView, PodRecords, Record, RecordType, in_pod_cache, sorted, terminal};
use crate::model::{Address, ClusterIp, EndpointSlice, Pod, Protocol, Service, ServiceType};

/// A ready address of a Service's slices, with the label naming it.
pub(super) struct ReadyAddress {
    pub ip: IpAddr,
    pub label: String,
}

/// One port of an SRV answer: its name, protocol and number; `None` for a slice without ports
/// (CoreDNS's port -1, counted in weights, never answered).
type SrvPort = Option<(String, Protocol, i32)>;

/// One entry CoreDNS's backend finds for an SRV name: a port, how many times it counts (once per
/// cluster IP), and the name it answers with.
struct SrvEntry {
    port: SrvPort,
    copies: usize,
    target: String,
}

/// SRV weight as CoreDNS gives it: every entry priority 0, weight `floor(100 / N)` over the `N`
/// entries found for the name (duplicates included), and never 0.
fn weight(entries: usize) -> usize {
    (100 / entries.max(1)).max(1)
}

fn proto_label(protocol: Protocol) -> String {
    protocol.as_str().to_ascii_lowercase()
}

impl<'a> DnsView<'a> {
    /// The cluster IPs of `service`, primary first.
    pub(super) fn cluster_ips(service: &Service) -> Vec<IpAddr> {
        let mut ips = Vec::with_capacity(2);
        if let ClusterIp::Ip(ip) = service.cluster_ip {
            ips.push(ip);
        }
        ips.extend(service.secondary_cluster_ip);
        ips
    }

    /// The ready addresses of one slice, each with its endpoint label: the endpoint's hostname,
    /// else the dashed address.
    pub(super) fn ready_addresses(slice: &EndpointSlice) -> Vec<ReadyAddress> {
        let mut out = Vec::new();
        for endpoint in &slice.endpoints {
            if endpoint.conditions.ready == Some(false) {
                continue;
            }
            for address in &endpoint.addresses {
                // FQDN addresses name no record of their own.
                let Address::Ip(ip) = address else { continue };
                let label = match &endpoint.hostname {
                    Some(hostname) => hostname.to_string(),
                    None => dashed(*ip),
                };
                out.push(ReadyAddress { ip: *ip, label });
            }
        }
        out
    }

    /// Every record under `<service>.<namespace>.svc.<zone>.`.
    pub(super) fn service_records(&self, service: &Service, out: &mut Vec<Record>) {
        let (namespace, name) = (service.meta.namespace.as_str(), service.meta.name.as_str());
        let base = self.service_name(namespace, name);
        if service.service_type == ServiceType::ExternalName {
            // An address given as the external name makes no record.
            if let Some(target) = &service.external_name
                && target.parse::<IpAddr>().is_err()
            {
                let target = format!("{}.", target.trim_end_matches('.'));
                out.push(self.record(base, RecordType::Cname, target));
            }
            return;
        }
        let slices = self.slices_of(namespace, name);
        let ready: Vec<Vec<ReadyAddress>> =
            slices.iter().map(|s| Self::ready_addresses(s)).collect();
        for address in ready.iter().flatten() {
            let endpoint_name = format!("{}.{base}", address.label);
            let data = address.ip.to_string();
            out.push(self.record(endpoint_name, RecordType::address(address.ip), data));
        }
        let cluster_ips = Self::cluster_ips(service);
        if !cluster_ips.is_empty() {
            for ip in &cluster_ips {
                out.push(self.record(base.clone(), RecordType::address(*ip), ip.to_string()));
            }
            let ports: Vec<SrvPort> = if service.ports.is_empty() {
                vec![None]
            } else {
                (service.ports.iter())
                    .map(|p| Some((p.name.to_string(), p.protocol, p.port)))
                    .collect()
            };
            // Each port answers with the Service's name, counted once per cluster IP.
            let entries = (ports.into_iter())
                .map(|port| SrvEntry {
                    port,
                    copies: cluster_ips.len(),
                    target: base.clone(),
                })
                .collect();
            self.srv_records(&base, entries, out);
            return;
        }
        // Headless: the Service's name holds every ready address, and each address answers SRV
        // with its own name, once per port of its slice.
        for address in ready.iter().flatten() {
            let data = address.ip.to_string();
            out.push(self.record(base.clone(), RecordType::address(address.ip), data));
        }
        let mut entries = Vec::new();
        for (slice, addresses) in slices.iter().zip(&ready) {
            let ports: Vec<SrvPort> = if slice.ports.is_empty() {
                vec![None]
            } else {
                (slice.ports.iter())
                    .map(|p| {
                        let name = p.name.as_ref().map_or(String::new(), |n| n.to_string());
                        p.port
                            .map(|port| (name, p.protocol.unwrap_or_default(), port))
                    })
                    .collect()
            };
            for address in addresses {
                let target = format!("{}.{base}", address.label);
                for port in &ports {
                    entries.push(SrvEntry {
                        port: port.clone(),
                        copies: 1,
                        target: target.clone(),
                    });
                }
            }
        }
        self.srv_records(&base, entries, out);
    }

    /// The SRV records of `entries`, under the Service's name and under `_<port>._<proto>.` for
    /// named ports. Weights count every entry found for the name, answered or not.
    fn srv_records(&self, base: &str, entries: Vec<SrvEntry>, out: &mut Vec<Record>) {
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut answers: Vec<(String, i32, &str)> = Vec::new();
        for entry in &entries {
            let mut names = vec![base.to_owned()];
            if let Some((name, protocol, number)) = &entry.port {
                if !name.is_empty() {
                    names.push(format!("_{name}._{}.{base}", proto_label(*protocol)));
                }
                for query in &names {
                    answers.push((query.clone(), *number, &entry.target));
                }
            }
            for query in names {
                *counts.entry(query).or_default() += entry.copies;
            }
        }
        for (query, port, target) in answers {
            let w = weight(counts.get(&query).copied().unwrap_or(1));
            out.push(self.record(query, RecordType::Srv, format!("0 {w} {port} {target}")));
        }
    }
}

impl<'a> DnsView<'a> {
    /// Every record the view serves, sorted by name, type and data. Under `pods insecure` the pod
    /// records listed are those of the pods that exist; a query answers any address.
    pub fn records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        for service in &self.services {
            self.service_records(service, &mut out);
        }
        for (ip, targets) in self.reverse_targets(None) {
            let name = reverse_name(ip);
            for target in targets {
                out.push(self.record(name.clone(), RecordType::Ptr, target));
            }
        }
        for pod in &self.pods {
            self.pod_records(pod, &mut out);
        }
        sorted(out)
    }

    /// The records of one name, as a query of every type would find them.
    pub fn query(&self, name: &str) -> Vec<Record> {
        let name = canonical(name);
        let mut out = Vec::new();
        match scope(&name, &self.options.zone) {
            QueryScope::Reverse(ip) => {
                for (_, targets) in self.reverse_targets(Some(ip)) {
                    for target in targets {
                        out.push(self.record(name.clone(), RecordType::Ptr, target));
                    }
                }
            }
            QueryScope::Service { namespace, service } => {
                if let Some(service) = self.service(namespace, service) {
                    self.service_records(service, &mut out);
                }
                out.retain(|r| r.name == name);
            }
            QueryScope::Pod { namespace, label } => {
                self.pod_query(&name, label, namespace, &mut out);
            }
            QueryScope::Outside => {}
        }
        sorted(out)
    }

    /// PTR targets by address (of `only`, when given): a cluster IP names its Service alone (the
    /// first one, in namespace and name order); any other ready endpoint address names its
    /// endpoint under every Service whose slices hold it.
    pub(super) fn reverse_targets(&self, only: Option<IpAddr>) -> Vec<(IpAddr, Vec<String>)> {
        let wanted = |ip: &IpAddr| only.is_none_or(|o| o == *ip);
        let mut by_ip: HashMap<IpAddr, Vec<String>> = HashMap::new();
        let mut of_service: HashMap<IpAddr, String> = HashMap::new();
        for service in &self.services {
            for ip in Self::cluster_ips(service).into_iter().filter(wanted) {
                of_service.entry(ip).or_insert_with(|| {
                    self.service_name(&service.meta.namespace, &service.meta.name)
                });
            }
        }
        let by_service = (self.slices.iter())
            .flat_map(|(namespace, m)| m.iter().map(move |(service, s)| (namespace, service, s)));
        for (namespace, service, slices) in by_service {
            let base = self.service_name(namespace, service);
            for slice in slices {
                for address in Self::ready_addresses(slice) {
                    if wanted(&address.ip) && !of_service.contains_key(&address.ip) {
                        let target = format!("{}.{base}", address.label);
                        by_ip.entry(address.ip).or_default().push(target);
                    }
                }
            }
        }
        let mut out: Vec<(IpAddr, Vec<String>)> = (by_ip.into_iter())
            .chain(of_service.into_iter().map(|(ip, t)| (ip, vec![t])))
            .collect();
        for (_, targets) in &mut out {
            targets.sort_unstable();
            targets.dedup();
        }
        out.sort_unstable();
        out
    }

    /// The `a-b-c-d.<ns>.pod.<zone>.` records of one pod, as the pods mode lists them.
    pub(super) fn pod_records(&self, pod: &Pod, out: &mut Vec<Record>) {
        let ips: &[IpAddr] = match self.options.pods {
            PodRecords::Disabled => return,
            PodRecords::Insecure if terminal(pod) => return,
            PodRecords::Insecure => pod.ips(),
            // The pod cache indexes `status.podIP` alone.
            PodRecords::Verified if !in_pod_cache(pod) => return,
            PodRecords::Verified => pod.ips().get(..1).unwrap_or(&[]),
        };
        for ip in ips {
            let name = format!(
                "{}.{}.pod.{}.",
                dashed(*ip),
                pod.meta.namespace,
                self.options.zone
            );
            out.push(self.record(name, RecordType::address(*ip), ip.to_string()));
        }
    }

    /// A query of `<label>.<namespace>.pod.<zone>.`: any address under `insecure`, a pod's under
    /// `verified`.
    fn pod_query(&self, name: &str, label: &str, namespace: &str, out: &mut Vec<Record>) {
        let Some(ip) = undashed(label) else { return };
        let answer = match self.options.pods {
            PodRecords::Disabled => false,
            PodRecords::Insecure => true,
            PodRecords::Verified => self.pods.iter().any(|p| {
                p.meta.namespace.as_str() == namespace
                    && in_pod_cache(p)
                    && p.ips().first() == Some(&ip)
            }),
        };
        if answer {
            out.push(self.record(name.to_owned(), RecordType::address(ip), ip.to_string()));
        }
    }
}

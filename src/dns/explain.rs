//! Why a pod has no DNS name, or fewer than expected: each reason a sentence naming the field
//! that causes it, in the order a reader should fix them.

use std::collections::HashSet;
use std::net::IpAddr;

use serde::Serialize;

use super::{DnsView, Record, RecordType, sorted, terminal};
use crate::model::{IpFamily, Pod, Service, ServiceType};

/// The Endpoints controller's cap on addresses per Endpoints object.
const ENDPOINTS_CAP: usize = 1000;

/// One container's readiness, from the pod's `status.containerStatuses` (and
/// `initContainerStatuses` for sidecars), when the caller has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerReadiness {
    pub name: String,
    pub ready: bool,
    /// A restartable init container.
    pub sidecar: bool,
}

/// One reason: the field that causes it, and a sentence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reason {
    pub field: &'static str,
    pub message: String,
}

impl Reason {
    fn new(field: &'static str, message: String) -> Reason {
        Reason { field, message }
    }
}

/// What `--explain` says of one pod: the names it has, and why it has no more.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// The address records that answer with the pod's addresses, the SRV records that point at
    /// them, and their PTR records.
    pub names: Vec<Record>,
    pub reasons: Vec<Reason>,
}

/// A pod a Service selects that is no ready address of it: it has no name under the Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub service: String,
    pub pod: String,
    pub reasons: Vec<Reason>,
}

/// The IP families a Service's endpoints come in: its `spec.ipFamilies`, else its cluster IP's,
/// else both (a headless Service without families).
fn families(service: &Service) -> Vec<IpFamily> {
    if !service.ip_families.is_empty() {
        return service.ip_families.to_vec();
    }
    match DnsView::cluster_ips(service).first() {
        Some(ip) => vec![IpFamily::of(ip)],
        None => vec![IpFamily::V4, IpFamily::V6],
    }
}

fn selects(service: &Service, pod: &Pod) -> bool {
    service.service_type != ServiceType::ExternalName
        && service.meta.namespace == pod.meta.namespace
        && (service.selector.as_ref()).is_some_and(|s| pod.meta.labels.matches(s))
}

impl<'a> DnsView<'a> {
    /// The Services of the pod's namespace that select it.
    fn selecting(&self, pod: &Pod) -> Vec<&'a Service> {
        (self.services.iter())
            .filter(|s| selects(s, pod))
            .copied()
            .collect()
    }

    /// What the reasons read of one Service, gathered once: its ready addresses and how many
    /// pods it selects.
    fn facts(&self, service: &Service) -> ServiceFacts {
        let ready = (self
            .slices_of(&service.meta.namespace, &service.meta.name)
            .iter())
        .flat_map(|slice| Self::ready_addresses(slice))
        .map(|a| a.ip)
        .collect();
        let members = (self.pods_of(&service.meta.namespace))
            .filter(|p| selects(service, p))
            .count();
        ServiceFacts { ready, members }
    }

    /// The pods of `namespace`.
    fn pods_of(&self, namespace: &str) -> impl Iterator<Item = &'a Pod> + '_ {
        (self.pod_index.get(namespace).into_iter())
            .flat_map(|m| m.values())
            .map(|i| self.pods[*i])
    }

    /// Every reason `pod` has no name, or fewer than expected; `containers` names the containers
    /// that are not ready.
    pub fn explain(&self, pod: &Pod, containers: Option<&[ContainerReadiness]>) -> Explanation {
        let selecting = self.selecting(pod);
        let mut reasons = self.pod_reasons(pod, &selecting, containers);
        reasons.extend(self.naming_reasons(pod, &selecting));
        for service in &selecting {
            reasons.extend(self.service_reasons(pod, service, &self.facts(service)));
        }
        let ips = pod.ips();
        let mut names = Vec::new();
        for service in &selecting {
            self.service_records(service, &mut names);
        }
        self.pod_records(pod, &mut names);
        let holds_ip = |r: &Record| {
            matches!(r.record_type, RecordType::A | RecordType::Aaaa)
                && ips.iter().any(|ip| ip.to_string() == r.data)
        };
        // Its addresses, and the SRV records that point at a name holding one.
        let own: std::collections::HashSet<String> = (names.iter())
            .filter(|r| holds_ip(r))
            .map(|r| r.name.clone())
            .collect();
        names.retain(|r| {
            holds_ip(r)
                || (r.record_type == RecordType::Srv
                    && r.data.rsplit(' ').next().is_some_and(|t| own.contains(t)))
        });
        for (ip, targets) in ips.iter().flat_map(|ip| self.reverse_targets(Some(*ip))) {
            for target in targets {
                names.push(self.record(super::reverse_name(ip), RecordType::Ptr, target));
            }
        }
        Explanation {
            pod: pod.meta.key(),
            names: sorted(names),
            reasons,
        }
    }

    /// The pod `namespace/name` explained, when the view holds it.
    pub fn explain_pod(
        &self,
        namespace: &str,
        name: &str,
        containers: Option<&[ContainerReadiness]>,
    ) -> Option<Explanation> {
        self.pod(namespace, name)
            .map(|p| self.explain(p, containers))
    }

    /// The pods `service` selects that are no ready address of it, each with its reasons.
    pub fn missing(&self, service: &Service) -> Vec<Missing> {
        if service.service_type == ServiceType::ExternalName || service.selector.is_none() {
            return Vec::new();
        }
        let facts = self.facts(service);
        let mut pods: Vec<&Pod> = (self.pods_of(&service.meta.namespace))
            .filter(|p| selects(service, p))
            .filter(|p| !p.ips().iter().any(|ip| facts.ready.contains(ip)))
            .collect();
        pods.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        (pods.into_iter())
            .map(|pod| {
                let mut reasons = self.pod_reasons(pod, &[service], None);
                reasons.extend(self.service_reasons(pod, service, &facts));
                Missing {
                    service: service.meta.key(),
                    pod: pod.meta.key(),
                    reasons,
                }
            })
            .collect()
    }

    /// `missing` of every Service.
    pub fn missing_all(&self) -> Vec<Missing> {
        self.services.iter().flat_map(|s| self.missing(s)).collect()
    }

    /// The pod's own state: ended, no address, terminating, not ready.
    fn pod_reasons(
        &self,
        pod: &Pod,
        selecting: &[&Service],
        containers: Option<&[ContainerReadiness]>,
    ) -> Vec<Reason> {
        let mut reasons = Vec::new();
        if terminal(pod) {
            reasons.push(Reason::new(
                "status.phase",
                format!(
                    "status.phase is {:?}: the pod has ended and is no endpoint of any Service",
                    pod.phase
                ),
            ));
            return reasons;
        }
        if pod.ips().is_empty() {
            reasons.push(Reason::new(
                "status.podIP",
                "status.podIP is empty: the pod has no address yet, so no record can hold it"
                    .to_owned(),
            ));
            return reasons;
        }
        let terminating = pod.meta.deletion_timestamp().is_some();
        if terminating {
            reasons.push(Reason::new(
                "metadata.deletionTimestamp",
                "metadata.deletionTimestamp is set: the pod is terminating, so its endpoint is \
                 not ready, and CoreDNS serves only ready endpoints"
                    .to_owned(),
            ));
        }
        if !pod.ready && !terminating {
            let unready: Vec<String> = (containers.unwrap_or_default().iter())
                .filter(|c| !c.ready)
                .map(|c| {
                    if c.sidecar {
                        format!("{} (sidecar)", c.name)
                    } else {
                        c.name.clone()
                    }
                })
                .collect();
            let which = if unready.is_empty() {
                String::new()
            } else {
                format!(" (not ready: {})", unready.join(", "))
            };
            reasons.push(Reason::new(
                "status.conditions[Ready]",
                format!(
                    "status.conditions[Ready] is not True{which}: the endpoint is marked not \
                     ready, and CoreDNS serves only ready endpoints"
                ),
            ));
        }
        if terminating || !pod.ready {
            for service in selecting.iter().filter(|s| !s.publish_not_ready_addresses) {
                reasons.push(Reason::new(
                    "spec.publishNotReadyAddresses",
                    format!(
                        "Service {} has spec.publishNotReadyAddresses false: it publishes only \
                         ready pods (true would publish this one)",
                        service.meta.key()
                    ),
                ));
            }
        }
        reasons
    }

    /// `spec.hostname` and `spec.subdomain`: the `<hostname>.<subdomain>` name, and whether any
    /// Service selects the pod at all.
    fn naming_reasons(&self, pod: &Pod, selecting: &[&Service]) -> Vec<Reason> {
        let mut reasons = Vec::new();
        let namespace = pod.meta.namespace.as_str();
        let mut named_service_refuses = false;
        match (pod.hostname(), pod.subdomain()) {
            (Some(hostname), None) => reasons.push(Reason::new(
                "spec.hostname",
                format!(
                    "spec.hostname is {hostname:?} but spec.subdomain is empty: a hostname is \
                     published only under the Service that spec.subdomain names"
                ),
            )),
            (_, Some(subdomain)) => match self.service(namespace, subdomain) {
                None => reasons.push(Reason::new(
                    "spec.subdomain",
                    format!(
                        "spec.subdomain is {subdomain:?} but namespace {namespace} has no Service \
                         of that name (create a headless Service {subdomain:?} selecting the pod)"
                    ),
                )),
                Some(service) if !selects(service, pod) => {
                    named_service_refuses = true;
                    reasons.push(Reason::new(
                        "spec.selector",
                        format!(
                            "Service {} (named by spec.subdomain) does not select the pod: {}",
                            service.meta.key(),
                            selector_difference(service, pod)
                        ),
                    ));
                }
                Some(_) => {}
            },
            (None, None) => {}
        }
        if selecting.is_empty() && !named_service_refuses {
            reasons.push(Reason::new(
                "metadata.labels",
                format!(
                    "no Service in namespace {namespace} selects the pod's metadata.labels: it is \
                     no endpoint, so it has no name under any Service"
                ),
            ));
        }
        reasons
    }

    /// Reasons that belong to one selecting Service: the pod's families, endpoints not yet
    /// written, the Endpoints cap.
    fn service_reasons(&self, pod: &Pod, service: &Service, facts: &ServiceFacts) -> Vec<Reason> {
        let mut reasons = Vec::new();
        let ips = pod.ips();
        if ips.is_empty() || terminal(pod) {
            return reasons;
        }
        let families = families(service);
        let served: Vec<IpAddr> = (ips.iter())
            .filter(|ip| families.contains(&IpFamily::of(ip)))
            .copied()
            .collect();
        if served.is_empty() {
            reasons.push(Reason::new(
                "status.podIPs",
                format!(
                    "status.podIPs holds no address of the families Service {} serves \
                     (spec.ipFamilies {:?})",
                    service.meta.key(),
                    families
                ),
            ));
            return reasons;
        }
        if let (Some(nodes), Some(node)) = (&self.nodes, &pod.node_name)
            && !nodes.contains(node)
        {
            reasons.push(Reason::new(
                "spec.nodeName",
                format!(
                    "spec.nodeName is {node:?}, a Node that does not exist: the EndpointSlice \
                     controller leaves the pod out until it does"
                ),
            ));
            return reasons;
        }
        let publishable = service.publish_not_ready_addresses
            || (pod.ready && pod.meta.deletion_timestamp().is_none());
        if publishable && !served.iter().any(|ip| facts.ready.contains(ip)) {
            reasons.push(Reason::new(
                "endpoints",
                format!(
                    "the EndpointSlices of Service {} do not hold the pod as a ready endpoint \
                     yet: sliced would add it at its next sync",
                    service.meta.key()
                ),
            ));
        }
        let members = facts.members;
        if members > ENDPOINTS_CAP {
            reasons.push(Reason::new(
                "subsets",
                format!(
                    "Service {} selects {members} pods, over the 1,000 addresses an Endpoints \
                     object holds: consumers of Endpoints (kube-dns) may not see this pod; \
                     CoreDNS reads EndpointSlices and is not limited",
                    service.meta.key()
                ),
            ));
        }
        reasons
    }
}

/// What the reasons read of one Service.
struct ServiceFacts {
    /// The ready addresses of its slices.
    ready: HashSet<IpAddr>,
    /// The pods it selects.
    members: usize,
}

/// Which label of the Service's selector the pod's labels lack or differ in.
fn selector_difference(service: &Service, pod: &Pod) -> String {
    let Some(selector) = &service.selector else {
        return "it has no spec.selector, so the EndpointSlice controller makes it no slices"
            .to_owned();
    };
    let differences: Vec<String> = (selector.iter())
        .filter(|(k, v)| pod.meta.labels.get(k) != Some(*v))
        .map(|(k, v)| match pod.meta.labels.get(k) {
            Some(has) => format!("spec.selector wants {k}={v}, the pod has {k}={has}"),
            None => format!("spec.selector wants {k}={v}, the pod has no label {k}"),
        })
        .collect();
    differences.join("; ")
}

//! The DNS view: the records CoreDNS's `kubernetes` plugin serves from Services, EndpointSlices and
//! Pods, and every reason a pod has none. Pure: the caller hands in the objects, from a file or
//! from the live index.
//!
//! CoreDNS is followed where it and the Kubernetes DNS specification differ (README, "sliced
//! dns"): only ready endpoints (`conditions.ready` true or unset), endpoint names under every
//! Service and not only headless ones, PTR records for the ready endpoints of every Service, SRV
//! weights of `floor(100 / N)`, and a TTL of 5 seconds.

mod explain;
mod names;
mod records;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use serde::Serialize;

pub use explain::{ContainerReadiness, Explanation, Missing, Reason};
pub use names::{QueryScope, canonical, dashed, reverse_name, scope, undashed, unreversed};

use crate::model::{EndpointSlice, Name, Pod, PodPhase, Service};

/// The cluster domain kubelet and CoreDNS use unless configured otherwise.
pub const DEFAULT_ZONE: &str = "cluster.local";
/// CoreDNS's `kubernetes` plugin's default TTL, for every record it serves.
pub const DEFAULT_TTL: u32 = 5;

/// CoreDNS's `pods` option: which `a-b-c-d.<ns>.pod.<zone>` names are answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodRecords {
    /// None (the plugin's own default).
    Disabled,
    /// Any name that decodes to an address, pod or not (kubeadm's Corefile sets this).
    #[default]
    Insecure,
    /// Only the primary address of a pod of that namespace that is running or pending and not
    /// terminating (those CoreDNS's pod cache holds).
    Verified,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsOptions {
    /// The cluster zone, without a trailing dot: `cluster.local`.
    pub zone: String,
    pub pods: PodRecords,
    pub ttl: u32,
}

impl Default for DnsOptions {
    fn default() -> Self {
        DnsOptions {
            zone: DEFAULT_ZONE.to_owned(),
            pods: PodRecords::default(),
            ttl: DEFAULT_TTL,
        }
    }
}

/// A record type; declared in the order records of one name are listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RecordType {
    A,
    Aaaa,
    Cname,
    Ptr,
    Srv,
}

impl RecordType {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordType::A => "A",
            RecordType::Aaaa => "AAAA",
            RecordType::Cname => "CNAME",
            RecordType::Ptr => "PTR",
            RecordType::Srv => "SRV",
        }
    }

    fn address(ip: IpAddr) -> RecordType {
        match ip {
            IpAddr::V4(_) => RecordType::A,
            IpAddr::V6(_) => RecordType::Aaaa,
        }
    }
}

/// One resource record, as `dig` prints it: a fully qualified name, type, TTL and data.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Record {
    pub name: String,
    #[serde(rename = "type")]
    pub record_type: RecordType,
    pub ttl: u32,
    pub data: String,
}

/// Sorted by name, type and data, each record once.
fn sorted(mut records: Vec<Record>) -> Vec<Record> {
    records.sort_unstable();
    records.dedup();
    records
}

/// By namespace, then name.
type Nested<'a, V> = HashMap<&'a str, HashMap<&'a str, V>>;

/// Services, their EndpointSlices and Pods, indexed for DNS.
pub struct DnsView<'a> {
    options: DnsOptions,
    /// By namespace and name.
    services: Vec<&'a Service>,
    service_index: Nested<'a, usize>,
    /// By namespace and `kubernetes.io/service-name` label.
    slices: Nested<'a, Vec<&'a EndpointSlice>>,
    /// By namespace, then name.
    pods: Vec<&'a Pod>,
    pod_index: Nested<'a, usize>,
    /// The names of the Nodes known, when the caller knows them.
    nodes: Option<HashSet<Name>>,
}

impl<'a> DnsView<'a> {
    /// A view over these objects. Slices without the `kubernetes.io/service-name` label can be
    /// reached by no name, and are left out.
    pub fn new(
        services: impl IntoIterator<Item = &'a Service>,
        slices: impl IntoIterator<Item = &'a EndpointSlice>,
        pods: impl IntoIterator<Item = &'a Pod>,
        options: DnsOptions,
    ) -> Self {
        let (services, service_index) = indexed(services, |s: &Service| {
            (s.meta.namespace.as_str(), s.meta.name.as_str())
        });
        let mut by_service: Nested<Vec<&EndpointSlice>> = HashMap::new();
        for slice in slices {
            if let Some(service) = slice.service_name() {
                (by_service.entry(slice.meta.namespace.as_str()).or_default())
                    .entry(service.as_str())
                    .or_default()
                    .push(slice);
            }
        }
        for list in by_service.values_mut().flat_map(|m| m.values_mut()) {
            list.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        }
        let (pods, pod_index) = indexed(pods, |p: &Pod| {
            (p.meta.namespace.as_str(), p.meta.name.as_str())
        });
        DnsView {
            options,
            services,
            service_index,
            slices: by_service,
            pods,
            pod_index,
            nodes: None,
        }
    }

    /// The Nodes that exist, so that a pod on another is explained.
    pub fn with_nodes(mut self, nodes: impl IntoIterator<Item = Name>) -> Self {
        self.nodes = Some(nodes.into_iter().collect());
        self
    }

    pub fn options(&self) -> &DnsOptions {
        &self.options
    }

    fn service(&self, namespace: &str, name: &str) -> Option<&'a Service> {
        (self.service_index.get(namespace))
            .and_then(|m| m.get(name))
            .map(|i| self.services[*i])
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<&'a Pod> {
        (self.pod_index.get(namespace))
            .and_then(|m| m.get(name))
            .map(|i| self.pods[*i])
    }

    fn slices_of(&self, namespace: &str, service: &str) -> &[&'a EndpointSlice] {
        (self.slices.get(namespace))
            .and_then(|m| m.get(service))
            .map_or(&[], Vec::as_slice)
    }

    /// `<service>.<namespace>.svc.<zone>.`
    fn service_name(&self, namespace: &str, service: &str) -> String {
        format!("{service}.{namespace}.svc.{}.", self.options.zone)
    }

    fn record(&self, name: String, record_type: RecordType, data: String) -> Record {
        Record {
            name,
            record_type,
            ttl: self.options.ttl,
            data,
        }
    }
}

/// `items` sorted by namespace and name, and their positions by namespace, then name.
fn indexed<'a, T: ?Sized>(
    items: impl IntoIterator<Item = &'a T>,
    key: impl Fn(&'a T) -> (&'a str, &'a str),
) -> (Vec<&'a T>, Nested<'a, usize>) {
    let mut items: Vec<&T> = items.into_iter().collect();
    items.sort_by(|a, b| key(a).cmp(&key(b)));
    let mut index: Nested<usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let (namespace, name) = key(item);
        index.entry(namespace).or_default().insert(name, i);
    }
    (items, index)
}

/// Whether CoreDNS's pod cache would hold `pod` (it lists pods not Succeeded, Failed or Unknown,
/// and skips those first seen terminating).
fn in_pod_cache(pod: &Pod) -> bool {
    !matches!(
        pod.phase,
        PodPhase::Succeeded | PodPhase::Failed | PodPhase::Unknown
    ) && pod.meta.deletion_timestamp().is_none()
}

/// Whether `pod` has ended: it is no endpoint and serves no name.
fn terminal(pod: &Pod) -> bool {
    matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
}

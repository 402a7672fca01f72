//! Services, pods, nodes and namespaces as the reconcilers see them.

use std::net::IpAddr;
use std::sync::Arc;

use smallvec::SmallVec;

use super::{
    Labels, Name, PackedTime, PodIps, ResourceVersion, ServiceLoadBalancer, Timestamp, Uid,
};

/// The identity and bookkeeping fields every stored object has; pods keep theirs as [`PodMeta`].
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

/// "namespace/name" in one allocation of its exact size (`format!` grows its buffer): a key is
/// made on every sync.
fn namespaced_key(namespace: &str, name: &str) -> String {
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}

impl Meta {
    /// "namespace/name", the queue key of upstream controllers.
    pub fn key(&self) -> String {
        namespaced_key(&self.namespace, &self.name)
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
    /// What the service controller reads; `None` for a Service that is not of type LoadBalancer
    /// and holds neither its finalizer nor an ingress.
    pub load_balancer: Option<Box<ServiceLoadBalancer>>,
    /// `spec.clusterIPs[1]`, the other family's address of a dual-stack Service (DNS's AAAA or A).
    pub secondary_cluster_ip: Option<IpAddr>,
    /// `spec.externalName` of an ExternalName Service (DNS's CNAME).
    pub external_name: Option<Name>,
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

/// A pod's metadata: what the reconcilers read of it, in compact form. Annotations and generation
/// are not kept; the UID, resourceVersion and timestamps are held compact (see [`Uid`],
/// [`ResourceVersion`], 12-byte timestamps), with what has no compact form in a rarely present box.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodMeta {
    pub namespace: Name,
    pub name: Name,
    pub labels: Labels,
    /// The UID's bytes when `flags` has `UID_UUID`; the UID is then in `rare` (or empty).
    uid: [u8; 16],
    /// The resourceVersion when `flags` has `RV_NUMBER`; otherwise it is in `rare` (or empty).
    resource_version: u64,
    creation_timestamp: PackedTime,
    flags: u8,
    /// What few pods have; `None` when all of it is unset, so that equal pods are equal here too.
    rare: Option<Box<PodRare>>,
}

const UID_UUID: u8 = 1;
const RV_NUMBER: u8 = 2;

/// The fields of a pod that are usually unset or have no compact form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PodRare {
    /// A UID that is not a canonical UUID.
    uid: Uid,
    /// A resourceVersion that is not a canonical decimal.
    resource_version: Option<ResourceVersion>,
    deletion_timestamp: Option<Timestamp>,
    hostname: Option<Name>,
    subdomain: Option<Name>,
    /// Every IP of a pod with more than one.
    ips: Box<[IpAddr]>,
}

impl PodMeta {
    pub fn new(namespace: Name, name: Name, labels: Labels) -> PodMeta {
        PodMeta {
            namespace,
            name,
            labels,
            ..PodMeta::default()
        }
    }

    /// "namespace/name", the queue key of upstream controllers.
    pub fn key(&self) -> String {
        namespaced_key(&self.namespace, &self.name)
    }

    fn rare(&self) -> Option<&PodRare> {
        self.rare.as_deref()
    }

    /// Changes the rare fields, dropping the box when nothing is left in it.
    fn change_rare(&mut self, change: impl FnOnce(&mut PodRare)) {
        let rare = self.rare.get_or_insert_with(Box::default);
        change(rare);
        if **rare == PodRare::default() {
            self.rare = None;
        }
    }

    /// True when `other` has the same UID; cheaper than comparing [`PodMeta::uid`]s.
    pub fn same_uid(&self, other: &PodMeta) -> bool {
        self.flags & UID_UUID == other.flags & UID_UUID
            && self.uid == other.uid
            && self.text_uid() == other.text_uid()
    }

    /// The UID when it is not a UUID, or empty.
    fn text_uid(&self) -> &Uid {
        static EMPTY: Uid = Uid::EMPTY;
        self.rare().map_or(&EMPTY, |r| &r.uid)
    }

    pub fn uid(&self) -> Uid {
        if self.flags & UID_UUID != 0 {
            return Uid::from_uuid(self.uid);
        }
        self.text_uid().clone()
    }

    pub fn set_uid(&mut self, uid: Uid) {
        match uid.uuid() {
            Some(bytes) => {
                self.uid = bytes;
                self.flags |= UID_UUID;
                self.change_rare(|r| r.uid = Uid::default());
            }
            None => {
                self.uid = [0; 16];
                self.flags &= !UID_UUID;
                self.change_rare(|r| r.uid = uid);
            }
        }
    }

    pub fn resource_version(&self) -> ResourceVersion {
        if self.flags & RV_NUMBER != 0 {
            return ResourceVersion::Number(self.resource_version);
        }
        self.rare()
            .and_then(|r| r.resource_version.clone())
            .unwrap_or_default()
    }

    /// True when the resourceVersion is set (not "").
    pub fn has_resource_version(&self) -> bool {
        self.flags & RV_NUMBER != 0 || self.rare().is_some_and(|r| r.resource_version.is_some())
    }

    pub fn set_resource_version(&mut self, rv: ResourceVersion) {
        match rv {
            ResourceVersion::Number(n) => {
                self.resource_version = n;
                self.flags |= RV_NUMBER;
                self.change_rare(|r| r.resource_version = None);
            }
            text => {
                self.resource_version = 0;
                self.flags &= !RV_NUMBER;
                let text = (!text.is_empty()).then_some(text);
                self.change_rare(|r| r.resource_version = text);
            }
        }
    }

    pub fn creation_timestamp(&self) -> Option<Timestamp> {
        self.creation_timestamp.get()
    }

    pub fn set_creation_timestamp(&mut self, t: Option<Timestamp>) {
        self.creation_timestamp = PackedTime::new(t);
    }

    pub fn deletion_timestamp(&self) -> Option<Timestamp> {
        self.rare().and_then(|r| r.deletion_timestamp)
    }

    pub fn set_deletion_timestamp(&mut self, t: Option<Timestamp>) {
        self.change_rare(|r| r.deletion_timestamp = t);
    }
}

impl From<Meta> for PodMeta {
    /// Keeps what a pod's metadata holds: generation and annotations are dropped.
    fn from(m: Meta) -> PodMeta {
        let mut meta = PodMeta::new(m.namespace, m.name, m.labels);
        meta.set_uid(Uid::new(&m.uid));
        meta.set_resource_version(ResourceVersion::new(&m.resource_version));
        meta.set_creation_timestamp(m.creation_timestamp);
        meta.set_deletion_timestamp(m.deletion_timestamp);
        meta
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    pub meta: PodMeta,
    pub node_name: Option<Name>,
    pub phase: PodPhase,
    /// `status.podIP` is set, whether or not `podIPs` is.
    pub has_pod_ip: bool,
    /// The Ready condition is True.
    pub ready: bool,
    /// The IP of a pod with exactly one; the IPs of others are in `meta.rare`.
    ip: Option<IpAddr>,
    /// lastTransitionTime of the Ready condition, when there is one.
    ready_transition: PackedTime,
    /// Named container ports only, regular containers first, then sidecars. Shared between pods of a
    /// template.
    pub named_ports: Arc<[ContainerPort]>,
}

impl Pod {
    /// A pending pod with this metadata and every other field unset.
    pub fn new(meta: PodMeta) -> Pod {
        Pod {
            meta,
            ..Pod::default()
        }
    }

    /// `spec.hostname`, when set and not empty.
    pub fn hostname(&self) -> Option<&Name> {
        self.meta.rare().and_then(|r| r.hostname.as_ref())
    }

    pub fn set_hostname(&mut self, hostname: Option<Name>) {
        self.meta.change_rare(|r| r.hostname = hostname);
    }

    /// `spec.subdomain`, when set and not empty.
    pub fn subdomain(&self) -> Option<&Name> {
        self.meta.rare().and_then(|r| r.subdomain.as_ref())
    }

    pub fn set_subdomain(&mut self, subdomain: Option<Name>) {
        self.meta.change_rare(|r| r.subdomain = subdomain);
    }

    /// `status.podIPs`, parsed, in order.
    pub fn ips(&self) -> &[IpAddr] {
        match &self.ip {
            Some(ip) => std::slice::from_ref(ip),
            None => self.meta.rare().map_or(&[], |r| &r.ips),
        }
    }

    pub fn set_ips(&mut self, ips: impl IntoIterator<Item = IpAddr>) {
        let ips: SmallVec<[IpAddr; 2]> = ips.into_iter().collect();
        let (one, many): (Option<IpAddr>, Box<[IpAddr]>) = match ips.as_slice() {
            [one] => (Some(*one), Box::default()),
            many => (None, many.into()),
        };
        self.ip = one;
        self.meta.change_rare(|r| r.ips = many);
    }

    /// lastTransitionTime of the Ready condition, when there is one.
    pub fn ready_transition(&self) -> Option<Timestamp> {
        self.ready_transition.get()
    }

    pub fn set_ready_transition(&mut self, t: Option<Timestamp>) {
        self.ready_transition = PackedTime::new(t);
    }

    /// The fields as a builder, to build a changed copy.
    pub fn to_builder(&self) -> PodBuilder {
        PodBuilder {
            meta: Meta {
                namespace: self.meta.namespace.clone(),
                name: self.meta.name.clone(),
                uid: Name::new(&self.meta.uid().as_str()),
                resource_version: Name::new(&self.meta.resource_version().as_str()),
                creation_timestamp: self.meta.creation_timestamp(),
                deletion_timestamp: self.meta.deletion_timestamp(),
                labels: self.meta.labels.clone(),
                ..Meta::default()
            },
            node_name: self.node_name.clone(),
            hostname: self.hostname().cloned(),
            subdomain: self.subdomain().cloned(),
            phase: self.phase,
            has_pod_ip: self.has_pod_ip,
            ips: self.ips().iter().copied().collect(),
            ready: self.ready,
            ready_transition: self.ready_transition(),
            named_ports: self.named_ports.clone(),
        }
    }
}

/// A pod's fields in plain form, for building one in code: `Pod::from(PodBuilder { .. })`. The
/// metadata's generation and annotations are not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodBuilder {
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
    /// Named container ports only, regular containers first, then sidecars.
    pub named_ports: Arc<[ContainerPort]>,
}

impl From<PodBuilder> for Pod {
    fn from(b: PodBuilder) -> Pod {
        let mut pod = Pod {
            meta: PodMeta::from(b.meta),
            node_name: b.node_name,
            phase: b.phase,
            has_pod_ip: b.has_pod_ip,
            ready: b.ready,
            ..Pod::default()
        };
        pod.set_hostname(b.hostname);
        pod.set_subdomain(b.subdomain);
        pod.set_ips(b.ips.iter().copied());
        pod.set_ready_transition(b.ready_transition);
        pod.named_ports = b.named_ports;
        pod
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub name: Name,
    pub labels: Labels,
    pub ready: bool,
    pub allocatable_cpu_millis: i64,
    /// `spec.providerID`: a load balancer's backends are told by it.
    pub provider_id: Option<Name>,
    /// A deletionTimestamp is set.
    pub deleting: bool,
    /// Tainted `ToBeDeletedByClusterAutoscaler` (any value or effect).
    pub to_be_deleted: bool,
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
    /// Read by address pools that pin themselves to namespaces by selector.
    pub labels: Labels,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_compact() {
        assert_eq!(size_of::<PodMeta>(), 80);
        assert_eq!(size_of::<Pod>(), 136);
    }

    #[test]
    fn pod_fields_round_trip_through_the_builder() {
        let t = Timestamp::from_second(1_700_000_000).ok();
        let v4: IpAddr = [10, 0, 0, 1].into();
        let v6: IpAddr = [0xfd00, 0, 0, 0, 0, 0, 0, 1].into();
        for (uid, rv, ips) in [
            ("6f1c3c1e-4d2a-4b8e-9f00-0123456789ab", "42", vec![v4]),
            ("pod-uid-1", "007", vec![v4, v6]),
            ("", "", vec![]),
        ] {
            let builder = PodBuilder {
                meta: Meta {
                    namespace: Name::from("ns"),
                    name: Name::new("p"),
                    uid: Name::new(uid),
                    resource_version: Name::new(rv),
                    creation_timestamp: t,
                    deletion_timestamp: t,
                    labels: Labels::from_pairs([("app", "web")]),
                    ..Meta::default()
                },
                hostname: Some(Name::new("h")),
                subdomain: Some(Name::from("s")),
                has_pod_ip: !ips.is_empty(),
                ips: ips.iter().copied().collect(),
                ready_transition: t,
                ..PodBuilder::default()
            };
            let pod = Pod::from(builder.clone());
            assert_eq!(pod.meta.uid().as_str(), uid);
            assert_eq!(pod.meta.uid().is_compact(), uid.len() == 36);
            assert!(pod.meta.same_uid(&pod.clone().meta));
            let mut other = pod.meta.clone();
            other.set_uid(Uid::new("other"));
            assert!(!pod.meta.same_uid(&other));
            assert_eq!(pod.meta.resource_version().as_str(), rv);
            assert_eq!(pod.meta.has_resource_version(), !rv.is_empty());
            assert_eq!(pod.meta.creation_timestamp(), t);
            assert_eq!(pod.meta.deletion_timestamp(), t);
            assert_eq!(pod.ips(), ips.as_slice());
            assert_eq!(pod.ready_transition(), t);
            assert_eq!(pod.hostname().map(|h| h.as_str()), Some("h"));
            assert_eq!(pod.subdomain().map(|s| s.as_str()), Some("s"));
            assert_eq!(pod.to_builder(), builder);
            assert_eq!(Pod::from(pod.to_builder()), pod);
        }
    }

    #[test]
    fn rare_fields_leave_no_trace_once_unset() {
        let plain = Pod::from(PodBuilder {
            meta: Meta {
                uid: Name::new("6f1c3c1e-4d2a-4b8e-9f00-0123456789ab"),
                resource_version: Name::new("7"),
                ..Meta::default()
            },
            ips: [IpAddr::from([10, 0, 0, 1])].into_iter().collect(),
            ..PodBuilder::default()
        });
        assert!(plain.meta.rare.is_none());
        let mut pod = plain.clone();
        pod.meta.set_uid(Uid::new("text-uid"));
        pod.meta.set_resource_version(ResourceVersion::new("x7"));
        pod.meta
            .set_deletion_timestamp(Timestamp::from_second(1).ok());
        pod.set_hostname(Some(Name::new("h")));
        pod.set_subdomain(Some(Name::new("s")));
        pod.set_ips([IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2])]);
        assert_ne!(pod, plain);
        pod.meta
            .set_uid(Uid::new("6f1c3c1e-4d2a-4b8e-9f00-0123456789ab"));
        pod.meta.set_resource_version(ResourceVersion::new("7"));
        pod.meta.set_deletion_timestamp(None);
        pod.set_hostname(None);
        pod.set_subdomain(None);
        pod.set_ips([IpAddr::from([10, 0, 0, 1])]);
        assert_eq!(pod, plain);
        assert!(pod.meta.rare.is_none());
    }
}

//! EndpointSlices and Endpoints: the objects the controllers write.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use smallvec::SmallVec;

use super::{IpFamily, Meta, Name, Protocol, Uid};

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressType {
    IPv4,
    IPv6,
    Fqdn,
    /// Any other value, such as the deprecated `IP`: never reconciled, deleted when found.
    Other(Name),
}

impl AddressType {
    pub fn for_family(family: IpFamily) -> AddressType {
        match family {
            IpFamily::V4 => AddressType::IPv4,
            IpFamily::V6 => AddressType::IPv6,
        }
    }

    pub fn family(&self) -> Option<IpFamily> {
        match self {
            AddressType::IPv4 => Some(IpFamily::V4),
            AddressType::IPv6 => Some(IpFamily::V6),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> AddressType {
        match s {
            "IPv4" => AddressType::IPv4,
            "IPv6" => AddressType::IPv6,
            "FQDN" => AddressType::Fqdn,
            other => AddressType::Other(Name::from(other)),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            AddressType::IPv4 => "IPv4",
            AddressType::IPv6 => "IPv6",
            AddressType::Fqdn => "FQDN",
            AddressType::Other(s) => s,
        }
    }
}

impl fmt::Display for AddressType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One address of an endpoint: an IP for IPv4 and IPv6 slices, text for FQDN and unknown types.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Address {
    Ip(IpAddr),
    Text(Name),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // IpAddr's Display is the canonical form (RFC 5952 for IPv6).
            Address::Ip(ip) => write!(f, "{ip}"),
            Address::Text(s) => f.write_str(s),
        }
    }
}

/// An endpoint's reference to its pod. `resource_version` is carried but never compared.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TargetRef {
    pub kind: Option<Name>,
    pub namespace: Option<Name>,
    pub name: Option<Name>,
    pub uid: Option<Uid>,
    pub api_version: Option<Name>,
    pub resource_version: Option<Name>,
}

impl TargetRef {
    /// Equal but for resourceVersion, as upstream compares target references.
    pub fn same_target(&self, other: &TargetRef) -> bool {
        self.kind == other.kind
            && self.namespace == other.namespace
            && self.name == other.name
            && self.uid == other.uid
            && self.api_version == other.api_version
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hints {
    pub for_zones: SmallVec<[Name; 1]>,
    pub for_nodes: SmallVec<[Name; 1]>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Conditions {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub addresses: SmallVec<[Address; 1]>,
    pub conditions: Conditions,
    pub hostname: Option<Name>,
    pub target_ref: Option<TargetRef>,
    pub node_name: Option<Name>,
    pub zone: Option<Name>,
    pub hints: Option<Box<Hints>>,
}

impl Endpoint {
    /// Sets the hints of an endpoint shared between slices, copying it only when they change.
    pub fn set_hints(endpoint: &mut Arc<Endpoint>, hints: Option<Box<Hints>>) {
        if endpoint.hints != hints {
            Arc::make_mut(endpoint).hints = hints;
        }
    }

    /// Upstream's "equal beyond hash": the attributes that make an endpoint need rewriting. Hints and
    /// the order of addresses are not compared; the target's resourceVersion is ignored.
    pub fn same_attributes(&self, other: &Endpoint) -> bool {
        self.node_name == other.node_name
            && self.zone == other.zone
            && self.conditions == other.conditions
            && match (&self.target_ref, &other.target_ref) {
                (None, None) => true,
                (Some(a), Some(b)) => a.same_target(b),
                _ => false,
            }
    }

    /// True when the endpoint counts as ready for hints and traffic distribution.
    pub fn is_ready(&self) -> bool {
        self.conditions.ready == Some(true)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointPort {
    pub name: Option<Name>,
    pub port: Option<i32>,
    pub protocol: Option<Protocol>,
    pub app_protocol: Option<Name>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerReference {
    pub api_version: Name,
    pub kind: Name,
    pub name: Name,
    pub uid: Name,
    pub controller: Option<bool>,
    pub block_owner_deletion: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSlice {
    /// `meta.name` is empty for a slice not yet created; `generate_name` then gives its prefix.
    pub meta: Meta,
    pub generate_name: Option<Name>,
    pub owner_references: Vec<OwnerReference>,
    pub address_type: AddressType,
    /// A nil list and an empty list are the same to every rule.
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Arc<Endpoint>>,
}

impl EndpointSlice {
    /// The service this slice belongs to, from its `kubernetes.io/service-name` label.
    pub fn service_name(&self) -> Option<&Name> {
        self.meta
            .labels
            .get(super::keys::LABEL_SERVICE_NAME)
            .filter(|n| !n.is_empty())
    }

    pub fn managed_by(&self) -> Option<&Name> {
        self.meta.labels.get(super::keys::LABEL_MANAGED_BY)
    }

    /// Owned by the Service with this UID: the rule upstream uses to tell its slices from those of an
    /// older Service of the same name.
    pub fn is_owned_by(&self, service_uid: &str) -> bool {
        self.owner_references.iter().any(|r| {
            r.uid.as_str() == service_uid
                && r.kind.as_str() == "Service"
                && r.api_version.as_str() == "v1"
        })
    }
}

/// A v1 Endpoints address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointAddress {
    pub ip: Address,
    pub hostname: Option<Name>,
    pub node_name: Option<Name>,
    pub target_ref: Option<TargetRef>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointsPort {
    pub name: Option<Name>,
    pub port: i32,
    pub protocol: Option<Protocol>,
    pub app_protocol: Option<Name>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointSubset {
    /// Shared: an update of an object holds most of the addresses of the one it replaces, and
    /// takes them by reference count instead of copying each address's names.
    pub addresses: Vec<Arc<EndpointAddress>>,
    pub not_ready_addresses: Vec<Arc<EndpointAddress>>,
    pub ports: Vec<EndpointsPort>,
}

/// A v1 Endpoints object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub meta: Meta,
    pub subsets: Vec<EndpointSubset>,
}

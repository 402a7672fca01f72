//! Pure reconcilers: functions from a service, its pods, the nodes and the current objects to a plan
//! of writes. No I/O; the same inputs give the same plan.

pub mod endpoints;
pub mod hash_order;
pub mod load_balancer;
pub mod mirroring;
pub mod ports;
pub mod slices;
pub mod topology;

use crate::model::{AddressType, EndpointSlice, Name};

/// Options of the EndpointSlice reconciler, named after kube-controller-manager's flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--max-endpoints-per-slice`, 1..=1000.
    pub max_endpoints_per_slice: usize,
    /// Honour `PreferSameZone` and `PreferSameNode` traffic distribution (on since Kubernetes
    /// 1.34, locked on in 1.35).
    pub prefer_same_traffic_distribution: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_endpoints_per_slice: 100,
            prefer_same_traffic_distribution: true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// A Kubernetes Event to record on the Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl Event {
    pub fn warning(reason: &'static str, message: impl Into<String>) -> Event {
        Event {
            event_type: EventType::Warning,
            reason,
            message: message.into(),
        }
    }

    pub fn normal(reason: &'static str, message: impl Into<String>) -> Event {
        Event {
            event_type: EventType::Normal,
            reason,
            message: message.into(),
        }
    }
}

/// The writes for one address type, executed creates first, then updates, then deletes.
#[derive(Clone, Debug, Default)]
pub struct AddressTypePlan {
    pub address_type: Option<AddressType>,
    /// New slices: `meta.name` empty, `generate_name` set.
    pub creates: Vec<EndpointSlice>,
    /// Whole objects to send; `meta.resource_version` is what the update is conditional on (empty for
    /// a recycled create, which overwrites unconditionally).
    pub updates: Vec<EndpointSlice>,
    pub deletes: Vec<EndpointSlice>,
    /// Desired endpoints not found in any existing slice of a desired port group.
    pub endpoints_added: usize,
    /// Endpoints dropped from existing slices of port groups still desired.
    pub endpoints_removed: usize,
    /// Endpoints kept whose attributes changed (counted by mirroring only, for its metrics).
    pub endpoints_updated: usize,
}

impl AddressTypePlan {
    pub fn is_empty(&self) -> bool {
        self.creates.is_empty() && self.updates.is_empty() && self.deletes.is_empty()
    }

    pub fn write_count(&self) -> usize {
        self.creates.len() + self.updates.len() + self.deletes.len()
    }
}

/// How the service's topology hints state changes after this sync, per address type.
#[derive(Clone, Debug, PartialEq)]
pub enum TopologyChange {
    /// Hints were allocated: the hinted endpoint count per zone.
    Populated {
        address_type: AddressType,
        zone_counts: Vec<(Name, usize)>,
    },
    /// Hints were removed for this address type.
    Removed { address_type: AddressType },
}

/// One sync of one service: everything to write, in order, and what to record.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// "namespace/name" of the service.
    pub service_key: String,
    /// One entry per supported address type, in the order to execute.
    pub per_type: Vec<AddressTypePlan>,
    /// Slices of address types the service no longer has; deleted last, every one attempted.
    pub unsupported_deletes: Vec<EndpointSlice>,
    pub events: Vec<Event>,
    /// Errors that make the sync fail (and retry) although the writes go ahead, such as a pod on a
    /// node that does not exist.
    pub errors: Vec<String>,
    /// The pods those errors left out (on a node that does not exist), by name, in name order: a
    /// later sync must look at them again, whether or not they change.
    pub pods_on_missing_nodes: Vec<Name>,
    pub topology_changes: Vec<TopologyChange>,
    /// Addresses of a mirrored Endpoints left out: invalid, or over the per-subset cap.
    pub addresses_skipped: usize,
}

impl Plan {
    pub fn write_count(&self) -> usize {
        self.per_type
            .iter()
            .map(AddressTypePlan::write_count)
            .sum::<usize>()
            + self.unsupported_deletes.len()
    }
}

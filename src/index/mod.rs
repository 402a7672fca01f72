//! Lock-sharded indexes of services, pods, nodes, slices and Endpoints, and the selector cache.
//!
//! [`Index`] answers the controller's two questions without scanning: which services select a pod
//! (one hash lookup per pod label, through the precompiled selector cache) and which pods a service
//! selects (member sets kept current on every pod and service event). [`pod_projection`] reduces a
//! pod event to what decides which services to sync, by upstream's rules. Pure: no I/O.

mod cluster;
mod namespace;
mod projection;
mod selector;
mod set;
mod slices;
mod slots;
mod store;

use std::fmt;

pub use cluster::{Index, Pods, ServiceKeys, Services};
pub use projection::{PodProjection, pod_projection};
pub use slices::{SliceStore, is_managed};
pub(crate) use store::NodeMap;
pub use store::{EndpointsStore, NodeStore, Relist};

use crate::model::{Name, Service, intern};

/// A service's identity: the key of the service queue. Displays as `namespace/name`; orders by
/// namespace, then name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceKey {
    pub namespace: Name,
    pub name: Name,
}

impl ServiceKey {
    /// Interns both parts: namespaces and service names come from a small set.
    pub fn new(namespace: &str, name: &str) -> Self {
        ServiceKey {
            namespace: intern(namespace),
            name: intern(name),
        }
    }

    pub fn from_names(namespace: Name, name: Name) -> Self {
        ServiceKey { namespace, name }
    }

    /// Reads a queue key, `namespace/name`.
    pub fn parse(key: &str) -> Option<Self> {
        let (namespace, name) = key.split_once('/')?;
        Some(ServiceKey::new(namespace, name))
    }

    pub fn of(service: &Service) -> Self {
        ServiceKey {
            namespace: service.meta.namespace.clone(),
            name: service.meta.name.clone(),
        }
    }
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

//! A change to the cluster as a watch delivers it: the input of the engine.

use std::sync::Arc;

use crate::model::{EndpointSlice, Endpoints, Name, Namespace, Node, Pod, Service};

/// One object created, updated or deleted. Applying an object that exists replaces it.
#[derive(Clone, Debug)]
pub enum Change {
    Service(Service),
    ServiceDeleted { namespace: Name, name: Name },
    Pod(Pod),
    PodDeleted { namespace: Name, name: Name },
    Node(Node),
    NodeDeleted { name: Name },
    Namespace(Namespace),
    NamespaceDeleted { name: Name },
    EndpointSlice(Arc<EndpointSlice>),
    EndpointSliceDeleted { namespace: Name, name: Name },
    Endpoints(Arc<Endpoints>),
    EndpointsDeleted { namespace: Name, name: Name },
}

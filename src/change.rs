//! A change to the cluster as a watch delivers it: the input of the engine.

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
    EndpointSlice(EndpointSlice),
    EndpointSliceDeleted { namespace: Name, name: Name },
    Endpoints(Endpoints),
    EndpointsDeleted { namespace: Name, name: Name },
}

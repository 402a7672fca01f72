//! What happens to a cluster: a change to one object as a watch delivers it (the input of the
//! engine), and the step of a trace, which is a change or a fault injected into the API server at a
//! time. One vocabulary for the generator, trace files, the replay, the live watch and the tests.

use std::sync::Arc;
use std::time::Duration;

use crate::model::{EndpointSlice, Endpoints, Name, Namespace, Node, Pod, Service};
use crate::sink::{Kind, Verb, WriteError};

/// One object created, updated or deleted. Applying an object that exists replaces it.
#[derive(Clone, Debug)]
pub enum Change {
    Service(Service),
    ServiceDeleted {
        namespace: Name,
        name: Name,
    },
    Pod(Pod),
    PodDeleted {
        namespace: Name,
        name: Name,
    },
    Node(Node),
    NodeDeleted {
        name: Name,
    },
    Namespace(Namespace),
    NamespaceDeleted {
        name: Name,
    },
    EndpointSlice(Arc<EndpointSlice>),
    EndpointSliceDeleted {
        namespace: Name,
        name: Name,
    },
    Endpoints(Arc<Endpoints>),
    /// `uid` is the deleted object's, empty when unknown (a relist only shows it is gone). An
    /// Endpoints' name is its Service's and is reused, so a late deletion of an older object must
    /// not remove a newer one.
    EndpointsDeleted {
        namespace: Name,
        name: Name,
        uid: Name,
    },
}

/// The kinds of object a watch delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    Service,
    Pod,
    Node,
    Namespace,
    EndpointSlice,
    Endpoints,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 6] = [
        ChangeKind::Namespace,
        ChangeKind::Node,
        ChangeKind::Service,
        ChangeKind::Pod,
        ChangeKind::EndpointSlice,
        ChangeKind::Endpoints,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Service => "Service",
            ChangeKind::Pod => "Pod",
            ChangeKind::Node => "Node",
            ChangeKind::Namespace => "Namespace",
            ChangeKind::EndpointSlice => "EndpointSlice",
            ChangeKind::Endpoints => "Endpoints",
        }
    }
}

impl Change {
    /// The deletion of an object of `kind`; `namespace` is ignored for cluster-scoped kinds.
    pub fn deleted(kind: ChangeKind, namespace: Name, name: Name) -> Change {
        Change::deleted_with_uid(kind, namespace, name, Name::default())
    }

    /// A deletion as a watch delivers it, with the deleted object's uid.
    pub fn deleted_with_uid(kind: ChangeKind, namespace: Name, name: Name, uid: Name) -> Change {
        match kind {
            ChangeKind::Service => Change::ServiceDeleted { namespace, name },
            ChangeKind::Pod => Change::PodDeleted { namespace, name },
            ChangeKind::Node => Change::NodeDeleted { name },
            ChangeKind::Namespace => Change::NamespaceDeleted { name },
            ChangeKind::EndpointSlice => Change::EndpointSliceDeleted { namespace, name },
            ChangeKind::Endpoints => Change::EndpointsDeleted {
                namespace,
                name,
                uid,
            },
        }
    }

    pub fn kind(&self) -> ChangeKind {
        match self {
            Change::Service(_) | Change::ServiceDeleted { .. } => ChangeKind::Service,
            Change::Pod(_) | Change::PodDeleted { .. } => ChangeKind::Pod,
            Change::Node(_) | Change::NodeDeleted { .. } => ChangeKind::Node,
            Change::Namespace(_) | Change::NamespaceDeleted { .. } => ChangeKind::Namespace,
            Change::EndpointSlice(_) | Change::EndpointSliceDeleted { .. } => {
                ChangeKind::EndpointSlice
            }
            Change::Endpoints(_) | Change::EndpointsDeleted { .. } => ChangeKind::Endpoints,
        }
    }

    /// Whether this change deletes its object.
    pub fn is_deletion(&self) -> bool {
        !matches!(
            self,
            Change::Service(_)
                | Change::Pod(_)
                | Change::Node(_)
                | Change::Namespace(_)
                | Change::EndpointSlice(_)
                | Change::Endpoints(_)
        )
    }
}

/// Injected into the API server: the next `times` writes of `verb` on `kind` fail with `error`.
#[derive(Clone, Debug)]
pub struct Fault {
    pub verb: Verb,
    pub kind: Kind,
    pub error: WriteError,
    pub times: usize,
}

/// What happens at one step of a trace.
#[derive(Clone, Debug)]
pub enum Happening {
    /// An object created, updated or deleted (a `*Deleted` change).
    Change(Change),
    Fault(Fault),
}

/// One step of a trace: at a virtual time since the trace began, what happens.
#[derive(Clone, Debug)]
pub struct Step {
    pub at: Duration,
    pub happening: Happening,
}

impl Step {
    pub fn change(at: Duration, change: Change) -> Step {
        Step {
            at,
            happening: Happening::Change(change),
        }
    }

    pub fn fault(at: Duration, fault: Fault) -> Step {
        Step {
            at,
            happening: Happening::Fault(fault),
        }
    }

    /// The change this step makes, unless it is a fault.
    pub fn as_change(&self) -> Option<&Change> {
        match &self.happening {
            Happening::Change(change) => Some(change),
            Happening::Fault(_) => None,
        }
    }
}

//! Where writes go: the `Sink` trait, an in-memory API server, and the executor that carries out a
//! plan with upstream's ordering and error rules.

use std::fmt;
use std::sync::Arc;

use crate::model::{EndpointSlice, Endpoints, Meta, Name};

/// The kinds of object sliced writes. The order (EndpointSlice first) is the listing order of
/// `MemorySink::objects`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    EndpointSlice,
    Endpoints,
    /// Only patched, by the service controller; never stored by a sink.
    Service,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Endpoints => "Endpoints",
            Kind::Service => "Service",
        }
    }

    /// The group-qualified resource, as the API server names it in NotFound, AlreadyExists, Conflict
    /// and Forbidden messages.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::EndpointSlice => "endpointslices.discovery.k8s.io",
            Kind::Endpoints => "endpoints",
            Kind::Service => "services",
        }
    }

    /// The group-qualified kind, as the API server names it in Invalid messages.
    pub fn qualified_kind(self) -> &'static str {
        match self {
            Kind::EndpointSlice => "EndpointSlice.discovery.k8s.io",
            Kind::Endpoints => "Endpoints",
            Kind::Service => "Service",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kinds of object sliced writes. Shared, not copied, between the plan, the API server's store
/// and the index: a write costs no copy of the object unless someone changes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    EndpointSlice(Arc<EndpointSlice>),
    Endpoints(Arc<Endpoints>),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::EndpointSlice(_) => Kind::EndpointSlice,
            Object::Endpoints(_) => Kind::Endpoints,
        }
    }

    pub fn meta(&self) -> &Meta {
        match self {
            Object::EndpointSlice(s) => &s.meta,
            Object::Endpoints(e) => &e.meta,
        }
    }

    pub fn meta_mut(&mut self) -> &mut Meta {
        match self {
            Object::EndpointSlice(s) => &mut Arc::make_mut(s).meta,
            Object::Endpoints(e) => &mut Arc::make_mut(e).meta,
        }
    }

    pub fn as_slice(&self) -> Option<&EndpointSlice> {
        match self {
            Object::EndpointSlice(s) => Some(s),
            Object::Endpoints(_) => None,
        }
    }

    pub fn as_endpoints(&self) -> Option<&Endpoints> {
        match self {
            Object::EndpointSlice(_) => None,
            Object::Endpoints(e) => Some(e),
        }
    }

    pub fn into_slice(self) -> Option<EndpointSlice> {
        match self {
            Object::EndpointSlice(s) => Some(Arc::unwrap_or_clone(s)),
            Object::Endpoints(_) => None,
        }
    }

    pub fn into_endpoints(self) -> Option<Endpoints> {
        match self {
            Object::EndpointSlice(_) => None,
            Object::Endpoints(e) => Some(Arc::unwrap_or_clone(e)),
        }
    }

    /// The shared slice, without copying it.
    pub fn slice_arc(&self) -> Option<&Arc<EndpointSlice>> {
        match self {
            Object::EndpointSlice(s) => Some(s),
            Object::Endpoints(_) => None,
        }
    }
}

impl From<EndpointSlice> for Object {
    fn from(s: EndpointSlice) -> Self {
        Object::EndpointSlice(Arc::new(s))
    }
}

impl From<Arc<EndpointSlice>> for Object {
    fn from(s: Arc<EndpointSlice>) -> Self {
        Object::EndpointSlice(s)
    }
}

impl From<Endpoints> for Object {
    fn from(e: Endpoints) -> Self {
        Object::Endpoints(Arc::new(e))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Create,
    Update,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
        }
    }
}

/// A write the API server refused. `kind` is the group-qualified resource (`Kind::resource`), so
/// that messages read as the API server's do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// A stale resourceVersion on update.
    #[error(
        "Operation cannot be fulfilled on {kind} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict { kind: &'static str, name: Name },
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: &'static str, name: Name },
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists { kind: &'static str, name: Name },
    /// Status cause `NamespaceTerminating`. `name` is empty for a generateName create: admission
    /// refuses it before a name is generated.
    #[error("{}", forbidden_message(kind, name, namespace))]
    NamespaceTerminating {
        kind: &'static str,
        name: Name,
        namespace: Name,
    },
    /// Any other status: Invalid (422), a failed UID precondition (409 Conflict), server errors.
    #[error("{message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
    },
}

fn forbidden_message(kind: &str, name: &str, namespace: &str) -> String {
    let cause = format!(
        "unable to create new content in namespace {namespace} because it is being terminated"
    );
    if name.is_empty() {
        format!("{kind} is forbidden: {cause}")
    } else {
        format!("{kind} \"{name}\" is forbidden: {cause}")
    }
}

impl WriteError {
    /// The HTTP status the API server would answer with.
    pub fn status_code(&self) -> u16 {
        match self {
            WriteError::Conflict { .. } | WriteError::AlreadyExists { .. } => 409,
            WriteError::NotFound { .. } => 404,
            WriteError::NamespaceTerminating { .. } => 403,
            WriteError::Status { code, .. } => *code,
        }
    }

    /// 422 Invalid, worded as the API server's field errors: `"<field>: <detail>"`.
    pub fn invalid(kind: Kind, name: &str, field_error: &str) -> WriteError {
        WriteError::Status {
            code: 422,
            reason: "Invalid".to_string(),
            message: format!(
                "{} \"{name}\" is invalid: {field_error}",
                kind.qualified_kind()
            ),
        }
    }

    /// 409 Conflict from a failed UID precondition.
    pub fn uid_precondition(kind: Kind, name: &str, sent: &str, stored: &str) -> WriteError {
        WriteError::Status {
            code: 409,
            reason: "Conflict".to_string(),
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {sent}, UID in object meta: {stored}",
                kind.resource()
            ),
        }
    }

    /// Any 409 Conflict: a stale resourceVersion or a failed precondition.
    pub fn is_conflict(&self) -> bool {
        match self {
            WriteError::Conflict { .. } => true,
            WriteError::Status { code, reason, .. } => *code == 409 && reason == "Conflict",
            _ => false,
        }
    }

    pub fn is_not_found(&self) -> bool {
        match self {
            WriteError::NotFound { .. } => true,
            WriteError::Status { code, .. } => *code == 404,
            _ => false,
        }
    }

    /// Upstream's `HasStatusCause(err, NamespaceTerminatingCause)`.
    pub fn is_namespace_terminating(&self) -> bool {
        matches!(self, WriteError::NamespaceTerminating { .. })
    }

    /// A metrics label for why the write failed: a metav1 `StatusReason`, `NamespaceTerminating`,
    /// `PreconditionFailed` or sliced's `NotLeader`. Reasons outside that list are `Unknown`, so
    /// that a server's free text cannot grow the label set.
    pub fn reason(&self) -> &'static str {
        match self {
            WriteError::Conflict { .. } => "Conflict",
            WriteError::NotFound { .. } => "NotFound",
            WriteError::AlreadyExists { .. } => "AlreadyExists",
            WriteError::NamespaceTerminating { .. } => "NamespaceTerminating",
            WriteError::Status {
                code: 409, message, ..
            } if message.contains("Precondition failed") => "PreconditionFailed",
            WriteError::Status { reason, .. } => STATUS_REASONS
                .iter()
                .find(|known| **known == reason.as_str())
                .copied()
                .unwrap_or("Unknown"),
        }
    }
}

/// metav1's `StatusReason` values, and the one sliced gives a write it did not send because this
/// replica lost the lease.
const STATUS_REASONS: [&str; 19] = [
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
    "NotLeader",
];

/// The API server, as the reconcilers' writes see it. Methods take `&self` so that one sink can serve
/// parallel workers. Each returns the object as the server stored it. Creates and updates take the
/// object: a sink that stores it keeps the same allocation when the caller holds no other reference.
pub trait Sink: Send + Sync {
    fn create(&self, object: Object) -> Result<Object, WriteError>;
    fn update(&self, object: Object) -> Result<Object, WriteError>;
    fn delete(&self, object: &Object) -> Result<(), WriteError>;

    /// How many writes the sink takes at once. At one (the default) every write is made in plan
    /// order on the caller's thread, which keeps the in-memory sink deterministic. Above one, the
    /// engine sends the writes of different services at the same time, and within one sync the
    /// writes of one step (creates, then updates, then deletes) together.
    fn concurrency(&self) -> usize {
        1
    }

    /// Sends the service controller's change of a Service. A sink that cannot answers 405, so a
    /// controller it does not serve fails loudly rather than quietly writing nothing.
    fn patch_service(&self, patch: &ServicePatch) -> Result<(), WriteError> {
        Err(WriteError::Status {
            code: 405,
            reason: "MethodNotAllowed".to_string(),
            message: format!(
                "this sink does not patch Services (service {}/{})",
                patch.namespace, patch.name
            ),
        })
    }
}

/// What the service controller changes of a Service, sent as upstream sends it: a strategic-merge
/// patch, one for the finalizers and one for the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePatch {
    pub namespace: Name,
    pub name: Name,
    /// Sent to the `status` subresource; false for a Service being deleted, which upstream
    /// patches directly.
    pub status_subresource: bool,
    pub change: ServiceChange,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceChange {
    /// `metadata.finalizers` as it is to be, the others' kept in their order.
    Finalizers(Vec<Name>),
    /// `status.loadBalancer.ingress` as it is to be, replaced whole.
    Ingress(Vec<crate::model::LoadBalancerIngress>),
}

pub mod apply;
pub mod endpoints;
pub mod memory;

pub use apply::{AppliedWrite, ApplyOutcome, TypeOutcome, TypeStatus, apply_plan};
pub use memory::{MemorySink, WriteRecord};

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str, message: &str) -> WriteError {
        WriteError::Status {
            code,
            reason: reason.to_string(),
            message: message.to_string(),
        }
    }

    #[test]
    fn reasons_of_the_typed_refusals() {
        let (kind, name) = (Kind::EndpointSlice.resource(), Name::new("web-abc"));
        let typed = [
            (
                WriteError::Conflict {
                    kind,
                    name: name.clone(),
                },
                "Conflict",
            ),
            (
                WriteError::NotFound {
                    kind,
                    name: name.clone(),
                },
                "NotFound",
            ),
            (
                WriteError::AlreadyExists {
                    kind,
                    name: name.clone(),
                },
                "AlreadyExists",
            ),
            (
                WriteError::NamespaceTerminating {
                    kind,
                    name,
                    namespace: Name::new("doomed"),
                },
                "NamespaceTerminating",
            ),
        ];
        for (error, reason) in typed {
            assert_eq!(error.reason(), reason, "{error:?}");
        }
    }

    #[test]
    fn status_reasons_are_kept_from_a_fixed_list() {
        for (code, reason) in [
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (503, "NotLeader"),
            (422, "Invalid"),
            (429, "TooManyRequests"),
            (403, "Forbidden"),
            (401, "Unauthorized"),
            (504, "Timeout"),
            (410, "Expired"),
            (409, "Conflict"),
        ] {
            assert_eq!(status(code, reason, "x").reason(), reason);
        }
        assert_eq!(
            WriteError::invalid(Kind::Endpoints, "web", "subsets[0]: bad").reason(),
            "Invalid"
        );
    }

    #[test]
    fn a_failed_uid_precondition_is_told_from_a_conflict() {
        let precondition = WriteError::uid_precondition(Kind::EndpointSlice, "web-abc", "a", "b");
        assert!(precondition.is_conflict());
        assert_eq!(precondition.reason(), "PreconditionFailed");
        // Only a 409 says so: the same words under another code are its reason.
        assert_eq!(
            status(500, "InternalError", "Precondition failed").reason(),
            "InternalError"
        );
    }

    #[test]
    fn other_reasons_are_unknown() {
        for reason in [
            "",
            "internalerror",
            "Some free text from a webhook",
            "Success",
        ] {
            assert_eq!(status(500, reason, "x").reason(), "Unknown", "{reason:?}");
        }
    }
}

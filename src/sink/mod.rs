//! Where writes go: the `Sink` trait, an in-memory API server, and the executor that carries out a
//! plan with upstream's ordering and error rules.

use crate::model::{EndpointSlice, Endpoints, Name};

/// The kinds of object sliced writes.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    EndpointSlice(EndpointSlice),
    Endpoints(Endpoints),
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

/// A write the API server refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("Operation cannot be fulfilled on {kind} \"{name}\": the object has been modified; please apply your changes to the latest version and try again")]
    Conflict { kind: &'static str, name: Name },
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: &'static str, name: Name },
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists { kind: &'static str, name: Name },
    #[error("{kind} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated")]
    NamespaceTerminating {
        kind: &'static str,
        name: Name,
        namespace: Name,
    },
    #[error("{message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
    },
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
}

/// The API server, as the reconcilers' writes see it. Methods take `&self` so that one sink can serve
/// parallel workers. Each returns the object as the server stored it.
pub trait Sink: Send + Sync {
    fn create(&self, object: &Object) -> Result<Object, WriteError>;
    fn update(&self, object: &Object) -> Result<Object, WriteError>;
    fn delete(&self, object: &Object) -> Result<(), WriteError>;
}

pub mod apply;
pub mod memory;

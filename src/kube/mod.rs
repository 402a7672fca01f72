//! The thin adapter to the Kubernetes API types.

pub mod convert;
pub mod events;
pub mod http;
pub mod manifest;

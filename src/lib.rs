//! sliced: a fast reconcile engine for Kubernetes EndpointSlices and Endpoints, and the mirroring of
//! custom Endpoints into EndpointSlices.
//!
//! Everything but `kube` is the core: no kube, no k8s-openapi, no tokio (a test, `boundary`, holds
//! the wall). `kube` is the thin adapter, the only module that knows Kubernetes API types and the
//! network; it also reads cluster dumps and traces from files.

pub mod allocator;
pub mod change;
pub mod controllers;
pub mod dns;
pub mod duration;
pub mod engine;
pub mod index;
pub mod kube;
pub mod metrics;
pub mod model;
pub mod queue;
pub mod reconcile;
pub mod replay;
pub mod sim;
pub mod sink;
pub mod snapshot;
pub mod tracker;
pub mod tune;
mod yaml;

#[cfg(test)]
mod boundary;

//! sliced: a fast reconcile engine for Kubernetes EndpointSlices, Endpoints and LoadBalancer Services.
//!
//! The core (`model`, `reconcile`, `sink`) is pure: no I/O, no kube, no tokio. `kube` is the thin
//! adapter, the only module that knows Kubernetes API types.

pub mod change;
pub mod controllers;
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

//! Deterministic synthetic clusters and churn, for benches, tests and `simulate`.
//!
//! - `generate(&ClusterSpec) -> Cluster`: a cluster from a small spec (YAML-loadable, see
//!   `fixtures/sim/default.yaml`): heavy-tailed service sizes, dual-stack, named ports, headless.
//! - `trace(&Cluster, TraceKind, seed, len) -> Vec<Step>`: timed, self-consistent changes to it
//!   (rolling updates, scaling, node loss, readiness flaps, label moves, or all mixed).
//! - `apply(&mut Snapshot, &Change)`: the plain oracle state the engine's result is checked against.
//! - `single_service` and `cluster`: the simple generators benches and `simulate` were built on.
//!
//! Everything is pure and reproducible from its seed: no I/O, no clock, no global randomness.

mod apply;
mod churn;
mod cluster;
mod episodes;
mod keyset;
mod rng;
mod simple;
mod spec;
mod trace;

pub use apply::{Applied, apply, apply_all};
pub use churn::Churn;
pub use cluster::{Cluster, Deployment, EPOCH_SECOND, LABEL_TEMPLATE_HASH, Zone, generate};
pub use episodes::NodeLoss;
pub use rng::Rng;
pub use simple::{ServiceScenario, cluster, single_service, two_templates};
pub use spec::{ClusterSpec, MAX_NAMESPACES, MAX_NODES, MAX_PODS, MAX_SERVICES, SpecError};
pub use trace::{TraceKind, trace};

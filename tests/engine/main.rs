//! The engine and what it is built from, tested without the binary or an API server.
//!
//! The engine: its incremental path against its full path, and the incremental state under
//! others' edits, restarts and faults (`faults`, `incremental`, `invalidation`, `late_events`,
//! `restart`). The reconcilers: the EndpointSlice reconciler's incremental reconcile against its
//! full one (`reconcile_incremental`), the mirroring reconciler (`mirroring`), the Endpoints
//! reconciler against an independent model of upstream's sync (`endpoints_properties`), and
//! property tests and fuzzing against independent oracles (`properties`). Their parts: the index
//! (`index`), the work queue (`queue`), the write-tracking state (`tracker`), and the in-memory
//! API server and plan executor (`sink`).

mod endpoints_over_capacity;
mod endpoints_properties;
mod faults;
mod incremental;
mod index;
mod invalidation;
mod late_events;
mod load_balancer;
mod mirroring;
#[path = "../support/model.rs"]
mod model;
mod properties;
mod queue;
mod reconcile_incremental;
mod restart;
mod sink;
#[path = "../support/snapshot_reference.rs"]
mod snapshot_reference;
mod tracker;

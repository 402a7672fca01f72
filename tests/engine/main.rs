//! The engine: its incremental path against its full path, and the incremental state under
//! others' edits, restarts and faults.

mod faults;
mod incremental;
mod invalidation;
mod late_events;
#[path = "../support/model.rs"]
mod model;
mod restart;

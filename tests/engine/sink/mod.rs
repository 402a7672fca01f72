//! The in-memory API server and the plan executor.

mod apply;
mod common;
mod memory;

//! The in-memory API server and the plan executor.

mod apply;
pub mod common;
mod memory;

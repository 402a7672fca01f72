//! Replaying a trace of cluster changes through the engine in virtual time: the `--events` form of
//! `sliced simulate`.

pub mod faults;
mod replicas;
mod run;
mod world;

pub use crate::change::{Fault, Happening, Step};
pub use faults::{FaultCounts, FaultProfile};
pub use run::{
    FaultReport, ReplayOptions, ReplayResult, TimedWrite, drain, replay, replay_with_progress,
};

//! Replaying a trace of cluster changes through the engine in virtual time: the `--events` form of
//! `sliced simulate`.

mod duration;
mod run;
mod world;

use std::time::Duration;

use crate::change::Change;
use crate::sink::{Kind, Verb, WriteError};

pub use duration::{DurationError, format_seconds, parse_duration};
pub use run::{ReplayOptions, ReplayResult, TimedWrite, replay, replay_with_progress};

/// What a step does.
#[derive(Clone, Debug)]
pub enum Action {
    /// An object created, or updated if one of its kind, namespace and name exists.
    Apply(Change),
    /// An object deleted by kind, namespace and name.
    Delete(Change),
    /// The next `times` writes of that verb and kind fail with `error`.
    Fail {
        verb: Verb,
        kind: Kind,
        error: WriteError,
        times: usize,
    },
}

/// One step of a trace: at a virtual time, an action.
#[derive(Clone, Debug)]
pub struct Step {
    pub at: Duration,
    pub action: Action,
}

//! The commands behind `sliced`'s subcommands.

pub mod reconcile;
pub mod replay;
pub mod simulate;

//! The commands behind `sliced`'s subcommands.

pub mod reconcile;
pub mod replay;
pub mod run;
pub mod simulate;

/// A Go-style duration flag (`0s`, `500ms`, `1m`).
pub fn duration_arg(s: &str) -> Result<std::time::Duration, String> {
    sliced::replay::parse_duration(s).map_err(|e| e.to_string())
}

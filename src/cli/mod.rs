//! The commands behind `sliced`'s subcommands.

pub mod reconcile;
mod render;
pub mod replay;
pub mod run;
pub mod simulate;

/// `--prefer-same-traffic-distribution` and its negation, shared by every command that reconciles.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct TrafficDistributionArgs {
    /// Give hints to PreferSameZone and PreferSameNode Services, as Kubernetes 1.34 and later do
    /// (the default; the flag is kept for scripts written before it was).
    #[arg(long, overrides_with = "no_prefer_same_traffic_distribution")]
    prefer_same_traffic_distribution: bool,
    /// Give PreferSameZone and PreferSameNode Services no hints, as kube-controller-manager before
    /// 1.34 (its PreferSameTrafficDistribution feature gate off).
    #[arg(long, overrides_with = "prefer_same_traffic_distribution")]
    no_prefer_same_traffic_distribution: bool,
}

impl TrafficDistributionArgs {
    pub fn prefer_same(&self) -> bool {
        !self.no_prefer_same_traffic_distribution
    }
}

/// A Go-style duration flag (`0s`, `500ms`, `1m`).
pub fn duration_arg(s: &str) -> Result<std::time::Duration, String> {
    sliced::duration::parse_duration(s).map_err(|e| e.to_string())
}

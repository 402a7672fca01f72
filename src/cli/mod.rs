//! The commands behind `sliced`'s subcommands.

pub mod dns;
pub mod reconcile;
mod render;
pub mod replay;
pub mod run;
pub mod simulate;
pub mod tune;
mod tune_plot;

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

/// A batch period flag: a Go-style duration, or `auto` for the adaptive window. Checked here,
/// kept as given: `auto`'s bounds come from other flags (`BatchPeriod::parse` reads it again).
pub fn batch_period_arg(s: &str) -> Result<String, String> {
    let any_bounds = sliced::engine::AdaptiveBatch {
        max_batch_period: std::time::Duration::ZERO,
        write_qps: 0.0,
    };
    sliced::engine::BatchPeriod::parse(s, any_bounds)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

/// The address pools of `--lb-pools` files added to `pools` (those given with the input), checked
/// together: no name twice, no address in two pools. A file's other objects are not read.
pub fn lb_pools(
    files: &[String],
    mut pools: Vec<sliced::reconcile::load_balancer::pools::Pool>,
) -> Result<Vec<sliced::reconcile::load_balancer::pools::Pool>, String> {
    for file in files {
        let loaded = sliced::kube::manifest::load_file(file).map_err(|e| e.to_string())?;
        if !loaded.is_empty() {
            eprintln!(
                "warning: {file}: {} objects other than IPAddressPools not read",
                loaded.len()
            );
        }
        pools.extend(loaded.pools);
    }
    sliced::reconcile::load_balancer::pools::check_pools(&pools).map_err(|e| e.to_string())?;
    Ok(pools)
}

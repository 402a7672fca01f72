//! The spec of a synthetic cluster: a few numbers, every one with a default, loadable from YAML.

use serde::{Deserialize, Serialize};

/// What `generate` builds. Every field has a default (`ClusterSpec::default()`, documented in
/// `fixtures/sim/default.yaml`), so a spec file names only what it changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSpec {
    /// Seed of every random choice: the same spec gives the same cluster.
    pub seed: u64,
    /// Pods in the cluster, all owned by the deployments of the services.
    pub pods: usize,
    /// Services, each with one deployment whose pods it selects.
    pub services: usize,
    /// Namespaces the services are dealt over, round robin.
    pub namespaces: usize,
    /// Availability zones.
    pub zones: usize,
    /// Nodes in each zone; 0 sizes the cluster from `pods_per_node`.
    pub nodes_per_zone: usize,
    /// Pods per node when `nodes_per_zone` is 0.
    pub pods_per_node: usize,
    /// Allocatable CPU of every node, in millicores.
    pub node_cpu_millis: i64,
    /// Services of exactly `huge_service_pods` pods.
    pub huge_services: usize,
    pub huge_service_pods: usize,
    /// Shape of the Lomax (Pareto II) distribution of the other services' sizes: the smaller, the heavier the tail.
    pub tail_shape: f64,
    /// Bounds of the other services' sizes.
    pub min_service_pods: usize,
    pub max_service_pods: usize,
    /// Fractions of services: IPv4+IPv6, named target ports, headless.
    pub dual_stack_fraction: f64,
    pub named_port_fraction: f64,
    pub headless_fraction: f64,
    /// Fraction of services of type LoadBalancer (none of them headless).
    pub load_balancer_fraction: f64,
    /// Fraction of pods running with an IP but not ready.
    pub not_ready_fraction: f64,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            seed: 1,
            pods: 100_000,
            services: 1_000,
            namespaces: 20,
            zones: 3,
            nodes_per_zone: 0,
            pods_per_node: 30,
            node_cpu_millis: 4_000,
            huge_services: 2,
            huge_service_pods: 5_000,
            tail_shape: 1.1,
            min_service_pods: 1,
            max_service_pods: 2_500,
            dual_stack_fraction: 0.1,
            named_port_fraction: 0.2,
            headless_fraction: 0.05,
            load_balancer_fraction: 0.01,
            not_ready_fraction: 0.01,
        }
    }
}

/// The largest cluster a spec may ask for: far beyond any real one (50 million pods take about
/// 16 GB), and far from overflowing `usize` arithmetic.
pub const MAX_PODS: usize = 50_000_000;
pub const MAX_SERVICES: usize = 10_000_000;
pub const MAX_NAMESPACES: usize = 1_000_000;
pub const MAX_NODES: usize = 5_000_000;

/// A spec that does not parse or cannot be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpecError {
    #[error("cluster spec: {0}")]
    Parse(String),
    #[error("cluster spec: {field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

fn invalid(field: &'static str, message: impl Into<String>) -> SpecError {
    SpecError::Invalid {
        field,
        message: message.into(),
    }
}

impl ClusterSpec {
    /// Parses and validates a YAML spec; an empty document is the default spec.
    pub fn from_yaml(text: &str) -> Result<ClusterSpec, SpecError> {
        let only_comments = text
            .lines()
            .map(str::trim)
            .all(|l| l.is_empty() || l.starts_with('#') || l == "---");
        let spec = if only_comments {
            ClusterSpec::default()
        } else {
            crate::yaml::from_str(text).map_err(SpecError::Parse)?
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks that the numbers can be built as asked. `generate` clamps a spec that fails this into
    /// range rather than failing, so it is for callers that want to report a bad spec.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.validate_sizes()?;
        for (field, value) in [
            ("dual_stack_fraction", self.dual_stack_fraction),
            ("named_port_fraction", self.named_port_fraction),
            ("headless_fraction", self.headless_fraction),
            ("load_balancer_fraction", self.load_balancer_fraction),
            ("not_ready_fraction", self.not_ready_fraction),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(invalid(field, format!("{value} is not between 0 and 1")));
            }
        }
        if !(self.tail_shape.is_finite() && self.tail_shape > 0.0) {
            return Err(invalid("tail_shape", "must be a positive number"));
        }
        if self.zones == 0 || self.zones > 26 * 26 {
            return Err(invalid("zones", "must be between 1 and 676"));
        }
        if self.namespaces == 0 {
            return Err(invalid("namespaces", "must be at least 1"));
        }
        if self.services == 0 && self.pods > 0 {
            return Err(invalid(
                "services",
                "must be at least 1 when there are pods",
            ));
        }
        if self.nodes_per_zone == 0 && self.pods_per_node == 0 {
            return Err(invalid(
                "pods_per_node",
                "must be at least 1 when nodes_per_zone is 0",
            ));
        }
        if self.node_cpu_millis <= 0 {
            return Err(invalid("node_cpu_millis", "must be positive"));
        }
        if self.huge_services > self.services {
            return Err(invalid("huge_services", "more than services"));
        }
        let huge = self.huge_services.saturating_mul(self.huge_service_pods);
        if huge > self.pods {
            return Err(invalid(
                "huge_services",
                format!(
                    "{huge} pods in huge services, more than pods ({})",
                    self.pods
                ),
            ));
        }
        if self.huge_services == self.services && huge != self.pods {
            return Err(invalid(
                "huge_services",
                "every service is huge, so pods must equal huge_services * huge_service_pods",
            ));
        }
        if self.max_service_pods < self.min_service_pods {
            return Err(invalid("max_service_pods", "less than min_service_pods"));
        }
        let tail = self.services - self.huge_services;
        if tail.saturating_mul(self.min_service_pods) > self.pods - huge {
            return Err(invalid(
                "min_service_pods",
                format!(
                    "{tail} services of at least {} pods need more than {} pods",
                    self.min_service_pods,
                    self.pods - huge
                ),
            ));
        }
        if tail > 0 && tail.saturating_mul(self.max_service_pods) < self.pods - huge {
            return Err(invalid(
                "max_service_pods",
                format!(
                    "{tail} services of at most {} pods cannot hold {} pods",
                    self.max_service_pods,
                    self.pods - huge
                ),
            ));
        }
        Ok(())
    }

    /// Checks that the sizes are within the bounds above (`generate` cuts larger ones down):
    /// what `--pods` and `--services` must pass too.
    pub fn validate_sizes(&self) -> Result<(), SpecError> {
        for (field, value, max) in [
            ("pods", self.pods, MAX_PODS),
            ("services", self.services, MAX_SERVICES),
            ("namespaces", self.namespaces, MAX_NAMESPACES),
            ("huge_service_pods", self.huge_service_pods, MAX_PODS),
        ] {
            if value > max {
                return Err(invalid(
                    field,
                    format!("{value} is more than a simulated cluster can hold (at most {max})"),
                ));
            }
        }
        if self.nodes_per_zone > 0 {
            let nodes = self.zones.max(1).checked_mul(self.nodes_per_zone);
            if nodes.is_none_or(|n| n > MAX_NODES) {
                return Err(invalid(
                    "nodes_per_zone",
                    format!(
                        "{} zones of {} nodes is more than a simulated cluster can hold (at most {MAX_NODES} nodes)",
                        self.zones, self.nodes_per_zone
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Nodes in each zone, as generated.
    pub fn node_count_per_zone(&self) -> usize {
        if self.nodes_per_zone > 0 {
            return self.nodes_per_zone;
        }
        let zones = self.zones.max(1);
        let nodes = self.pods.div_ceil(self.pods_per_node.max(1));
        nodes.div_ceil(zones).max(1)
    }
}

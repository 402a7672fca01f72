//! Write budgets that grow with the cluster (`--write-qps-steps "0:10,100:20,1000:50"`): the
//! writes per second allowed to the API server, chosen from the number of nodes, as operators of
//! large clusters size their API servers' limits by node count.

use std::sync::atomic::{AtomicU64, Ordering};

/// A `--write-qps-steps` value that is not a list of `NODES:QPS` with node counts rising.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("--write-qps-steps: {0}")]
pub struct StepsError(String);

/// Writes per second by node count: each step applies from its node count up to the next's.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteQpsSteps {
    /// (nodes, qps), node counts strictly rising.
    steps: Vec<(usize, f64)>,
}

impl WriteQpsSteps {
    /// Parses `NODES:QPS` pairs separated by commas. Below the first step's node count, the
    /// first step's qps applies.
    pub fn parse(text: &str) -> Result<Self, StepsError> {
        let mut steps: Vec<(usize, f64)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = |why: &str| StepsError(format!("{item:?}: {why}"));
            let (nodes, qps) = item
                .split_once(':')
                .ok_or_else(|| bad("expected NODES:QPS, such as 100:20"))?;
            let nodes: usize =
                (nodes.trim().parse()).map_err(|_| bad("the node count is not a whole number"))?;
            let qps: f64 = (qps.trim().parse()).map_err(|_| bad("the qps is not a number"))?;
            if !(qps.is_finite() && qps > 0.0) {
                return Err(bad("the qps must be a positive number"));
            }
            if steps.last().is_some_and(|(last, _)| *last >= nodes) {
                return Err(bad("node counts must rise from one step to the next"));
            }
            steps.push((nodes, qps));
        }
        if steps.is_empty() {
            return Err(StepsError("give at least one NODES:QPS step".into()));
        }
        Ok(WriteQpsSteps { steps })
    }

    /// The writes per second allowed with `nodes` nodes.
    pub fn qps_for(&self, nodes: usize) -> f64 {
        let at = self.steps.partition_point(|(from, _)| *from <= nodes);
        self.steps[at.saturating_sub(1)].1
    }
}

/// The writes per second allowed now, shared by the engine (the adaptive batch period's budget)
/// and the sink (its token bucket).
#[derive(Debug)]
pub struct WriteBudget {
    qps_bits: AtomicU64,
}

impl WriteBudget {
    pub fn new(qps: f64) -> Self {
        WriteBudget {
            qps_bits: AtomicU64::new(qps.to_bits()),
        }
    }

    pub fn qps(&self) -> f64 {
        f64::from_bits(self.qps_bits.load(Ordering::Relaxed))
    }

    /// Sets the budget; returns whether it changed.
    pub fn set_qps(&self, qps: f64) -> bool {
        self.qps_bits.swap(qps.to_bits(), Ordering::Relaxed) != qps.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_applies_from_its_node_count_to_the_next() {
        let steps = WriteQpsSteps::parse("0:10, 100:20,1000:50").unwrap();
        let at = |n| steps.qps_for(n);
        assert_eq!(
            [at(0), at(99), at(100), at(999), at(1000), at(50_000)],
            [10.0, 10.0, 20.0, 20.0, 50.0, 50.0]
        );
        // Below the first step, the first applies.
        assert_eq!(WriteQpsSteps::parse("10:5").unwrap().qps_for(3), 5.0);
    }

    #[test]
    fn malformed_steps_are_refused_naming_the_item() {
        for (text, why) in [
            ("", "give at least one"),
            ("100", "expected NODES:QPS"),
            ("x:10", "node count"),
            ("0:fast", "qps is not a number"),
            ("0:0", "positive"),
            ("0:NaN", "positive"),
            ("100:10,100:20", "must rise"),
            ("100:10,50:20", "must rise"),
        ] {
            let error = WriteQpsSteps::parse(text).unwrap_err().to_string();
            assert!(error.contains(why), "{text:?}: {error}");
            assert!(error.starts_with("--write-qps-steps: "), "{error}");
        }
    }

    #[test]
    fn the_budget_tells_a_change() {
        let budget = WriteBudget::new(20.0);
        assert!(!budget.set_qps(20.0));
        assert!(budget.set_qps(50.0));
        assert_eq!(budget.qps(), 50.0);
    }
}

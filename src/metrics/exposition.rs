//! The exposition: every family under its exact name, help and type, in Prometheus' text format
//! 0.0.4, through one prometheus-client collector.
//!
//! prometheus-client writes OpenMetrics: it appends `_total` to every counter sample and a `.` to
//! every help text. kube-controller-manager serves the text format of client_golang, where a counter
//! is exposed under the name it was given: `endpoint_slice_controller_changes`, not `..._total`, and
//! `workqueue_adds_total` with a `# TYPE workqueue_adds_total counter` line. Dashboards and alerts
//! use those names, so [`PlainCounter`] is typed a counter but written as a bare sample, and the
//! collector writes each descriptor itself, help verbatim. No `# EOF` is written: 0.0.4 has none.
//!
//! One difference remains: bucket bounds print as prometheus-client prints floats, `le="2.0"` where
//! client_golang prints `le="2"`. Prometheus 3 normalises both to one series; queries by `le`
//! range, as `histogram_quantile` does, work with either.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use crate::queue::DurationHistogram;

/// A monotonic counter exposed under its own name, with no `_total` appended.
#[derive(Clone, Debug, Default)]
pub struct PlainCounter(Arc<AtomicU64>);

impl PlainCounter {
    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Mirrors a counter kept elsewhere (a queue's), read at scrape time.
    pub(super) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
}

impl TypedMetric for PlainCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for PlainCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        // A gauge sample is the bare `name{labels} value` line that 0.0.4 uses for counters.
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// A histogram copied from a queue's own at scrape time.
#[derive(Clone, Debug, Default)]
pub(super) struct QueueHistogram(Arc<Mutex<DurationHistogram>>);

impl QueueHistogram {
    pub(super) fn set(&self, h: DurationHistogram) {
        *self.0.lock() = h;
    }
}

impl TypedMetric for QueueHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for QueueHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let h = *self.0.lock();
        encoder.encode_histogram::<NoLabelSet>(h.sum.as_secs_f64(), h.count(), &h.buckets(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// A metric shown only once used, as client_golang shows a vector's series only once created: a
/// controller that does not run shows none of its metrics.
#[derive(Clone, Debug)]
pub(super) struct Lazy<M> {
    metric: M,
    shown: Arc<AtomicBool>,
}

impl<M: Default> Default for Lazy<M> {
    fn default() -> Self {
        Lazy::new(M::default())
    }
}

impl<M> Lazy<M> {
    pub(super) fn new(metric: M) -> Self {
        Lazy {
            metric,
            shown: Arc::default(),
        }
    }

    /// The metric, shown from now on.
    pub(super) fn get(&self) -> &M {
        if !self.shown.load(Ordering::Relaxed) {
            self.shown.store(true, Ordering::Relaxed);
        }
        &self.metric
    }

    /// The metric, to read, without showing it.
    pub(super) fn peek(&self) -> &M {
        &self.metric
    }
}

impl<M: EncodeMetric> EncodeMetric for Lazy<M> {
    fn encode(&self, encoder: MetricEncoder) -> fmt::Result {
        self.metric.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.metric.metric_type()
    }

    fn is_empty(&self) -> bool {
        !self.shown.load(Ordering::Relaxed) || self.metric.is_empty()
    }
}

type Boxed = Box<dyn EncodeMetric + Send + Sync>;

struct Described {
    name: &'static str,
    help: String,
    metric: Boxed,
}

/// Every family, in registration order.
#[derive(Default)]
pub(super) struct Exposition {
    families: Vec<Described>,
}

impl fmt::Debug for Exposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.families.iter().map(|d| d.name))
            .finish()
    }
}

/// Stability levels kube-controller-manager prefixes to help texts.
pub(super) const ALPHA: &str = "[ALPHA] ";
pub(super) const BETA: &str = "[BETA] ";

impl Exposition {
    /// Adds a family and returns it: a handle sharing its values with the one exposed.
    pub(super) fn add<M>(&mut self, name: &'static str, help: impl Into<String>, metric: M) -> M
    where
        M: EncodeMetric + Clone + Send + Sync + 'static,
    {
        self.families.push(Described {
            name,
            help: help.into(),
            metric: Box::new(metric.clone()),
        });
        metric
    }
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        for d in &self.families {
            // As client_golang: a vector with no series yet shows nothing, not even its help.
            if d.metric.is_empty() {
                continue;
            }
            let e = encoder.encode_descriptor(d.name, &d.help, None, d.metric.metric_type())?;
            d.metric.encode(e)?;
        }
        Ok(())
    }
}

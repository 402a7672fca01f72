//! client-go's workqueue metrics, labelled `name=<queue>` with upstream's queue names, copied from
//! each queue's own figures at scrape time: the queues' hot paths carry no metrics code.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::exposition::{ALPHA, Exposition, PlainCounter, QueueHistogram};
use super::upstream::Label1;
use crate::queue::QueueMetrics;

type FloatGauge = Gauge<f64, AtomicU64>;

pub(super) struct WorkqueueMetrics {
    depth: Family<Label1, Gauge>,
    adds: Family<Label1, PlainCounter>,
    queue_duration: Family<Label1, QueueHistogram>,
    work_duration: Family<Label1, QueueHistogram>,
    unfinished_work: Family<Label1, FloatGauge>,
    longest_running: Family<Label1, FloatGauge>,
    retries: Family<Label1, PlainCounter>,
}

impl WorkqueueMetrics {
    pub(super) fn register(x: &mut Exposition) -> Self {
        WorkqueueMetrics {
            depth: x.add(
                "workqueue_depth",
                format!("{ALPHA}Current depth of workqueue"),
                Family::default(),
            ),
            adds: x.add(
                "workqueue_adds_total",
                format!("{ALPHA}Total number of adds handled by workqueue"),
                Family::default(),
            ),
            queue_duration: x.add(
                "workqueue_queue_duration_seconds",
                format!(
                    "{ALPHA}How long in seconds an item stays in workqueue before being requested."
                ),
                Family::default(),
            ),
            work_duration: x.add(
                "workqueue_work_duration_seconds",
                format!("{ALPHA}How long in seconds processing an item from workqueue takes."),
                Family::default(),
            ),
            unfinished_work: x.add(
                "workqueue_unfinished_work_seconds",
                format!(
                    "{ALPHA}How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."
                ),
                Family::default(),
            ),
            longest_running: x.add(
                "workqueue_longest_running_processor_seconds",
                format!(
                    "{ALPHA}How many seconds has the longest running processor for workqueue been running."
                ),
                Family::default(),
            ),
            retries: x.add(
                "workqueue_retries_total",
                format!("{ALPHA}Total number of retries handled by workqueue"),
                Family::default(),
            ),
        }
    }

    /// Copies each queue's figures.
    pub(super) fn refresh(&self, queues: &[(&'static str, QueueMetrics)]) {
        for (name, m) in queues {
            let label = [("name", *name)];
            self.depth
                .get_or_create(&label)
                .set(i64::try_from(m.depth).unwrap_or(i64::MAX));
            self.adds.get_or_create(&label).set(m.adds);
            self.retries.get_or_create(&label).set(m.retries);
            self.queue_duration.get_or_create(&label).set(m.queue_wait);
            self.work_duration.get_or_create(&label).set(m.work);
            self.unfinished_work
                .get_or_create(&label)
                .set(m.unfinished_work.as_secs_f64());
            self.longest_running
                .get_or_create(&label)
                .set(m.longest_running.as_secs_f64());
        }
    }
}

//! The sweep behind `sliced tune`: one trace replayed through the real engine in virtual time for
//! each setting, and what each cost the API server and the traffic waiting on it.
//!
//! Propagation latency is measured per pod change: from the change's time to the end of the next
//! successful sync of each Service that selects the pod, the sync that writes the change, or finds
//! nothing to write (a flap that settled back within the batch period).

use std::collections::HashMap;
use std::time::Duration;

use crate::change::{Change, Step};
use crate::engine::{BatchPeriod, EngineOptions, SyncOutcome, SyncRecord};
use crate::model::{EndpointSlice, Labels, Name};
use crate::replay::{ReplayOptions, replay};
use crate::sink::{Object, Verb};

/// One combination of the swept flags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setting {
    /// Both controllers' batch period (`--endpointslice-updates-batch-period` and
    /// `--endpoint-updates-batch-period`).
    pub batch_period: BatchPeriod,
    pub max_endpoints_per_slice: usize,
    pub workers: usize,
}

/// What one setting cost, over the trace (the cold start before it is not counted).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub writes: usize,
    /// The written objects' size, as `size` measured them.
    pub bytes: u64,
    /// Writes per second of the trace's span, and in its busiest second.
    pub mean_writes_per_second: f64,
    pub peak_writes_per_second: usize,
    pub latency_p50: Duration,
    pub latency_p99: Duration,
    pub latency_max: Duration,
    /// Pod changes a sync carried (the latency sample).
    pub carried: usize,
    pub syncs: u64,
    /// Endpoints written again, unchanged, inside a slice rewritten for another's sake.
    pub needless_endpoints: usize,
}

/// The pods' labels and the Services' selectors as the trace goes, to tell which Services a pod
/// change concerns.
#[derive(Default)]
struct Membership {
    pods: HashMap<(Name, Name), Labels>,
    selectors: HashMap<Name, Vec<(Name, Labels)>>,
}

impl Membership {
    fn apply(&mut self, change: &Change) -> Vec<(Name, Name)> {
        let labels = match change {
            Change::Service(s) => {
                let list = self.selectors.entry(s.meta.namespace.clone()).or_default();
                list.retain(|(n, _)| *n != s.meta.name);
                if let Some(selector) = &s.selector {
                    list.push((s.meta.name.clone(), selector.clone()));
                }
                return Vec::new();
            }
            Change::ServiceDeleted { namespace, name } => {
                if let Some(list) = self.selectors.get_mut(namespace) {
                    list.retain(|(n, _)| n != name);
                }
                return Vec::new();
            }
            Change::Pod(p) => {
                let key = (p.meta.namespace.clone(), p.meta.name.clone());
                let old = self.pods.insert(key, p.meta.labels.clone());
                [Some(p.meta.labels.clone()), old]
            }
            Change::PodDeleted { namespace, name } => {
                [self.pods.remove(&(namespace.clone(), name.clone())), None]
            }
            _ => return Vec::new(),
        };
        let namespace = match change {
            Change::Pod(p) => p.meta.namespace.clone(),
            Change::PodDeleted { namespace, .. } => namespace.clone(),
            _ => return Vec::new(),
        };
        let mut services: Vec<(Name, Name)> = (self.selectors.get(&namespace).into_iter())
            .flatten()
            .filter(|(_, selector)| labels.iter().flatten().any(|l| l.matches(selector)))
            .map(|(name, _)| (namespace.clone(), name.clone()))
            .collect();
        services.sort_unstable();
        services.dedup();
        services
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Endpoints of `new` that `old` held exactly as they are.
fn unchanged_endpoints(old: &EndpointSlice, new: &EndpointSlice) -> usize {
    let held: HashMap<_, _> = (old.endpoints.iter())
        .filter_map(|e| e.addresses.first().map(|a| (a.to_string(), e)))
        .collect();
    (new.endpoints.iter())
        .filter(|e| {
            (e.addresses.first())
                .is_some_and(|a| held.get(&a.to_string()).is_some_and(|o| ***o == ***e))
        })
        .count()
}

/// Replays `steps` under `setting` and measures it from `trace_start` on.
pub fn measure(
    steps: &[Step],
    trace_start: Duration,
    base: &EngineOptions,
    setting: Setting,
    size: &dyn Fn(&Object) -> usize,
) -> Outcome {
    let mut engine = base.clone();
    let (period, adaptive) = setting.batch_period.split();
    engine.batch_period = period;
    engine.endpoints_batch_period = period;
    engine.adaptive_batch = adaptive;
    engine.endpoints_adaptive_batch = adaptive;
    engine.reconcile.max_endpoints_per_slice = setting.max_endpoints_per_slice;
    engine.workers = setting.workers;
    let options = ReplayOptions {
        engine,
        keep_records: true,
        ..ReplayOptions::default()
    };
    let result = replay(steps, &options);

    // Pod changes waiting for their Service's next sync, by Service.
    let mut membership = Membership::default();
    let mut waiting: HashMap<(Name, Name), Vec<Duration>> = HashMap::new();
    let mut changes = steps.iter().peekable();
    let mut latencies = Vec::new();
    let mut syncs: Vec<&SyncRecord> = result.syncs.iter().collect();
    syncs.sort_by_key(|r| r.at);
    for sync in syncs {
        while let Some(step) = changes.next_if(|s| s.at <= sync.at) {
            let Some(change) = step.as_change() else {
                continue;
            };
            for service in membership.apply(change) {
                if step.at >= trace_start {
                    waiting.entry(service).or_default().push(step.at);
                }
            }
        }
        if sync.outcome != SyncOutcome::Success {
            continue;
        }
        let key = (sync.service.namespace.clone(), sync.service.name.clone());
        for at in waiting.remove(&key).unwrap_or_default() {
            latencies.push(sync.at.saturating_sub(at));
        }
    }

    let mut last_written: HashMap<(Name, Name), std::sync::Arc<EndpointSlice>> = HashMap::new();
    let mut per_second: HashMap<u64, usize> = HashMap::new();
    let mut out = Outcome {
        syncs: result.stats.syncs,
        ..Outcome::default()
    };
    let mut last_at = trace_start;
    for write in &result.writes {
        let Object::EndpointSlice(slice) = &write.object else {
            continue;
        };
        let key = (slice.meta.namespace.clone(), slice.meta.name.clone());
        let previous = match write.verb {
            Verb::Delete => last_written.remove(&key),
            _ => last_written.insert(key, std::sync::Arc::clone(slice)),
        };
        if write.at < trace_start {
            continue;
        }
        out.writes += 1;
        out.bytes += size(&write.object) as u64;
        *per_second.entry(write.at.as_secs()).or_default() += 1;
        last_at = last_at.max(write.at);
        if write.verb == Verb::Update
            && let Some(previous) = &previous
        {
            out.needless_endpoints += unchanged_endpoints(previous, slice);
        }
    }
    latencies.sort_unstable();
    let span = steps.last().map_or(last_at, |s| s.at.max(last_at));
    let seconds = span.saturating_sub(trace_start).as_secs_f64().max(1.0);
    out.mean_writes_per_second = out.writes as f64 / seconds;
    out.peak_writes_per_second = per_second.values().copied().max().unwrap_or(0);
    out.latency_p50 = percentile(&latencies, 0.50);
    out.latency_p99 = percentile(&latencies, 0.99);
    out.latency_max = latencies.last().copied().unwrap_or_default();
    out.carried = latencies.len();
    out
}

/// The setting to recommend: within `max_write_qps` (peak writes per second), the least p99
/// latency; else within `p99_latency`, the fewest writes; else the fewest writes with the least
/// p99 latency among them. `None` when nothing meets the bound asked for.
pub fn recommend(
    outcomes: &[Outcome],
    max_write_qps: Option<f64>,
    p99_latency: Option<Duration>,
) -> Option<usize> {
    let indexed = outcomes.iter().enumerate();
    match (max_write_qps, p99_latency) {
        (Some(qps), _) => indexed
            .filter(|(_, o)| o.peak_writes_per_second as f64 <= qps)
            .min_by_key(|(_, o)| (o.latency_p99, o.writes))
            .map(|(i, _)| i),
        (None, Some(bound)) => indexed
            .filter(|(_, o)| o.latency_p99 <= bound)
            .min_by_key(|(_, o)| (o.writes, o.latency_p99))
            .map(|(i, _)| i),
        (None, None) => indexed
            .min_by_key(|(_, o)| (o.writes, o.latency_p99))
            .map(|(i, _)| i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(writes: usize, peak: usize, p99_ms: u64) -> Outcome {
        Outcome {
            writes,
            peak_writes_per_second: peak,
            latency_p99: Duration::from_millis(p99_ms),
            ..Outcome::default()
        }
    }

    #[test]
    fn the_recommendation_meets_the_bound_asked_for() {
        let outcomes = [
            outcome(900, 90, 10),
            outcome(400, 40, 500),
            outcome(200, 20, 2000),
        ];
        assert_eq!(recommend(&outcomes, Some(50.0), None), Some(1));
        assert_eq!(recommend(&outcomes, Some(10.0), None), None);
        assert_eq!(
            recommend(&outcomes, None, Some(Duration::from_secs(1))),
            Some(1)
        );
        assert_eq!(recommend(&outcomes, None, None), Some(2));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&ms, 0.5), Duration::from_millis(50));
        assert_eq!(percentile(&ms, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&[], 0.99), Duration::ZERO);
    }
}

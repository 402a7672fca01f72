//! One batch of service syncs: plans computed in parallel, applied in order, results fed back.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::record::{SyncOutcome, SyncRecord, track_own_writes};
use super::{ENDPOINTSLICE_CONTROLLER, Engine, endpoints, mirroring, slices};
use crate::index::ServiceKey;
use crate::sink::Sink;

/// A key taken from one controller's queue.
enum Job {
    Slices(ServiceKey),
    Endpoints(ServiceKey),
    Mirroring(ServiceKey),
}

impl Job {
    fn key(&self) -> &ServiceKey {
        match self {
            Job::Slices(key) | Job::Endpoints(key) | Job::Mirroring(key) => key,
        }
    }
}

/// A job's plan.
enum Planned {
    Slices(ServiceKey, slices::Prepared),
    Endpoints(ServiceKey, endpoints::Prepared),
    Mirroring(ServiceKey, mirroring::Prepared),
    /// The job's controller does not run.
    Nothing(ServiceKey),
}

impl Engine {
    /// Takes the services that are ready now, reconciles them in parallel and applies their plans
    /// to `sink`, in the order they became ready.
    pub fn sync_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.mark_pods_on_changed_nodes();
        self.recompute_topology_if_needed();
        let max = self.options.max_batch;
        let mut jobs: Vec<Job> = self
            .endpointslice
            .queue
            .pop_ready(max)
            .into_iter()
            .map(Job::Slices)
            .collect();
        if let Some(controller) = &self.endpoints {
            jobs.extend(
                controller
                    .queue
                    .pop_ready(max)
                    .into_iter()
                    .map(Job::Endpoints),
            );
        }
        if let Some(controller) = &self.mirroring {
            let keys = controller.queue.pop_ready(max);
            jobs.extend(keys.into_iter().map(Job::Mirroring));
        }
        self.run_jobs(jobs, sink)
    }

    /// [`Engine::sync_ready`] until nothing is ready now: every record, in order. What is delayed
    /// stays queued (see `replay::drain` to let virtual time run on to it).
    pub fn sync_all_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        let mut records = Vec::new();
        loop {
            let batch = self.sync_ready(sink);
            if batch.is_empty() {
                return records;
            }
            records.extend(batch);
        }
    }

    /// One pass of controllers that have just started (`sliced reconcile`): every ready key of
    /// every controller synced once, and failures not retried. A service's EndpointSlices and
    /// then its Endpoints, services in namespace/name order, those that no longer exist (whose
    /// Endpoints are left over) last; then the mirroring controller's keys in the same order, so
    /// that it reads what the Endpoints controller wrote.
    pub fn sync_once(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.mark_pods_on_changed_nodes();
        self.recompute_topology_if_needed();
        let mut jobs: Vec<Job> = self
            .endpointslice
            .queue
            .pop_ready(usize::MAX)
            .into_iter()
            .map(Job::Slices)
            .collect();
        if let Some(controller) = &self.endpoints {
            let keys = controller.queue.pop_ready(usize::MAX);
            jobs.extend(keys.into_iter().map(Job::Endpoints));
        }
        let services = self.index.services();
        jobs.sort_by_cached_key(|job| {
            let key = job.key();
            let gone = services.get(&key.namespace, &key.name).is_none();
            (gone, key.clone(), matches!(job, Job::Endpoints(_)))
        });
        let mut records = self.run_jobs(jobs, sink);
        if let Some(controller) = &self.mirroring {
            let mut keys = controller.queue.pop_ready(usize::MAX);
            keys.sort();
            records.extend(self.run_jobs(keys.into_iter().map(Job::Mirroring).collect(), sink));
        }
        records
    }

    /// Plans `jobs` in parallel, then applies the plans to `sink` in the jobs' order.
    fn run_jobs(&self, jobs: Vec<Job>, sink: &dyn Sink) -> Vec<SyncRecord> {
        if jobs.is_empty() {
            return Vec::new();
        }
        let cx = self.cluster();
        let timed = |job: &Job| {
            let started = Instant::now();
            let store = self.index.endpoints();
            let planned = match (job, &self.endpoints, &self.mirroring) {
                (Job::Slices(key), _, _) => {
                    Planned::Slices(key.clone(), self.endpointslice.prepare(&cx, key))
                }
                (Job::Endpoints(key), Some(c), _) => {
                    Planned::Endpoints(key.clone(), c.prepare(&self.index, store, key))
                }
                (Job::Mirroring(key), _, Some(c)) => {
                    Planned::Mirroring(key.clone(), c.prepare(&self.index, store, key))
                }
                (Job::Endpoints(key) | Job::Mirroring(key), _, _) => Planned::Nothing(key.clone()),
            };
            (planned, started.elapsed())
        };
        // One job is planned here: handing it to a worker costs more than it saves.
        let planned: Vec<(Planned, Duration)> = match &self.pool {
            Some(pool) if jobs.len() > 1 => pool.install(|| jobs.par_iter().map(timed).collect()),
            _ => jobs.iter().map(timed).collect(),
        };
        let at = self.clock.now();
        let mut records = Vec::with_capacity(planned.len());
        for (planned, planning) in planned {
            let started = Instant::now();
            let mut record = match planned {
                Planned::Slices(key, prepared) => {
                    let mut events = Vec::new();
                    let record = self
                        .endpointslice
                        .finish(&key, prepared, sink, at, &mut events);
                    self.events.lock().extend(events);
                    if self.options.observe_writes {
                        track_own_writes(&self.endpointslice.tracker, &record);
                    }
                    self.observe_own_writes(&record);
                    record
                }
                Planned::Endpoints(key, prepared) => match &self.endpoints {
                    Some(c) => {
                        let mut events = Vec::new();
                        let record = c.finish(
                            &key,
                            prepared,
                            sink,
                            self.index.endpoints(),
                            at,
                            &mut events,
                        );
                        self.events.lock().extend(events);
                        self.observe_own_writes(&record);
                        record
                    }
                    None => SyncRecord::new(at, key, endpoints::ENDPOINTS_CONTROLLER),
                },
                Planned::Mirroring(key, prepared) => match &self.mirroring {
                    Some(c) => {
                        let mut events = Vec::new();
                        let record = c.finish(&key, prepared, sink, at, &mut events);
                        self.events.lock().extend(events);
                        if self.options.observe_writes {
                            track_own_writes(&c.tracker, &record);
                        }
                        self.observe_own_writes(&record);
                        record
                    }
                    None => SyncRecord::new(at, key, mirroring::MIRRORING_CONTROLLER),
                },
                Planned::Nothing(key) => SyncRecord::new(at, key, ENDPOINTSLICE_CONTROLLER),
            };
            record.took = planning + started.elapsed();
            self.count(&record);
            self.check_after_sync(&record);
            records.push(record);
        }
        records
    }

    fn count(&self, record: &SyncRecord) {
        let mut stats = self.stats.lock();
        stats.syncs += 1;
        match record.outcome {
            SyncOutcome::Success => {}
            SyncOutcome::Error => stats.sync_errors += 1,
            SyncOutcome::Stale => stats.stale += 1,
        }
        stats.dropped += u64::from(record.dropped);
    }
}

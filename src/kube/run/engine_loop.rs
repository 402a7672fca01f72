//! The engine's thread of `sliced run`: watch input in, syncs out once every cache is filled
//! and this replica leads, shadow mode's report, the recorded trace and the write budget kept
//! up to date beside them.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use tokio::sync::mpsc;

use crate::change::ChangeKind;
use crate::engine::{Engine, SyncRecord};
use crate::index::ServiceKey;
use crate::kube::api_sink::WriteGate;
use crate::kube::http::HttpState;
use crate::kube::shadow::DryRunReport;
use crate::kube::trace_record::TraceRecorder;
use crate::kube::watch::Input;
use crate::metrics::Metrics;
use crate::model::Name;
use crate::queue::WriteQpsSteps;
use crate::reconcile::Event;
use crate::sink::Sink;

/// The engine's thread: takes watch input, and syncs what is ready once every cache is filled
/// and this replica leads.
pub(super) struct EngineLoop {
    pub(super) engine: Arc<Engine>,
    pub(super) input: Receiver<Input>,
    pub(super) sink: Box<dyn Sink>,
    pub(super) gate: WriteGate,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) needed: HashSet<ChangeKind>,
    /// The cluster's address pools have not been listed yet.
    pub(super) pools_needed: bool,
    pub(super) synced: Arc<AtomicBool>,
    pub(super) dry_run: Option<Arc<DryRunReport>>,
    pub(super) events: mpsc::UnboundedSender<(ServiceKey, Option<String>, Event)>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) health: Arc<HttpState>,
    pub(super) resync: Resync,
    /// Shadow mode: services whose slices, Endpoints or Service changed since the report was last
    /// checked, and whether a relist happened.
    pub(super) touched: Vec<ServiceKey>,
    pub(super) relisted: bool,
    /// `--write-qps-steps`, followed as nodes come and go.
    pub(super) write_qps_steps: Option<WriteQpsSteps>,
    pub(super) recorder: Option<TraceRecorder>,
}

/// When the next informer-style resync is due: a random time between the period and twice it,
/// drawn again after each, as client-go's reflectors spread their resyncs.
pub(super) struct Resync {
    period: Duration,
    next: Option<std::time::Instant>,
    rng: crate::sim::Rng,
}

impl Resync {
    pub(super) fn new(period: Duration, identity: &str) -> Resync {
        let seed = identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let mut resync = Resync {
            period,
            next: None,
            rng: crate::sim::Rng::new(seed),
        };
        resync.schedule();
        resync
    }

    fn schedule(&mut self) {
        self.next = (!self.period.is_zero()).then(|| {
            let jitter = self.period.mul_f64(self.rng.unit());
            std::time::Instant::now() + self.period + jitter
        });
    }

    /// Whether a resync is due now; if so, the next one is scheduled.
    fn due(&mut self) -> bool {
        match self.next {
            Some(at) if std::time::Instant::now() >= at => {
                self.schedule();
                true
            }
            _ => false,
        }
    }
}

/// The longest the loop sleeps without looking at the stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// Inputs taken in one go before syncs get a turn.
const MAX_INPUTS_PER_TURN: usize = 10_000;

impl EngineLoop {
    pub(super) fn run(mut self) {
        // /healthz fails once this thread is gone, however it goes.
        struct Alive(Arc<HttpState>);
        impl Drop for Alive {
            fn drop(&mut self) {
                self.0.set_engine_alive(false);
            }
        }
        let _alive = Alive(Arc::clone(&self.health));
        let mut started = false;
        while !self.stop.load(Ordering::SeqCst) {
            let wait = if started && self.gate.is_open() {
                self.engine
                    .next_ready_at()
                    .map_or(IDLE_WAIT, |at| at.saturating_sub(self.engine.now()))
                    .min(IDLE_WAIT)
            } else {
                IDLE_WAIT
            };
            match self.input.recv_timeout(wait) {
                Ok(input) => {
                    self.take(input);
                    for _ in 0..MAX_INPUTS_PER_TURN {
                        match self.input.try_recv() {
                            Ok(input) => self.take(input),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => crate::allocator::collect_idle_thread(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if let Some(recorder) = &mut self.recorder {
                recorder.tick();
            }
            self.follow_node_count();
            if !started && self.needed.is_empty() && !self.pools_needed {
                started = true;
                self.engine.start();
                if let Some(recorder) = &mut self.recorder {
                    recorder.started(&self.engine);
                }
                self.synced.store(true, Ordering::SeqCst);
                self.health.set_ready(true);
                tracing::info!("caches synced: reconciling");
            }
            if started && self.resync.due() {
                tracing::info!("resync: every Service queued again");
                self.engine.resync();
            }
            if started && self.gate.is_open() {
                let records = self.engine.sync_ready(self.sink.as_ref());
                self.after_syncs(&records);
            }
            if started {
                self.recheck_report();
            }
        }
        if let Some(recorder) = &mut self.recorder {
            recorder.finish();
        }
    }

    /// Moves the write budget to the step of `--write-qps-steps` the node count is in.
    fn follow_node_count(&self) {
        let Some(steps) = &self.write_qps_steps else {
            return;
        };
        let nodes = self.engine.object_counts().nodes;
        let qps = steps.qps_for(nodes);
        if self.engine.write_budget().set_qps(qps) {
            tracing::info!(nodes, qps, "write budget follows the node count");
        }
    }

    /// Shadow mode: a difference someone else fixed leaves the report as soon as the watch shows
    /// it, though upstream's rules queue no sync for it.
    fn recheck_report(&mut self) {
        let Some(report) = &self.dry_run else {
            return;
        };
        if !self.relisted && self.touched.is_empty() {
            return;
        }
        if std::mem::take(&mut self.relisted) {
            report.revalidate_all(&self.engine);
        } else {
            self.touched.sort_unstable();
            self.touched.dedup();
            report.revalidate(&self.engine, &self.touched);
        }
        self.touched.clear();
        report.export(self.metrics.dry_run());
    }

    /// Shadow mode: notes the services a change of a slice, an Endpoints or a Service concerns.
    /// A slice whose service label changed concerns the service it left as well.
    fn touch(&mut self, change: &crate::change::Change) {
        use crate::change::Change;
        let slice_service = |namespace: &Name, name: &Name| {
            let held = self.engine.stored_slice(namespace, name)?;
            Some(ServiceKey::new(namespace, held.service_name()?))
        };
        let (key, left) = match change {
            Change::Service(s) => (Some(ServiceKey::of(s)), None),
            Change::ServiceDeleted { namespace, name }
            | Change::EndpointsDeleted {
                namespace, name, ..
            } => (Some(ServiceKey::new(namespace, name)), None),
            Change::Endpoints(e) => (Some(ServiceKey::new(&e.meta.namespace, &e.meta.name)), None),
            Change::EndpointSlice(slice) => (
                slice
                    .service_name()
                    .map(|service| ServiceKey::new(&slice.meta.namespace, service)),
                slice_service(&slice.meta.namespace, &slice.meta.name),
            ),
            Change::EndpointSliceDeleted { namespace, name } => {
                (slice_service(namespace, name), None)
            }
            _ => (None, None),
        };
        self.touched.extend(key);
        self.touched.extend(left);
    }

    fn take(&mut self, input: Input) {
        match input {
            Input::Change(change) => {
                // Before the engine forgets the slice a deletion names.
                if self.dry_run.is_some() {
                    self.touch(&change);
                }
                if let Some(recorder) = &mut self.recorder {
                    recorder.change(&change, &self.engine);
                }
                self.engine.handle(change);
            }
            Input::Pools(pools) => {
                tracing::info!(pools = pools.len(), "address pools");
                self.engine.set_address_pools(pools);
                self.pools_needed = false;
            }
            Input::Listed { kind, seen } => {
                self.relisted |= self.dry_run.is_some() && seen.is_some();
                if let Some(seen) = seen {
                    if let Some(recorder) = &mut self.recorder {
                        recorder.relisted(kind, &seen, &self.engine);
                    }
                    let deleted = self.engine.relisted(kind, &seen);
                    tracing::info!(kind = kind.as_str(), deleted, "relisted");
                }
                self.needed.remove(&kind);
            }
            Input::Invalid {
                kind,
                object,
                error,
            } => tracing::warn!(
                kind = kind.as_str(),
                object = %object,
                error = %error,
                "ignoring an object that cannot be read; the version held before, if any, is kept"
            ),
            // Logged here only: the watch sends each failure once.
            Input::WatchError {
                kind,
                request,
                message,
                retry_in,
            } => tracing::warn!(
                kind = kind.as_str(),
                request,
                retry_in = ?retry_in,
                "watch of {}: {request} failed: {message}",
                kind.as_str()
            ),
        }
    }

    fn after_syncs(&self, records: &[SyncRecord]) {
        self.metrics.observe_syncs(records);
        for r in records {
            if let Some(message) = &r.message {
                tracing::warn!(
                    controller = r.controller,
                    service = %r.service,
                    dropped = r.dropped,
                    "sync failed: {message}"
                );
            }
        }
        if let Some(report) = &self.dry_run {
            report.observe(records);
            for r in records {
                for w in &r.writes {
                    self.metrics
                        .dry_run()
                        .record_difference(w.object.kind(), w.verb);
                }
            }
            report.export(self.metrics.dry_run());
        }
        for (service, event) in self.engine.take_events() {
            if self.dry_run.is_some() {
                tracing::info!(service = %service, reason = event.reason, "dry run: would record event: {}", event.message);
            } else {
                let uid = self
                    .engine
                    .index()
                    .services()
                    .get(&service.namespace, &service.name)
                    .map(|s| s.meta.uid.to_string())
                    .filter(|u| !u.is_empty());
                let _ = self.events.send((service, uid, event));
            }
        }
    }
}

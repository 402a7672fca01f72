//! `sliced run`: watches feed the engine on its own thread, the engine writes through the API
//! sink while this replica leads, and everything stops cleanly when asked.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use tokio::sync::mpsc;

use super::api_sink::{ApiSink, WriteGate};
use super::http::{self, HttpState};
use super::lease::{LeaderElector, LeaseConfig, LeaseConfigError, LeaseError};
use super::shadow::{DryRunReport, DryRunSink};
use super::trace_record::{RecordError, RecordTrace, RecordingSink, TraceRecorder};
use super::watch;
use crate::engine::{Engine, EngineOptions, EngineStats};
use crate::index::ServiceKey;
use crate::metrics::Metrics;
use crate::queue::{Clock, SystemClock, WriteQpsSteps};
use crate::reconcile::{Event, EventType};
use crate::sink::Sink;

mod engine_loop;
use engine_loop::{EngineLoop, Resync};

/// Everything `run` needs besides the client.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub engine: EngineOptions,
    /// `--kube-api-qps` and `--kube-api-burst`: the client-side limit on writes.
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    /// `None` with `--leader-elect=false`: this replica writes from the start.
    pub leader_election: Option<LeaseConfig>,
    /// `--dry-run`: reconcile and report, write nothing.
    pub dry_run: bool,
    pub dry_run_summary_interval: Duration,
    /// Objects per page of the initial lists.
    pub page_size: u32,
    /// This replica's name in events and the lease.
    pub identity: String,
    /// `--min-resync-period`: every Service synced again after a random time between this and
    /// twice this; zero never.
    pub min_resync_period: Duration,
    /// The longest a list page, the start of a watch, a write or an event waits for the API
    /// server's answer before it counts as failed (and is retried with backoff). The apiserver
    /// gives up on such requests itself after 60 s.
    pub request_timeout: Duration,
    /// `--write-qps-steps`: the write limit chosen from the node count, instead of
    /// `kube_api_qps`.
    pub write_qps_steps: Option<WriteQpsSteps>,
    /// `--record-trace`: every watch event taken, written as a replayable trace.
    pub record_trace: Option<RecordTrace>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            engine: EngineOptions::default(),
            kube_api_qps: 20.0,
            kube_api_burst: 30,
            leader_election: None,
            dry_run: false,
            dry_run_summary_interval: Duration::from_secs(60),
            page_size: 500,
            identity: "sliced".to_string(),
            min_resync_period: Duration::from_secs(12 * 3600),
            request_timeout: Duration::from_secs(30),
            write_qps_steps: None,
            record_trace: None,
        }
    }
}

/// Why `run` stopped other than by being asked to.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    LeaseConfig(#[from] LeaseConfigError),
    #[error("the engine thread stopped: {0}")]
    Engine(String),
    #[error("serving metrics")]
    Serve(#[source] std::io::Error),
    #[error(transparent)]
    RecordTrace(#[from] RecordError),
}

/// What a finished run did.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    pub stats: EngineStats,
    /// Whether this replica led at some point.
    pub led: bool,
}

/// The state `run` shares with whoever watches it (the HTTP endpoint, tests).
#[derive(Clone)]
pub struct RunState {
    pub engine: Arc<Engine>,
    /// Every watch has delivered its first full list.
    pub synced: Arc<AtomicBool>,
    pub gate: WriteGate,
    /// Shadow mode's report, when it runs.
    pub dry_run: Option<Arc<DryRunReport>>,
    pub metrics: Arc<Metrics>,
    /// What `/healthz` and `/readyz` answer from.
    pub health: Arc<HttpState>,
}

impl RunState {
    pub fn new(options: &RunOptions) -> RunState {
        let mut engine_options = options.engine.clone();
        if options.dry_run {
            // Nothing written may be believed; every sync compares with the cluster in full.
            engine_options.observe_writes = false;
            engine_options.incremental = false;
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let engine = Arc::new(Engine::new(engine_options, clock));
        // The writes' budget: the sink's limiter and an adaptive batch period follow it. With
        // steps, the first applies until the nodes are listed.
        let qps = (options.write_qps_steps.as_ref()).map_or(options.kube_api_qps, |s| s.qps_for(0));
        engine.write_budget().set_qps(qps);
        let metrics = Arc::new(Metrics::new());
        let health = {
            let (metrics, engine) = (Arc::clone(&metrics), Arc::clone(&engine));
            // The HTTP handler reads the resident set itself before each scrape.
            let debug = super::debug_dns::handler(Arc::clone(&engine));
            Arc::new(
                HttpState::new(Arc::clone(&metrics), move || metrics.refresh(&engine))
                    .with_debug(debug),
            )
        };
        RunState {
            engine,
            metrics,
            health,
            synced: Arc::new(AtomicBool::new(false)),
            gate: if options.leader_election.is_some() {
                WriteGate::closed()
            } else {
                WriteGate::open()
            },
            dry_run: options.dry_run.then(Arc::default),
        }
    }
}

/// Runs until `shutdown` completes, the lease is lost, or the engine stops. On shutdown the
/// batch being written finishes, then the lease is released.
pub async fn run(
    client: Client,
    options: RunOptions,
    state: RunState,
    metrics: Option<std::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> Result<RunSummary, RunError> {
    if let Some(config) = &options.leader_election {
        config.validate()?;
    }
    let trace = (options.record_trace.as_ref())
        .map(TraceRecorder::create)
        .transpose()?;
    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = match metrics {
        Some(listener) => {
            let listener = listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(listener))
                .map_err(RunError::Serve)?;
            let health = Arc::clone(&state.health);
            Some(tokio::spawn(http::serve(listener, health, async move {
                let _ = serving_stopped.await;
            })))
        }
        None => None,
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let kinds = watch::watched_kinds(state.engine.options().controllers);
    let watches: Vec<_> = kinds
        .iter()
        .map(|&kind| {
            let counters = watch::Counters {
                events: state.metrics.watch_events(kind.as_str()),
                restarts: state.metrics.watch_restarts(kind.as_str()),
            };
            watch::spawn(
                client.clone(),
                kind,
                options.page_size,
                options.request_timeout,
                tx.clone(),
                counters,
            )
        })
        .collect();
    // The cluster's address pools, when the built-in provider serves the service controller.
    let engine_options = state.engine.options();
    let pools_watch = super::pools::watched(engine_options).then(|| {
        super::pools::spawn(
            client.clone(),
            engine_options.load_balancers.pools.clone(),
            tx.clone(),
        )
    });
    drop(tx);

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let recorder = (!options.dry_run).then(|| {
        tokio::spawn(publish_events(
            client.clone(),
            options.identity.clone(),
            options.request_timeout,
            events_rx,
        ))
    });

    let sink: Box<dyn Sink> = match &state.dry_run {
        Some(_) => Box::new(DryRunSink::new(Arc::clone(&state.engine))),
        None => Box::new(
            ApiSink::new(
                client.clone(),
                tokio::runtime::Handle::current(),
                state.gate.clone(),
                Arc::clone(&state.metrics),
                options.kube_api_qps,
                options.kube_api_burst,
            )
            .with_request_timeout(options.request_timeout)
            .with_concurrency(options.engine.workers)
            .with_budget(Arc::clone(state.engine.write_budget())),
        ),
    };
    // The recorder tells the echoes of sliced's own writes by what they wrote. Shadow mode writes
    // nothing: every slice and Endpoints is others', and recorded.
    let sink: Box<dyn Sink> = match (&trace, &state.dry_run) {
        (Some(trace), None) => Box::new(RecordingSink::new(sink, trace)),
        _ => sink,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let engine_loop = EngineLoop {
        engine: Arc::clone(&state.engine),
        input: rx,
        sink,
        gate: state.gate.clone(),
        stop: Arc::clone(&stop),
        needed: kinds.into_iter().collect(),
        pools_needed: pools_watch.is_some(),
        synced: Arc::clone(&state.synced),
        dry_run: state.dry_run.clone(),
        events: events_tx,
        metrics: Arc::clone(&state.metrics),
        health: Arc::clone(&state.health),
        resync: Resync::new(options.min_resync_period, &options.identity),
        touched: Vec::new(),
        relisted: false,
        write_qps_steps: options.write_qps_steps.clone(),
        recorder: trace,
    };
    // Dropped when the thread ends, however it ends.
    let (done_tx, engine_done) = tokio::sync::oneshot::channel::<()>();
    let engine_thread = thread::Builder::new()
        .name("sliced-engine".to_string())
        .spawn(move || {
            engine_loop.run();
            drop(done_tx);
        })
        .map_err(|e| RunError::Engine(e.to_string()))?;

    let summary_task = state.dry_run.clone().map(|report| {
        let every = options
            .dry_run_summary_interval
            .max(Duration::from_millis(100));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                report.log_summary();
            }
        })
    });

    let mut elector = options
        .leader_election
        .clone()
        .map(|config| LeaderElector::new(client.clone(), config));
    if elector.is_none() {
        state.metrics.set_leader(true);
    }
    let leading = {
        let gate = state.gate.clone();
        let metrics = Arc::clone(&state.metrics);
        let elector = elector.as_mut();
        async move {
            match elector {
                None => std::future::pending::<LeaseError>().await,
                Some(elector) => {
                    elector.acquire().await;
                    tracing::info!(
                        identity = elector.identity(),
                        "leader election: acquired the lease"
                    );
                    gate.set(true);
                    metrics.set_leader(true);
                    elector.keep(&gate).await
                }
            }
        }
    };
    let outcome = tokio::select! {
        () = shutdown => Ok(()),
        lost = leading => Err(RunError::Lease(lost)),
        _ = engine_done => Err(RunError::Engine("it ended before shutdown".to_string())),
    };
    let led = state.gate.is_open()
        || outcome
            .as_ref()
            .is_err_and(|e| matches!(e, RunError::Lease(_)));

    // Stop: the batch in progress finishes its writes, then nothing more is written.
    stop.store(true, Ordering::SeqCst);
    for w in watches.iter().chain(&pools_watch) {
        w.abort();
    }
    let joined = tokio::task::spawn_blocking(move || engine_thread.join());
    if let Ok(Ok(Err(_))) = tokio::time::timeout(Duration::from_secs(60), joined).await {
        tracing::error!("the engine thread panicked");
    }
    state.gate.set(false);
    state.metrics.set_leader(false);
    if let Some(task) = summary_task {
        task.abort();
    }
    if let Some(report) = &state.dry_run {
        report.log_summary();
    }
    if let Some(task) = recorder {
        // Events already queued are sent; the channel closed with the engine's loop.
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    // Nothing is sent unless this replica held the lease; then the release is bounded by one
    // lease request timeout.
    if let Some(elector) = elector.as_mut()
        && let Err(e) = elector.release().await
    {
        tracing::warn!("leader election: {}; leaving it to expire", e.describe());
    }
    let _ = stop_serving.send(());
    if let Some(server) = server {
        let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    }
    outcome.map(|()| RunSummary {
        stats: state.engine.stats(),
        led,
    })
}

/// The most bytes the API server accepts in an events.k8s.io/v1 Event's note.
const NOTE_LENGTH_LIMIT: usize = 1024;

/// A message cut to the note limit at a character boundary, marked as cut with "...": the
/// FailedToUpdateEndpointSlices message of a large service names every failed write.
fn note_within_limit(mut message: String) -> String {
    if message.len() <= NOTE_LENGTH_LIMIT {
        return message;
    }
    let mut end = NOTE_LENGTH_LIMIT - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str("...");
    message
}

/// The controller an event comes from, named as upstream's controllers name themselves, so that
/// filters and alerts on kube-controller-manager's events keep working; `reportingInstance` (this
/// replica's identity) tells sliced's events from kube-controller-manager's.
fn reporting_controller(reason: &str) -> &'static str {
    use crate::reconcile::{endpoints, mirroring};
    match reason {
        endpoints::REASON_FAILED_TO_CREATE | endpoints::REASON_FAILED_TO_UPDATE => {
            "endpoint-controller"
        }
        mirroring::REASON_INVALID_IP | mirroring::REASON_TOO_MANY_ADDRESSES => {
            "endpoint-slice-mirroring-controller"
        }
        _ => "endpoint-slice-controller",
    }
}

/// Records events on Services, as upstream's controllers do.
async fn publish_events(
    client: Client,
    instance: String,
    request_timeout: Duration,
    mut events: mpsc::UnboundedReceiver<(ServiceKey, Option<String>, Event)>,
) {
    let mut recorders: HashMap<&'static str, Recorder> = HashMap::new();
    while let Some((service, uid, event)) = events.recv().await {
        let controller = reporting_controller(event.reason);
        let recorder = recorders.entry(controller).or_insert_with(|| {
            let reporter = Reporter {
                controller: controller.to_string(),
                instance: Some(instance.clone()),
            };
            Recorder::new(client.clone(), reporter)
        });
        let reference = ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Service".to_string()),
            namespace: Some(service.namespace.to_string()),
            name: Some(service.name.to_string()),
            uid,
            ..ObjectReference::default()
        };
        let published = KubeEvent {
            type_: match event.event_type {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason.to_string(),
            note: Some(note_within_limit(event.message)),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        let publish = recorder.publish(&published, &reference);
        let error = match tokio::time::timeout(request_timeout, publish).await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => watch::describe(&e),
            Err(_) => format!("no answer from the API server within {request_timeout:?}"),
        };
        tracing::warn!(service = %service, reason = published.reason, "could not record an event: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_reported_under_upstreams_controller_names() {
        assert_eq!(
            reporting_controller("FailedToUpdateEndpointSlices"),
            "endpoint-slice-controller"
        );
        assert_eq!(
            reporting_controller("TopologyAwareHintsEnabled"),
            "endpoint-slice-controller"
        );
        assert_eq!(
            reporting_controller("FailedToUpdateEndpoint"),
            "endpoint-controller"
        );
        assert_eq!(
            reporting_controller("TooManyAddressesToMirror"),
            "endpoint-slice-mirroring-controller"
        );
    }

    #[test]
    fn notes_over_the_limit_are_cut_at_a_character_boundary() {
        let short = "x".repeat(NOTE_LENGTH_LIMIT);
        assert_eq!(note_within_limit(short.clone()), short);
        let long = format!("{}é{}", "x".repeat(1020), "y".repeat(40));
        let cut = note_within_limit(long);
        assert!(cut.len() <= NOTE_LENGTH_LIMIT, "{}", cut.len());
        assert!(cut.ends_with("..."));
        assert_eq!(cut, format!("{}...", "x".repeat(1020)));
    }
}

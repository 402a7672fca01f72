//! `sliced run`: keep a real cluster's EndpointSlices and Endpoints, with kube-controller-manager's
//! flags where they mean the same.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgAction, Args};
use sliced::controllers::Controllers;
use sliced::engine::{AdaptiveBatch, BatchPeriod, EngineOptions, LoadBalancerOptions};
use sliced::kube::launch::run_until_terminated;
use sliced::kube::lease::LeaseConfig;
use sliced::kube::run::RunOptions;
use sliced::kube::trace_record::{Limits, RecordTrace, check_writable};
use sliced::queue::WriteQpsSteps;
use sliced::reconcile::load_balancer::ClassFilter;

use super::{batch_period_arg, duration_arg};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Path to a kubeconfig file. Without it: the in-cluster service account when running in a
    /// pod, else $KUBECONFIG or ~/.kube/config.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Controllers to run, as kube-controller-manager's --controllers: `*` for all, names
    /// (endpointslice, endpoint, endpointslicemirroring, service-lb-controller), `-name` to
    /// switch one off.
    #[arg(long, default_value = "*")]
    controllers: String,
    /// Services whose load balancers are synced at once (provider calls in flight).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    concurrent_service_syncs: u32,
    /// MetalLB `IPAddressPool` objects (YAML or JSON) the built-in provider hands addresses out of.
    #[arg(long = "lb-pools", value_name = "FILE")]
    lb_pools: Vec<String>,
    /// The `spec.loadBalancerClass` sliced answers for, besides Services with none.
    #[arg(long = "lb-class", value_name = "CLASS")]
    lb_class: Option<String>,
    /// Parallel reconcile workers: services planned at once, and writes in flight at once (of
    /// different services, or of one step of one sync).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=256))]
    concurrent_service_endpoint_syncs: u32,
    /// The most endpoints one EndpointSlice holds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_endpoints_per_slice: u32,
    /// The most addresses the mirroring controller takes from one Endpoints subset.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    mirroring_max_endpoints_per_subset: u32,
    #[command(flatten)]
    traffic_distribution: super::TrafficDistributionArgs,
    /// Delay of pod-triggered EndpointSlice syncs (e.g. 0s, 500ms, 1s), or `auto`: no delay
    /// for a service that has not written lately, and for one that has, a window widened (at
    /// least doubled) each second the writes exceed the write limit (--kube-api-qps or
    /// --write-qps-steps) and halved each second of writes under half of it, up to
    /// --max-batch-period.
    #[arg(long, default_value = "0s", value_parser = batch_period_arg)]
    endpointslice_updates_batch_period: String,
    /// Delay of pod-triggered Endpoints syncs, or `auto`.
    #[arg(long, default_value = "0s", value_parser = batch_period_arg)]
    endpoint_updates_batch_period: String,
    /// The widest window of an `auto` batch period.
    #[arg(long, default_value = "1s", value_parser = duration_arg)]
    max_batch_period: Duration,
    /// Delay of mirroring syncs.
    #[arg(long, default_value = "0s", value_parser = duration_arg)]
    mirroring_endpointslice_updates_batch_period: Duration,
    /// Writes per second to the API server.
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f64,
    /// Write limits by node count instead of --kube-api-qps: `NODES:QPS` steps, each applying
    /// from its node count to the next (e.g. "0:10,100:20,1000:50"). Shown in /metrics as
    /// sliced_write_qps_limit.
    #[arg(long, value_name = "STEPS")]
    write_qps_steps: Option<String>,
    /// Writes allowed in a burst above --kube-api-qps.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Take a Lease before writing, so that only one replica writes.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true")]
    leader_elect: bool,
    /// How long a leader's lease lasts without renewal.
    #[arg(long, default_value = "15s", value_parser = duration_arg)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before it stops.
    #[arg(long, default_value = "10s", value_parser = duration_arg)]
    leader_elect_renew_deadline: Duration,
    /// Pause between attempts to take or renew the lease.
    #[arg(long, default_value = "2s", value_parser = duration_arg)]
    leader_elect_retry_period: Duration,
    /// Name of the Lease object.
    #[arg(long, default_value = "sliced")]
    leader_elect_resource_name: String,
    /// Namespace of the Lease object.
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Address of the /metrics, /healthz and /readyz endpoint; empty to serve none.
    #[arg(long, default_value = "127.0.0.1:10258")]
    metrics_bind_address: String,
    /// Shadow mode: watch and reconcile, write nothing, and report every object where the
    /// cluster differs from what sliced would write.
    #[arg(long)]
    dry_run: bool,
    /// How often shadow mode logs its summary.
    #[arg(long, default_value = "1m", value_parser = duration_arg)]
    dry_run_summary_interval: Duration,
    /// Every Service is synced again at a random time between this period and twice it, as
    /// kube-controller-manager's informers resync: it repairs what others changed without an
    /// event that queues a sync (an untracked slice deleted). 0s never resyncs.
    #[arg(long, default_value = "12h", value_parser = duration_arg)]
    min_resync_period: Duration,
    /// Write every watch event taken to FILE, as steps that `sliced simulate --events` and
    /// `sliced tune --events` replay (pods cut down to what the controllers read).
    #[arg(long, value_name = "FILE")]
    record_trace: Option<PathBuf>,
    /// Size at which the trace file is rotated to FILE.1 (and older ones to FILE.2, ...): a
    /// quantity such as 512Mi or 1Gi, or bytes. Each file starts with the state then held, so
    /// that it replays alone.
    #[arg(long, value_name = "SIZE", default_value = "1Gi", value_parser = size_arg)]
    record_trace_max_size: u64,
    /// Trace files kept, the current one included.
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    record_trace_max_files: u32,
}

fn size_arg(s: &str) -> Result<u64, String> {
    sliced::kube::trace_record::parse_size(s)
}

/// This replica's name: the pod's (POD_NAME, else the host name), with a random suffix so that a
/// restarted process is a new candidate.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "sliced".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}_{:08x}", nanos ^ std::process::id().rotate_left(16))
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let controllers = match Controllers::parse(&args.controllers) {
        // As kube-controller-manager skips its service controller without a cloud provider,
        // `*` runs this one only with address pools to hand out, or when named.
        Ok(c)
            if args.lb_pools.is_empty() && !Controllers::names_load_balancer(&args.controllers) =>
        {
            Controllers {
                load_balancer: false,
                ..c
            }
        }
        Ok(c) => c,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let pools = match super::lb_pools(&args.lb_pools, Vec::new()) {
        Ok(pools) => pools,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let load_balancers = LoadBalancerOptions {
        pools,
        classes: ClassFilter(args.lb_class.as_deref().map(sliced::model::intern)),
        workers: args.concurrent_service_syncs as usize,
        ..LoadBalancerOptions::default()
    };
    let identity = identity();
    let leader_election = args.leader_elect.then(|| LeaseConfig {
        name: args.leader_elect_resource_name.clone(),
        namespace: args.leader_elect_resource_namespace.clone(),
        identity: identity.clone(),
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    });
    // Before connecting, as client-go's NewLeaderElector refuses them.
    if let Some(Err(e)) = leader_election.as_ref().map(LeaseConfig::validate) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let metrics = if args.metrics_bind_address.is_empty() {
        None
    } else {
        let address: SocketAddr = match args.metrics_bind_address.parse() {
            Ok(a) => a,
            Err(e) => {
                eprintln!(
                    "error: --metrics-bind-address {:?}: {e}",
                    args.metrics_bind_address
                );
                return Ok(ExitCode::from(2));
            }
        };
        Some(
            TcpListener::bind(address)
                .with_context(|| format!("binding --metrics-bind-address {address}"))?,
        )
    };
    let write_qps_steps = match args.write_qps_steps.as_deref().map(WriteQpsSteps::parse) {
        None => None,
        Some(Ok(steps)) => Some(steps),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let adaptive = AdaptiveBatch {
        max_batch_period: args.max_batch_period,
        // The engine follows the limit as it moves; this is where it starts.
        write_qps: (write_qps_steps.as_ref()).map_or(args.kube_api_qps, |s| s.qps_for(0)),
    };
    // Both were checked when the flags were read.
    let period = |text: &str| BatchPeriod::parse(text, adaptive).map(BatchPeriod::split);
    let (batch_period, adaptive_batch) = period(&args.endpointslice_updates_batch_period)?;
    let (endpoints_batch_period, endpoints_adaptive_batch) =
        period(&args.endpoint_updates_batch_period)?;
    let record_trace = args.record_trace.as_ref().map(|path| RecordTrace {
        path: path.clone(),
        limits: Limits {
            max_size: args.record_trace_max_size,
            max_files: args.record_trace_max_files as usize,
        },
    });
    // Before connecting: a trace that cannot be written is said at once.
    if let Some(Err(e)) = record_trace.as_ref().map(|r| check_writable(&r.path)) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    init_logging();
    let options = RunOptions {
        engine: EngineOptions {
            reconcile: sliced::reconcile::Options {
                max_endpoints_per_slice: args.max_endpoints_per_slice as usize,
                prefer_same_traffic_distribution: args.traffic_distribution.prefer_same(),
            },
            batch_period,
            adaptive_batch,
            endpoints_batch_period,
            endpoints_adaptive_batch,
            mirroring_batch_period: args.mirroring_endpointslice_updates_batch_period,
            mirroring: sliced::reconcile::mirroring::Options {
                max_endpoints_per_subset: args.mirroring_max_endpoints_per_subset as usize,
            },
            workers: args.concurrent_service_endpoint_syncs as usize,
            controllers,
            load_balancers,
            ..EngineOptions::default()
        },
        kube_api_qps: args.kube_api_qps,
        kube_api_burst: args.kube_api_burst,
        leader_election,
        dry_run: args.dry_run,
        dry_run_summary_interval: args.dry_run_summary_interval,
        min_resync_period: args.min_resync_period,
        write_qps_steps,
        identity,
        record_trace,
        ..RunOptions::default()
    };
    let summary = run_until_terminated(args.kubeconfig, options, metrics)?;
    tracing::info!(
        syncs = summary.stats.syncs,
        errors = summary.stats.sync_errors,
        "stopped"
    );
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr; RUST_LOG filters (default: info). Colours only on a terminal: a log collector
/// would store the escape codes.
fn init_logging() {
    use std::io::IsTerminal as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, filter, fmt};
    let env = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // kube's client logs every failed request at ERROR, with no word of which; sliced logs each
    // failure once, with the kind and request, where it retries.
    let once = filter::filter_fn(|meta| {
        !(meta.target() == "kube_client::client::builder" && *meta.level() == tracing::Level::ERROR)
    });
    let layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(once);
    let _ = tracing_subscriber::registry()
        .with(env)
        .with(layer)
        .try_init();
}

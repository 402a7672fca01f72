//! `sliced simulate`: a synthetic cluster reconciled in memory, with no API server.
//!
//! This first form runs three full passes over a generated cluster: a cold start (every slice
//! created), a restart over correct slices (which must write nothing), and a pass after 1% of the
//! pods stop being ready. The engine-driven replay of churn traces comes with the engine.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

use sliced::reconcile::Options;
use sliced::sim;
use sliced::sink::{Object, Verb};
use sliced::snapshot::{Snapshot, SnapshotResult, reconcile_snapshot};

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Pods in the generated cluster.
    #[arg(long, default_value_t = 100_000)]
    pods: usize,
    /// Services in the generated cluster.
    #[arg(long, default_value_t = 1_000)]
    services: usize,
    /// Seed of the generator and of generated names.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The most endpoints one EndpointSlice holds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_endpoints_per_slice: u32,
    /// Print the summary as JSON.
    #[arg(short = 'o', long = "output", value_parser = ["text", "json"], default_value = "text")]
    output: String,
    /// Replay a trace of changes (YAML or JSON steps) in virtual time instead of a generated cluster.
    #[arg(long, value_name = "FILE")]
    events: Option<String>,
    /// Delay of pod-triggered syncs, as --endpointslice-updates-batch-period (e.g. 500ms, 1s).
    #[arg(long, value_parser = parse_duration_arg, default_value = "0s")]
    batch_period: Duration,
    /// Parallel reconcile workers.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: u32,
    /// Controllers to run, comma-separated: endpointslice, endpoints, mirroring (default: all).
    #[arg(long, default_value = "all")]
    controllers: String,
    /// With --events: stop at this virtual time even if work remains.
    #[arg(long, value_parser = parse_duration_arg)]
    until: Option<Duration>,
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    sliced::replay::parse_duration(s).map_err(|e| e.to_string())
}

struct Pass {
    name: &'static str,
    elapsed: Duration,
    creates: usize,
    updates: usize,
    deletes: usize,
    errors: usize,
}

fn pass(
    name: &'static str,
    snapshot: &Snapshot,
    options: &Options,
    seed: u64,
) -> (Pass, SnapshotResult) {
    let start = Instant::now();
    let result = reconcile_snapshot(snapshot, options, seed);
    let elapsed = start.elapsed();
    let count = |v: Verb| result.writes.iter().filter(|w| w.verb == v).count();
    let p = Pass {
        name,
        elapsed,
        creates: count(Verb::Create),
        updates: count(Verb::Update),
        deletes: count(Verb::Delete),
        errors: result.errors.len(),
    };
    (p, result)
}

fn slices_of(result: &SnapshotResult) -> Vec<sliced::model::EndpointSlice> {
    result
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::EndpointSlice(s) => Some(s.clone()),
            Object::Endpoints(_) => None,
        })
        .collect()
}

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    if let Err(message) = super::replay::check_controllers(&args.controllers) {
        eprintln!("error: {message}");
        return Ok(ExitCode::from(2));
    }
    if let Some(events) = &args.events {
        return super::replay::run(super::replay::ReplayArgs {
            events,
            batch_period: args.batch_period,
            workers: args.workers as usize,
            max_endpoints_per_slice: args.max_endpoints_per_slice as usize,
            until: args.until,
            seed: args.seed,
        });
    }
    let options = Options {
        max_endpoints_per_slice: args.max_endpoints_per_slice as usize,
        prefer_same_traffic_distribution: false,
    };
    let started = Instant::now();
    let mut snapshot = sim::cluster(args.pods, args.services, args.seed);
    let generated = started.elapsed();
    let text = args.output == "text";
    if text {
        println!(
            "cluster: {} pods, {} services, {} nodes (generated in {:.0?})",
            snapshot.pods.len(),
            snapshot.services.len(),
            snapshot.nodes.len(),
            generated
        );
    }

    let (cold, result) = pass("cold start", &snapshot, &options, args.seed);
    snapshot.endpoint_slices = slices_of(&result);
    let (restart, _) = pass("restart, slices correct", &snapshot, &options, args.seed);
    for pod in snapshot.pods.iter_mut().step_by(100) {
        pod.ready = false;
    }
    let (churn, result) = pass("1% of pods not ready", &snapshot, &options, args.seed);
    let final_slices = slices_of(&result);
    snapshot.endpoint_slices = Vec::new();
    let (_, fresh) = pass("fresh", &snapshot, &options, args.seed);
    let agrees = same_content(&final_slices, &slices_of(&fresh));

    let passes = [cold, restart, churn];
    let pods = snapshot.pods.len().max(1) as f64;
    if text {
        for p in &passes {
            println!(
                "{:<26} {:>9.1?}  {:>7.0} ns/pod  writes: {} create, {} update, {} delete; {} errors",
                p.name,
                p.elapsed,
                p.elapsed.as_nanos() as f64 / pods,
                p.creates,
                p.updates,
                p.deletes,
                p.errors
            );
        }
        println!(
            "endpoints after churn equal a fresh full reconcile: {}",
            if agrees { "yes" } else { "NO" }
        );
    } else {
        let summary: Vec<_> = passes
            .iter()
            .map(|p| {
                json!({"pass": p.name, "seconds": p.elapsed.as_secs_f64(),
                       "creates": p.creates, "updates": p.updates, "deletes": p.deletes,
                       "errors": p.errors})
            })
            .collect();
        let doc = json!({"pods": snapshot.pods.len(), "services": snapshot.services.len(),
                         "passes": summary, "matches_fresh_reconcile": agrees});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    let restart_wrote = passes[1].creates + passes[1].updates + passes[1].deletes > 0;
    Ok(if agrees && !restart_wrote {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The same endpoints per service, address type and ready state, whatever the slice layout.
fn same_content(a: &[sliced::model::EndpointSlice], b: &[sliced::model::EndpointSlice]) -> bool {
    let key = |slices: &[sliced::model::EndpointSlice]| {
        let mut v: Vec<String> = slices
            .iter()
            .flat_map(|s| {
                s.endpoints.iter().map(move |e| {
                    format!(
                        "{}/{:?}/{:?}/{:?}/{:?}",
                        s.meta.namespace,
                        s.service_name(),
                        s.address_type,
                        e.addresses,
                        e.conditions
                    )
                })
            })
            .collect();
        v.sort();
        v
    };
    key(a) == key(b)
}

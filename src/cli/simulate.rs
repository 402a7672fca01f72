//! `sliced simulate`: a synthetic cluster kept in step by the engine, in memory and in virtual time.
//!
//! The cluster comes from a small spec (`--spec`, or the built-in default of 100,000 pods); the run
//! is a cold start (every object arrives at time zero) followed by a churn trace, all replayed
//! through the engine and an in-memory API server. The summary ends with a check that the slices
//! hold what a fresh full reconcile of the final state would put in them.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use sliced::engine::LoadBalancerOptions;
use sliced::model::{EndpointSlice, EndpointSubset, Endpoints, Labels, Name};
use sliced::reconcile::endpoints::ANNOTATION_OVER_CAPACITY as OVER_CAPACITY;
use sliced::reconcile::load_balancer::pools;
use sliced::replay::{FaultProfile, ReplayOptions, Step, replay_with_progress};
use sliced::sim::{self, ClusterSpec, SpecError, TraceKind};
use sliced::sink::Object;
use sliced::snapshot::{Controllers, reconcile_snapshot_keeping_engine};

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Pods in the generated cluster (overrides the spec).
    #[arg(long)]
    pods: Option<usize>,
    /// Services in the generated cluster (overrides the spec).
    #[arg(long)]
    services: Option<usize>,
    /// Seed of the generator, the trace and generated names (overrides the spec).
    #[arg(long)]
    seed: Option<u64>,
    /// A cluster spec (YAML), such as fixtures/sim/default.yaml.
    #[arg(long, value_name = "FILE")]
    spec: Option<String>,
    /// The churn trace: mixed, rolling-update, scale, node-loss, readiness-flap, label-move.
    #[arg(long, default_value = "mixed")]
    trace: TraceKind,
    /// Steps in the churn trace.
    #[arg(long, default_value_t = 50_000)]
    steps: usize,
    /// The most endpoints one EndpointSlice holds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_endpoints_per_slice: u32,
    #[command(flatten)]
    traffic_distribution: super::TrafficDistributionArgs,
    /// The most addresses of one Endpoints subset the mirroring controller mirrors, as
    /// kube-controller-manager's flag.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    mirroring_max_endpoints_per_subset: u32,
    /// Print the summary as JSON.
    #[arg(short = 'o', long = "output", value_parser = ["text", "json"], default_value = "text")]
    output: String,
    /// Replay a trace of changes (YAML or JSON steps) in virtual time instead of a generated cluster.
    #[arg(long, value_name = "FILE")]
    events: Option<String>,
    /// Delay of pod-triggered syncs, as --endpointslice-updates-batch-period (e.g. 500ms, 1s).
    #[arg(long, value_parser = super::duration_arg, default_value = "0s")]
    batch_period: Duration,
    /// Parallel reconcile workers.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: u32,
    /// Controllers to run, comma-separated: endpointslice, endpoints, mirroring, service-lb
    /// (default: all).
    #[arg(long, default_value = "all")]
    controllers: String,
    /// MetalLB `IPAddressPool` objects for the LoadBalancer Services; without it, one pool,
    /// 10.200.0.0/16, serves the generated cluster's.
    #[arg(long = "lb-pools", value_name = "FILE")]
    lb_pools: Vec<String>,
    /// Stop at this virtual time even if work remains.
    #[arg(long, value_parser = super::duration_arg)]
    until: Option<Duration>,
    /// After every sync that succeeded, check that a full reconcile of the same state would write
    /// nothing (one more full reconcile per sync); exit 1 if one would.
    #[arg(long)]
    check_invariants: bool,
    /// Inject faults until the trace ends: none, flaky-api (refused, lost and slow writes, late
    /// and expiring watches) or chaos (also others' edits, a lagging garbage collector, resyncs,
    /// restarts and leader changes). Seeded by --seed.
    #[arg(long, default_value = "none", value_parser = clap::builder::PossibleValuesParser::new(FaultProfile::NAMES))]
    faults: String,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let controllers = match Controllers::parse(&args.controllers) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let load_balancers = match load_balancer_options(&args.lb_pools) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let faults: FaultProfile = match args.faults.parse() {
        Ok(profile) => profile,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(events) = &args.events {
        return super::replay::run(super::replay::ReplayArgs {
            events,
            batch_period: args.batch_period,
            workers: args.workers as usize,
            reconcile: reconcile_options(&args),
            mirroring_max_endpoints_per_subset: args.mirroring_max_endpoints_per_subset as usize,
            controllers,
            until: args.until,
            seed: args.seed.unwrap_or(0),
            check_invariants: args.check_invariants,
            faults,
            load_balancers,
        });
    }
    let mut spec = match &args.spec {
        Some(path) => {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!("error: {path}: cannot read the cluster spec: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            match ClusterSpec::from_yaml(&text) {
                Ok(spec) => spec,
                Err(e) => {
                    eprintln!("error: {path}: {e}");
                    return Ok(ExitCode::from(2));
                }
            }
        }
        None => ClusterSpec::default(),
    };
    if let Some(pods) = args.pods {
        spec.pods = pods;
    }
    if let Some(services) = args.services {
        spec.services = services;
    }
    if let Some(seed) = args.seed {
        spec.seed = seed;
    }
    // The overrides too must fit in memory; the rest of a spec `generate` clamps into range.
    if let Err(e) = spec.validate_sizes() {
        let source = match &e {
            SpecError::Invalid { field: "pods", .. } if args.pods.is_some() => "--pods",
            SpecError::Invalid {
                field: "services", ..
            } if args.services.is_some() => "--services",
            _ => args.spec.as_deref().unwrap_or("the default spec"),
        };
        eprintln!("error: {source}: {e}");
        return Ok(ExitCode::from(2));
    }
    let text = args.output == "text";
    let rss_start = resident_bytes();

    let started = Instant::now();
    let cluster = sim::generate(&spec);
    let trace = sim::trace(&cluster, args.trace, spec.seed, args.steps);
    let generated = started.elapsed();
    let snapshot = &cluster.snapshot;
    if text {
        println!(
            "cluster: {} pods, {} services, {} nodes; trace: {} steps of {} (generated in {:.1?})",
            snapshot.pods.len(),
            snapshot.services.len(),
            snapshot.nodes.len(),
            trace.len(),
            args.trace,
            generated
        );
    }

    // Everything exists at time zero; the trace starts once the cold start has settled.
    let offset = Duration::from_secs(60);
    let mut steps = snapshot.as_steps();
    let cold_steps = steps.len();
    steps.extend(trace.iter().map(|s| Step {
        at: s.at + offset,
        ..s.clone()
    }));

    let mut engine = super::replay::engine_options(
        args.batch_period,
        args.workers as usize,
        reconcile_options(&args),
        args.mirroring_max_endpoints_per_subset as usize,
        controllers,
    );
    engine.check_invariants = args.check_invariants;
    engine.load_balancers = load_balancers;
    let options = ReplayOptions {
        engine,
        keep_records: false,
        until: args.until,
        seed: spec.seed,
        faults,
        resync_when_idle: false,
    };
    let bar = progress_bar(text, steps.len());
    let mut last_line = Instant::now();
    let mut result = replay_with_progress(&steps, &options, &mut |done, total| match &bar {
        Some(bar) => bar.set_position(done as u64),
        None => {
            if text && (done == total || last_line.elapsed() >= Duration::from_secs(5)) {
                println!("replayed {done}/{total} steps");
                last_line = Instant::now();
            }
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let peak = peak_resident_bytes();

    // The oracle: the final state (as the API server holds it, when others may have changed it),
    // reconciled afresh from nothing.
    let final_state = match result.final_state.take() {
        Some(state) => state,
        None => {
            let mut state = snapshot.clone();
            sim::apply_all(&mut state, trace.iter().filter_map(Step::as_change));
            state
        }
    };
    let options_fresh = reconcile_options(&args);
    let mirroring = sliced::reconcile::mirroring::Options {
        max_endpoints_per_subset: args.mirroring_max_endpoints_per_subset as usize,
    };
    // The oracle is of slices and Endpoints: the service controller has no part in it.
    let endpoint_controllers = Controllers {
        load_balancer: false,
        ..controllers
    };
    let (fresh, fresh_engine) = reconcile_snapshot_keeping_engine(
        final_state,
        &options_fresh,
        &mirroring,
        endpoint_controllers,
        spec.seed,
        Default::default(),
    );
    let agrees = same_content(&slices_of(&result.objects), &slices_of(&fresh.objects))
        && same_endpoints(&result.objects, &fresh.objects);

    let pods = snapshot.pods.len().max(1);
    let replay_secs = result.elapsed.as_secs_f64().max(1e-9);
    let mut times = result.sync_times.clone();
    times.sort();
    let pct = |p: f64| {
        times
            .get(((times.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    let [creates, updates, deletes] = result.write_counts;
    let growth = peak.zip(rss_start).map(|(p, s)| p.saturating_sub(s));
    if text {
        println!(
            "replayed {} steps ({} cold start, {} churn) in {:.2?}: {:.0} events/s",
            steps.len(),
            cold_steps,
            trace.len(),
            result.elapsed,
            steps.len() as f64 / replay_secs
        );
        println!(
            "syncs: {} ({} errors, {} stale, {} dropped); writes: {creates} create, {updates} update, {deletes} delete",
            result.stats.syncs, result.stats.sync_errors, result.stats.stale, result.stats.dropped
        );
        let (load_balancers, addressed) = result.load_balancers;
        if load_balancers > 0 || result.service_patches > 0 {
            println!(
                "load balancers: {addressed} of {load_balancers} LoadBalancer Services hold an address; {} Service patches; {} addresses moved",
                result.service_patches, result.moved_addresses
            );
        }
        println!(
            "sync time: p50 {:.1?}, p90 {:.1?}, p99 {:.1?}, max {:.1?}",
            pct(0.5),
            pct(0.9),
            pct(0.99),
            pct(1.0)
        );
        if let (Some(peak), Some(growth)) = (peak, growth) {
            println!(
                "peak memory: {:.0} MiB resident; {} bytes per pod (whole process, above start)",
                peak as f64 / 1048576.0,
                growth / pods as u64
            );
        }
        if let Some(report) = &result.faults {
            let injected: Vec<String> = report
                .counts
                .rows()
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(name, n)| format!("{n} {}", name.replace('_', " ")))
                .collect();
            println!(
                "faults ({}): {} injected until {}: {}",
                report.profile,
                report.counts.total(),
                sliced::duration::format_seconds(report.stopped_at),
                injected.join(", ")
            );
            println!(
                "survived: {} failed syncs retried, {} relists, {} restarts, {} leader changes; {} writes to objects sliced does not manage",
                result.stats.sync_errors + result.stats.stale,
                report.counts.watch_expiries,
                report.counts.restarts,
                report.counts.leader_changes,
                report.unmanaged_writes.len(),
            );
        }
        if args.check_invariants {
            println!(
                "invariant: {} syncs checked, {} after which a full reconcile would still write",
                result.stats.invariant_checks, result.stats.invariant_violations
            );
        }
        if let Some(unsettled) = &result.unsettled {
            println!(
                "once the queues drained, services a full reconcile would still change: {}",
                unsettled.len()
            );
        }
        println!(
            "slices and Endpoints equal a fresh full reconcile of the final state: {}",
            if agrees { "yes" } else { "NO" }
        );
    } else {
        let doc = json!({
            "pods": snapshot.pods.len(),
            "services": snapshot.services.len(),
            "nodes": snapshot.nodes.len(),
            "steps": steps.len(),
            "cold_start_steps": cold_steps,
            "replay_seconds": result.elapsed.as_secs_f64(),
            "events_per_second": steps.len() as f64 / replay_secs,
            "syncs": result.stats.syncs,
            "incremental_syncs": result.stats.incremental_syncs,
            "sync_errors": result.stats.sync_errors,
            "stale": result.stats.stale,
            "dropped": result.stats.dropped,
            "writes": {"create": creates, "update": updates, "delete": deletes},
            "load_balancers": {"services": result.load_balancers.0,
                               "with_address": result.load_balancers.1,
                               "service_patches": result.service_patches,
                               "moved_addresses": result.moved_addresses},
            "sync_seconds": {"p50": pct(0.5).as_secs_f64(), "p90": pct(0.9).as_secs_f64(),
                             "p99": pct(0.99).as_secs_f64(), "max": pct(1.0).as_secs_f64()},
            "peak_resident_bytes": peak,
            "bytes_per_pod": growth.map(|g| g / pods as u64),
            "matches_fresh_reconcile": agrees,
            "invariant": super::replay::invariant_summary(&result, args.check_invariants),
            "faults": super::replay::fault_summary(&result),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    for violation in &result.violations {
        eprintln!("invariant violated: {violation}");
    }
    let mut faults_survived = true;
    if let Some(report) = &result.faults {
        for write in &report.unmanaged_writes {
            eprintln!("write to an object sliced does not manage: {write}");
        }
        faults_survived = report.unmanaged_writes.is_empty();
    }
    for violation in result.unsettled.iter().flatten() {
        eprintln!("unsettled once the queues drained: {violation}");
    }
    let settled = result.unsettled.as_ref().is_none_or(Vec::is_empty);
    let code = if agrees && faults_survived && settled && result.stats.invariant_violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    // The process ends here: freeing two clusters' worth of objects one by one would only delay
    // the exit.
    std::mem::forget((result, fresh, fresh_engine, cluster, trace, steps));
    Ok(code)
}

/// The service controller's pools: those of `--lb-pools` files, or the generated cluster's one.
fn load_balancer_options(files: &[String]) -> Result<LoadBalancerOptions, String> {
    let pools = if files.is_empty() {
        let object = serde_json::json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": "simulate"},
            "spec": {"addresses": ["10.200.0.0/16"], "avoidBuggyIPs": true}
        });
        let object: pools::IpAddressPoolObject =
            serde_json::from_value(object).map_err(|e| e.to_string())?;
        vec![pools::pool_from_object(object).map_err(|e| e.to_string())?]
    } else {
        super::lb_pools(files, Vec::new())?
    };
    Ok(LoadBalancerOptions {
        pools,
        ..LoadBalancerOptions::default()
    })
}

fn progress_bar(text: bool, total: usize) -> Option<ProgressBar> {
    if !text || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total as u64);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} steps {per_sec} {eta}") {
        bar.set_style(style);
    }
    Some(bar)
}

/// The same Endpoints objects: subsets, labels and the over-capacity mark.
fn same_endpoints(a: &[Object], b: &[Object]) -> bool {
    fn compared(e: &Endpoints) -> (&Name, &Name, &Labels, Option<&Name>, &Vec<EndpointSubset>) {
        let capacity = e.meta.annotations.get(OVER_CAPACITY);
        (
            &e.meta.namespace,
            &e.meta.name,
            &e.meta.labels,
            capacity,
            &e.subsets,
        )
    }
    let a = a.iter().filter_map(|o| o.as_endpoints()).map(compared);
    let b = b.iter().filter_map(|o| o.as_endpoints()).map(compared);
    a.eq(b)
}

fn slices_of(objects: &[Object]) -> Vec<&EndpointSlice> {
    objects.iter().filter_map(|o| o.as_slice()).collect()
}

/// The same endpoints per service and address type, with the same conditions, node and zone,
/// whatever the slice layout: the two sides counted against each other.
fn same_content(a: &[&EndpointSlice], b: &[&EndpointSlice]) -> bool {
    let endpoints = a.iter().map(|s| s.endpoints.len()).sum();
    let mut counts =
        std::collections::HashMap::with_capacity_and_hasher(endpoints, ahash::RandomState::new());
    for (slices, step) in [(a, 1i64), (b, -1)] {
        for s in slices {
            for e in &s.endpoints {
                let key = (
                    &s.meta.namespace,
                    s.service_name(),
                    &s.address_type,
                    &e.addresses,
                    e.conditions,
                    &e.node_name,
                    &e.zone,
                );
                *counts.entry(key).or_insert(0) += step;
            }
        }
    }
    counts.values().all(|&count| count == 0)
}

/// Resident memory now and at its peak, from /proc (Linux); None elsewhere.
fn proc_status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn resident_bytes() -> Option<u64> {
    proc_status("VmRSS:")
}

fn peak_resident_bytes() -> Option<u64> {
    proc_status("VmHWM:")
}

fn reconcile_options(args: &SimulateArgs) -> sliced::reconcile::Options {
    sliced::reconcile::Options {
        max_endpoints_per_slice: args.max_endpoints_per_slice as usize,
        prefer_same_traffic_distribution: args.traffic_distribution.prefer_same(),
    }
}

#[cfg(test)]
mod tests {
    use sliced::model::EndpointSlice;
    use sliced::sim::{self, ClusterSpec};

    use super::same_content;

    fn slices() -> Vec<EndpointSlice> {
        let spec = ClusterSpec {
            seed: 3,
            pods: 300,
            services: 6,
            namespaces: 2,
            huge_services: 0,
            max_service_pods: 80,
            ..ClusterSpec::default()
        };
        let cluster = sim::generate(&spec);
        let options = sliced::reconcile::Options {
            max_endpoints_per_slice: 20,
            ..sliced::reconcile::Options::default()
        };
        let result = sliced::snapshot::reconcile_snapshot(&cluster.snapshot, &options, 3);
        result
            .objects
            .iter()
            .filter_map(|o| o.as_slice())
            .cloned()
            .collect()
    }

    fn refs(slices: &[EndpointSlice]) -> Vec<&EndpointSlice> {
        slices.iter().collect()
    }

    /// The oracle of `simulate` says "NO" when an endpoint is missing or differs, and "yes"
    /// whatever the slice layout.
    #[test]
    fn the_final_check_sees_a_missing_or_changed_endpoint() {
        let a = slices();
        assert!(a.len() > 6, "services of several slices");
        assert!(same_content(&refs(&a), &refs(&a)));

        // Another layout: an endpoint moved to another slice of its service.
        let mut moved = a.clone();
        let (from, to) = (0..moved.len())
            .flat_map(|i| (0..moved.len()).map(move |j| (i, j)))
            .find(|&(i, j)| {
                i != j
                    && moved[i].service_name() == moved[j].service_name()
                    && moved[i].address_type == moved[j].address_type
                    && !moved[i].endpoints.is_empty()
            })
            .expect("a service of two slices");
        let endpoint = moved[from].endpoints.remove(0);
        moved[to].endpoints.push(endpoint);
        assert!(same_content(&refs(&a), &refs(&moved)));

        let mut missing = a.clone();
        missing[from].endpoints.remove(0);
        assert!(!same_content(&refs(&a), &refs(&missing)));

        let mut changed = a.clone();
        let ready = changed[from].endpoints[0].conditions.ready;
        std::sync::Arc::make_mut(&mut changed[from].endpoints[0])
            .conditions
            .ready = Some(!ready.unwrap_or(true));
        assert!(!same_content(&refs(&a), &refs(&changed)));
    }
}

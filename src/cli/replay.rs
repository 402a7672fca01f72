//! `sliced simulate --events FILE`: a trace of changes replayed through the engine in virtual time.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use sliced::controllers::Controllers;
use sliced::duration::format_seconds;
use sliced::engine::{EngineOptions, LoadBalancerOptions};
use sliced::kube::convert::object_to_json;
use sliced::kube::trace_file::load_trace_file;
use sliced::reconcile::Options;
use sliced::replay::{FaultProfile, ReplayOptions, ReplayResult, replay};
use sliced::sink::Verb;

pub struct ReplayArgs<'a> {
    pub events: &'a str,
    pub batch_period: Duration,
    pub workers: usize,
    pub reconcile: Options,
    pub mirroring_max_endpoints_per_subset: usize,
    pub controllers: Controllers,
    pub until: Option<Duration>,
    pub seed: u64,
    pub check_invariants: bool,
    pub faults: FaultProfile,
    pub load_balancers: LoadBalancerOptions,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let steps = match load_trace_file(args.events) {
        Ok(trace) => {
            warn_cut_off(args.events, &trace);
            trace.steps
        }
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut engine = engine_options(
        args.batch_period,
        args.workers,
        args.reconcile,
        args.mirroring_max_endpoints_per_subset,
        args.controllers,
    );
    engine.load_balancers = args.load_balancers;
    engine.check_invariants = args.check_invariants;
    let options = ReplayOptions {
        engine,
        keep_records: true,
        until: args.until,
        seed: args.seed,
        faults: args.faults,
        resync_when_idle: false,
    };
    let result = replay(&steps, &options);
    println!(
        "{}",
        serde_json::to_string_pretty(&render(&result, args.check_invariants)?)?
    );
    Ok(ExitCode::SUCCESS)
}

pub fn engine_options(
    batch_period: Duration,
    workers: usize,
    reconcile: Options,
    max_per_mirrored_subset: usize,
    controllers: Controllers,
) -> EngineOptions {
    EngineOptions {
        reconcile,
        // `--batch-period` is both kube-controller-manager batch periods.
        batch_period,
        endpoints_batch_period: batch_period,
        controllers,
        mirroring: sliced::reconcile::mirroring::Options {
            max_endpoints_per_subset: max_per_mirrored_subset,
        },
        workers,
        ..EngineOptions::default()
    }
}

fn render(r: &ReplayResult, checked: bool) -> anyhow::Result<Value> {
    let object = |o| object_to_json(o).context("serialising an object");
    let writes = r
        .writes
        .iter()
        .map(|w| {
            Ok(json!({"at": format_seconds(w.at), "verb": w.verb.as_str(), "object": object(&w.object)?}))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let syncs: Vec<Value> = r
        .syncs
        .iter()
        .map(|s| {
            json!({
                "at": format_seconds(s.at),
                "service": s.service.to_string(),
                "controller": s.controller,
                "result": s.outcome.as_str(),
                "message": s.message,
            })
        })
        .collect();
    let objects = r
        .objects
        .iter()
        .map(object)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let events: Vec<Value> = r
        .events
        .iter()
        .map(|(service, e)| {
            json!({"service": service.to_string(), "type": format!("{:?}", e.event_type),
                   "reason": e.reason, "message": e.message})
        })
        .collect();
    let count = |v: Verb| r.writes.iter().filter(|w| w.verb == v).count();
    let summary = json!({
        "steps": r.steps,
        "changes": r.stats.changes,
        "syncs": r.stats.syncs,
        "sync_errors": r.stats.sync_errors,
        "stale": r.stats.stale,
        "dropped": r.stats.dropped,
        "writes": {"create": count(Verb::Create), "update": count(Verb::Update), "delete": count(Verb::Delete)},
        "ended_at": format_seconds(r.ended_at),
        "wall_seconds": r.elapsed.as_secs_f64(),
        "invariant": invariant_summary(r, checked),
        "faults": fault_summary(r),
    });
    Ok(
        json!({"writes": writes, "syncs": syncs, "objects": objects, "events": events, "summary": summary}),
    )
}

/// The invariant checks of a run: `null` when not checked.
pub fn invariant_summary(r: &ReplayResult, checked: bool) -> Value {
    if !checked {
        return Value::Null;
    }
    json!({
        "checks": r.stats.invariant_checks,
        "violations": r.stats.invariant_violations,
        "first": r.violations.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "unsettled": r.unsettled.as_ref().map(|u| u.iter().map(ToString::to_string).collect::<Vec<_>>()),
    })
}

/// What the faults did and how the run came out of them: `null` without faults.
pub fn fault_summary(r: &ReplayResult) -> Value {
    let Some(report) = &r.faults else {
        return Value::Null;
    };
    let injected: serde_json::Map<String, Value> = report
        .counts
        .rows()
        .into_iter()
        .map(|(name, n)| (name.to_string(), json!(n)))
        .collect();
    json!({
        "profile": report.profile,
        "injected": injected,
        "injected_total": report.counts.total(),
        "stopped_at": format_seconds(report.stopped_at),
        "failed_syncs_retried": r.stats.sync_errors + r.stats.stale,
        "relists": report.counts.watch_expiries,
        "restarts_survived": report.counts.restarts,
        "leader_changes_survived": report.counts.leader_changes,
        "unmanaged_writes": report.unmanaged_writes,
    })
}

/// Says on standard error that a recording's last line, cut off by a crash, was left out.
pub fn warn_cut_off(file: &str, trace: &sliced::kube::trace_file::Trace) {
    if let Some(line) = trace.cut_off_line {
        eprintln!(
            "warning: {file}: line {line} is cut off (the recording stopped mid-write) and is left out"
        );
    }
}

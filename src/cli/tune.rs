//! `sliced tune`: a trace replayed through the real engine in virtual time for every combination
//! of the swept flags, with what each cost, and the setting to choose.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use sliced::engine::{AdaptiveBatch, BatchPeriod};
use sliced::kube::convert::object_to_json;
use sliced::kube::trace_file::load_trace_file;
use sliced::replay::Step;
use sliced::sim::{self, ClusterSpec, TraceKind};
use sliced::snapshot::Controllers;
use sliced::tune::{Outcome, Setting, measure, recommend};

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// A trace of changes (YAML or JSON steps, as `simulate --events` reads) to replay.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    events: Option<String>,
    /// A built-in trace over a generated cluster: rolling-update, scale, node-loss,
    /// readiness-flap, label-move, mixed.
    #[arg(long, default_value = "rolling-update")]
    trace: TraceKind,
    /// Pods of the generated cluster.
    #[arg(long, default_value_t = 20_000)]
    pods: usize,
    /// Services of the generated cluster.
    #[arg(long, default_value_t = 200)]
    services: usize,
    /// Steps of the built-in trace.
    #[arg(long, default_value_t = 20_000)]
    steps: usize,
    /// Seed of the generated cluster and trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Batch periods to try, comma separated (`--endpointslice-updates-batch-period`); `auto`
    /// is the adaptive window, widened while writes exceed --max-write-qps (else 20, the
    /// default --kube-api-qps) up to --max-batch-period.
    #[arg(long, value_name = "LIST", default_value = "0s,500ms,1s,5s,auto")]
    batch_period: String,
    /// The widest window of an `auto` batch period (`sliced run --max-batch-period`).
    #[arg(long, value_name = "D", default_value = "1s", value_parser = super::duration_arg)]
    max_batch_period: Duration,
    /// Slice sizes to try, comma separated.
    #[arg(long, value_name = "LIST", default_value = "100")]
    max_endpoints_per_slice: String,
    /// Worker counts to try, comma separated.
    #[arg(long, value_name = "LIST", default_value = "2")]
    workers: String,
    /// Recommend the least p99 latency among settings whose busiest second stays within this.
    #[arg(long, value_name = "Q")]
    max_write_qps: Option<f64>,
    /// Recommend the fewest writes among settings whose p99 latency stays within this.
    #[arg(long, value_name = "D", value_parser = super::duration_arg)]
    p99_latency: Option<Duration>,
    /// Output format: text or json.
    #[arg(short = 'o', long = "output", default_value = "text")]
    output: String,
    /// Also draw writes per second against p99 latency, each setting labelled, into this SVG or
    /// PNG.
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<String>,
}

fn list<T>(flag: &str, text: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    (text.split(',').map(str::trim).filter(|s| !s.is_empty()))
        .map(|item| parse(item).ok_or_else(|| format!("--{flag}: {item:?} is not a valid value")))
        .collect::<Result<Vec<T>, String>>()
        .and_then(|v| match v.is_empty() {
            true => Err(format!("--{flag}: give at least one value")),
            false => Ok(v),
        })
}

fn settings(args: &TuneArgs) -> Result<Vec<Setting>, String> {
    let adaptive = AdaptiveBatch {
        max_batch_period: args.max_batch_period,
        write_qps: args.max_write_qps.unwrap_or(DEFAULT_WRITE_QPS),
    };
    let periods = list("batch-period", &args.batch_period, |s| {
        BatchPeriod::parse(s, adaptive).ok()
    })?;
    let sizes = list(
        "max-endpoints-per-slice",
        &args.max_endpoints_per_slice,
        |s| s.parse::<usize>().ok().filter(|n| (1..=1000).contains(n)),
    )?;
    let workers = list("workers", &args.workers, |s| {
        s.parse::<usize>().ok().filter(|n| (1..=256).contains(n))
    })?;
    let mut out = Vec::new();
    for &batch_period in &periods {
        for &max_endpoints_per_slice in &sizes {
            for &workers in &workers {
                out.push(Setting {
                    batch_period,
                    max_endpoints_per_slice,
                    workers,
                });
            }
        }
    }
    Ok(out)
}

/// The steps to replay and when the measured part starts.
fn steps(args: &TuneArgs) -> Result<(Vec<Step>, Duration), String> {
    if let Some(file) = &args.events {
        let trace = load_trace_file(file).map_err(|e| e.to_string())?;
        super::replay::warn_cut_off(file, &trace);
        return Ok((trace.steps, Duration::ZERO));
    }
    let spec = ClusterSpec {
        pods: args.pods,
        services: args.services,
        seed: args.seed,
        ..ClusterSpec::default()
    };
    spec.validate_sizes().map_err(|e| e.to_string())?;
    let cluster = sim::generate(&spec);
    let trace = sim::trace(&cluster, args.trace, args.seed, args.steps);
    // Everything exists at time zero; the trace starts once the cold start has settled.
    let offset = Duration::from_secs(60);
    let mut steps = cluster.snapshot.as_steps();
    steps.extend(trace.iter().map(|s| Step {
        at: s.at + offset,
        ..s.clone()
    }));
    Ok((steps, offset))
}

pub fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    if !matches!(args.output.as_str(), "text" | "json") {
        eprintln!("error: -o {:?}: want text or json", args.output);
        return Ok(ExitCode::from(2));
    }
    if let Some(path) = args
        .plot
        .as_deref()
        .filter(|p| !super::tune_plot::drawable(p))
    {
        eprintln!("error: --plot {path}: give a .svg or .png file");
        return Ok(ExitCode::from(2));
    }
    let (settings, (steps, trace_start)) =
        match settings(&args).and_then(|s| Ok((s, steps(&args)?))) {
            Ok(both) => both,
            Err(message) => {
                eprintln!("error: {message}");
                return Ok(ExitCode::from(2));
            }
        };
    let base = super::replay::engine_options(
        Duration::ZERO,
        2,
        sliced::reconcile::Options::default(),
        1000,
        Controllers::ENDPOINTSLICE,
    );
    let size = |o: &sliced::sink::Object| {
        object_to_json(o)
            .ok()
            .and_then(|v| serde_json::to_vec(&v).ok())
            .map_or(0, |b| b.len())
    };
    let bar = (args.output == "text" && std::io::stderr().is_terminal())
        .then(|| ProgressBar::new(settings.len() as u64));
    if let Some(bar) = &bar
        && let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} settings {eta}")
    {
        bar.set_style(style);
    }
    let mut outcomes = Vec::with_capacity(settings.len());
    for setting in &settings {
        outcomes.push(measure(&steps, trace_start, &base, *setting, &size));
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let chosen = recommend(&outcomes, args.max_write_qps, args.p99_latency);
    if let Some(path) = &args.plot
        && let Err(message) = super::tune_plot::plot(path, &settings, &outcomes, chosen, label)
    {
        eprintln!("error: {message}");
        return Ok(ExitCode::from(2));
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.output == "json" {
        let rows: Vec<Value> = (settings.iter().zip(&outcomes))
            .map(|(s, o)| row_json(s, o))
            .collect();
        let value = json!({"settings": rows, "recommended": chosen});
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        table(&mut out, &settings, &outcomes, chosen, &args)?;
    }
    out.flush().context("writing output")?;
    Ok(ExitCode::SUCCESS)
}

/// `sliced run`'s default `--kube-api-qps`: the budget of an `auto` batch period without
/// `--max-write-qps`.
const DEFAULT_WRITE_QPS: f64 = 20.0;

/// A batch period as the flags take it: `0s`, `500ms`, `1s`, `auto`.
fn period(p: BatchPeriod) -> String {
    match p {
        BatchPeriod::Fixed(d) if d.is_zero() => "0s".to_owned(),
        BatchPeriod::Fixed(d) => format!("{d:?}"),
        BatchPeriod::Auto(_) => "auto".to_owned(),
    }
}

fn label(s: &Setting) -> String {
    format!(
        "batch {}, {}/slice, {} workers",
        period(s.batch_period),
        s.max_endpoints_per_slice,
        s.workers
    )
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn row_json(s: &Setting, o: &Outcome) -> Value {
    json!({
        "batchPeriod": period(s.batch_period),
        "maxEndpointsPerSlice": s.max_endpoints_per_slice,
        "workers": s.workers,
        "writes": o.writes,
        "bytes": o.bytes,
        "meanWritesPerSecond": o.mean_writes_per_second,
        "peakWritesPerSecond": o.peak_writes_per_second,
        "latencyMs": {"p50": millis(o.latency_p50), "p99": millis(o.latency_p99), "max": millis(o.latency_max)},
        "podChangesCarried": o.carried,
        "syncs": o.syncs,
        "needlessEndpoints": o.needless_endpoints,
    })
}

fn table(
    out: &mut impl Write,
    settings: &[Setting],
    outcomes: &[Outcome],
    chosen: Option<usize>,
    args: &TuneArgs,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<36} {:>8} {:>11} {:>7} {:>6} {:>9} {:>9} {:>9} {:>8} {:>9}",
        "setting", "writes", "bytes", "mean/s", "peak/s", "p50", "p99", "max", "syncs", "needless"
    )?;
    for (i, (s, o)) in settings.iter().zip(outcomes).enumerate() {
        let mark = if Some(i) == chosen { "*" } else { " " };
        writeln!(
            out,
            "{mark}{:<35} {:>8} {:>11} {:>7.1} {:>6} {:>7.0}ms {:>7.0}ms {:>7.0}ms {:>8} {:>9}",
            label(s),
            o.writes,
            o.bytes,
            o.mean_writes_per_second,
            o.peak_writes_per_second,
            millis(o.latency_p50),
            millis(o.latency_p99),
            millis(o.latency_max),
            o.syncs,
            o.needless_endpoints
        )?;
    }
    let why = match (args.max_write_qps, args.p99_latency) {
        (Some(q), _) => format!("the least p99 latency with at most {q} writes in any second"),
        (None, Some(d)) => format!("the fewest writes with p99 latency within {d:?}"),
        (None, None) => "the fewest writes (give --max-write-qps or --p99-latency)".to_owned(),
    };
    match chosen {
        Some(i) => writeln!(out, "recommended (*): {}: {why}", label(&settings[i]))?,
        None => writeln!(out, "no setting meets the bound: {why}")?,
    }
    Ok(())
}

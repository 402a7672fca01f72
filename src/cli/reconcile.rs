//! `sliced reconcile`: one sync of every Service in a YAML or JSON snapshot, with no cluster.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use sliced::kube::convert::object_to_json;
use sliced::kube::manifest::{self, GivenKey, Manifest};
use sliced::reconcile::{Options, mirroring};
use sliced::sink::Kind;
use sliced::sink::Object;
use sliced::snapshot::{Controllers, SnapshotResult, reconcile_snapshot_full};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

#[derive(Args, Debug)]
pub struct ReconcileArgs {
    /// A file of Kubernetes objects (YAML documents, a List, or JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    files: Vec<String>,
    /// The most endpoints one EndpointSlice holds, as kube-controller-manager's flag.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_endpoints_per_slice: u32,
    /// The most addresses of one Endpoints subset the mirroring controller mirrors, as
    /// kube-controller-manager's flag.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    mirroring_max_endpoints_per_subset: u32,
    #[command(flatten)]
    traffic_distribution: super::TrafficDistributionArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: Format,
    /// Seed for the names the in-memory API server generates.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The controllers to run, comma separated: endpointslice, endpoints, mirroring, or all.
    #[arg(long, value_name = "LIST", default_value = "all")]
    controllers: String,
}

/// Reads every file; a malformed input ends the command with status 2.
fn load(files: &[String]) -> Result<Manifest, String> {
    let mut all = Manifest::default();
    for file in files {
        let loaded = if file == "-" {
            manifest::load_reader("-", std::io::stdin().lock())
        } else {
            manifest::load_file(file)
        };
        all.merge(loaded.map_err(|e| e.to_string())?);
    }
    Ok(all)
}

pub fn run(args: ReconcileArgs) -> anyhow::Result<ExitCode> {
    let controllers = match Controllers::parse(&args.controllers) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let manifest = match load(&args.files) {
        Ok(m) => m,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    for warning in &manifest.warnings {
        eprintln!("warning: {warning}");
    }
    let options = Options {
        max_endpoints_per_slice: args.max_endpoints_per_slice as usize,
        prefer_same_traffic_distribution: args.traffic_distribution.prefer_same(),
    };
    let mirroring_options = mirroring::Options {
        max_endpoints_per_subset: args.mirroring_max_endpoints_per_subset as usize,
    };
    let result = reconcile_snapshot_full(
        &manifest.objects,
        &options,
        &mirroring_options,
        controllers,
        args.seed,
    );
    let objects = final_objects(&result, &manifest.given)?;
    let text = match args.output {
        Format::Json => render_json(&result, objects)?,
        Format::Yaml => render_yaml(objects)?,
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .context("writing output")?;
    Ok(ExitCode::SUCCESS)
}

fn json_of(object: &Object) -> anyhow::Result<Value> {
    object_to_json(object).context("serialising an object")
}

/// The objects after the reconcile, in the sink's order (EndpointSlices, then Endpoints, each by
/// namespace and name): those sliced wrote as it wrote them, the others exactly as given.
fn final_objects(
    result: &SnapshotResult,
    given: &HashMap<GivenKey, Value>,
) -> anyhow::Result<Vec<(Kind, Value)>> {
    let key = |o: &Object| {
        let meta = o.meta();
        (o.kind(), meta.namespace.clone(), meta.name.clone())
    };
    let written: HashSet<GivenKey> = result.writes.iter().map(|w| key(&w.sent)).collect();
    result
        .objects
        .iter()
        .map(|object| {
            let k = key(object);
            let value = match given.get(&k) {
                Some(as_given) if !written.contains(&k) => as_given.clone(),
                _ => json_of(object)?,
            };
            Ok((object.kind(), value))
        })
        .collect()
}

fn render_json(result: &SnapshotResult, objects: Vec<(Kind, Value)>) -> anyhow::Result<String> {
    let writes = result
        .writes
        .iter()
        .map(|w| Ok(json!({"verb": w.verb.as_str(), "object": json_of(&w.sent)?})))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let objects: Vec<Value> = objects.into_iter().map(|(_, v)| v).collect();
    let errors: Vec<Value> = result
        .errors
        .iter()
        .map(|e| json!({"service": e.service, "message": e.message}))
        .collect();
    let events: Vec<Value> = result
        .events
        .iter()
        .map(|(service, e)| {
            json!({
                "service": service,
                "type": format!("{:?}", e.event_type),
                "reason": e.reason,
                "message": e.message,
            })
        })
        .collect();
    let doc = json!({"writes": writes, "objects": objects, "errors": errors, "events": events});
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

/// The EndpointSlices, then the Endpoints, each sorted by namespace and name.
fn render_yaml(objects: Vec<(Kind, Value)>) -> anyhow::Result<String> {
    let mut text = String::new();
    for kind in [Kind::EndpointSlice, Kind::Endpoints] {
        for (_, object) in objects.iter().filter(|(k, _)| *k == kind) {
            text.push_str("---\n");
            text.push_str(&serde_saphyr::to_string(object).context("writing YAML")?);
        }
    }
    Ok(text)
}

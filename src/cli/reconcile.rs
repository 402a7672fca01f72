//! `sliced reconcile`: one sync of every Service in a YAML or JSON snapshot, with no cluster.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::render;
use sliced::kube::manifest::{self, Manifest};
use sliced::reconcile::{Options, mirroring};
use sliced::snapshot::{Controllers, reconcile_snapshot_owned};

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
    let mut manifest = match load(&args.files) {
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
    let result = reconcile_snapshot_owned(
        std::mem::take(&mut manifest.objects),
        &options,
        &mirroring_options,
        controllers,
        args.seed,
    );
    let objects = render::final_objects(&result, &manifest.given);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    match args.output {
        Format::Json => render::json(&mut out, &result, &objects),
        Format::Yaml => render::yaml(&mut out, &objects),
    }
    .and_then(|()| out.flush().context("writing output"))?;
    // The process ends here: freeing every object one by one would only delay the exit (a
    // fifth of a second at a million pods).
    std::mem::forget((result, manifest));
    Ok(ExitCode::SUCCESS)
}

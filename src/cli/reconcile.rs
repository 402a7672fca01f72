//! `sliced reconcile`: one sync of every Service in a YAML or JSON snapshot, with no cluster.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::render;
use sliced::engine::LoadBalancerOptions;
use sliced::kube::manifest::{self, Manifest};
use sliced::reconcile::load_balancer::{ClassFilter, PoolProvider};
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
    /// The controllers to run, comma separated: endpointslice, endpoints, mirroring, service-lb,
    /// or all.
    #[arg(long, value_name = "LIST", default_value = "all")]
    controllers: String,
    /// MetalLB `IPAddressPool` objects (YAML or JSON) the built-in provider hands addresses out of.
    #[arg(long = "lb-pools", value_name = "FILE")]
    lb_pools: Vec<String>,
    /// The `spec.loadBalancerClass` sliced answers for, besides Services with none.
    #[arg(long = "lb-class", value_name = "CLASS")]
    lb_class: Option<String>,
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

/// [`load`], its warnings and error printed: the error as the exit status 2.
pub(super) fn load_telling(files: &[String]) -> Result<Manifest, ExitCode> {
    let manifest = load(files).map_err(|message| {
        eprintln!("error: {message}");
        ExitCode::from(2)
    })?;
    for warning in &manifest.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(manifest)
}

/// The built-in provider over the pools of `--lb-pools` files and of the input. The engine tells
/// it the input's namespace labels.
fn pool_provider(files: &[String], manifest: &mut Manifest) -> Result<PoolProvider, String> {
    let pools = super::lb_pools(files, std::mem::take(&mut manifest.pools))?;
    Ok(PoolProvider::new(pools))
}

pub fn run(args: ReconcileArgs) -> anyhow::Result<ExitCode> {
    let controllers = match Controllers::parse(&args.controllers) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut manifest = match load_telling(&args.files) {
        Ok(m) => m,
        Err(code) => return Ok(code),
    };
    let options = Options {
        max_endpoints_per_slice: args.max_endpoints_per_slice as usize,
        prefer_same_traffic_distribution: args.traffic_distribution.prefer_same(),
    };
    let mirroring_options = mirroring::Options {
        max_endpoints_per_subset: args.mirroring_max_endpoints_per_subset as usize,
    };
    let provider = match pool_provider(&args.lb_pools, &mut manifest) {
        Ok(provider) => provider,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    // `loadBalancers` is printed when the service controller had a Service to look at, so that
    // the output of a cluster without any is what it was before the controller existed.
    let load_balancer_services = controllers.load_balancer
        && (manifest.objects.services.iter()).any(|s| s.load_balancer.is_some());
    let load_balancers = LoadBalancerOptions {
        provider: Some(Arc::new(provider)),
        classes: ClassFilter(args.lb_class.as_deref().map(sliced::model::intern)),
        record_calls: true,
        ..LoadBalancerOptions::default()
    };
    let result = reconcile_snapshot_owned(
        std::mem::take(&mut manifest.objects),
        &options,
        &mirroring_options,
        controllers,
        args.seed,
        load_balancers,
    );
    let objects = render::final_objects(&result, &manifest.given);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    match args.output {
        Format::Json => render::json(&mut out, &result, &objects, load_balancer_services),
        Format::Yaml => render::yaml(&mut out, &objects),
    }
    .and_then(|()| out.flush().context("writing output"))?;
    // The process ends here: freeing every object one by one would only delay the exit (a
    // fifth of a second at a million pods).
    std::mem::forget((result, manifest));
    Ok(ExitCode::SUCCESS)
}

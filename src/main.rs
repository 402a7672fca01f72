//! The `sliced` command line.

use clap::{Parser, Subcommand};
use mimalloc::MiMalloc;

mod cli;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

/// sliced keeps Kubernetes EndpointSlices in step with Pods and Nodes, as kube-controller-manager's
/// EndpointSlice controller does, faster and with fewer writes.
#[derive(Parser)]
#[command(name = "sliced", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reconcile a snapshot of objects from files once, offline, and print the resulting objects.
    Reconcile(cli::reconcile::ReconcileArgs),
    /// Build a synthetic cluster in memory and reconcile it end to end.
    Simulate(cli::simulate::SimulateArgs),
    /// Keep a cluster's EndpointSlices and Endpoints, in place of kube-controller-manager's
    /// endpointslice, endpoint and endpointslice-mirroring controllers.
    Run(Box<cli::run::RunArgs>),
    /// The DNS records CoreDNS serves for a cluster's Services and Pods, one name's, or why a
    /// pod has none (`--explain`).
    Dns(cli::dns::DnsArgs),
    /// Replay a trace for every combination of batch period, slice size and workers, and
    /// recommend one.
    Tune(cli::tune::TuneArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // A one-shot `reconcile` keeps mimalloc's delay: pages it frees are soon used again, and
    // handing them back at once made it fault them in anew (a tenth of its time at 1M pods).
    if !matches!(cli.command, Command::Reconcile(_)) {
        sliced::allocator::return_freed_pages_at_once();
    }
    sliced::allocator::no_transparent_huge_pages();
    let result = match cli.command {
        Command::Reconcile(args) => cli::reconcile::run(args),
        Command::Simulate(args) => cli::simulate::run(args),
        Command::Run(args) => cli::run::run(*args),
        Command::Dns(args) => cli::dns::run(args),
        Command::Tune(args) => cli::tune::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

//! `sliced dns`: the records CoreDNS serves for a cluster, one name's, or why a pod has none.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use sliced::dns::{
    ContainerReadiness, DnsOptions, DnsView, Explanation, Missing, PodRecords, QueryScope, Record,
};
use sliced::model::{EndpointSlice, Node, Pod, Service};
use sliced::snapshot::reconciled_slices;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// CoreDNS's `pods` modes.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum PodsMode {
    Disabled,
    Insecure,
    Verified,
}

#[derive(Args, Debug)]
pub struct DnsArgs {
    /// A file of Kubernetes objects (YAML documents, a List, or JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    files: Vec<String>,
    /// Only the records of this name, as `dig` would ask for it.
    #[arg(value_name = "NAME")]
    name: Option<String>,
    /// The cluster zone.
    #[arg(long, default_value = sliced::dns::DEFAULT_ZONE)]
    zone: String,
    /// Use the EndpointSlices of the input as they are, instead of reconciling the input first.
    #[arg(long)]
    as_is: bool,
    /// Which `a-b-c-d.<ns>.pod.<zone>` names are answered, as CoreDNS's `pods` option
    /// (kubeadm's Corefile sets insecure).
    #[arg(long, value_enum, default_value = "insecure")]
    pods: PodsMode,
    /// Every reason the pod (or the pods of the Service) `NAMESPACE/NAME` has no name, or fewer.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "name")]
    explain: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
}

/// The objects DNS is derived from, owned.
struct Objects {
    services: Vec<Service>,
    slices: Vec<Arc<EndpointSlice>>,
    pods: Vec<Pod>,
    nodes: Vec<Node>,
}

pub fn run(args: DnsArgs) -> anyhow::Result<ExitCode> {
    let mut manifest = match super::reconcile::load_telling(&args.files) {
        Ok(m) => m,
        Err(code) => return Ok(code),
    };
    let mut snapshot = std::mem::take(&mut manifest.objects);
    let services = snapshot.services.clone();
    let pods = snapshot.pods.clone();
    let nodes = snapshot.nodes.clone();
    let slices = if args.as_is {
        snapshot.endpoint_slices.into_iter().map(Arc::new).collect()
    } else {
        // A dump of Services, slices and Pods holds no Node: each pod's node is taken to exist,
        // or the controller would leave every pod out.
        if snapshot.nodes.is_empty() {
            let names: BTreeSet<_> = (snapshot.pods.iter())
                .filter_map(|p| p.node_name.clone())
                .collect();
            snapshot.nodes = (names.into_iter())
                .map(|name| Node {
                    name,
                    ready: true,
                    ..Node::default()
                })
                .collect();
        }
        reconciled_slices(snapshot)
    };
    let objects = Objects {
        services,
        slices,
        pods,
        nodes,
    };
    let options = DnsOptions {
        zone: args.zone.trim_end_matches('.').to_owned(),
        pods: match args.pods {
            PodsMode::Disabled => PodRecords::Disabled,
            PodsMode::Insecure => PodRecords::Insecure,
            PodsMode::Verified => PodRecords::Verified,
        },
        ..DnsOptions::default()
    };
    let mut view = DnsView::new(
        &objects.services,
        objects.slices.iter().map(|s| s.as_ref()),
        &objects.pods,
        options,
    );
    if !objects.nodes.is_empty() {
        view = view.with_nodes(objects.nodes.iter().map(|n| n.name.clone()));
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if let Some(target) = &args.explain {
        let Some((namespace, name)) = target.split_once('/') else {
            eprintln!("error: --explain {target:?}: want NAMESPACE/NAME");
            return Ok(ExitCode::from(2));
        };
        let named = |ns: &str, n: &str| ns == namespace && n == name;
        if (objects.pods.iter()).any(|p| named(&p.meta.namespace, &p.meta.name)) {
            let containers = container_readiness(&args.files, namespace, name);
            let explanation = view.explain_pod(namespace, name, containers.as_deref());
            if let Some(explanation) = explanation {
                match args.output {
                    Format::Text => explanation_text(&mut out, &explanation)?,
                    Format::Json => explanation_json(&mut out, &explanation)?,
                }
            }
        } else if let Some(service) =
            (objects.services.iter()).find(|s| named(&s.meta.namespace, &s.meta.name))
        {
            let base = format!("{name}.{namespace}.svc.{}.", view.options().zone);
            let suffix = format!(".{base}");
            let mut records = view.records();
            records.retain(|r| r.name == base || r.name.ends_with(&suffix));
            print(&mut out, args.output, &records, &view.missing(service))?;
        } else {
            eprintln!("error: --explain {target}: the input holds no Pod or Service of that name");
            return Ok(ExitCode::from(2));
        }
    } else if let Some(name) = &args.name {
        let records = view.query(name);
        // A name under a Service: the pods it selects that have no name under it.
        let canonical = sliced::dns::canonical(name);
        let missing: Vec<Missing> = match sliced::dns::scope(&canonical, &view.options().zone) {
            QueryScope::Service { namespace, service } => (objects.services.iter())
                .find(|s| s.meta.namespace.as_str() == namespace && s.meta.name.as_str() == service)
                .map(|s| view.missing(s))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        print(&mut out, args.output, &records, &missing)?;
    } else {
        print(&mut out, args.output, &view.records(), &view.missing_all())?;
    }
    out.flush().context("writing output")?;
    Ok(ExitCode::SUCCESS)
}

fn record_line(r: &Record) -> String {
    format!(
        "{} {} IN {} {}",
        r.name,
        r.ttl,
        r.record_type.as_str(),
        r.data
    )
}

fn print(
    out: &mut impl Write,
    format: Format,
    records: &[Record],
    missing: &[Missing],
) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            let value = json!({"records": records, "missing": missing});
            serde_json::to_writer_pretty(&mut *out, &value)?;
            writeln!(out)?;
        }
        Format::Text => {
            for r in records {
                writeln!(out, "{}", record_line(r))?;
            }
            for m in missing {
                writeln!(out, "; {} has no name under {}:", m.pod, m.service)?;
                for reason in &m.reasons {
                    writeln!(out, ";   {}", reason.message)?;
                }
            }
        }
    }
    Ok(())
}

fn explanation_json(out: &mut impl Write, e: &Explanation) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, e)?;
    writeln!(out)?;
    Ok(())
}

fn explanation_text(out: &mut impl Write, e: &Explanation) -> anyhow::Result<()> {
    writeln!(out, "pod {}", e.pod)?;
    if e.names.is_empty() {
        writeln!(out, "names: none")?;
    } else {
        writeln!(out, "names:")?;
        for r in &e.names {
            writeln!(out, "  {}", record_line(r))?;
        }
    }
    if e.reasons.is_empty() {
        writeln!(out, "nothing keeps it from its names")?;
    } else {
        writeln!(out, "why not more:")?;
        for r in &e.reasons {
            writeln!(out, "  - {}", r.message)?;
        }
    }
    Ok(())
}

/// The readiness of the pod's containers, read from its document in the input files: the compact
/// model keeps only the pod's Ready condition. None when it cannot be read.
fn container_readiness(
    files: &[String],
    namespace: &str,
    name: &str,
) -> Option<Vec<ContainerReadiness>> {
    for file in files.iter().filter(|f| *f != "-") {
        let text = std::fs::read_to_string(file).ok()?;
        let documents: Vec<Value> = if text.trim_start().starts_with(['{', '[']) {
            vec![serde_json::from_str(&text).ok()?]
        } else {
            serde_saphyr::from_multiple(&text).ok()?
        };
        let items = documents.iter().flat_map(|d| match d["items"].as_array() {
            Some(items) => items.iter().collect::<Vec<_>>(),
            None => vec![d],
        });
        for pod in items {
            let meta = &pod["metadata"];
            if pod["kind"] == "Pod"
                && meta["name"] == name
                && meta["namespace"].as_str().unwrap_or("default") == namespace
            {
                return Some(containers_of(pod));
            }
        }
    }
    None
}

fn containers_of(pod: &Value) -> Vec<ContainerReadiness> {
    let sidecars: BTreeSet<&str> = (pod["spec"]["initContainers"].as_array().into_iter())
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str())
        .collect();
    let statuses = |key: &str| {
        (pod["status"][key].as_array().into_iter())
            .flatten()
            .filter_map(|s| Some((s["name"].as_str()?, s["ready"].as_bool().unwrap_or(false))))
            .collect::<Vec<_>>()
    };
    let mut out: Vec<ContainerReadiness> = statuses("containerStatuses")
        .into_iter()
        .map(|(name, ready)| ContainerReadiness {
            name: name.to_owned(),
            ready,
            sidecar: false,
        })
        .collect();
    out.extend(
        (statuses("initContainerStatuses").into_iter())
            .filter(|(name, _)| sidecars.contains(name))
            .map(|(name, ready)| ContainerReadiness {
                name: name.to_owned(),
                ready,
                sidecar: true,
            }),
    );
    out
}

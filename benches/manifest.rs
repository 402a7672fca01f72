//! Loading a cluster dump, as `sliced reconcile -f` reads it: real-shaped pods (managedFields,
//! probes, statuses: `fixtures/pods/deployment-pod.yaml`) in one `List`, as JSON (item by item,
//! straight into the model, in parallel) and as YAML (cut into items by line, each parsed into a
//! value tree in parallel, then the model), beside the whole-file value path both took before
//! (`yaml_whole`), as the baseline in the same run; and one pod's JSON read borrowed against read
//! into `WatchedPod`. Throughput is in pods; the whole process is timed by
//! `perf/reconcile-whole.sh`.

#[path = "../tests/support/real_pods.rs"]
mod real_pods;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

use sliced::kube::convert::{WatchedPod, pod_from_json_text, pod_from_watched};
use sliced::kube::manifest::{LoadError, Manifest, load_str, load_str_whole};

// The binary's allocator, so that the bench measures what ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SERVICES: usize = 100;

/// A `List` of the services and `pods` pods, as JSON.
fn json_list(pods: usize) -> String {
    let mut items: Vec<Vec<u8>> = (0..SERVICES)
        .map(|i| serde_json::to_vec(&real_pods::service(i)).unwrap_or_default())
        .collect();
    items.extend(real_pods::json_variants(pods, SERVICES));
    let mut text = String::from(r#"{"apiVersion":"v1","kind":"List","items":["#);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&String::from_utf8_lossy(item));
    }
    text.push_str("]}");
    text
}

/// YAML is timed on fewer pods: it is read many times slower, through value trees.
fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("manifest");
    group.sample_size(10);
    type Load = fn(&str, &str) -> Result<Manifest, LoadError>;
    let cases: [(&str, usize, Load); 4] = [
        ("json", 1_000, load_str),
        ("json", 10_000, load_str),
        ("yaml", 1_000, load_str),
        ("yaml_whole", 1_000, load_str_whole),
    ];
    for (format, pods, load) in cases {
        let json = json_list(pods);
        let text = match format {
            "json" => json,
            _ => match serde_json::from_str::<Value>(&json).map(|v| serde_saphyr::to_string(&v)) {
                Ok(Ok(yaml)) => yaml,
                _ => panic!("the generated List does not convert to YAML"),
            },
        };
        group.throughput(Throughput::Elements(pods as u64));
        let id = BenchmarkId::new(format!("load_real_pods/{format}"), pods);
        group.bench_with_input(id, &text, |b, text| {
            b.iter(|| match load("bench", black_box(text)) {
                Ok(m) => assert_eq!(m.objects.pods.len(), pods),
                Err(e) => panic!("{e}"),
            })
        });
    }
    group.finish();
}

/// One real-shaped pod's JSON into the compact pod, one core: the borrowed read `load_str` tries
/// first, beside `WatchedPod` (owned strings and k8s-openapi's condition and port types), the
/// read it falls back to and the only one before, as the baseline in the same run.
fn pod_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("manifest/pod_decode");
    let texts = real_pods::json_variants(64, SERVICES);
    let texts: Vec<&str> = texts
        .iter()
        .map(|t| std::str::from_utf8(t).unwrap_or_default())
        .collect();
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.bench_function("borrowed", |b| {
        b.iter(|| {
            for text in &texts {
                match pod_from_json_text(black_box(text)) {
                    Some(Ok(pod)) => drop(black_box(pod)),
                    _ => panic!("the borrowed read refused a real pod"),
                }
            }
        })
    });
    group.bench_function("watched_pod", |b| {
        b.iter(|| {
            for text in &texts {
                let watched: WatchedPod = match serde_json::from_str(black_box(text)) {
                    Ok(p) => p,
                    Err(e) => panic!("{e}"),
                };
                match pod_from_watched(&watched) {
                    Ok(pod) => drop(black_box(pod)),
                    Err(e) => panic!("{e}"),
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, load, pod_decode);
criterion_main!(benches);

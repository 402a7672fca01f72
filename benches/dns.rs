//! The DNS view over a generated cluster of 100,000 pods and 1,000 Services (5% headless, 10% dual
//! stack), its slices as the EndpointSlice controller writes them:
//! - every record: the view built and all its records listed, sorted;
//! - one query: a headless Service's name, and one pod's endpoint name, against the built view.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use sliced::dns::{DnsOptions, DnsView};
use sliced::model::EndpointSlice;
use sliced::sim::{self, ClusterSpec};
use sliced::snapshot::reconciled_slices;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench(c: &mut Criterion) {
    let cluster = sim::generate(&ClusterSpec::default());
    let snapshot = cluster.snapshot;
    let (services, pods) = (snapshot.services.clone(), snapshot.pods.clone());
    let slices: Vec<Arc<EndpointSlice>> = reconciled_slices(snapshot);
    let view = || {
        DnsView::new(
            &services,
            slices.iter().map(|s| s.as_ref()),
            &pods,
            DnsOptions::default(),
        )
    };
    let records = view().records();
    eprintln!(
        "dns: {} pods, {} services, {} slices: {} records",
        pods.len(),
        services.len(),
        slices.len(),
        records.len()
    );
    let headless = services
        .iter()
        .find(|s| s.is_headless())
        .map(|s| format!("{}.{}.svc.cluster.local.", s.meta.name, s.meta.namespace))
        .unwrap_or_default();
    let endpoint = records
        .iter()
        .find(|r| r.name.ends_with(&format!(".{headless}")))
        .map(|r| r.name.clone())
        .unwrap_or_default();
    assert!(!view().query(&headless).is_empty(), "{headless} answers");
    assert!(!view().query(&endpoint).is_empty(), "{endpoint} answers");

    let mut group = c.benchmark_group("dns");
    group.sample_size(10);
    group.bench_function("records of 100k pods", |b| {
        b.iter(|| black_box(view().records().len()))
    });
    let built = view();
    group.bench_function("query a headless service", |b| {
        b.iter(|| black_box(built.query(&headless).len()))
    });
    group.bench_function("query an endpoint name", |b| {
        b.iter(|| black_box(built.query(&endpoint).len()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The engine under faults: random churn traces replayed with a flaky API server, late, duplicated
//! and expiring watches, others editing and deleting managed objects, a lagging garbage collector,
//! resyncs, restarts and leader changes. The incremental engine and an engine that syncs in full
//! every time must write exactly the same, pass the invariant after every sync, never write an
//! object sliced does not manage, and once the faults stop leave what the independent model of
//! upstream's rules wants.

use std::time::Duration;

use proptest::prelude::*;

use sliced::controllers::Controllers;
use sliced::engine::{AdaptiveBatch, EngineOptions};
use sliced::model::{EndpointSlice, Endpoints};
use sliced::replay::{FaultProfile, ReplayOptions, ReplayResult, Step, replay};
use sliced::sim::{self, ClusterSpec, TraceKind};
use sliced::snapshot::Snapshot;

use crate::model;

/// One run's outcome, and the cluster as it is at the end (what the model reads).
pub struct Run {
    pub result: ReplayResult,
    pub final_state: Snapshot,
}

pub struct Setup {
    pub spec: ClusterSpec,
    pub kind: TraceKind,
    pub steps: usize,
    pub max: usize,
    pub batch_period: Duration,
    /// Both controllers' batch period is `auto` with these bounds (`batch_period` its floor).
    pub adaptive: Option<AdaptiveBatch>,
    pub profile: FaultProfile,
}

pub fn run(setup: &Setup, incremental: bool) -> Run {
    let cluster = sim::generate(&setup.spec);
    let trace = sim::trace(&cluster, setup.kind, setup.spec.seed, setup.steps);
    // The trace starts once the cold start has settled, as in `sliced simulate`.
    let offset = Duration::from_secs(10);
    let mut steps = cluster.snapshot.as_steps();
    steps.extend(trace.iter().map(|s| Step {
        at: s.at + offset,
        ..s.clone()
    }));
    let options = ReplayOptions {
        engine: EngineOptions {
            incremental,
            workers: 1,
            check_invariants: true,
            controllers: Controllers::ALL,
            batch_period: setup.batch_period,
            endpoints_batch_period: setup.batch_period,
            adaptive_batch: setup.adaptive,
            endpoints_adaptive_batch: setup.adaptive,
            reconcile: sliced::reconcile::Options {
                max_endpoints_per_slice: setup.max,
                prefer_same_traffic_distribution: false,
            },
            ..EngineOptions::default()
        },
        keep_records: true,
        until: None,
        seed: setup.spec.seed,
        faults: setup.profile.clone(),
        ..ReplayOptions::default()
    };
    let mut result = replay(&steps, &options);
    // As the API server holds it at the end: others may have recreated Services.
    let final_state = result
        .final_state
        .take()
        .expect("faults keep the final state");
    Run {
        result,
        final_state,
    }
}

/// Everything a run must hold on its own: the invariant after every sync, no write to an object
/// sliced does not manage, nothing left unsettled, and the model's content.
pub fn check(run: &Run, max: usize) -> Result<(), String> {
    let r = &run.result;
    if r.stats.invariant_violations > 0 {
        return Err(format!(
            "{} invariant violations: {:?}",
            r.stats.invariant_violations, r.violations
        ));
    }
    let report = r.faults.as_ref().ok_or("no fault report")?;
    if !report.unmanaged_writes.is_empty() {
        return Err(format!("unmanaged writes: {:?}", report.unmanaged_writes));
    }
    match &r.unsettled {
        Some(unsettled) if unsettled.is_empty() => {}
        other => return Err(format!("unsettled: {other:?}")),
    }
    let slices: Vec<&EndpointSlice> = r.objects.iter().filter_map(|o| o.as_slice()).collect();
    let (observed, broken) = model::observed_slices(&slices, &run.final_state.services, max);
    if !broken.is_empty() {
        return Err(format!("slices breaking the rules: {broken:?}"));
    }
    let differences = model::differences(&model::slices(&run.final_state), &observed);
    if !differences.is_empty() {
        return Err(format!("slices differ from the model: {differences:#?}"));
    }
    let endpoints: Vec<&Endpoints> = r.objects.iter().filter_map(|o| o.as_endpoints()).collect();
    let differences = model::differences(
        &model::endpoints(&run.final_state),
        &model::observed_endpoints(&endpoints),
    );
    if !differences.is_empty() {
        return Err(format!("Endpoints differ from the model: {differences:#?}"));
    }
    Ok(())
}

fn writes(r: &ReplayResult) -> Vec<String> {
    r.writes
        .iter()
        .map(|w| format!("{} {:?} {:?}", w.at.as_secs_f64(), w.verb, w.object))
        .collect()
}

/// Where two lists of writes first differ, shortly.
pub fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let short =
        |s: Option<&String>| s.map_or("nothing".to_string(), |s| s.chars().take(600).collect());
    let i = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    Some(format!(
        "write {i} of {} and {}:\n incremental: {}\n full: {}",
        a.len(),
        b.len(),
        short(a.get(i)),
        short(b.get(i))
    ))
}

/// An adaptive batch period whose budget any churn exceeds, so that its windows move.
const TIGHT_BUDGET: AdaptiveBatch = AdaptiveBatch {
    max_batch_period: Duration::from_secs(2),
    write_qps: 1.0,
};

fn small_spec(seed: u64, pods: usize) -> ClusterSpec {
    ClusterSpec {
        seed,
        pods,
        services: 8,
        namespaces: 2,
        huge_services: 0,
        max_service_pods: 120,
        ..ClusterSpec::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn under_faults_incremental_and_full_syncs_write_the_same_and_settle_right(
        seed in 0u64..1_000_000,
        kind in prop::sample::select(TraceKind::ALL.to_vec()),
        pods in 40usize..300,
        max in 2usize..20,
        // u64::MAX: `auto`, with a budget so low that windows widen (up to 2 s).
        batch in prop::sample::select(vec![0u64, 500, u64::MAX]),
        chaos in any::<bool>(),
    ) {
        let setup = Setup {
            spec: small_spec(seed, pods),
            kind,
            steps: 200,
            max,
            batch_period: Duration::from_millis(if batch == u64::MAX { 0 } else { batch }),
            adaptive: (batch == u64::MAX).then_some(TIGHT_BUDGET),
            profile: if chaos { FaultProfile::chaos() } else { FaultProfile::flaky_api() },
        };
        let full = run(&setup, false);
        let inc = run(&setup, true);
        prop_assert_eq!(full.result.stats.incremental_syncs, 0);
        let injected = inc.result.faults.as_ref().map_or(0, |f| f.counts.total());
        prop_assert!(injected > 0, "no fault injected");
        if let Err(e) = check(&full, max) {
            return Err(TestCaseError::fail(format!("full-sync engine: {e}")));
        }
        if let Err(e) = check(&inc, max) {
            return Err(TestCaseError::fail(format!("incremental engine: {e}")));
        }
        // The same world (faults follow the writes), so the same writes, in the same order.
        if let Some(difference) = first_difference(&writes(&inc.result), &writes(&full.result)) {
            return Err(TestCaseError::fail(format!("writes differ: {difference}")));
        }
        prop_assert_eq!(
            format!("{:?}", inc.result.objects),
            format!("{:?}", full.result.objects)
        );
    }
}

/// A longer chaos run of every trace kind, checked the same way, and reporting what it survived:
/// the figures of the closing note come from here.
#[test]
fn chaos_on_every_trace_kind_settles_right() {
    let mut survived = sliced::replay::FaultCounts::default();
    for (i, kind) in TraceKind::ALL.iter().enumerate() {
        let setup = Setup {
            spec: small_spec(1000 + i as u64, 400),
            kind: *kind,
            steps: 1500,
            max: 10,
            batch_period: Duration::from_millis(200),
            adaptive: None,
            profile: FaultProfile::chaos(),
        };
        let inc = run(&setup, true);
        if let Err(e) = check(&inc, setup.max) {
            panic!("{kind}: {e}");
        }
        let report = inc.result.faults.as_ref().expect("faults");
        survived.add(&report.counts);
        assert!(
            inc.result.stats.incremental_syncs > 0,
            "{kind}: no incremental sync"
        );
        eprintln!(
            "{kind}: {} faults ({:?}); {} syncs, {} incremental, {} invariant checks",
            report.counts.total(),
            report.counts,
            inc.result.stats.syncs,
            inc.result.stats.incremental_syncs,
            inc.result.stats.invariant_checks
        );
    }
    assert!(
        survived.restarts > 0 && survived.leader_changes > 0,
        "{survived:?}"
    );
    assert!(
        survived.watch_expiries > 0 && survived.answers_lost > 0,
        "{survived:?}"
    );
    assert!(
        survived.slices_deleted > 0 && survived.slices_duplicated > 0,
        "{survived:?}"
    );
}

/// `auto` under chaos: windows that widen and narrow lose no endpoint and keep nothing stale.
#[test]
fn chaos_with_an_adaptive_batch_period_settles_right() {
    for (i, kind) in [
        TraceKind::RollingUpdate,
        TraceKind::ReadinessFlap,
        TraceKind::Mixed,
    ]
    .into_iter()
    .enumerate()
    {
        let setup = Setup {
            spec: small_spec(2000 + i as u64, 400),
            kind,
            steps: 1500,
            max: 10,
            batch_period: Duration::ZERO,
            adaptive: Some(TIGHT_BUDGET),
            profile: FaultProfile::chaos(),
        };
        let inc = run(&setup, true);
        if let Err(e) = check(&inc, setup.max) {
            panic!("{kind}: {e}");
        }
        let full = run(&setup, false);
        if let Some(difference) = first_difference(&writes(&inc.result), &writes(&full.result)) {
            panic!("{kind}: writes differ: {difference}");
        }
        // The windows did move: the writes are not those of no batch period at all.
        let unbatched = run(
            &Setup {
                adaptive: None,
                ..setup
            },
            true,
        );
        assert!(
            first_difference(&writes(&inc.result), &writes(&unbatched.result)).is_some(),
            "{kind}: auto wrote exactly as 0s"
        );
    }
}

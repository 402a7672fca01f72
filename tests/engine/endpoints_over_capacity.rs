//! The Endpoints controller's address cache over the 1,000-address cap, where it builds only the
//! addresses the cut keeps: its plans against a full build's, as pods move across the cut.

use std::sync::Arc;

use proptest::prelude::*;

use sliced::model::{Endpoints, Name, Pod};
use sliced::reconcile::endpoints::{
    ANNOTATION_OVER_CAPACITY, AddressCache, Edit, EndpointsInput, EndpointsPlan, sync_settled,
};

use crate::endpoints_properties::{check_cached, keep, store};

/// Pods that can exist; between 950 and all of them do.
const SLOTS: usize = 1_400;

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Both of upstream's cuts: more ready addresses than the cap (every not-ready one goes), and
    /// fewer (not-ready ones fill what is left of it). Readiness flips, deletions and returns move
    /// addresses in and out of what is kept, and across the cap itself.
    #[test]
    fn an_address_cache_over_capacity_plans_as_a_full_build(
        present in 950usize..SLOTS,
        not_ready_every in 2usize..60,
        steps in prop::collection::vec(prop::collection::vec((0..SLOTS, 0u8..3), 1..4), 1..20),
    ) {
        let scenario = sliced::sim::single_service(SLOTS);
        let svc = Arc::new(scenario.service);
        let all: Vec<Arc<Pod>> = scenario
            .pods
            .into_iter()
            .enumerate()
            .map(|(i, mut pod)| {
                pod.ready = i % not_ready_every != 0;
                Arc::new(pod)
            })
            .collect();
        let mut held: Vec<Option<Arc<Pod>>> = all
            .iter()
            .enumerate()
            .map(|(i, pod)| (i < present).then(|| Arc::clone(pod)))
            .collect();
        let members = |held: &[Option<Arc<Pod>>]| -> Vec<Arc<Pod>> {
            held.iter().flatten().cloned().collect()
        };
        let mut cache = AddressCache::build(&svc, &members(&held));
        let mut current: Option<Endpoints> = None;
        for (n, step) in steps.into_iter().enumerate() {
            // A batch of changes: the change log names each pod once, as it is at the end (a
            // pod changed and changed back is named too).
            let mut changed: Vec<(Name, Option<Arc<Pod>>)> = Vec::new();
            for (slot, change) in step {
                let after = match (&held[slot], change) {
                    (Some(pod), 0 | 1) => {
                        let mut flipped = Pod::clone(pod);
                        flipped.ready = !flipped.ready;
                        Some(Arc::new(flipped))
                    }
                    (Some(_), _) => None,
                    (None, _) => Some(Arc::clone(&all[slot])),
                };
                let name = &all[slot].meta.name;
                changed.retain(|(n, _)| n != name);
                changed.push((name.clone(), after.clone()));
                held[slot] = after;
            }
            let pods = members(&held);
            let edit = keep(&mut cache, &svc, &changed, &pods);
            let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
            let input = EndpointsInput {
                service: &svc,
                pods: &refs,
                current: current.as_ref(),
                trigger_time: svc.meta.creation_timestamp,
                current_is_own_write: false,
            };
            let Some(cache) = cache.as_mut() else {
                panic!("pods of distinct identities are always kept");
            };
            let full = check_cached(&svc, cache, edit, &input, n)?;
            // The scenario is what it claims: over the cap whenever more than 1,000 pods exist.
            prop_assert_eq!(full.truncated, pods.len() > 1_000);
            store(full, n, &mut current);
        }
    }
}

/// One sync from `cache` (checked against the full build), its write stored.
fn sync_once(
    svc: &Arc<sliced::model::Service>,
    cache: &mut AddressCache,
    pods: &[Arc<Pod>],
    edit: Edit,
    n: usize,
    current: &mut Option<Endpoints>,
) -> EndpointsPlan {
    let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    let input = EndpointsInput {
        service: svc,
        pods: &refs,
        current: current.as_ref(),
        trigger_time: svc.meta.creation_timestamp,
        current_is_own_write: false,
    };
    let plan = match check_cached(svc, cache, edit, &input, n) {
        Ok(plan) => plan,
        Err(e) => panic!("the cached sync plans as the full one: {e}"),
    };
    store(plan.clone(), n, current);
    plan
}

/// A pod past the last address the cut keeps moves nothing the object holds: the settled object
/// answers the sync, with the counts of now. A pod that serves other ports past the cut, one gone
/// that brings the service down to the cap, and one the object holds, each change the object.
#[test]
fn a_change_past_the_cut_is_decided_by_the_settled_object() {
    let mut scenario = sliced::sim::single_service(1_002);
    // A named port, served by every pod alike until one pod changes template.
    sliced::sim::two_templates(&mut scenario.service, &mut scenario.pods);
    let other_template = Arc::clone(&scenario.pods[1].named_ports);
    let one_template = Arc::clone(&scenario.pods[0].named_ports);
    for pod in &mut scenario.pods {
        pod.named_ports = Arc::clone(&one_template);
    }
    let svc = Arc::new(scenario.service);
    let mut pods: Vec<Arc<Pod>> = scenario.pods.into_iter().map(Arc::new).collect();
    let Some(mut cache) = AddressCache::build(&svc, &pods) else {
        panic!("pods of distinct identities are always kept");
    };
    let mut current: Option<Endpoints> = None;
    let created = sync_once(&svc, &mut cache, &pods, Edit::Moved, 0, &mut current);
    assert!(created.truncated);
    let Some(written) = &current else {
        panic!("the first sync creates the object");
    };
    let held: Vec<String> = written.subsets[0]
        .addresses
        .iter()
        .map(|a| a.ip.to_string())
        .collect();
    assert_eq!(held.len(), 1_000);
    let ip = |p: &Pod| p.ips()[0].to_string();
    let past: Vec<String> = pods
        .iter()
        .map(|p| ip(p))
        .filter(|ip| !held.contains(ip))
        .collect();
    let inside = ip(&pods[0]);
    assert!(past.len() == 2 && held.contains(&inside));
    let at = |pods: &[Arc<Pod>], which: &str| pods.iter().position(|p| ip(p) == which);
    let change = |pods: &mut Vec<Arc<Pod>>, which: &str, how: &dyn Fn(&mut Pod)| {
        let Some(at) = at(pods, which) else {
            panic!("pod {which} is there");
        };
        let mut changed = Pod::clone(&pods[at]);
        how(&mut changed);
        pods[at] = Arc::new(changed);
        vec![(pods[at].meta.name.clone(), Some(Arc::clone(&pods[at])))]
    };
    let unready = |p: &mut Pod| p.ready = false;

    // Past the cut: decided without a comparison, and nothing is written.
    let edit = cache.apply(&svc, &change(&mut pods, &past[0], &unready));
    assert_eq!(edit, Edit::PastCut);
    let Some(settled) = sync_settled(&svc, current.as_ref(), &cache) else {
        panic!("the object settled is still the one the store holds");
    };
    assert_eq!(
        (settled.write, settled.ready, settled.not_ready),
        (None, 1_001, 1)
    );
    let plan = sync_once(&svc, &mut cache, &pods, edit, 1, &mut current);
    assert_eq!(plan.write, None);
    let Some(gone) = at(&pods, &past[0]).map(|at| pods.remove(at)) else {
        panic!("pod {} is there", past[0]);
    };
    let edit = cache.apply(&svc, &[(gone.meta.name.clone(), None)]);
    assert_eq!(edit, Edit::PastCut);
    let plan = sync_once(&svc, &mut cache, &pods, edit, 2, &mut current);
    assert_eq!((plan.write, plan.ready, plan.not_ready), (None, 1_001, 0));

    // Past the cut, but serving other ports: a second subset takes a share of the cut.
    let template = |named: &Arc<[sliced::model::ContainerPort]>| {
        let named = Arc::clone(named);
        move |p: &mut Pod| p.named_ports = Arc::clone(&named)
    };
    let edit = cache.apply(
        &svc,
        &change(&mut pods, &past[1], &template(&other_template)),
    );
    assert_eq!(edit, Edit::Moved);
    let plan = sync_once(&svc, &mut cache, &pods, edit, 3, &mut current);
    assert!(plan.write.is_some());
    let edit = cache.apply(&svc, &change(&mut pods, &past[1], &template(&one_template)));
    assert_eq!(edit, Edit::Moved);
    sync_once(&svc, &mut cache, &pods, edit, 4, &mut current);

    // Past the cut, but the service falls to the cap: the object is cut no longer.
    let Some(gone) = at(&pods, &past[1]).map(|at| pods.remove(at)) else {
        panic!("pod {} is there", past[1]);
    };
    let edit = cache.apply(&svc, &[(gone.meta.name.clone(), None)]);
    assert_eq!(edit, Edit::Moved);
    let plan = sync_once(&svc, &mut cache, &pods, edit, 5, &mut current);
    assert!(!plan.truncated && plan.write.is_some());
    let Some(now) = &current else {
        panic!("the object is there");
    };
    assert!(!now.meta.annotations.contains_key(ANNOTATION_OVER_CAPACITY));

    // In the object: it must change.
    let edit = cache.apply(&svc, &change(&mut pods, &inside, &unready));
    assert_eq!(edit, Edit::Moved);
    let plan = sync_once(&svc, &mut cache, &pods, edit, 6, &mut current);
    assert!(plan.write.is_some());
}

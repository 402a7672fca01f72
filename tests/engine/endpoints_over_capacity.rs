//! The Endpoints controller's address cache over the 1,000-address cap, where it builds only the
//! addresses the cut keeps: its plans against a full build's, as pods move across the cut.

use std::sync::Arc;

use proptest::prelude::*;

use sliced::model::{Endpoints, Name, Pod};
use sliced::reconcile::endpoints::{AddressCache, EndpointsInput};

use crate::endpoints_properties::{check_cached, keep, store};

/// Pods that can exist; between 950 and all of them do.
const SLOTS: usize = 1_200;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Both of upstream's cuts: more ready addresses than the cap (every not-ready one goes), and
    /// fewer (not-ready ones fill what is left of it). Readiness flips, deletions and returns move
    /// addresses in and out of what is kept, and across the cap itself.
    #[test]
    fn an_address_cache_over_capacity_plans_as_a_full_build(
        present in 950usize..SLOTS,
        not_ready_every in 2usize..60,
        steps in prop::collection::vec((0..SLOTS, 0u8..3), 1..20),
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
        for (n, (slot, change)) in steps.into_iter().enumerate() {
            let after = match (&held[slot], change) {
                (Some(pod), 0 | 1) => {
                    let mut flipped = Pod::clone(pod);
                    flipped.ready = !flipped.ready;
                    Some(Arc::new(flipped))
                }
                (Some(_), _) => None,
                (None, _) => Some(Arc::clone(&all[slot])),
            };
            let changed: Vec<(Name, Option<Arc<Pod>>)> =
                vec![(all[slot].meta.name.clone(), after.clone())];
            held[slot] = after;
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

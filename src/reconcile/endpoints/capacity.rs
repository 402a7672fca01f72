//! The 1,000-address cap of an Endpoints object. Beyond it the object is truncated, ready addresses
//! kept first, each subset keeping a share proportional to its size (rounded up, so the first
//! subsets are favoured and the last may get less), and annotated as over capacity.

use crate::model::{Endpoints, Labels};

use super::desired::Group;

/// The most addresses (ready and not ready) one Endpoints object holds.
pub const MAX_CAPACITY: usize = 1000;
/// Set, with the value [`OVER_CAPACITY_TRUNCATED`], on an Endpoints object that was truncated.
pub const ANNOTATION_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
pub const OVER_CAPACITY_TRUNCATED: &str = "truncated";

/// Upstream's `capacityAnnotationSetCorrectly`: the object holds no more than the cap and carries
/// no over-capacity annotation. An object over the cap is never "correct": it must be truncated.
pub(crate) fn annotation_set_correctly(annotations: &Labels, current: &Endpoints) -> bool {
    let count: usize = current
        .subsets
        .iter()
        .map(|s| s.addresses.len() + s.not_ready_addresses.len())
        .sum();
    count <= MAX_CAPACITY && !annotations.contains_key(ANNOTATION_OVER_CAPACITY)
}

/// Cuts the groups (in their final order) down to the cap; true when anything was cut.
///
/// More ready addresses than the cap: the cap is shared among ready addresses and every not-ready
/// address goes. Otherwise every ready address stays and what is left of the cap is shared among
/// the not-ready ones. The arithmetic is upstream's, in f64, so the shares match to the address.
pub(crate) fn truncate(groups: &mut [Group]) -> bool {
    let ready: usize = groups.iter().map(|g| g.ready.len()).sum();
    let not_ready: usize = groups.iter().map(|g| g.not_ready.len()).sum();
    if ready + not_ready <= MAX_CAPACITY {
        return false;
    }
    let cut_ready = ready > MAX_CAPACITY;
    let (budget, total) = if cut_ready {
        (MAX_CAPACITY, ready)
    } else {
        (MAX_CAPACITY - ready, not_ready)
    };
    let mut left = budget;
    for g in groups {
        let list = if cut_ready {
            g.not_ready.clear();
            &mut g.ready
        } else {
            &mut g.not_ready
        };
        let share = ((list.len() as f64 / total as f64) * budget as f64).ceil() as usize;
        list.truncate(share.min(left));
        left -= list.len();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(ready: &[u32], not_ready: &[u32]) -> Vec<Group> {
        ready
            .iter()
            .zip(not_ready)
            .map(|(&r, &n)| Group {
                ports: Vec::new(),
                ready: (0..r).collect(),
                not_ready: (0..n).collect(),
            })
            .collect()
    }

    fn sizes(groups: &[Group]) -> (Vec<usize>, Vec<usize>) {
        (
            groups.iter().map(|g| g.ready.len()).collect(),
            groups.iter().map(|g| g.not_ready.len()).collect(),
        )
    }

    // The expected figures are those of upstream's own unit test of the same distribution.
    #[test]
    fn not_ready_addresses_share_what_ready_ones_leave() {
        let mut g = groups(&[90, 110, 50, 10, 20], &[101, 200, 200, 201, 298]);
        assert!(truncate(&mut g));
        assert_eq!(
            sizes(&g),
            (vec![90, 110, 50, 10, 20], vec![73, 144, 144, 145, 214])
        );
    }

    #[test]
    fn too_many_ready_addresses_drop_every_not_ready_one() {
        let mut g = groups(&[205, 400, 402, 400, 693], &[100, 200, 200, 200, 300]);
        assert!(truncate(&mut g));
        assert_eq!(
            sizes(&g),
            (vec![98, 191, 192, 191, 328], vec![0, 0, 0, 0, 0])
        );
    }

    #[test]
    fn exactly_the_cap_is_untouched() {
        let mut g = groups(&[600, 200], &[100, 100]);
        assert!(!truncate(&mut g));
        assert_eq!(sizes(&g), (vec![600, 200], vec![100, 100]));
        let mut one_more = groups(&[1001], &[0]);
        assert!(truncate(&mut one_more));
        assert_eq!(sizes(&one_more), (vec![1000], vec![0]));
    }
}

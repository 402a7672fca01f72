//! The held addresses of one family as maximal runs, so that "the lowest free address at or
//! after x" is one ordered-map lookup however many addresses are held.

use std::collections::BTreeMap;

/// Held addresses as maximal runs `start -> end` (inclusive): no two runs touch or overlap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunSet {
    runs: BTreeMap<u128, u128>,
}

impl RunSet {
    /// The run containing `x`, if any.
    fn run_of(&self, x: u128) -> Option<(u128, u128)> {
        let (&start, &end) = self.runs.range(..=x).next_back()?;
        (end >= x).then_some((start, end))
    }

    /// Whether `x` is held.
    pub(crate) fn contains(&self, x: u128) -> bool {
        self.run_of(x).is_some()
    }

    /// The lowest address at or after `x` that is not held; `None` past the top of the space.
    pub(crate) fn first_free_from(&self, x: u128) -> Option<u128> {
        match self.run_of(x) {
            Some((_, end)) => end.checked_add(1),
            None => Some(x),
        }
    }

    /// Marks `x` held.
    pub(crate) fn insert(&mut self, x: u128) {
        if self.contains(x) {
            return;
        }
        let before = x
            .checked_sub(1)
            .and_then(|p| self.run_of(p))
            .map(|(start, _)| start);
        let after = x
            .checked_add(1)
            .and_then(|n| self.runs.get(&n).map(|&end| (n, end)));
        let start = before.unwrap_or(x);
        let end = match after {
            Some((next, end)) => {
                self.runs.remove(&next);
                end
            }
            None => x,
        };
        self.runs.insert(start, end);
    }

    /// Marks `x` free.
    pub(crate) fn remove(&mut self, x: u128) {
        let Some((start, end)) = self.run_of(x) else {
            return;
        };
        self.runs.remove(&start);
        if start < x {
            self.runs.insert(start, x - 1);
        }
        if x < end {
            self.runs.insert(x + 1, end);
        }
    }

    /// Whether nothing is held.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The runs, lowest first (for the tests' cross-checks).
    #[cfg(test)]
    pub(crate) fn runs(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        self.runs.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn merges_and_splits() {
        let mut s = RunSet::default();
        for x in [5, 7, 6, 9] {
            s.insert(x);
        }
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(5, 7), (9, 9)]);
        assert_eq!(s.first_free_from(5), Some(8));
        assert_eq!(s.first_free_from(8), Some(8));
        assert_eq!(s.first_free_from(9), Some(10));
        s.remove(6);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(5, 5), (7, 7), (9, 9)]);
        s.insert(8);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(5, 5), (7, 9)]);
        s.insert(u128::MAX);
        assert_eq!(s.first_free_from(u128::MAX), None);
        s.insert(0);
        s.remove(0);
        s.remove(0);
        assert_eq!(s.first_free_from(0), Some(0));
    }

    proptest! {
        #[test]
        fn agrees_with_a_plain_set(ops in prop::collection::vec((any::<bool>(), 0u128..40), 0..200)) {
            let mut s = RunSet::default();
            let mut model = BTreeSet::new();
            for (add, x) in ops {
                if add { s.insert(x); model.insert(x); } else { s.remove(x); model.remove(&x); }
                let expanded: BTreeSet<u128> = s.runs().flat_map(|(a, b)| a..=b).collect();
                prop_assert_eq!(&expanded, &model);
                let runs: Vec<_> = s.runs().collect();
                for w in runs.windows(2) {
                    prop_assert!(w[0].1 + 1 < w[1].0, "runs touch: {:?}", w);
                }
                for y in 0u128..42 {
                    let expect = (y..).find(|v| !model.contains(v));
                    prop_assert_eq!(s.first_free_from(y), expect);
                }
            }
        }
    }
}

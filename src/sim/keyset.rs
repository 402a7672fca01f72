//! A set with reproducible random picks.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

use ahash::RandomState;

use super::rng::Rng;

/// Items in insertion order with O(1) removal (the last item takes the removed one's place): random
/// picks that are reproducible, which a hash map's iteration order is not.
pub(super) struct KeySet<K> {
    items: Vec<K>,
    index: HashMap<K, usize, RandomState>,
}

impl<K: Hash + Eq + Clone> KeySet<K> {
    pub(super) fn new() -> Self {
        KeySet {
            items: Vec::new(),
            index: HashMap::default(),
        }
    }

    /// Room for `n` items before either part grows.
    pub(super) fn with_capacity(n: usize) -> Self {
        KeySet {
            items: Vec::with_capacity(n),
            index: HashMap::with_capacity_and_hasher(n, RandomState::new()),
        }
    }

    pub(super) fn insert(&mut self, key: K) {
        if let Entry::Vacant(slot) = self.index.entry(key) {
            self.items.push(slot.key().clone());
            slot.insert(self.items.len() - 1);
        }
    }

    pub(super) fn remove(&mut self, key: &K) {
        let Some(i) = self.index.remove(key) else {
            return;
        };
        self.items.swap_remove(i);
        if let Some(moved) = self.items.get(i) {
            self.index.insert(moved.clone(), i);
        }
    }

    pub(super) fn pick(&self, rng: &mut Rng) -> Option<&K> {
        self.items.get(rng.below(self.items.len()))
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn contains(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    /// In a reproducible order.
    pub(super) fn iter(&self) -> std::slice::Iter<'_, K> {
        self.items.iter()
    }
}

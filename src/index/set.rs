//! Small building blocks: the hasher every index map uses, and a set of pod names that stays inline
//! while small.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::LazyLock;

use hashbrown::HashSet;
use smallvec::SmallVec;

use crate::model::Name;

/// A label pair `(key, value)`, both interned.
pub(crate) type Pair = (Name, Name);

/// A label pair borrowed, to look a [`Pair`] up without cloning its names: interned names are
/// reference counted, and a pod event looks up every pair the pod carries.
#[derive(Clone, Copy)]
pub(crate) struct PairRef<'a>(pub(crate) &'a Name, pub(crate) &'a Name);

impl Hash for PairRef<'_> {
    /// As a `(Name, Name)` tuple hashes.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl hashbrown::Equivalent<Pair> for PairRef<'_> {
    fn equivalent(&self, pair: &Pair) -> bool {
        *self.0 == pair.0 && *self.1 == pair.1
    }
}

static SEED: LazyLock<ahash::RandomState> = LazyLock::new(ahash::RandomState::new);

/// A zero-sized hasher builder with one random seed per process: an index holds thousands of small
/// maps, and a 32-byte `RandomState` in each would cost more than many of their contents.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seeded;

impl BuildHasher for Seeded {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        SEED.build_hasher()
    }
}

pub(crate) type Map<K, V> = hashbrown::HashMap<K, V, Seeded>;

/// Names kept inline up to this many: most label pairs that are not selector targets are carried by
/// one pod (a StatefulSet pod name) or a few (a template hash).
const INLINE: usize = 3;
/// Above this many, a linear scan costs more than hashing.
const SCAN_LIMIT: usize = 16;

/// A set of pod names. Small sets are a vector scanned linearly; large ones are hashed.
#[derive(Debug)]
pub(crate) enum NameSet {
    Small(SmallVec<[Name; INLINE]>),
    Large(HashSet<Name, Seeded>),
}

impl Default for NameSet {
    fn default() -> Self {
        NameSet::Small(SmallVec::new())
    }
}

impl NameSet {
    /// Adds `name`; false when it was already there.
    pub(crate) fn insert(&mut self, name: Name) -> bool {
        match self {
            NameSet::Small(v) => {
                if v.contains(&name) {
                    return false;
                }
                if v.len() < SCAN_LIMIT {
                    v.push(name);
                } else {
                    let mut set: HashSet<Name, Seeded> =
                        HashSet::with_capacity_and_hasher(v.len() * 2, Seeded);
                    set.extend(v.drain(..));
                    set.insert(name);
                    *self = NameSet::Large(set);
                }
                true
            }
            NameSet::Large(set) => set.insert(name),
        }
    }

    /// Removes `name`; false when it was not there.
    pub(crate) fn remove(&mut self, name: &Name) -> bool {
        match self {
            NameSet::Small(v) => match v.iter().position(|n| n == name) {
                Some(i) => {
                    v.swap_remove(i);
                    true
                }
                None => false,
            },
            NameSet::Large(set) => {
                let removed = set.remove(name);
                // Shrink a set that emptied out after a scale-down, or it keeps its peak size.
                if removed && set.len() * 4 < set.capacity() {
                    set.shrink_to_fit();
                }
                removed
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            NameSet::Small(v) => v.len(),
            NameSet::Large(set) => set.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn iter(&self) -> NameSetIter<'_> {
        match self {
            NameSet::Small(v) => NameSetIter::Small(v.iter()),
            NameSet::Large(set) => NameSetIter::Large(set.iter()),
        }
    }
}

pub(crate) enum NameSetIter<'a> {
    Small(std::slice::Iter<'a, Name>),
    Large(hashbrown::hash_set::Iter<'a, Name>),
}

impl<'a> Iterator for NameSetIter<'a> {
    type Item = &'a Name;

    fn next(&mut self) -> Option<&'a Name> {
        match self {
            NameSetIter::Small(it) => it.next(),
            NameSetIter::Large(it) => it.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_pair_finds_its_owned_pair() {
        let mut map: Map<Pair, u32> = Map::default();
        for (i, (k, v)) in [("app", "web"), ("app", "db"), ("tier", "web")]
            .iter()
            .enumerate()
        {
            map.insert((Name::new(k), Name::new(v)), i as u32);
        }
        let (app, web, db, tier) = (
            Name::new("app"),
            Name::new("web"),
            Name::new("db"),
            Name::new("tier"),
        );
        assert_eq!(map.get(&PairRef(&app, &web)), Some(&0));
        assert_eq!(map.get(&PairRef(&app, &db)), Some(&1));
        assert_eq!(map.get(&PairRef(&tier, &web)), Some(&2));
        assert_eq!(map.get(&PairRef(&web, &app)), None);
        assert_eq!(map.get(&PairRef(&tier, &db)), None);
    }

    #[test]
    fn grows_from_inline_to_hashed_and_back_to_empty() {
        let names: Vec<Name> = (0..40).map(|i| Name::new(&format!("pod-{i}"))).collect();
        let mut set = NameSet::default();
        for n in &names {
            assert!(set.insert(n.clone()));
            assert!(!set.insert(n.clone()));
        }
        assert!(matches!(set, NameSet::Large(_)));
        assert_eq!(set.len(), 40);
        assert_eq!(set.iter().count(), 40);
        for n in &names {
            assert!(set.remove(n));
            assert!(!set.remove(n));
        }
        assert!(set.is_empty());
    }
}

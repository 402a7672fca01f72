//! Label and annotation maps, kept as sorted pairs: small, cheap to compare and to iterate in order.
//!
//! A map is an immutable shared slice. Maps built from pairs (objects as they arrive, selectors) are
//! shared by content: the pods of one template carry the same labels, and hold one copy of them.

use std::sync::{Arc, LazyLock};

use ahash::RandomState;
use hashbrown::HashSet;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::intern::{Name, intern};

type Pairs = Arc<[(Name, Name)]>;

/// A string map sorted by key. Used for labels, annotations and selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Pairs);

const SHARDS: usize = 16;

/// One shard of the maps in use. A map only the shard holds is dropped when the shard has doubled
/// since it was last swept, so a map lives no longer than its last user by more than that.
struct Shard {
    maps: HashSet<Pairs, RandomState>,
    sweep_at: usize,
}

struct Shared {
    shards: [Mutex<Shard>; SHARDS],
    hasher: RandomState,
}

static SHARED: LazyLock<Shared> = LazyLock::new(|| Shared {
    shards: std::array::from_fn(|_| {
        Mutex::new(Shard {
            maps: HashSet::with_hasher(RandomState::new()),
            sweep_at: 64,
        })
    }),
    hasher: RandomState::new(),
});

/// The shared copy of `pairs` (sorted, keys unique), storing it on first sight.
fn shared(pairs: Vec<(Name, Name)>) -> Pairs {
    if pairs.is_empty() {
        // The empty slice takes no allocation.
        return Pairs::default();
    }
    let shared = &*SHARED;
    let shard = (shared.hasher.hash_one(pairs.as_slice()) as usize) % SHARDS;
    let mut shard = shared.shards[shard].lock();
    if let Some(existing) = shard.maps.get(pairs.as_slice()) {
        return existing.clone();
    }
    if shard.maps.len() >= shard.sweep_at {
        shard.maps.retain(|m| Arc::strong_count(m) > 1);
        shard.sweep_at = (shard.maps.len() * 2).max(64);
    }
    let map: Pairs = pairs.into();
    shard.maps.insert(map.clone());
    map
}

/// Pairs not yet interned, sorted by key with keys unique: they hash as the shared map of the
/// same content does, so that the map can be found without interning a string.
#[derive(Hash)]
struct Borrowed<'a>(&'a [(&'a str, &'a str)]);

impl hashbrown::Equivalent<Pairs> for Borrowed<'_> {
    fn equivalent(&self, key: &Pairs) -> bool {
        self.0.len() == key.len()
            && self
                .0
                .iter()
                .zip(key.iter())
                .all(|((k, v), (key, value))| *k == key.as_str() && *v == value.as_str())
    }
}

/// The shared map of `pairs` (sorted, keys unique), if one is in use.
fn find_shared(pairs: &[(&str, &str)]) -> Option<Pairs> {
    let shared = &*SHARED;
    let borrowed = Borrowed(pairs);
    let shard = (shared.hasher.hash_one(&borrowed) as usize) % SHARDS;
    shared.shards[shard].lock().maps.get(&borrowed).cloned()
}

/// `pairs` sorted by key, keys interned and values made by `value`; of two with one key, the
/// later value.
fn sorted_pairs<I, K, V>(pairs: I, value: fn(&str) -> Name) -> Vec<(Name, Name)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut sorted: Vec<(Name, Name)> = pairs
        .into_iter()
        .map(|(k, v)| (intern(k.as_ref()), value(v.as_ref())))
        .collect();
    // Stable: equal keys stay in the order given.
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(Name, Name)> = Vec::with_capacity(sorted.len());
    for (k, val) in sorted {
        match out.last_mut() {
            Some(last) if last.0 == k => last.1 = val,
            _ => out.push((k, val)),
        }
    }
    out
}

impl Labels {
    pub fn new() -> Self {
        Labels::default()
    }

    /// Builds from pairs in any order; a later duplicate key wins.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Labels(shared(sorted_pairs(pairs, intern)))
    }

    /// [`Labels::from_pairs`] of borrowed strings. When a map of the same content is in use (the
    /// labels of a pod whose template's pods are known), it is shared without interning a string.
    pub fn from_str_pairs(pairs: &[(&str, &str)]) -> Self {
        if pairs.is_empty() {
            return Labels::default();
        }
        let mut sorted: SmallVec<[(&str, &str); 8]> = pairs.iter().copied().collect();
        // Stable: of equal keys, the last given stays last and wins.
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        let mut unique: SmallVec<[(&str, &str); 8]> = SmallVec::with_capacity(sorted.len());
        for (k, v) in sorted {
            match unique.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => unique.push((k, v)),
            }
        }
        match find_shared(&unique) {
            Some(map) => Labels(map),
            None => Labels::from_pairs(unique),
        }
    }

    /// Builds annotations from pairs in any order; a later duplicate key wins. Keys are interned;
    /// values are not, nor is the map shared: annotation values are mostly unique to their object
    /// (trigger times, `last-applied-configuration`), and interning them would only hold them.
    pub fn annotations_from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Labels(sorted_pairs(pairs, Name::new).into())
    }

    pub fn get(&self, key: &str) -> Option<&Name> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Name, &Name)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A copy with `key` set to `value`. The value is not interned: those set one at a time are
    /// trigger times and the like, new on every write.
    pub fn with(&self, key: &str, value: &str) -> Labels {
        self.with_name(intern(key), Name::new(value))
    }

    /// [`with`](Self::with) for names already made: no lookup in the interner, which a hot path
    /// calling it for every sync would contend on.
    pub fn with_name(&self, key: Name, value: Name) -> Labels {
        let mut v: Vec<(Name, Name)> = self.0.to_vec();
        match v.binary_search_by(|(k, _)| k.as_str().cmp(key.as_str())) {
            Ok(i) => v[i].1 = value,
            Err(i) => v.insert(i, (key, value)),
        }
        Labels(v.into())
    }

    /// A copy without `key`.
    pub fn without(&self, key: &str) -> Labels {
        Labels(
            self.0
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .cloned()
                .collect(),
        )
    }

    /// A copy keeping only the pairs for which `keep` is true.
    pub fn filtered(&self, keep: impl Fn(&str) -> bool) -> Labels {
        Labels(self.0.iter().filter(|(k, _)| keep(k)).cloned().collect())
    }

    /// True when every pair of `selector` is in `self`: equality-based selector matching. An empty
    /// selector matches everything.
    pub fn matches(&self, selector: &Labels) -> bool {
        selector.iter().all(|(k, v)| self.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_lookup_and_selector_match() {
        let l = Labels::from_pairs([("b", "2"), ("a", "1"), ("c", "3")]);
        assert_eq!(l.get("a").map(|n| n.as_str()), Some("1"));
        assert_eq!(l.get("z"), None);
        assert!(l.matches(&Labels::from_pairs([("a", "1"), ("c", "3")])));
        assert!(!l.matches(&Labels::from_pairs([("a", "2")])));
        assert!(l.matches(&Labels::new()));
        assert_eq!(l.with("a", "9").get("a").map(|n| n.as_str()), Some("9"));
        assert_eq!(l.without("a").len(), 2);
    }

    #[test]
    fn maps_built_from_pairs_are_shared_until_unused() {
        let a = Labels::from_pairs([("app", "shared-test"), ("tier", "web")]);
        let b = Labels::from_pairs([("tier", "web"), ("app", "shared-test")]);
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, b);
        assert!(!Arc::ptr_eq(&a.0, &a.with("tier", "db").0));
        assert_eq!(Arc::strong_count(&a.0), 3, "a, b and the shard");
        drop((a, b));
        // Maps nobody uses any more are swept as the shard grows.
        for i in 0..SHARDS * 200 {
            Labels::from_pairs([("sweep-test", i.to_string())]);
        }
        let live: usize = SHARED.shards.iter().map(|s| s.lock().maps.len()).sum();
        assert!(live < SHARDS * 200, "{live} maps kept");
    }

    #[test]
    fn borrowed_pairs_find_the_map_in_use_or_build_the_same() {
        let given = [("tier", "web"), ("app", "borrowed-test"), ("tier", "api")];
        let fresh = Labels::from_str_pairs(&given);
        let owned = Labels::from_pairs(given);
        assert_eq!(fresh, owned);
        assert!(Arc::ptr_eq(&fresh.0, &owned.0), "one shared map");
        let again = Labels::from_str_pairs(&[("app", "borrowed-test"), ("tier", "api")]);
        assert!(Arc::ptr_eq(&again.0, &owned.0), "found, not built");
        assert_eq!(
            again.get("tier").map(|n| n.as_str()),
            Some("api"),
            "the later duplicate wins"
        );
        assert_eq!(Labels::from_str_pairs(&[]), Labels::default());
    }
}

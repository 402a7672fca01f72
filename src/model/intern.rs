//! Interned strings: namespaces, node names, zones, label keys and the label values selectors read
//! repeat across thousands of objects, so each distinct string is stored once and shared.
//!
//! A `Name` is a thin pointer (8 bytes), reference counted. The interner forgets a string once only
//! it holds it (swept as a shard doubles), so a controller that runs for weeks over a churning
//! cluster holds the strings of the objects it holds, not of every object it ever saw. Strings that
//! rarely repeat (pod names, UIDs, annotation values) are never interned.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::LazyLock;

use ahash::RandomState;
use arcstr::ArcStr;
use parking_lot::Mutex;
use std::collections::HashSet;

/// A shared, immutable string. Equality is by content with a pointer fast path.
#[derive(Clone, PartialOrd, Ord)]
pub struct Name(ArcStr);

impl Name {
    /// A name that is not interned: for strings that rarely repeat (pod names, UIDs).
    pub fn new(s: &str) -> Self {
        Name(ArcStr::from(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        ArcStr::ptr_eq(&self.0, &other.0) || self.0.as_str() == other.0.as_str()
    }
}
impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_str().hash(state)
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Default for Name {
    /// The empty name: a static, so making one takes no lock.
    fn default() -> Self {
        Name(ArcStr::new())
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        intern(s)
    }
}

const SHARDS: usize = 16;
/// A shard is first swept when it holds this many strings.
const FIRST_SWEEP: usize = 64;

/// One shard of the strings in use. Strings only the shard holds are dropped when the shard has
/// doubled since it was last swept: the sweeps cost O(1) per interned string, and a string outlives
/// its last user by no more than that.
struct Shard {
    names: HashSet<ArcStr, RandomState>,
    sweep_at: usize,
}

struct Interner {
    shards: [Mutex<Shard>; SHARDS],
    hasher: RandomState,
}

/// Strings in nearly every object the controllers write, interned as statics: a static has no
/// count, so copying one into each of thousands of endpoint references (their kind) and slice
/// owner references (their kind and apiVersion) and dropping them again costs no atomic
/// operation. Protocols and address types are enums in the model and need none.
const STATICS: [ArcStr; 3] = [
    arcstr::literal!("Pod"),
    arcstr::literal!("Service"),
    arcstr::literal!("v1"),
];

static INTERNER: LazyLock<Interner> = LazyLock::new(|| {
    let interner = Interner {
        shards: std::array::from_fn(|_| {
            Mutex::new(Shard {
                names: HashSet::with_hasher(RandomState::new()),
                sweep_at: FIRST_SWEEP,
            })
        }),
        hasher: RandomState::new(),
    };
    for name in STATICS {
        let shard = (interner.hasher.hash_one(name.as_str()) as usize) % SHARDS;
        interner.shards[shard].lock().names.insert(name);
    }
    interner
});

/// Returns the shared copy of `s`, storing it on first sight. For strings drawn from a small set:
/// namespaces, service and node names, label keys and values, zones.
pub fn intern(s: &str) -> Name {
    let interner = &*INTERNER;
    let shard = (interner.hasher.hash_one(s) as usize) % SHARDS;
    let mut shard = interner.shards[shard].lock();
    if let Some(existing) = shard.names.get(s) {
        return Name(existing.clone());
    }
    if shard.names.len() >= shard.sweep_at {
        // Held by the shard alone (a count of 1); literals (no count) are kept.
        shard
            .names
            .retain(|n| ArcStr::strong_count(n).is_none_or(|count| count > 1));
        shard.sweep_at = shard.names.len().saturating_mul(2).max(FIRST_SWEEP);
    }
    let name = ArcStr::from(s);
    shard.names.insert(name.clone());
    Name(name)
}

/// The number of strings the interner holds (those in use, and those not yet swept).
pub fn interned_count() -> usize {
    INTERNER.shards.iter().map(|s| s.lock().names.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_names_share_storage() {
        let a = intern("kube-system");
        let b = intern(&String::from("kube-system"));
        assert!(ArcStr::ptr_eq(&a.0, &b.0));
        assert_eq!(a, Name::new("kube-system"));
        assert_ne!(a, intern("default"));
        assert!(!ArcStr::ptr_eq(
            &Name::new("pod-1").0,
            &Name::new("pod-1").0
        ));
    }

    #[test]
    fn the_commonest_strings_are_statics() {
        let kind = intern("Pod");
        assert!(ArcStr::is_static(&kind.0));
        assert_eq!(ArcStr::strong_count(&kind.0), None);
        assert!(ArcStr::ptr_eq(&kind.0, &intern("Pod").0));
        assert!(!ArcStr::is_static(&intern("Pods").0));
    }

    #[test]
    fn strings_nobody_holds_are_freed() {
        let kept = intern("interner-test-kept");
        let count = |n: &Name| ArcStr::strong_count(&n.0);
        assert_eq!(count(&kept), Some(2), "kept and the shard");
        // A churn of strings each used once, as unique label values are: far more than any shard
        // would hold if they were kept.
        for i in 0..SHARDS * 5_000 {
            drop(intern(&format!("interner-test-{i}")));
        }
        let held = INTERNER
            .shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.names
                    .iter()
                    .filter(|n| n.starts_with("interner-test-"))
                    .count()
            })
            .sum::<usize>();
        assert!(
            held < SHARDS * 5_000 / 4,
            "{held} of {} kept",
            SHARDS * 5_000
        );
        // What is still used stays, and is still the one copy.
        assert!(ArcStr::ptr_eq(&kept.0, &intern("interner-test-kept").0));
    }
}

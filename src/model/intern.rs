//! Interned strings: namespaces, names and label keys and values repeat across thousands of objects,
//! so each distinct string is stored once and shared.
//!
//! A `Name` is a thin pointer (8 bytes). Interned names live for the life of the process, so they are
//! made static: cloning or dropping one touches no reference count. Other names (pod names, UIDs)
//! are reference counted and freed with their last owner.

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

struct Interner {
    shards: [Mutex<HashSet<ArcStr, RandomState>>; SHARDS],
    hasher: RandomState,
}

static INTERNER: LazyLock<Interner> = LazyLock::new(|| Interner {
    shards: std::array::from_fn(|_| Mutex::new(HashSet::with_hasher(RandomState::new()))),
    hasher: RandomState::new(),
});

/// Returns the shared copy of `s`, storing it on first sight. For strings drawn from a small set:
/// namespaces, service and node names, label keys and values, zones.
pub fn intern(s: &str) -> Name {
    let interner = &*INTERNER;
    let shard = (interner.hasher.hash_one(s) as usize) % SHARDS;
    let mut set = interner.shards[shard].lock();
    if let Some(existing) = set.get(s) {
        return Name(existing.clone());
    }
    let name = ArcStr::from(s);
    // Interned names are never freed: make them static so clones and drops cost nothing.
    let _: &'static str = name.leak();
    set.insert(name.clone());
    Name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_names_share_storage() {
        let a = intern("kube-system");
        let b = intern(&String::from("kube-system"));
        assert!(ArcStr::ptr_eq(&a.0, &b.0));
        assert!(ArcStr::is_static(&a.0));
        assert!(!ArcStr::is_static(&Name::new("pod-1").0));
        assert_eq!(a, Name::new("kube-system"));
        assert_ne!(a, intern("default"));
    }
}

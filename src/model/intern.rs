//! Interned strings: namespaces, names and label keys and values repeat across thousands of objects,
//! so each distinct string is stored once and shared.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use ahash::RandomState;
use parking_lot::Mutex;
use std::collections::HashSet;

/// A shared, immutable string. Cloning is a reference-count increment; equality is by content with a
/// pointer fast path.
#[derive(Clone, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    /// A name that is not interned: for strings that rarely repeat (pod names, UIDs).
    pub fn new(s: &str) -> Self {
        Name(Arc::from(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}
impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Default for Name {
    fn default() -> Self {
        intern("")
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
    shards: [Mutex<HashSet<Arc<str>, RandomState>>; SHARDS],
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
    let arc: Arc<str> = Arc::from(s);
    set.insert(arc.clone());
    Name(arc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_names_share_storage() {
        let a = intern("kube-system");
        let b = intern(&String::from("kube-system"));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, Name::new("kube-system"));
        assert_ne!(a, intern("default"));
    }
}

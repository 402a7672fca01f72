//! Label and annotation maps, kept as sorted pairs: small, cheap to compare and to iterate in order.

use super::intern::{Name, intern};

/// A string map sorted by key. Used for labels, annotations and selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Box<[(Name, Name)]>);

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
        let mut v: Vec<(Name, Name)> = pairs
            .into_iter()
            .map(|(k, v)| (intern(k.as_ref()), intern(v.as_ref())))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        // Keep the last value given for a key.
        let mut out: Vec<(Name, Name)> = Vec::with_capacity(v.len());
        for (k, val) in v {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = val,
                _ => out.push((k, val)),
            }
        }
        Labels(out.into_boxed_slice())
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

    /// A copy with `key` set to `value`.
    pub fn with(&self, key: &str, value: &str) -> Labels {
        let mut v: Vec<(Name, Name)> = self.0.to_vec();
        match v.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(i) => v[i].1 = intern(value),
            Err(i) => v.insert(i, (intern(key), intern(value))),
        }
        Labels(v.into_boxed_slice())
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
}

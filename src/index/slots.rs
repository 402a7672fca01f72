//! The pods of one namespace, each in a numbered slot.
//!
//! Member sets hold slots, not pods: a status update, the commonest pod event by far, replaces the
//! pod in its slot and every service selecting it sees the new version, with no member set
//! touched. Slots stay dense: a deletion moves the last pod into the hole, and says so, so that
//! the caller can re-point that pod's members.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use super::set::Seeded;
use crate::model::Pod;

/// A pod's position in its namespace's [`PodSlots`].
pub(crate) type Slot = usize;

#[derive(Debug, Default)]
pub(crate) struct PodSlots {
    /// Slots by pod name, hashed through the pod's own name: the table keeps no copy of it.
    by_name: HashTable<Slot>,
    pods: Vec<Arc<Pod>>,
}

/// What a removal took out, and the pod it moved into the freed slot.
pub(crate) struct Removed {
    pub(crate) pod: Arc<Pod>,
    /// The pod that was last, now in the removed pod's slot; `None` when the removed pod was last.
    pub(crate) moved: Option<(Slot, Arc<Pod>)>,
}

fn hash(name: &str) -> u64 {
    Seeded.hash_one(name)
}

impl PodSlots {
    pub(crate) fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// The pod in `slot`.
    pub(crate) fn at(&self, slot: Slot) -> Option<&Arc<Pod>> {
        self.pods.get(slot)
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Pod>> {
        self.find(name).map(|(_, pod)| pod)
    }

    pub(crate) fn find(&self, name: &str) -> Option<(Slot, &Arc<Pod>)> {
        let pods = &self.pods;
        let slot = *self
            .by_name
            .find(hash(name), |&s| pods[s].meta.name.as_str() == name)?;
        Some((slot, &pods[slot]))
    }

    /// The slot of the pod called `name`, and the pod itself, to be replaced in place.
    pub(crate) fn find_mut(&mut self, name: &str) -> Option<(Slot, &mut Arc<Pod>)> {
        let pods = &self.pods;
        let slot = *self
            .by_name
            .find(hash(name), |&s| pods[s].meta.name.as_str() == name)?;
        Some((slot, &mut self.pods[slot]))
    }

    /// Every pod, in slot order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Arc<Pod>> {
        self.pods.iter()
    }

    /// Adds a pod whose name is not here yet; returns its slot.
    pub(crate) fn insert(&mut self, pod: Arc<Pod>) -> Slot {
        debug_assert!(self.find(&pod.meta.name).is_none());
        let slot = self.pods.len();
        let h = hash(&pod.meta.name);
        self.pods.push(pod);
        let pods = &self.pods;
        self.by_name
            .insert_unique(h, slot, |&s| hash(&pods[s].meta.name));
        slot
    }

    pub(crate) fn remove(&mut self, name: &str) -> Option<Removed> {
        let pods = &self.pods;
        let entry = self
            .by_name
            .find_entry(hash(name), |&s| pods[s].meta.name.as_str() == name)
            .ok()?;
        let (slot, _) = entry.remove();
        let last = self.pods.len() - 1;
        let pod = self.pods.swap_remove(slot);
        let moved = if slot == last {
            None
        } else {
            let moved = Arc::clone(&self.pods[slot]);
            if let Some(s) = self
                .by_name
                .find_mut(hash(&moved.meta.name), |&s| s == last)
            {
                *s = slot;
            }
            Some((slot, moved))
        };
        // A namespace scaled down keeps no room for its peak.
        if self.pods.capacity() > 64 && self.pods.len() * 4 < self.pods.capacity() {
            self.pods.shrink_to_fit();
            let pods = &self.pods;
            self.by_name.shrink_to_fit(|&s| hash(&pods[s].meta.name));
        }
        Some(Removed { pod, moved })
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        assert_eq!(self.by_name.len(), self.pods.len());
        for (slot, pod) in self.pods.iter().enumerate() {
            assert_eq!(self.find(&pod.meta.name).map(|(s, _)| s), Some(slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Name;

    fn pod(name: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.meta.name = Name::new(name);
        Arc::new(p)
    }

    #[test]
    fn a_removal_moves_the_last_pod_into_the_hole() {
        let mut slots = PodSlots::default();
        for name in ["a", "b", "c"] {
            slots.insert(pod(name));
        }
        let removed = slots
            .remove("a")
            .map(|r| (r.pod.meta.name.to_string(), r.moved));
        let Some((name, Some((slot, moved)))) = removed else {
            panic!("a was not removed with c moved: {removed:?}");
        };
        assert_eq!(
            (name.as_str(), slot, moved.meta.name.as_str()),
            ("a", 0, "c")
        );
        assert_eq!(slots.find("c").map(|(s, _)| s), Some(0));
        assert_eq!(slots.find("b").map(|(s, _)| s), Some(1));
        assert!(slots.get("a").is_none());
        // The last one goes without moving another.
        assert!(slots.remove("b").is_some_and(|r| r.moved.is_none()));
        assert!(slots.remove("b").is_none());
        slots.check_invariants();
    }

    #[test]
    fn a_scaled_down_namespace_lets_its_room_go() {
        let mut slots = PodSlots::default();
        let names: Vec<String> = (0..1000).map(|i| format!("pod-{i}")).collect();
        for n in &names {
            slots.insert(pod(n));
        }
        for n in &names[10..] {
            assert!(slots.remove(n).is_some());
            slots.check_invariants();
        }
        assert_eq!(slots.pods.len(), 10);
        assert!(slots.pods.capacity() <= 64, "{}", slots.pods.capacity());
    }
}

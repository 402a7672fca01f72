//! The EndpointSlice generation tracker: what the controller expects the informer cache to show
//! for each slice it wrote or deleted.
//!
//! Writes record the generation from the API server's response; deletes record that the slice is
//! expected to disappear. A sync compares the listed slices against these expectations and backs
//! off while the cache is behind, instead of acting on old data and writing duplicates.
//!
//! Slices the controller wrote itself come back as informer events; the tracker tells those
//! echoes apart from changes made by someone else, which need a sync to be undone. The
//! `on_slice_*` decisions return the services to queue; the caller queues them after
//! [`slice_event_delay`].

use std::collections::HashMap;
use std::time::Duration;

use ahash::RandomState;
use dashmap::DashMap;
use smallvec::SmallVec;

use super::{MissingServiceLabel, ServiceId, service_of_slice, tracked_service};
use crate::model::{EndpointSlice, Name, keys};

/// What the tracker expects of one slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// The controller last saw this generation in a create or update response.
    Generation(i64),
    /// The controller deleted the slice; the cache should stop listing it.
    Deletion,
}

impl Expectation {
    /// The generation a listed slice must exceed to be news: upstream stores a deletion as -1.
    fn floor(self) -> i64 {
        match self {
            Expectation::Generation(g) => g,
            Expectation::Deletion => -1,
        }
    }
}

#[derive(Debug, Default)]
struct ServiceSlices {
    /// Slice UID → expectation.
    slices: HashMap<Name, Expectation, RandomState>,
    /// The Service UID last seen by [`EndpointSliceTracker::stale_slices_for_uid`].
    service_uid: Option<Name>,
}

/// Expected slice generations by service. Thread-safe: every method takes `&self`, and each
/// operation is atomic for its service.
///
/// A slice is filed under its namespace and `kubernetes.io/service-name` label (the empty name when
/// the label is missing), and identified by its UID.
#[derive(Debug)]
pub struct EndpointSliceTracker {
    services: DashMap<ServiceId, ServiceSlices, RandomState>,
    /// The managed-by label value of the controller whose writes this tracks.
    manager: &'static str,
}

impl Default for EndpointSliceTracker {
    fn default() -> Self {
        EndpointSliceTracker::for_manager(crate::model::keys::ENDPOINTSLICE_CONTROLLER)
    }
}

impl EndpointSliceTracker {
    /// The EndpointSlice controller's tracker.
    pub fn new() -> Self {
        EndpointSliceTracker::default()
    }

    /// The tracker of the controller whose slices carry this managed-by value.
    pub fn for_manager(manager: &'static str) -> Self {
        EndpointSliceTracker {
            services: DashMap::default(),
            manager,
        }
    }

    /// The slice carries this tracker's controller's managed-by label.
    pub fn manages(&self, slice: &EndpointSlice) -> bool {
        slice.managed_by().map(|m| m.as_str()) == Some(self.manager)
    }

    /// Records the slice's generation. Call with the API server's response to every successful
    /// create or update.
    pub fn update(&self, slice: &EndpointSlice) {
        self.set(slice, Expectation::Generation(slice.meta.generation));
    }

    /// Records that the slice is expected to be deleted. Call after every successful delete.
    pub fn expect_deletion(&self, slice: &EndpointSlice) {
        self.set(slice, Expectation::Deletion);
    }

    fn set(&self, slice: &EndpointSlice, expectation: Expectation) {
        self.services
            .entry(tracked_service(slice))
            .or_default()
            .slices
            .insert(slice.meta.uid.clone(), expectation);
    }

    /// What is tracked for the slice's UID under its service, if anything.
    pub fn expected(&self, slice: &EndpointSlice) -> Option<Expectation> {
        self.services
            .view(&tracked_service(slice), |_, s| {
                s.slices.get(slice.meta.uid.as_str()).copied()
            })
            .flatten()
    }

    /// The slice's UID is tracked (with a generation or an expected deletion).
    pub fn has(&self, slice: &EndpointSlice) -> bool {
        self.expected(slice).is_some()
    }

    /// The slice is news to the controller: its service or its UID is not tracked, or its
    /// generation is newer than the tracked one. A slice expected to be deleted counts as news.
    pub fn should_sync(&self, slice: &EndpointSlice) -> bool {
        match self.expected(slice) {
            None => true,
            Some(e) => slice.meta.generation > e.floor(),
        }
    }

    /// True when the listed slices of a service (already stripped of those with a deletion
    /// timestamp) lag behind the controller's own writes:
    /// - a listed slice is expected to be deleted, or is tracked with a newer generation; or
    /// - a tracked slice that is not expected to be deleted is missing from the list.
    pub fn stale_slices(&self, namespace: &Name, name: &Name, slices: &[&EndpointSlice]) -> bool {
        let id = ServiceId::from_names(namespace.clone(), name.clone());
        self.services
            .view(&id, |_, s| lags_behind(&s.slices, slices))
            .unwrap_or(false)
    }

    /// [`stale_slices`](Self::stale_slices), first dropping the service's expectations when its UID
    /// differs from the one seen last time: writes for a deleted Service say nothing about the
    /// cache of its same-named successor. An empty UID on either side never triggers the reset.
    ///
    /// This is newer upstream behaviour (kubernetes PR #141593) than the reference's basis.
    pub fn stale_slices_for_uid(
        &self,
        namespace: &Name,
        name: &Name,
        service_uid: &Name,
        slices: &[&EndpointSlice],
    ) -> bool {
        let id = ServiceId::from_names(namespace.clone(), name.clone());
        let mut entry = self.services.entry(id).or_default();
        let state = entry.value_mut();
        if let Some(seen) = &state.service_uid
            && !seen.is_empty()
            && !service_uid.is_empty()
            && seen != service_uid
        {
            state.slices.clear();
        }
        state.service_uid = Some(service_uid.clone());
        lags_behind(&state.slices, slices)
    }

    /// Forgets the slice's UID. Returns true when the deletion was expected: the UID was tracked
    /// as to be deleted, or was not tracked at all.
    pub fn handle_deletion(&self, slice: &EndpointSlice) -> bool {
        !matches!(self.take(slice), Some(Expectation::Generation(_)))
    }

    /// Atomic `has` then `handle_deletion`: `None` when the UID is not tracked (nothing changes),
    /// else forgets it and returns whether its deletion was expected.
    pub fn handle_deletion_if_tracked(&self, slice: &EndpointSlice) -> Option<bool> {
        self.take(slice).map(|e| e == Expectation::Deletion)
    }

    fn take(&self, slice: &EndpointSlice) -> Option<Expectation> {
        self.services
            .get_mut(&tracked_service(slice))
            .and_then(|mut s| s.slices.remove(slice.meta.uid.as_str()))
    }

    /// Drops everything tracked for the service.
    pub fn delete_service(&self, namespace: &Name, name: &Name) {
        self.services
            .remove(&ServiceId::from_names(namespace.clone(), name.clone()));
    }

    /// The number of services with tracked state.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }
}

fn lags_behind(
    tracked: &HashMap<Name, Expectation, RandomState>,
    listed: &[&EndpointSlice],
) -> bool {
    if tracked.is_empty() {
        return false;
    }
    // The tracked entries the list holds, each by its key's place in the map: counted once
    // however often the list repeats a UID, without hashing any UID again.
    let mut found: SmallVec<[*const Name; 16]> = SmallVec::new();
    for slice in listed {
        match tracked.get_key_value(slice.meta.uid.as_str()) {
            Some((_, Expectation::Deletion)) => return true,
            Some((_, Expectation::Generation(g))) if *g > slice.meta.generation => return true,
            Some((uid, Expectation::Generation(_))) => found.push(std::ptr::from_ref(uid)),
            None => {}
        }
    }
    found.sort_unstable();
    found.dedup();
    let expected = tracked
        .values()
        .filter(|e| **e != Expectation::Deletion)
        .count();
    found.len() != expected
}

/// The least delay before a sync queued by a slice event.
pub const SLICE_CHANGE_MIN_SYNC_DELAY: Duration = Duration::from_secs(1);

/// The delay for a sync queued by a slice event: the batch period, but at least one second.
pub fn slice_event_delay(batch_period: Duration) -> Duration {
    batch_period.max(SLICE_CHANGE_MIN_SYNC_DELAY)
}

/// The services an update queues, in upstream's order. An `Err` is a service the event would have
/// queued but cannot name, because the slice lacks the service-name label: log it and go on.
pub type Queued = SmallVec<[Result<ServiceId, MissingServiceLabel>; 2]>;

/// The slice carries the EndpointSlice controller's managed-by label.
pub fn is_managed_by_controller(slice: &EndpointSlice) -> bool {
    slice.managed_by().map(|m| m.as_str()) == Some(keys::ENDPOINTSLICE_CONTROLLER)
}

/// A slice appeared in the cache. Queues its service when the slice is ours and is news to the
/// tracker (untracked, or a newer generation than the controller wrote). `Ok(None)`: nothing to do.
pub fn on_slice_add(
    tracker: &EndpointSliceTracker,
    slice: &EndpointSlice,
) -> Result<Option<ServiceId>, MissingServiceLabel> {
    if tracker.manages(slice) && tracker.should_sync(slice) {
        service_of_slice(slice).map(Some)
    } else {
        Ok(None)
    }
}

/// A slice changed. Label edits do not bump the generation, so they are checked explicitly:
/// - the service-name label changed: queue the new service, then the old one;
/// - otherwise queue the service when the managed-by label moved to or from this controller, or
///   when the slice is ours and news to the tracker.
///
/// Unlike upstream, a slice replaced by another object of the same name (another uid, as a relist
/// shows when the watch missed the deletion) counts as the old one's deletion and the new one's
/// creation: upstream keeps expecting the old uid, and its service then stays stale for ever.
pub fn on_slice_update(
    tracker: &EndpointSliceTracker,
    old: &EndpointSlice,
    new: &EndpointSlice,
) -> Queued {
    let mut queued = Queued::new();
    if old.meta.uid != new.meta.uid {
        queued.extend(on_slice_delete(tracker, old).transpose());
        queued.extend(on_slice_add(tracker, new).transpose());
        return queued;
    }
    if new.service_name() != old.service_name() {
        queued.push(service_of_slice(new));
        queued.push(service_of_slice(old));
        return queued;
    }
    let ours = tracker.manages(new);
    if ours != tracker.manages(old) || (ours && tracker.should_sync(new)) {
        queued.push(service_of_slice(new));
    }
    queued
}

/// Any slice event: an add (`old` is `None`), an update or a deletion (`new` is `None`).
pub fn on_slice_changed(
    tracker: &EndpointSliceTracker,
    old: Option<&EndpointSlice>,
    new: Option<&EndpointSlice>,
) -> Queued {
    match (old, new) {
        (None, Some(new)) => on_slice_add(tracker, new).transpose().into_iter().collect(),
        (Some(old), Some(new)) => on_slice_update(tracker, old, new),
        (Some(old), None) => on_slice_delete(tracker, old)
            .transpose()
            .into_iter()
            .collect(),
        (None, None) => Queued::new(),
    }
}

/// A slice left the cache (the final state of a tombstone will do). Only slices that are ours and
/// tracked count: the tracker forgets the UID, and the service is queued when the deletion was
/// not one the controller made. Deleting a slice the controller has not written since it started
/// is ignored, as upstream does.
pub fn on_slice_delete(
    tracker: &EndpointSliceTracker,
    slice: &EndpointSlice,
) -> Result<Option<ServiceId>, MissingServiceLabel> {
    if !tracker.manages(slice) {
        return Ok(None);
    }
    match tracker.handle_deletion_if_tracked(slice) {
        Some(false) => service_of_slice(slice).map(Some),
        Some(true) | None => Ok(None),
    }
}

//! Which services an EndpointSlice event queues.
//!
//! Slices the controller wrote itself come back as informer events; the generation tracker tells
//! those echoes apart from changes made by someone else, which need a sync to be undone. Each
//! decision here returns the services to queue; the caller queues them after
//! [`slice_event_delay`].

use std::time::Duration;

use smallvec::SmallVec;

use super::{EndpointSliceTracker, MissingServiceLabel, ServiceId, service_of_slice};
use crate::model::{EndpointSlice, keys};

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

//! Slice event decisions: which services an add, update or delete queues.

use std::time::Duration;

use sliced::model::{EndpointSlice, keys};
use sliced::tracker::{
    EndpointSliceTracker, MissingServiceLabel, ServiceId, on_slice_add, on_slice_delete,
    on_slice_update, service_of_slice, slice_event_delay,
};

use super::{n, ours, plain, slice};

fn svc(ns: &str, name: &str) -> ServiceId {
    ServiceId::from_names(n(ns), n(name))
}

fn missing(s: &EndpointSlice) -> MissingServiceLabel {
    MissingServiceLabel {
        namespace: s.meta.namespace.clone(),
        slice: s.meta.name.clone(),
    }
}

#[test]
fn service_id_is_the_queue_key() {
    let id = svc("default", "web");
    assert_eq!(id.to_string(), "default/web");
    assert_eq!(id.to_string(), "default/web");
    assert_eq!(ServiceId::parse("default/web"), Some(id.clone()));
    assert_eq!(service_of_slice(&ours("a", 1)), Ok(svc("ns1", "svc1")));
    let orphan = slice("ns1", None, "o", 1, Some(keys::ENDPOINTSLICE_CONTROLLER));
    let err = service_of_slice(&orphan).unwrap_err();
    assert_eq!(err, missing(&orphan));
    assert!(err.to_string().contains(keys::LABEL_SERVICE_NAME));
    let empty = slice(
        "ns1",
        Some(""),
        "o",
        1,
        Some(keys::ENDPOINTSLICE_CONTROLLER),
    );
    assert!(
        service_of_slice(&empty).is_err(),
        "an empty label counts as missing"
    );
}

#[test]
fn delay_is_at_least_one_second() {
    assert_eq!(slice_event_delay(Duration::ZERO), Duration::from_secs(1));
    assert_eq!(
        slice_event_delay(Duration::from_millis(500)),
        Duration::from_secs(1)
    );
    assert_eq!(
        slice_event_delay(Duration::from_secs(5)),
        Duration::from_secs(5)
    );
}

#[test]
fn add_queues_our_untracked_or_newer_slices_only() {
    let tracker = EndpointSliceTracker::new();
    // Untracked, ours: after a restart, or created by someone else with our label.
    assert_eq!(
        on_slice_add(&tracker, &ours("a", 1)),
        Ok(Some(svc("ns1", "svc1")))
    );
    // Not ours: never.
    assert_eq!(on_slice_add(&tracker, &plain("b", 1)), Ok(None));
    let other = slice("ns1", Some("svc1"), "c", 1, Some("someone-else"));
    assert_eq!(on_slice_add(&tracker, &other), Ok(None));
    // The echo of the controller's own create: not queued.
    tracker.update(&ours("a", 1));
    assert_eq!(on_slice_add(&tracker, &ours("a", 1)), Ok(None));
    // A newer generation than the controller wrote.
    assert_eq!(
        on_slice_add(&tracker, &ours("a", 2)),
        Ok(Some(svc("ns1", "svc1")))
    );
    // Ours but unlabelled: wanted, but no service to name.
    let orphan = slice("ns1", None, "o", 1, Some(keys::ENDPOINTSLICE_CONTROLLER));
    assert_eq!(on_slice_add(&tracker, &orphan), Err(missing(&orphan)));
}

#[test]
fn update_own_write_is_not_requeued() {
    let tracker = EndpointSliceTracker::new();
    tracker.update(&ours("a", 2));
    let queued = on_slice_update(&tracker, &ours("a", 1), &ours("a", 2));
    assert!(queued.is_empty());
    // Someone else bumped the generation past ours.
    let queued = on_slice_update(&tracker, &ours("a", 2), &ours("a", 3));
    assert_eq!(queued.as_slice(), &[Ok(svc("ns1", "svc1"))]);
    // A resync of an untracked slice of ours is queued too (upstream checks no resourceVersion).
    let queued = on_slice_update(&tracker, &ours("z", 1), &ours("z", 1));
    assert_eq!(queued.as_slice(), &[Ok(svc("ns1", "svc1"))]);
}

#[test]
fn update_service_label_change_queues_new_then_old() {
    let tracker = EndpointSliceTracker::new();
    let old = ours("a", 1);
    tracker.update(&old);
    let moved = slice(
        "ns1",
        Some("svc2"),
        "a",
        1,
        Some(keys::ENDPOINTSLICE_CONTROLLER),
    );
    let queued = on_slice_update(&tracker, &old, &moved);
    assert_eq!(
        queued.as_slice(),
        &[Ok(svc("ns1", "svc2")), Ok(svc("ns1", "svc1"))]
    );
    // Regardless of ownership: the label alone decides.
    let theirs_old = plain("b", 1);
    let theirs_new = slice("ns1", Some("svc3"), "b", 1, None);
    let queued = on_slice_update(&tracker, &theirs_old, &theirs_new);
    assert_eq!(
        queued.as_slice(),
        &[Ok(svc("ns1", "svc3")), Ok(svc("ns1", "svc1"))]
    );
    // Label removed: only the old service can be named.
    let unlabelled = slice("ns1", None, "a", 1, Some(keys::ENDPOINTSLICE_CONTROLLER));
    let queued = on_slice_update(&tracker, &old, &unlabelled);
    assert_eq!(
        queued.as_slice(),
        &[Err(missing(&unlabelled)), Ok(svc("ns1", "svc1"))]
    );
    // Missing and empty are the same value: no label change.
    let empty = slice(
        "ns1",
        Some(""),
        "a",
        1,
        Some(keys::ENDPOINTSLICE_CONTROLLER),
    );
    tracker.update(&unlabelled);
    assert!(on_slice_update(&tracker, &unlabelled, &empty).is_empty());
}

#[test]
fn update_managed_by_flip_queues() {
    let tracker = EndpointSliceTracker::new();
    let theirs = plain("a", 1);
    let mine = ours("a", 1);
    tracker.update(&mine);
    // To us, even though the tracker has this generation.
    let queued = on_slice_update(&tracker, &theirs, &mine);
    assert_eq!(queued.as_slice(), &[Ok(svc("ns1", "svc1"))]);
    // Away from us.
    let queued = on_slice_update(&tracker, &mine, &theirs);
    assert_eq!(queued.as_slice(), &[Ok(svc("ns1", "svc1"))]);
    // Between two other managers: nothing.
    let other = slice("ns1", Some("svc1"), "a", 5, Some("someone-else"));
    assert!(on_slice_update(&tracker, &theirs, &other).is_empty());
}

#[test]
fn delete_queues_only_unexpected_deletions_of_tracked_slices() {
    let tracker = EndpointSliceTracker::new();
    // Someone else deleted a slice the controller wrote: queued, and forgotten.
    tracker.update(&ours("a", 1));
    assert_eq!(
        on_slice_delete(&tracker, &ours("a", 1)),
        Ok(Some(svc("ns1", "svc1")))
    );
    assert!(!tracker.has(&ours("a", 1)));
    // The controller's own delete: not queued, and forgotten.
    tracker.expect_deletion(&ours("b", 1));
    assert_eq!(on_slice_delete(&tracker, &ours("b", 1)), Ok(None));
    assert!(!tracker.has(&ours("b", 1)));
    // Untracked (not written since start): ignored.
    assert_eq!(on_slice_delete(&tracker, &ours("c", 1)), Ok(None));
    // Not ours: ignored, and the tracker is left alone.
    tracker.update(&ours("d", 1));
    assert_eq!(on_slice_delete(&tracker, &plain("d", 1)), Ok(None));
    assert!(tracker.has(&ours("d", 1)));
    // Ours, tracked under the empty name, unexpected: wanted but unnamed.
    let orphan = slice("ns1", None, "o", 1, Some(keys::ENDPOINTSLICE_CONTROLLER));
    tracker.update(&orphan);
    assert_eq!(on_slice_delete(&tracker, &orphan), Err(missing(&orphan)));
    assert!(!tracker.has(&orphan));
}

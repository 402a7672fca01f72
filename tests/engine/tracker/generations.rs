//! `EndpointSliceTracker`: every operation of the reference table, upstream's tracker test tables
//! and the stale-informer fixtures of the controller test.

use sliced::model::EndpointSlice;
use sliced::tracker::{EndpointSliceTracker, Expectation};

use super::{n, plain, slice};

fn different_namespace() -> EndpointSlice {
    slice("ns2", Some("svc1"), "diff-ns", 1, None)
}

fn different_service() -> EndpointSlice {
    slice("ns1", Some("svc2"), "diff-svc", 1, None)
}

fn stale(tracker: &EndpointSliceTracker, listed: &[&EndpointSlice]) -> bool {
    tracker.stale_slices(&n("ns1"), &n("svc1"), listed)
}

#[test]
fn update_then_checks() {
    let original = plain("original", 1);
    let newer = plain("original", 2);
    // (slice checked, has, should_sync)
    let cases: [(&str, EndpointSlice, bool, bool); 4] = [
        ("same slice", original.clone(), true, false),
        ("different namespace", different_namespace(), false, true),
        ("different service", different_service(), false, true),
        ("newer generation", newer, true, true),
    ];
    for (name, checked, has, should_sync) in cases {
        let tracker = EndpointSliceTracker::new();
        tracker.update(&original);
        assert_eq!(tracker.has(&checked), has, "{name}: has");
        assert_eq!(
            tracker.should_sync(&checked),
            should_sync,
            "{name}: should_sync"
        );
        assert_eq!(
            tracker.expected(&original),
            Some(Expectation::Generation(1)),
            "{name}: the tracked generation is untouched by checks"
        );
    }
}

#[test]
fn update_overwrites_the_generation_and_untracked_is_news() {
    let tracker = EndpointSliceTracker::new();
    assert!(!tracker.has(&plain("a", 1)));
    assert!(tracker.should_sync(&plain("a", 1)));
    tracker.update(&plain("a", 3));
    assert!(!tracker.should_sync(&plain("a", 2)), "older than written");
    assert!(
        !tracker.should_sync(&plain("a", 3)),
        "the controller's own write"
    );
    assert!(
        tracker.should_sync(&plain("a", 4)),
        "someone else wrote after us"
    );
    // Each write records the generation of the response as it is.
    tracker.update(&plain("a", 5));
    assert_eq!(
        tracker.expected(&plain("a", 0)),
        Some(Expectation::Generation(5))
    );
    // Another UID of the same service is untracked.
    assert!(!tracker.has(&plain("b", 1)));
    assert!(tracker.should_sync(&plain("b", 1)));
}

#[test]
fn stale_slices_table() {
    let s1 = plain("original", 1);
    let s1_newer = plain("original", 2);

    // Empty tracker.
    let tracker = EndpointSliceTracker::new();
    assert!(!stale(&tracker, &[]));
    assert!(!stale(&tracker, &[&s1]));

    // The service is known but tracks no slice any more.
    let tracker = EndpointSliceTracker::new();
    tracker.update(&s1);
    tracker.handle_deletion(&s1);
    assert!(!stale(&tracker, &[]), "empty slices");

    // Matching slices.
    let tracker = EndpointSliceTracker::new();
    tracker.update(&s1);
    assert!(!stale(&tracker, &[&s1]), "matching slices");

    // Newer slice in the tracker.
    let tracker = EndpointSliceTracker::new();
    tracker.update(&s1_newer);
    assert!(stale(&tracker, &[&s1]), "newer slice in tracker");

    // Newer slice in the list.
    let tracker = EndpointSliceTracker::new();
    tracker.update(&s1);
    assert!(!stale(&tracker, &[&s1_newer]), "newer slice in params");

    // A listed slice is expected to be deleted.
    let tracker = EndpointSliceTracker::new();
    tracker.expect_deletion(&s1);
    assert!(stale(&tracker, &[&s1]), "deletion expected but listed");

    // A tracked slice is missing from the list.
    let tracker = EndpointSliceTracker::new();
    tracker.update(&s1);
    assert!(stale(&tracker, &[]), "tracked but not listed");
}

#[test]
fn stale_slices_more_rows() {
    let a = plain("a", 2);
    let b = plain("b", 1);
    let tracker = EndpointSliceTracker::new();
    tracker.update(&a);
    tracker.expect_deletion(&b);
    // b is gone from the cache as expected: nothing to wait for.
    assert!(!stale(&tracker, &[&a]));
    // b still listed: the delete is not in the cache yet.
    assert!(stale(&tracker, &[&a, &b]));
    // An untracked listed slice (someone else's, or from before a restart) is not staleness.
    assert!(!stale(&tracker, &[&a, &plain("c", 1)]));
    // A tracked UID absent from the list, even next to others.
    assert!(stale(&tracker, &[&plain("c", 1)]));
    // Other services and namespaces are separate.
    assert!(!tracker.stale_slices(&n("ns1"), &n("svc2"), &[]));
    assert!(!tracker.stale_slices(&n("ns2"), &n("svc1"), &[]));
}

/// A list that repeats one tracked slice's UID still lacks the other's: each tracked slice counts
/// once, however often it is listed.
#[test]
fn a_repeated_uid_does_not_stand_for_a_missing_one() {
    let (first, second) = (plain("uid-1", 1), plain("uid-2", 1));
    let tracker = EndpointSliceTracker::new();
    tracker.update(&first);
    tracker.update(&second);
    assert!(!stale(&tracker, &[&first, &second]), "both listed");
    assert!(stale(&tracker, &[&first, &first]), "the second missing");
    assert!(
        !stale(&tracker, &[&first, &second, &first]),
        "both, one twice"
    );
}

/// A service with many slices (a 5,000-pod service has 50): the same answers as with a few.
#[test]
fn stale_slices_of_a_service_with_many() {
    let slices: Vec<EndpointSlice> = (0..40).map(|i| plain(&format!("uid-{i}"), 1)).collect();
    let tracker = EndpointSliceTracker::new();
    for slice in &slices {
        tracker.update(slice);
    }
    let all: Vec<&EndpointSlice> = slices.iter().collect();
    assert!(!stale(&tracker, &all), "every tracked slice listed");
    let untracked = plain("uid-other", 1);
    let mut with_other = all.clone();
    with_other.push(&untracked);
    assert!(!stale(&tracker, &with_other), "an untracked one besides");
    // One tracked UID absent from the list, the list as long as ever.
    let mut missing_one = all[1..].to_vec();
    missing_one.push(&untracked);
    assert!(stale(&tracker, &missing_one), "a tracked slice not listed");
    let behind = plain("uid-7", 0);
    let mut one_behind = all.clone();
    one_behind[7] = &behind;
    assert!(
        stale(&tracker, &one_behind),
        "a listed slice behind its generation"
    );
    tracker.expect_deletion(&slices[3]);
    assert!(
        stale(&tracker, &all),
        "a slice expected deleted still listed"
    );
    let without_it: Vec<&EndpointSlice> = all
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != 3)
        .map(|(_, s)| *s)
        .collect();
    assert!(!stale(&tracker, &without_it), "and gone as expected");
}

/// The controller test fixtures: the tracker holds one generation, the informer lists another.
#[test]
fn stale_informer_fixtures() {
    for (tracked, listed, want) in [(12, 10, true), (10, 10, false), (1, 10, false)] {
        let tracker = EndpointSliceTracker::new();
        tracker.update(&plain("uid", tracked));
        let in_cache = plain("uid", listed);
        assert_eq!(
            stale(&tracker, &[&in_cache]),
            want,
            "tracker {tracked} vs informer {listed}"
        );
    }
}

#[test]
fn deletion_table() {
    let original = plain("original", 1);
    let newer = plain("original", 2);
    // (expect_deletion of, check, has, should_sync, handle_deletion(original))
    let cases: [(&str, &EndpointSlice, &EndpointSlice, bool, bool, bool); 7] = [
        ("same slice", &original, &original, true, true, true),
        (
            "different namespace",
            &different_namespace(),
            &different_namespace(),
            true,
            true,
            false,
        ),
        (
            "different namespace, check original",
            &different_namespace(),
            &original,
            true,
            false,
            false,
        ),
        (
            "different service",
            &different_service(),
            &different_service(),
            true,
            true,
            false,
        ),
        (
            "different service, check original",
            &different_service(),
            &original,
            true,
            false,
            false,
        ),
        ("different generation", &newer, &newer, true, true, true),
        (
            "different generation, check original",
            &newer,
            &original,
            true,
            true,
            true,
        ),
    ];
    for (name, expect_deleted, checked, has, should_sync, expected) in cases {
        let tracker = EndpointSliceTracker::new();
        tracker.update(&original);
        tracker.expect_deletion(expect_deleted);
        assert_eq!(tracker.has(checked), has, "{name}: has");
        assert_eq!(
            tracker.should_sync(checked),
            should_sync,
            "{name}: should_sync"
        );
        assert_eq!(
            tracker.handle_deletion(&original),
            expected,
            "{name}: handle_deletion"
        );
        assert!(
            !tracker.has(&original),
            "{name}: forgotten after handle_deletion"
        );
    }
}

#[test]
fn handle_deletion_of_untracked_counts_as_expected() {
    let tracker = EndpointSliceTracker::new();
    assert!(tracker.handle_deletion(&plain("x", 1)), "unknown service");
    tracker.update(&plain("a", 1));
    assert!(tracker.handle_deletion(&plain("x", 1)), "unknown UID");
    assert!(tracker.has(&plain("a", 1)), "other UIDs stay");
    assert_eq!(tracker.handle_deletion_if_tracked(&plain("x", 1)), None);
    assert_eq!(
        tracker.handle_deletion_if_tracked(&plain("a", 1)),
        Some(false)
    );
    assert_eq!(tracker.handle_deletion_if_tracked(&plain("a", 1)), None);
    tracker.expect_deletion(&plain("a", 1));
    assert_eq!(
        tracker.expected(&plain("a", 1)),
        Some(Expectation::Deletion)
    );
    assert_eq!(
        tracker.handle_deletion_if_tracked(&plain("a", 1)),
        Some(true)
    );
}

#[test]
fn delete_service_table() {
    let s = slice("ns1", Some("svc1"), "", 1, None);
    // (namespace, service deleted, has, should_sync)
    for (ns, svc, has, should_sync) in [
        ("ns1", "svc1", false, true),
        ("ns2", "svc1", true, false),
        ("ns1", "svc2", true, false),
    ] {
        let tracker = EndpointSliceTracker::new();
        tracker.update(&s);
        tracker.delete_service(&n(ns), &n(svc));
        assert_eq!(tracker.has(&s), has, "{ns}/{svc}: has");
        assert_eq!(
            tracker.should_sync(&s),
            should_sync,
            "{ns}/{svc}: should_sync"
        );
        if has {
            assert_eq!(tracker.expected(&s), Some(Expectation::Generation(1)));
        }
    }
}

#[test]
fn slices_without_the_service_label_are_filed_under_the_empty_name() {
    let tracker = EndpointSliceTracker::new();
    let orphan = slice("ns1", None, "o", 1, None);
    let empty = slice("ns1", Some(""), "o", 1, None);
    tracker.update(&orphan);
    assert!(tracker.has(&orphan));
    assert!(
        tracker.has(&empty),
        "a missing label and an empty one are the same"
    );
    assert!(tracker.stale_slices(&n("ns1"), &n(""), &[]));
    assert!(!tracker.stale_slices(&n("ns1"), &n("svc1"), &[]));
}

#[test]
fn a_changed_service_uid_drops_old_expectations() {
    let tracker = EndpointSliceTracker::new();
    let (ns, svc) = (n("ns1"), n("svc1"));
    let old = plain("old-slice", 3);
    assert!(!tracker.stale_slices_for_uid(&ns, &svc, &n("uid-1"), &[]));
    tracker.update(&old);
    assert!(
        tracker.stale_slices_for_uid(&ns, &svc, &n("uid-1"), &[]),
        "same UID: still stale"
    );
    assert!(
        tracker.stale_slices_for_uid(&ns, &svc, &n(""), &[]),
        "empty UID: no reset"
    );
    // The empty UID was recorded, so the next UID is not a change either.
    assert!(tracker.stale_slices_for_uid(&ns, &svc, &n("uid-2"), &[]));
    // A real change: the writes for the old Service are dropped.
    assert!(!tracker.stale_slices_for_uid(&ns, &svc, &n("uid-3"), &[]));
    assert!(!tracker.has(&old));
    // The plain check ignores UIDs.
    tracker.update(&old);
    assert!(tracker.stale_slices(&ns, &svc, &[]));
    tracker.delete_service(&ns, &svc);
    assert!(tracker.is_empty());
    tracker.update(&old);
    assert!(
        tracker.stale_slices_for_uid(&ns, &svc, &n("uid-4"), &[]),
        "UID forgotten with the service"
    );
}

#[test]
fn concurrent_writers_on_many_services() {
    let tracker = EndpointSliceTracker::new();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let tracker = &tracker;
            scope.spawn(move || {
                for i in 0..200 {
                    let s = slice(
                        "ns",
                        Some(&format!("svc-{t}-{i}")),
                        &format!("u{i}"),
                        i,
                        None,
                    );
                    tracker.update(&s);
                    assert!(!tracker.should_sync(&s));
                }
            });
        }
    });
    assert_eq!(tracker.len(), 800);
}

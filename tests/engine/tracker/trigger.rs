//! `TriggerTimeTracker`: upstream's trigger-time test cases and the forgetting rules.

use jiff::{SignedDuration, Timestamp};

use sliced::model::{Meta, Name, Pod, PodBuilder, Service, intern};
use sliced::tracker::TriggerTimeTracker;

use super::n;

/// t(0) is 2019-01-01T00:00:00Z; t(k) is k seconds later.
fn t(k: i64) -> Timestamp {
    Timestamp::from_second(1_546_300_800).unwrap() + SignedDuration::from_secs(k)
}

fn service(created: Timestamp) -> Service {
    Service {
        meta: Meta {
            namespace: intern("ttNamespace1"),
            name: intern("my-service"),
            creation_timestamp: Some(created),
            ..Meta::default()
        },
        ..Service::default()
    }
}

fn pod(name: &str, ready_at: Option<Timestamp>) -> Pod {
    Pod::from(PodBuilder {
        meta: Meta {
            namespace: intern("ttNamespace1"),
            name: Name::new(name),
            ..Meta::default()
        },
        ready: ready_at.is_some(),
        ready_transition: ready_at,
        ..PodBuilder::default()
    })
}

struct Tester(TriggerTimeTracker);

impl Tester {
    fn new() -> Self {
        Tester(TriggerTimeTracker::new())
    }

    fn compute(&self, svc: &Service, pods: &[&Pod]) -> Option<Timestamp> {
        self.0
            .compute(&n("ttNamespace1"), &n("my-service"), svc, pods)
    }

    fn delete(&self) {
        self.0.delete_service(&n("ttNamespace1"), &n("my-service"));
    }
}

#[test]
fn new_service_without_pods_gives_its_creation_time() {
    let tester = Tester::new();
    assert_eq!(tester.compute(&service(t(2)), &[]), Some(t(2)));
}

#[test]
fn new_service_with_existing_pods_gives_its_creation_time() {
    let tester = Tester::new();
    let (p1, p2, p3) = (
        pod("pod1", Some(t(0))),
        pod("pod2", Some(t(1))),
        pod("pod3", Some(t(5))),
    );
    assert_eq!(tester.compute(&service(t(3)), &[&p1, &p2, &p3]), Some(t(3)));
}

#[test]
fn added_pods_give_the_earliest_ready_time() {
    let tester = Tester::new();
    let svc = service(t(0));
    assert_eq!(tester.compute(&svc, &[]), Some(t(0)));
    let (p1, p2) = (pod("pod1", Some(t(2))), pod("pod2", Some(t(1))));
    assert_eq!(tester.compute(&svc, &[&p1, &p2]), Some(t(1)));
}

#[test]
fn updated_pods_give_the_earliest_changed_time() {
    let tester = Tester::new();
    let svc = service(t(0));
    let p3 = pod("pod3", Some(t(3)));
    let first = [pod("pod1", Some(t(1))), pod("pod2", Some(t(2)))];
    assert_eq!(
        tester.compute(&svc, &[&first[0], &first[1], &p3]),
        Some(t(0))
    );
    // pod3 keeps t3, which is earlier than both changes but did not change.
    let (p1, p2) = (pod("pod1", Some(t(5))), pod("pod2", Some(t(4))));
    assert_eq!(tester.compute(&svc, &[&p1, &p2, &p3]), Some(t(4)));
}

#[test]
fn a_pod_becoming_ready_later_gives_that_time() {
    let tester = Tester::new();
    let svc = service(t(0));
    let not_ready = pod("pod1", None);
    assert_eq!(tester.compute(&svc, &[&not_ready]), Some(t(0)));
    assert_eq!(
        tester.compute(&svc, &[&not_ready]),
        None,
        "no Ready condition: nothing"
    );
    let ready = pod("pod1", Some(t(7)));
    assert_eq!(tester.compute(&svc, &[&ready]), Some(t(7)));
}

#[test]
fn nothing_changed_gives_none() {
    let tester = Tester::new();
    let svc = service(t(0));
    let pods = [
        pod("pod1", Some(t(1))),
        pod("pod2", Some(t(2))),
        pod("pod3", Some(t(3))),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    assert_eq!(tester.compute(&svc, &refs), Some(t(0)));
    assert_eq!(tester.compute(&svc, &refs), None);
}

#[test]
fn a_deleted_pod_is_forgotten_and_counts_again_when_back() {
    let tester = Tester::new();
    let svc = service(t(0));
    let p1 = pod("pod1", Some(t(1)));
    let p2 = pod("pod2", Some(t(2)));
    assert_eq!(tester.compute(&svc, &[&p1, &p2]), Some(t(0)));
    assert_eq!(
        tester.compute(&svc, &[&p1]),
        None,
        "a removal has no trigger time"
    );
    // Back with its old time: forgotten, so it counts as changed.
    assert_eq!(tester.compute(&svc, &[&p1, &p2]), Some(t(2)));
    let p2 = pod("pod2", Some(t(4)));
    assert_eq!(tester.compute(&svc, &[&p1, &p2]), Some(t(4)));
}

#[test]
fn a_recreated_service_starts_over() {
    let tester = Tester::new();
    let (p1, p2) = (pod("pod1", Some(t(1))), pod("pod2", Some(t(2))));
    assert_eq!(tester.compute(&service(t(0)), &[&p1, &p2]), Some(t(0)));
    tester.delete();
    assert!(tester.0.is_empty());
    assert_eq!(tester.compute(&service(t(3)), &[&p1, &p2]), Some(t(3)));
}

#[test]
fn a_spec_change_is_not_measurable() {
    let tester = Tester::new();
    let mut svc = service(t(0));
    let (p1, p2) = (pod("pod1", Some(t(1))), pod("pod2", Some(t(2))));
    assert_eq!(tester.compute(&svc, &[&p1, &p2]), Some(t(0)));
    svc.publish_not_ready_addresses = true;
    svc.selector = Some(Default::default());
    assert_eq!(tester.compute(&svc, &[&p1, &p2]), None);
}

#[test]
fn a_later_creation_time_counts_as_a_change() {
    // Same key, new object without a delete in between (the NotFound sync was missed).
    let tester = Tester::new();
    let p1 = pod("pod1", Some(t(5)));
    assert_eq!(tester.compute(&service(t(0)), &[&p1]), Some(t(0)));
    assert_eq!(tester.compute(&service(t(3)), &[&p1]), Some(t(3)));
    let p1 = pod("pod1", Some(t(9)));
    assert_eq!(
        tester.compute(&service(t(10)), &[&p1]),
        Some(t(9)),
        "the minimum of both"
    );
}

#[test]
fn an_earlier_ready_time_is_not_a_change_but_is_stored() {
    let tester = Tester::new();
    let svc = service(t(0));
    assert_eq!(
        tester.compute(&svc, &[&pod("pod1", Some(t(5)))]),
        Some(t(0))
    );
    assert_eq!(tester.compute(&svc, &[&pod("pod1", Some(t(3)))]), None);
    assert_eq!(
        tester.compute(&svc, &[&pod("pod1", Some(t(4)))]),
        Some(t(4))
    );
}

#[test]
fn no_creation_timestamp_gives_none_first() {
    let tester = Tester::new();
    let mut svc = service(t(0));
    svc.meta.creation_timestamp = None;
    assert_eq!(tester.compute(&svc, &[&pod("pod1", Some(t(1)))]), None);
    assert_eq!(
        tester.compute(&svc, &[&pod("pod1", Some(t(2)))]),
        Some(t(2))
    );
}

#[test]
fn services_are_independent() {
    let tracker = TriggerTimeTracker::new();
    let a = service(t(0));
    let p = pod("pod1", Some(t(1)));
    assert_eq!(tracker.compute(&n("ns"), &n("a"), &a, &[&p]), Some(t(0)));
    assert_eq!(tracker.compute(&n("ns"), &n("b"), &a, &[&p]), Some(t(0)));
    assert_eq!(tracker.compute(&n("ns"), &n("a"), &a, &[&p]), None);
    assert_eq!(tracker.len(), 2);
    tracker.delete_service(&n("ns"), &n("a"));
    assert_eq!(tracker.len(), 1);
}

#[test]
fn compute_changed_equals_compute_for_the_changed_pods() {
    use sliced::model::{Name, Pod, Timestamp};
    let ts = |s: i64| Timestamp::from_second(1_800_000_000 + s).ok();
    let service = {
        let mut s = sliced::model::Service::default();
        s.meta.namespace = Name::from("ns");
        s.meta.name = Name::from("svc");
        s.meta.creation_timestamp = ts(0);
        s
    };
    let pod = |name: &str, t: Option<i64>| {
        let mut p = Pod::default();
        p.meta.namespace = Name::from("ns");
        p.meta.name = Name::new(name);
        p.set_ready_transition(t.and_then(ts));
        p
    };
    let (ns, name) = (Name::from("ns"), Name::from("svc"));
    let before = [pod("a", Some(1)), pod("b", Some(2)), pod("c", None)];
    // The same history through both paths.
    let full = sliced::tracker::TriggerTimeTracker::new();
    let incremental = sliced::tracker::TriggerTimeTracker::new();
    let refs: Vec<&Pod> = before.iter().collect();
    assert_eq!(full.compute(&ns, &name, &service, &refs), ts(0));
    assert_eq!(incremental.compute(&ns, &name, &service, &refs), ts(0));

    // b becomes ready later, c gets a transition, a is deleted, d is new.
    let after = [pod("b", Some(5)), pod("c", Some(4)), pod("d", Some(7))];
    let refs: Vec<&Pod> = after.iter().collect();
    let changed: Vec<(Name, Option<&Pod>)> = vec![
        (Name::new("a"), None),
        (Name::new("b"), Some(&after[0])),
        (Name::new("c"), Some(&after[1])),
        (Name::new("d"), Some(&after[2])),
    ];
    let want = full.compute(&ns, &name, &service, &refs);
    assert_eq!(want, ts(4));
    assert_eq!(
        incremental.compute_changed(&ns, &name, &service, &changed),
        Some(want)
    );
    // Nothing moved: no trigger time, on both paths.
    assert_eq!(full.compute(&ns, &name, &service, &refs), None);
    assert_eq!(
        incremental.compute_changed(&ns, &name, &service, &[]),
        Some(None)
    );
    // A service never computed: the caller must do the full computation.
    let other = Name::from("other");
    assert_eq!(
        incremental.compute_changed(&ns, &other, &service, &[]),
        None
    );
}

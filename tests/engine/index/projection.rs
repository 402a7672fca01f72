//! Upstream's pod projection rules, one case each, and the projection as the pod handler uses it.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use sliced::index::{Index, PodProjection, pod_projection};
use sliced::model::{
    ContainerPort, Labels, Meta, Pod, PodBuilder, PodPhase, Protocol, ResourceVersion, Timestamp,
    intern,
};

use super::common::{key, keys_of, labels, meta, service};

fn base() -> Pod {
    Pod::from(PodBuilder {
        meta: Meta {
            resource_version: intern("1"),
            labels: labels(&[("app", "web")]),
            ..meta("ns", "p")
        },
        ready: true,
        ips: [IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))]
            .into_iter()
            .collect(),
        ..PodBuilder::default()
    })
}

/// `base` at resourceVersion 2 with `change` applied.
fn updated(change: impl FnOnce(&mut Pod)) -> Pod {
    let mut p = base();
    p.meta.set_resource_version(ResourceVersion::new("2"));
    change(&mut p);
    p
}

/// (old labels, pod changed) of a projection; `None` when the event is ignored.
type Projected = Option<(Option<Labels>, bool)>;

fn projection(old: &Pod, new: &Pod) -> Projected {
    pod_projection(Some(old), Some(new)).map(|p| (p.old_labels, p.pod_changed))
}

#[test]
fn adds_and_deletes_project_their_labels() {
    let p = base();
    let expected = Some(PodProjection {
        namespace: intern("ns"),
        labels: labels(&[("app", "web")]),
        old_labels: None,
        pod_changed: false,
    });
    assert_eq!(pod_projection(None, Some(&p)), expected);
    assert_eq!(pod_projection(Some(&p), None), expected);
    assert_eq!(pod_projection(None, None), None);
}

#[test]
fn update_rules() {
    let ts = Timestamp::from_second(1_700_000_000).ok();
    let web = Some(labels(&[("app", "web")]));
    let unversioned = |ready: bool| {
        Pod::from(PodBuilder {
            meta: Meta {
                resource_version: intern(""),
                ..base().to_builder().meta
            },
            ready,
            ..base().to_builder()
        })
    };
    let terminating = Pod::from(PodBuilder {
        meta: Meta {
            deletion_timestamp: ts,
            ..base().to_builder().meta
        },
        ..base().to_builder()
    });
    let cases: Vec<(&str, Pod, Pod, Projected)> = vec![
        ("a resync: same resourceVersion", base(), base(), None),
        (
            "same resourceVersion, whatever else differs",
            base(),
            Pod::from(PodBuilder {
                ready: false,
                ..base().to_builder()
            }),
            None,
        ),
        (
            "empty resourceVersions are not a resync",
            unversioned(true),
            unversioned(false),
            Some((None, true)),
        ),
        ("nothing looked at changed", base(), updated(|_| {}), None),
        (
            "phase only",
            base(),
            updated(|p| p.phase = PodPhase::Failed),
            None,
        ),
        (
            "node name and container ports (a pod keeps no annotations)",
            base(),
            updated(|p| {
                p.node_name = Some(intern("n1"));
                p.named_ports = Arc::from(vec![ContainerPort {
                    name: intern("http"),
                    port: 80,
                    protocol: Protocol::Tcp,
                    sidecar: false,
                }]);
            }),
            None,
        ),
        (
            "readiness",
            base(),
            updated(|p| p.ready = false),
            Some((None, true)),
        ),
        (
            "becomes terminating",
            base(),
            updated(|p| p.meta.set_deletion_timestamp(ts)),
            Some((None, true)),
        ),
        (
            "terminating before and after counts as changed",
            terminating.clone(),
            updated(|p| p.meta.set_deletion_timestamp(ts)),
            Some((None, true)),
        ),
        (
            "an IP changes",
            base(),
            updated(|p| p.set_ips([IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))])),
            Some((None, true)),
        ),
        (
            "an IP is added",
            base(),
            updated(|p| {
                let added = [IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))];
                p.set_ips(p.ips().iter().copied().chain(added).collect::<Vec<_>>())
            }),
            Some((None, true)),
        ),
        (
            "labels only",
            base(),
            updated(|p| p.meta.labels = labels(&[("app", "db")])),
            Some((web.clone(), false)),
        ),
        (
            "hostname only",
            base(),
            updated(|p| p.set_hostname(Some(intern("h")))),
            Some((web.clone(), false)),
        ),
        (
            "subdomain only",
            base(),
            updated(|p| p.set_subdomain(Some(intern("s")))),
            Some((web.clone(), false)),
        ),
        (
            "an empty hostname is no hostname",
            base(),
            updated(|p| p.set_hostname(Some(intern("")))),
            None,
        ),
        (
            "labels and readiness",
            base(),
            updated(|p| {
                p.meta.labels = labels(&[("app", "db")]);
                p.ready = false;
            }),
            Some((web.clone(), true)),
        ),
    ];
    for (what, old, new, expected) in cases {
        assert_eq!(projection(&old, &new), expected, "{what}");
    }
}

#[test]
fn apply_projected_gives_the_handler_its_projection() {
    let index = Index::new();
    index
        .services()
        .apply(service("ns", "web", Some(&[("app", "web")])));
    let to_update = |p: Option<PodProjection>| {
        p.map(|p| keys_of(&index.services_to_update(&p)))
            .unwrap_or_default()
    };

    let (old, _, projection) = index.pods().apply_projected(base());
    assert!(old.is_none());
    assert_eq!(to_update(projection), ["ns/web"]);

    let (old, _, projection) = index.pods().apply_projected(base());
    assert!(old.is_some());
    assert_eq!(projection, None, "a resync projects to nothing");

    let relabel = updated(|p| p.meta.labels = labels(&[("app", "x")]));
    let (_, _, projection) = index.pods().apply_projected(relabel);
    assert_eq!(to_update(projection), ["ns/web"]);
    assert!(index.members(&key("ns", "web")).is_empty());
}

/// A watched update brings its own copy of the pod's name; the engine keeps one, the stored
/// pod's, for every version of a pod.
#[test]
fn an_updated_pod_keeps_the_stored_name() {
    use sliced::change::Change;
    use sliced::engine::{Engine, EngineOptions};
    use sliced::queue::{Clock, VirtualClock};

    let engine = Engine::new(
        EngineOptions::default(),
        Arc::new(VirtualClock::new()) as Arc<dyn Clock>,
    );
    engine.handle(Change::Service(service(
        "ns",
        "web",
        Some(&[("app", "web")]),
    )));
    engine.handle(Change::Pod(base()));
    let first = engine.index().pods().get("ns", "p").unwrap();
    let update = updated(|p| p.ready = false);
    assert_ne!(
        update.meta.name.as_str().as_ptr(),
        first.meta.name.as_str().as_ptr(),
        "the update's name is a string of its own"
    );
    engine.handle(Change::Pod(update));
    let stored = engine.index().pods().get("ns", "p").unwrap();
    assert!(!stored.ready);
    assert_eq!(
        stored.meta.name.as_str().as_ptr(),
        first.meta.name.as_str().as_ptr()
    );
}

//! MemorySink: the API server rules.

use sliced::model::{AddressType, Endpoints, Labels, Name, Timestamp, keys};
use sliced::sink::{Kind, MemorySink, Object, Sink, Verb, WriteError, WriteRecord};

use super::common::*;

#[test]
fn generated_names_are_prefix_plus_five_alphabet_chars_and_deterministic() {
    let names = |seed: u64| -> Vec<(Name, Name)> {
        let sink = MemorySink::new(seed);
        (0..20)
            .map(|_| {
                let o = sink.create(obj(&v4("", &[]))).unwrap();
                (o.meta().name.clone(), o.meta().uid.clone())
            })
            .collect()
    };
    let a = names(7);
    assert_eq!(a, names(7));
    assert_ne!(a, names(8));
    for (name, uid) in &a {
        let suffix = name.strip_prefix("svc-").unwrap();
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(suffix.chars().all(|c| ALPHABET.contains(c)), "{name}");
        let groups: Vec<usize> = uid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{uid}");
    }
    let distinct: std::collections::BTreeSet<_> = a.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(distinct.len(), a.len());
}

#[test]
fn generated_name_collision_is_retried() {
    let first = MemorySink::new(3).create(obj(&v4("", &[]))).unwrap();
    let sink = MemorySink::new(3);
    // A uid is given so that preloading draws nothing from the PRNG.
    let mut taken = v4(&first.meta().name, &[]);
    taken.meta.uid = "preloaded".into();
    existing(&sink, taken);
    let second = sink.create(obj(&v4("", &[]))).unwrap();
    assert_ne!(second.meta().name, first.meta().name);
    assert!(second.meta().name.starts_with("svc-"));
    assert_eq!(sink.list_slices("ns").len(), 2);
}

#[test]
fn create_assigns_server_fields_and_keeps_the_rest() {
    let sink = MemorySink::new(1);
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    sink.set_now(now);
    let sent = v4("", &["10.0.0.1"]);
    let stored = sink.create(obj(&sent)).unwrap().into_slice().unwrap();
    assert_eq!(stored.meta.generation, 1);
    assert_eq!(stored.meta.resource_version.as_str(), "1");
    assert_eq!(stored.meta.creation_timestamp, Some(now));
    assert!(!stored.meta.uid.is_empty());
    assert_eq!(stored.endpoints, sent.endpoints);
    assert_eq!(stored.meta.labels, sent.meta.labels);
    assert_eq!(stored.generate_name, sent.generate_name);
    let got = sink
        .get(Kind::EndpointSlice, "ns", &stored.meta.name)
        .unwrap();
    assert_eq!(got, Object::from(stored.clone()));
    assert_eq!(
        sink.writes(),
        vec![WriteRecord {
            verb: Verb::Create,
            sent: obj(&sent),
            stored: Some(got),
        }]
    );
}

#[test]
fn create_rejects_missing_and_duplicate_names() {
    let sink = MemorySink::new(1);
    let mut nameless = v4("", &[]);
    nameless.generate_name = None;
    let err = sink.create(obj(&nameless)).unwrap_err();
    assert_eq!(err.status_code(), 422);
    let nameless_ep = Object::from(Endpoints::default());
    assert_eq!(sink.create(nameless_ep).unwrap_err().status_code(), 422);

    sink.create(obj(&v4("a", &[]))).unwrap();
    let err = sink.create(obj(&v4("a", &[]))).unwrap_err();
    assert!(matches!(err, WriteError::AlreadyExists { .. }));
    assert_eq!(
        err.to_string(),
        "endpointslices.discovery.k8s.io \"a\" already exists"
    );
    assert_eq!(sink.writes().len(), 1);
}

#[test]
fn resource_version_increases_on_every_write() {
    let sink = MemorySink::new(1);
    let mut last = 0;
    let mut check = |o: &Object| {
        let v = rv(o);
        assert!(v > last, "{v} after {last}");
        last = v;
    };
    let a = sink.create(obj(&v4("", &["10.0.0.1"]))).unwrap();
    check(&a);
    let b = sink.create(obj(&v4("", &["10.0.0.2"]))).unwrap();
    check(&b);
    let mut a2 = a.into_slice().unwrap();
    a2.endpoints.push(endpoint("10.0.0.3"));
    let a3 = sink.update(obj(&a2)).unwrap();
    check(&a3);
    let mut ep = Endpoints::default();
    ep.meta.namespace = "ns".into();
    ep.meta.name = "svc".into();
    check(&sink.create(Object::from(ep)).unwrap());
    let mut a4 = a3.into_slice().unwrap();
    a4.meta.labels = a4.meta.labels.with("x", "y");
    check(&sink.update(obj(&a4)).unwrap());
    assert_eq!(sink.revision(), last);
}

#[test]
fn generation_bumps_only_on_spec_or_label_changes() {
    let sink = MemorySink::new(1);
    let s = sink
        .create(obj(&v4("", &["10.0.0.1"])))
        .unwrap()
        .into_slice()
        .unwrap();
    // Annotations are metadata: no bump, but a new resourceVersion.
    let mut annotated = s.clone();
    annotated.meta.annotations = Labels::from_pairs([(keys::ANNOTATION_TRIGGER_TIME, "t")]);
    let after_annotations = sink.update(obj(&annotated)).unwrap().into_slice().unwrap();
    assert_eq!(after_annotations.meta.generation, 1);
    assert!(rv(&obj(&after_annotations)) > rv(&obj(&s)));

    // The API server bumps an EndpointSlice's generation on a label change too.
    let mut labels_only = after_annotations.clone();
    labels_only.meta.labels = s.meta.labels.with("team", "a");
    let after_labels = sink
        .update(obj(&labels_only))
        .unwrap()
        .into_slice()
        .unwrap();
    assert_eq!(after_labels.meta.generation, 2);
    assert_eq!(after_labels.meta.labels, labels_only.meta.labels);

    let mut endpoints = after_labels.clone();
    std::sync::Arc::make_mut(&mut endpoints.endpoints[0])
        .conditions
        .ready = Some(false);
    let after_ep = sink.update(obj(&endpoints)).unwrap().into_slice().unwrap();
    assert_eq!(after_ep.meta.generation, 3);

    let mut ports = after_ep.clone();
    ports.ports[0].port = Some(8080);
    let after_ports = sink.update(obj(&ports)).unwrap().into_slice().unwrap();
    assert_eq!(after_ports.meta.generation, 4);
    // The client's generation is ignored; server-owned fields are kept.
    let mut forged = after_ports.clone();
    forged.meta.generation = 99;
    forged.meta.creation_timestamp = None;
    forged.meta.annotations = forged.meta.annotations.with("k", "v");
    let after_forged = sink.update(obj(&forged)).unwrap().into_slice().unwrap();
    assert_eq!(after_forged.meta.generation, 4);
    assert_eq!(after_forged.meta.uid, s.meta.uid);
    assert_eq!(
        after_forged.meta.creation_timestamp,
        s.meta.creation_timestamp
    );
}

#[test]
fn endpoints_generation_follows_subsets() {
    let sink = MemorySink::new(1);
    let mut ep = Endpoints::default();
    ep.meta.namespace = "ns".into();
    ep.meta.name = "svc".into();
    let stored = sink
        .create(Object::from(ep))
        .unwrap()
        .into_endpoints()
        .unwrap();
    let mut relabelled = stored.clone();
    relabelled.meta.labels = Labels::from_pairs([("a", "b")]);
    let e = sink
        .update(Object::from(relabelled))
        .unwrap()
        .into_endpoints()
        .unwrap();
    assert_eq!(e.meta.generation, 1);
    let mut changed = e.clone();
    changed.subsets.push(Default::default());
    let e = sink
        .update(Object::from(changed))
        .unwrap()
        .into_endpoints()
        .unwrap();
    assert_eq!(e.meta.generation, 2);
}

#[test]
fn noop_update_keeps_the_resource_version() {
    let sink = MemorySink::new(1);
    let s = sink.create(obj(&v4("", &["10.0.0.1"]))).unwrap();
    let again = sink.update(s.clone()).unwrap();
    assert_eq!(again, s);
    assert_eq!(sink.revision(), 1);
    assert_eq!(sink.writes().len(), 2);
}

#[test]
fn stale_resource_version_conflicts_and_empty_one_is_unconditional() {
    let sink = MemorySink::new(1);
    let s = existing(&sink, v4("a", &["10.0.0.1"]));
    let mut first = s.clone();
    first.endpoints.push(endpoint("10.0.0.2"));
    sink.update(obj(&first)).unwrap();

    let mut stale = s.clone();
    stale.endpoints.push(endpoint("10.0.0.9"));
    let err = sink.update(obj(&stale)).unwrap_err();
    assert!(matches!(err, WriteError::Conflict { .. }));
    assert!(err.is_conflict());
    assert_eq!(err.status_code(), 409);
    assert!(err.to_string().contains("the object has been modified"));

    // A recycled slice: whole new content, no resourceVersion, no uid.
    let mut recycled = v4("a", &["10.1.0.1"]);
    recycled.meta.resource_version = Name::default();
    let stored = sink.update(obj(&recycled)).unwrap().into_slice().unwrap();
    assert_eq!(stored.endpoints, recycled.endpoints);
    assert_eq!(stored.meta.uid, s.meta.uid);
    assert_eq!(stored.meta.generation, 3);
}

#[test]
fn update_errors() {
    let sink = MemorySink::new(1);
    let err = sink.update(obj(&v4("missing", &[]))).unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(
        err.to_string(),
        "endpointslices.discovery.k8s.io \"missing\" not found"
    );

    let s = existing(&sink, v4("a", &[]));
    let mut v6 = s.clone();
    v6.address_type = AddressType::IPv6;
    let err = sink.update(obj(&v6)).unwrap_err();
    assert_eq!(err.status_code(), 422);
    assert!(err.to_string().contains("addressType"), "{err}");
    assert!(err.to_string().contains("field is immutable"), "{err}");

    let mut other_uid = s.clone();
    other_uid.meta.uid = "someone-else".into();
    assert!(sink.update(obj(&other_uid)).unwrap_err().is_conflict());
    assert!(sink.writes().is_empty());
}

#[test]
fn delete_checks_the_uid_precondition() {
    let sink = MemorySink::new(1);
    let s = existing(&sink, v4("a", &[]));
    let mut wrong = s.clone();
    wrong.meta.uid = "not-it".into();
    let err = sink.delete(&obj(&wrong)).unwrap_err();
    assert!(err.is_conflict());
    assert!(err.to_string().contains("Precondition failed"), "{err}");
    assert!(sink.get(Kind::EndpointSlice, "ns", "a").is_some());

    sink.delete(&obj(&s)).unwrap();
    assert!(sink.get(Kind::EndpointSlice, "ns", "a").is_none());
    assert!(sink.delete(&obj(&s)).unwrap_err().is_not_found());

    // No uid: delete by name.
    existing(&sink, v4("b", &[]));
    sink.delete(&obj(&v4("b", &[]))).unwrap();
    let log = sink.writes();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].verb, Verb::Delete);
    assert_eq!(log[0].stored, None);
}

#[test]
fn terminating_namespace_refuses_creates_only() {
    let sink = MemorySink::new(1);
    let s = existing(&sink, v4("a", &[]));
    sink.set_namespace_terminating("ns", true);
    let err = sink.create(obj(&v4("", &[]))).unwrap_err();
    assert!(err.is_namespace_terminating());
    assert_eq!(err.status_code(), 403);
    assert_eq!(
        err.to_string(),
        "endpointslices.discovery.k8s.io is forbidden: unable to create new content in namespace ns because it is being terminated"
    );
    let err = sink.create(obj(&v4("named", &[]))).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("endpointslices.discovery.k8s.io \"named\" is forbidden")
    );
    assert!(
        sink.create(obj(&slice("other", "", AddressType::IPv4, &[])))
            .is_ok()
    );

    let mut changed = s.clone();
    changed.endpoints.push(endpoint("10.0.0.1"));
    sink.update(obj(&changed)).unwrap();
    sink.set_namespace_terminating("ns", false);
    sink.create(obj(&v4("", &[]))).unwrap();
}

#[test]
fn injected_failures_are_used_up_and_change_nothing() {
    let sink = MemorySink::new(1);
    let s = existing(&sink, v4("a", &["10.0.0.1"]));
    sink.fail_next(Verb::Update, Kind::EndpointSlice, boom(), 2);
    let mut changed = s.clone();
    changed.endpoints.clear();
    assert_eq!(sink.update(obj(&changed)).unwrap_err(), boom());
    // Other verbs and kinds are not affected.
    sink.create(obj(&v4("", &[]))).unwrap();
    assert_eq!(sink.update(obj(&changed)).unwrap_err(), boom());
    assert_eq!(
        sink.get(Kind::EndpointSlice, "ns", "a").unwrap(),
        obj(&s),
        "failed writes change nothing"
    );
    sink.update(obj(&changed)).unwrap();
    assert_eq!(sink.writes().len(), 2);

    // Injections queue up in order.
    sink.fail_next(Verb::Delete, Kind::EndpointSlice, boom(), 1);
    sink.fail_next(
        Verb::Delete,
        Kind::EndpointSlice,
        WriteError::Conflict {
            kind: "x",
            name: "a".into(),
        },
        1,
    );
    assert_eq!(sink.delete(&obj(&v4("a", &[]))).unwrap_err(), boom());
    assert!(sink.delete(&obj(&v4("a", &[]))).unwrap_err().is_conflict());
    sink.delete(&obj(&v4("a", &[]))).unwrap();
}

#[test]
fn preloaded_objects_keep_their_fields_and_listing_is_ordered() {
    let sink = MemorySink::new(1);
    let mut kept = v4("b", &[]);
    kept.meta.uid = "uid-b".into();
    kept.meta.resource_version = "500".into();
    kept.meta.generation = 7;
    let stored = existing(&sink, kept.clone());
    assert_eq!(stored.meta.uid.as_str(), "uid-b");
    assert_eq!(stored.meta.resource_version.as_str(), "500");
    assert_eq!(stored.meta.generation, 7);
    let filled = existing(&sink, v4("a", &[]));
    assert!(!filled.meta.uid.is_empty());
    assert_eq!(filled.meta.resource_version.as_str(), "501");
    assert_eq!(filled.meta.generation, 1);
    let mut ep = Endpoints::default();
    ep.meta.namespace = "a-ns".into();
    ep.meta.name = "svc".into();
    sink.insert_existing(Object::from(ep)).unwrap();
    existing(&sink, slice("z-ns", "c", AddressType::IPv6, &[]));
    assert!(sink.writes().is_empty());

    let listed: Vec<(Kind, String)> = sink
        .objects()
        .iter()
        .map(|o| (o.kind(), o.meta().key()))
        .collect();
    assert_eq!(
        listed,
        vec![
            (Kind::EndpointSlice, "ns/a".to_string()),
            (Kind::EndpointSlice, "ns/b".to_string()),
            (Kind::EndpointSlice, "z-ns/c".to_string()),
            (Kind::Endpoints, "a-ns/svc".to_string()),
        ]
    );
    let names: Vec<String> = sink
        .list_slices("ns")
        .iter()
        .map(|s| s.meta.name.to_string())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(sink.list_slices("a-ns").is_empty());
    let created = sink.create(obj(&v4("", &[]))).unwrap();
    assert_eq!(rv(&created), 504);
}

#[test]
fn memory_sink_is_shareable_across_threads() {
    let sink = std::sync::Arc::new(MemorySink::new(9));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let sink = sink.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let s = slice(&format!("ns{t}"), &format!("s{i}"), AddressType::IPv4, &[]);
                    sink.create(Object::from(s)).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(sink.len(), 100);
    assert_eq!(sink.revision(), 100);
}

//! apply_plan: upstream's finalize ordering and error rules.

use sliced::model::{AddressType, EndpointSlice, Name};
use sliced::reconcile::{AddressTypePlan, Plan};
use sliced::sink::{
    ApplyOutcome, Kind, MemorySink, Sink, TypeStatus, Verb, WriteError, apply_plan,
};

use super::common::*;

fn plan(per_type: Vec<AddressTypePlan>, unsupported: Vec<EndpointSlice>) -> Plan {
    Plan {
        service_key: "ns/svc".into(),
        per_type,
        unsupported_deletes: unsupported,
        ..Plan::default()
    }
}

fn type_plan(
    address_type: AddressType,
    creates: Vec<EndpointSlice>,
    updates: Vec<EndpointSlice>,
    deletes: Vec<EndpointSlice>,
) -> AddressTypePlan {
    AddressTypePlan {
        address_type: Some(address_type),
        creates,
        updates,
        deletes,
        ..AddressTypePlan::default()
    }
}

/// A server with v4 slices u1, u2, d1, d2, v6 slices u6, d6 and an unsupported x1, x2, x3; and the
/// plan: v4 creates 2, updates u1 u2, deletes d1 d2; v6 creates 1, updates u6, deletes d6; then the
/// unsupported deletes.
fn setup() -> (MemorySink, Plan) {
    let sink = MemorySink::new(42);
    let upd = |name: &str, at: AddressType| {
        let mut s = existing(&sink, slice("ns", name, at, &["10.0.0.1"]));
        s.endpoints.push(endpoint("10.0.0.2"));
        s
    };
    let v4_updates = vec![upd("u1", AddressType::IPv4), upd("u2", AddressType::IPv4)];
    let v6_updates = vec![upd("u6", AddressType::IPv6)];
    let del = |name: &str, at: AddressType| existing(&sink, slice("ns", name, at, &[]));
    let v4_deletes = vec![del("d1", AddressType::IPv4), del("d2", AddressType::IPv4)];
    let v6_deletes = vec![del("d6", AddressType::IPv6)];
    let other = AddressType::Other("IP".into());
    let unsupported = vec![
        del("x1", other.clone()),
        del("x2", other.clone()),
        del("x3", other),
    ];
    let new = |at: AddressType| slice("ns", "", at, &["10.9.0.1"]);
    let p = plan(
        vec![
            type_plan(
                AddressType::IPv4,
                vec![new(AddressType::IPv4), new(AddressType::IPv4)],
                v4_updates,
                v4_deletes,
            ),
            type_plan(
                AddressType::IPv6,
                vec![new(AddressType::IPv6)],
                v6_updates,
                v6_deletes,
            ),
        ],
        unsupported,
    );
    (sink, p)
}

fn summary(out: &ApplyOutcome) -> Vec<String> {
    out.records
        .iter()
        .map(|r| match r.verb {
            Verb::Create => format!("create {}", r.object.as_slice().unwrap().address_type),
            v => format!("{} {}", v.as_str(), r.object.meta().name),
        })
        .collect()
}

#[test]
fn apply_orders_creates_updates_deletes_per_type_then_unsupported() {
    let (sink, mut p) = setup();
    let out = apply_plan(&sink, &mut p);
    assert!(out.is_success(), "{:?}", out.errors);
    assert_eq!(
        summary(&out),
        [
            "create IPv4",
            "create IPv4",
            "update u1",
            "update u2",
            "delete d1",
            "delete d2",
            "create IPv6",
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3",
        ]
    );
    assert_eq!((out.creates, out.updates, out.deletes), (3, 3, 6));
    assert_eq!(out.changes(Verb::Delete), 6);
    assert!(
        out.per_type
            .iter()
            .all(|t| t.status == TypeStatus::Completed)
    );
    assert_eq!(out.per_type[0].planned, 6);
    // Records carry the server's answers: created slices have names and generation 1, updated ones
    // generation 2.
    let created = out.records[0].object.as_slice().unwrap();
    assert!(created.meta.name.starts_with("svc-") && created.meta.generation == 1);
    assert_eq!(out.records[2].object.meta().generation, 2);
    assert_eq!(sink.list_slices("ns").len(), 6);
    // The server saw the same sequence.
    let verbs: Vec<Verb> = sink.writes().iter().map(|w| w.verb).collect();
    let expected: Vec<Verb> = out.records.iter().map(|r| r.verb).collect();
    assert_eq!(verbs, expected);
    assert_eq!(out.error_message(), None);
}

#[test]
fn create_failure_ends_that_type_only() {
    let (sink, mut p) = setup();
    sink.fail_next(Verb::Create, Kind::EndpointSlice, boom(), 1);
    let out = apply_plan(&sink, &mut p);
    assert_eq!(
        out.errors,
        ["failed to create EndpointSlice for Service ns/svc: boom"]
    );
    assert_eq!(
        summary(&out),
        [
            "create IPv6",
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3",
        ]
    );
    assert_eq!(out.per_type[0].status, TypeStatus::Failed);
    assert_eq!(out.per_type[1].status, TypeStatus::Completed);
    assert!(!out.is_success());
}

#[test]
fn update_failure_skips_remaining_updates_and_deletes() {
    let (sink, mut p) = setup();
    sink.fail_next(Verb::Update, Kind::EndpointSlice, boom(), 1);
    let out = apply_plan(&sink, &mut p);
    assert_eq!(
        out.errors,
        ["failed to update u1 EndpointSlice for Service ns/svc: boom"]
    );
    assert_eq!(
        summary(&out),
        [
            "create IPv4",
            "create IPv4",
            "create IPv6",
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3",
        ]
    );
}

#[test]
fn delete_failure_skips_remaining_deletes() {
    let (sink, mut p) = setup();
    sink.fail_next(Verb::Delete, Kind::EndpointSlice, boom(), 1);
    let out = apply_plan(&sink, &mut p);
    assert_eq!(
        out.errors,
        ["failed to delete d1 EndpointSlice for Service ns/svc: boom"]
    );
    assert_eq!(
        summary(&out),
        [
            "create IPv4",
            "create IPv4",
            "update u1",
            "update u2",
            "create IPv6",
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3",
        ]
    );
    assert!(sink.get(Kind::EndpointSlice, "ns", "d2").is_some());
}

#[test]
fn stale_update_reports_the_conflict() {
    let (sink, mut p) = setup();
    p.per_type[0].updates[0].meta.resource_version = "999".into();
    let out = apply_plan(&sink, &mut p);
    assert_eq!(out.errors.len(), 1);
    assert!(
        out.errors[0].starts_with(
            "failed to update u1 EndpointSlice for Service ns/svc: Operation cannot be fulfilled on endpointslices.discovery.k8s.io \"u1\""
        ),
        "{}",
        out.errors[0]
    );
}

#[test]
fn terminating_namespace_abandons_the_type_without_error() {
    let (sink, mut p) = setup();
    // The second type has no creates, so it still runs in full.
    p.per_type[1].creates.clear();
    sink.set_namespace_terminating("ns", true);
    let out = apply_plan(&sink, &mut p);
    assert!(out.is_success(), "{:?}", out.errors);
    assert_eq!(
        summary(&out),
        [
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3",
        ]
    );
    assert_eq!(out.per_type[0].status, TypeStatus::NamespaceTerminating);
    assert_eq!(out.per_type[1].status, TypeStatus::Completed);
    assert!(sink.get(Kind::EndpointSlice, "ns", "d1").is_some());
}

#[test]
fn terminating_cause_on_create_lets_the_next_type_create() {
    let (sink, mut p) = setup();
    let terminating = WriteError::NamespaceTerminating {
        kind: Kind::EndpointSlice.resource(),
        name: Name::default(),
        namespace: "ns".into(),
    };
    sink.fail_next(Verb::Create, Kind::EndpointSlice, terminating, 1);
    let out = apply_plan(&sink, &mut p);
    assert!(out.is_success(), "{:?}", out.errors);
    assert_eq!(
        summary(&out),
        [
            "create IPv6",
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3"
        ]
    );
    assert_eq!(out.per_type[0].status, TypeStatus::NamespaceTerminating);
}

#[test]
fn unsupported_deletes_continue_after_errors() {
    let (sink, p) = setup();
    // Per-type deletes use the first injection; x1 and x2 fail, x3 goes through.
    let mut p = plan(Vec::new(), p.unsupported_deletes);
    sink.fail_next(Verb::Delete, Kind::EndpointSlice, boom(), 2);
    let out = apply_plan(&sink, &mut p);
    assert_eq!(
        out.errors,
        [
            "error deleting x1 EndpointSlice for Service ns/svc: boom",
            "error deleting x2 EndpointSlice for Service ns/svc: boom",
        ]
    );
    assert_eq!(summary(&out), ["delete x3"]);
    assert_eq!(
        out.error_message().unwrap(),
        "[error deleting x1 EndpointSlice for Service ns/svc: boom, error deleting x2 EndpointSlice for Service ns/svc: boom]"
    );
}

#[test]
fn deleting_a_missing_slice_is_success_but_not_counted() {
    let (sink, mut p) = setup();
    sink.delete(&obj(&p.per_type[0].deletes[0])).unwrap();
    sink.delete(&obj(&p.unsupported_deletes[2])).unwrap();
    let out = apply_plan(&sink, &mut p);
    assert!(out.is_success(), "{:?}", out.errors);
    assert_eq!(out.deletes, 4);
    assert!(!summary(&out).contains(&"delete d1".to_string()));
}

#[test]
fn plan_errors_come_after_write_errors() {
    let (sink, mut p) = setup();
    p.errors = vec!["skipping Pod p for Service ns/svc: Node n Not Found".to_string()];
    sink.fail_next(Verb::Update, Kind::EndpointSlice, boom(), 2);
    let out = apply_plan(&sink, &mut p);
    assert_eq!(
        out.errors,
        [
            "failed to update u1 EndpointSlice for Service ns/svc: boom",
            "failed to update u6 EndpointSlice for Service ns/svc: boom",
            "skipping Pod p for Service ns/svc: Node n Not Found",
        ]
    );
    // Writes go ahead despite the plan's own errors.
    let plain = setup();
    let mut p2 = plain.1;
    p2.errors = vec!["e".into(), "e".into()];
    let out = apply_plan(&plain.0, &mut p2);
    assert_eq!(out.records.len(), 12);
    assert!(!out.is_success());
    assert_eq!(out.error_message().unwrap(), "e");
}

#[test]
fn writes_sent_together_are_recorded_in_plan_order() {
    let (sink, mut p) = setup();
    let out = apply_plan(&Together(&sink), &mut p);
    assert!(out.is_success(), "{:?}", out.errors);
    let (serial_sink, mut serial_plan) = setup();
    let serial = apply_plan(&serial_sink, &mut serial_plan);
    assert_eq!(summary(&out), summary(&serial));
    assert_eq!((out.creates, out.updates, out.deletes), (3, 3, 6));
    assert_eq!(sink.list_slices("ns").len(), 6);
}

/// A refusal cannot recall the writes of its step already sent: the others are made and recorded
/// (the tracker must know of them), and the address type still ends there.
#[test]
fn a_refusal_among_writes_sent_together_ends_the_type_after_its_step() {
    let (sink, mut p) = setup();
    sink.fail_next(Verb::Update, Kind::EndpointSlice, boom(), 1);
    let out = apply_plan(&Together(&sink), &mut p);
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    let made = summary(&out);
    let (refused, accepted) = if made.contains(&"update u1".to_string()) {
        ("u2", "update u1")
    } else {
        ("u1", "update u2")
    };
    assert_eq!(
        out.errors[0],
        format!("failed to update {refused} EndpointSlice for Service ns/svc: boom")
    );
    assert_eq!(
        made,
        [
            "create IPv4",
            "create IPv4",
            accepted,
            "create IPv6",
            "update u6",
            "delete d6",
            "delete x1",
            "delete x2",
            "delete x3",
        ]
    );
    assert_eq!(out.per_type[0].status, TypeStatus::Failed);
    // What the server holds is what the outcome says was written.
    assert_eq!(sink.writes().len(), out.records.len());
}

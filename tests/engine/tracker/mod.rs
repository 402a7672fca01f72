//! The controller's write-tracking state: the EndpointSlice generation tracker, the slice event
//! decisions built on it, and the trigger-time tracker. Cases follow upstream's unit and
//! controller tests.

mod events;
mod generations;
mod trigger;

use sliced::model::{AddressType, EndpointSlice, Labels, Meta, Name, intern, keys};

/// A slice in `ns` with the given UID and generation, labelled for `service` (no label when
/// `None`) and managed by `managed_by` (no label when `None`).
pub fn slice(
    ns: &str,
    service: Option<&str>,
    uid: &str,
    generation: i64,
    managed_by: Option<&str>,
) -> EndpointSlice {
    let mut labels: Vec<(&str, &str)> = Vec::new();
    if let Some(s) = service {
        labels.push((keys::LABEL_SERVICE_NAME, s));
    }
    if let Some(m) = managed_by {
        labels.push((keys::LABEL_MANAGED_BY, m));
    }
    EndpointSlice {
        meta: Meta {
            namespace: intern(ns),
            name: Name::new(&format!("{}-{uid}", service.unwrap_or("orphan"))),
            uid: Name::new(uid),
            generation,
            labels: Labels::from_pairs(labels),
            ..Meta::default()
        },
        generate_name: None,
        owner_references: Vec::new(),
        address_type: AddressType::IPv4,
        ports: Vec::new(),
        endpoints: Vec::new(),
    }
}

/// A slice of service `svc1` in `ns1`, as upstream's tracker tests use, without managed-by.
pub fn plain(uid: &str, generation: i64) -> EndpointSlice {
    slice("ns1", Some("svc1"), uid, generation, None)
}

/// A slice of `ns1/svc1` managed by the EndpointSlice controller.
pub fn ours(uid: &str, generation: i64) -> EndpointSlice {
    slice(
        "ns1",
        Some("svc1"),
        uid,
        generation,
        Some(keys::ENDPOINTSLICE_CONTROLLER),
    )
}

pub fn n(s: &str) -> Name {
    intern(s)
}

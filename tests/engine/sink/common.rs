//! Builders shared by the sink tests.

use std::net::IpAddr;
use std::sync::Arc;

use sliced::model::{
    Address, AddressType, Conditions, Endpoint, EndpointPort, EndpointSlice, Labels, Meta,
    Protocol, keys,
};
use sliced::sink::{MemorySink, Object, WriteError};

pub const ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

pub fn endpoint(ip: &str) -> Arc<Endpoint> {
    let ip: IpAddr = ip.parse().unwrap();
    Arc::new(Endpoint {
        addresses: [Address::Ip(ip)].into_iter().collect(),
        conditions: Conditions {
            ready: Some(true),
            serving: Some(true),
            terminating: Some(false),
        },
        hostname: None,
        target_ref: None,
        node_name: None,
        zone: None,
        hints: None,
    })
}

/// A slice of service ns/svc; an empty name makes it a generateName create.
pub fn slice(ns: &str, name: &str, address_type: AddressType, ips: &[&str]) -> EndpointSlice {
    EndpointSlice {
        meta: Meta {
            namespace: ns.into(),
            name: name.into(),
            labels: Labels::from_pairs([(keys::LABEL_SERVICE_NAME, "svc")]),
            ..Meta::default()
        },
        generate_name: Some("svc-".into()),
        owner_references: Vec::new(),
        address_type,
        ports: vec![EndpointPort {
            name: Some("http".into()),
            port: Some(80),
            protocol: Some(Protocol::Tcp),
            app_protocol: None,
        }],
        endpoints: ips.iter().map(|ip| endpoint(ip)).collect(),
    }
}

pub fn v4(name: &str, ips: &[&str]) -> EndpointSlice {
    slice("ns", name, AddressType::IPv4, ips)
}

pub fn obj(s: &EndpointSlice) -> Object {
    Object::from(s.clone())
}

pub fn rv(o: &Object) -> u64 {
    o.meta().resource_version.parse().unwrap()
}

/// Preloads a slice and returns the stored copy.
pub fn existing(sink: &MemorySink, s: EndpointSlice) -> EndpointSlice {
    sink.insert_existing(Object::from(s))
        .unwrap()
        .into_slice()
        .unwrap()
}

pub fn boom() -> WriteError {
    WriteError::Status {
        code: 500,
        reason: "InternalError".into(),
        message: "boom".into(),
    }
}

/// The memory sink, taking several writes at once: the executor sends a step's writes, and the
/// engine the writes of different services, together.
pub struct Together<'a>(pub &'a MemorySink);

impl sliced::sink::Sink for Together<'_> {
    fn create(&self, object: Object) -> Result<Object, WriteError> {
        self.0.create(object)
    }
    fn update(&self, object: Object) -> Result<Object, WriteError> {
        self.0.update(object)
    }
    fn delete(&self, object: &Object) -> Result<(), WriteError> {
        self.0.delete(object)
    }
    fn concurrency(&self) -> usize {
        4
    }
}

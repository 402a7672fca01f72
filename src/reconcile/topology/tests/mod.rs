//! Tests of the topology module through its public API, one file per area; shared fixtures here.

mod add_hints;
mod cache;
mod traffic;

use std::net::IpAddr;

use smallvec::smallvec;

use super::*;
use crate::model::{Address, Conditions, Endpoint, Hints, Meta, Name, Node, intern};
use crate::reconcile::EventType;

const V4: AddressType = AddressType::IPv4;
const KEY: &str = "ns/svc";

fn node(name: &str, zone: Option<&str>, cpu: i64, ready: bool) -> Node {
    Node {
        name: intern(name),
        labels: Labels::from_pairs(zone.map(|z| (keys::LABEL_ZONE, z))),
        ready,
        allocatable_cpu_millis: cpu,
        ..Node::default()
    }
}

/// A cache whose zones have these CPU amounts, one node each.
fn cache_with(zones: &[(&str, i64)]) -> TopologyCache {
    let nodes: Vec<Node> = zones
        .iter()
        .enumerate()
        .map(|(i, (z, cpu))| node(&format!("n{i}"), Some(z), *cpu, true))
        .collect();
    let mut cache = TopologyCache::new();
    cache.set_nodes(&nodes);
    cache
}

fn ep(ip: &str, zone: Option<&str>, ready: bool) -> Endpoint {
    let addr: IpAddr = ip.parse().unwrap();
    Endpoint {
        addresses: smallvec![Address::Ip(addr)],
        conditions: Conditions {
            ready: Some(ready),
            serving: Some(ready),
            terminating: Some(false),
        },
        hostname: None,
        target_ref: None,
        node_name: Some(Name::new(&format!("node-{ip}"))),
        zone: zone.map(intern),
        hints: None,
    }
}

fn hinted(mut e: Endpoint, zone: &str) -> Endpoint {
    e.hints = Some(Box::new(Hints {
        for_zones: smallvec![intern(zone)],
        for_nodes: smallvec![],
    }));
    e
}

fn slice(name: &str, endpoints: Vec<Endpoint>) -> EndpointSlice {
    EndpointSlice {
        meta: Meta {
            namespace: intern("ns"),
            name: intern(name),
            resource_version: intern("42"),
            ..Meta::default()
        },
        generate_name: None,
        owner_references: Vec::new(),
        address_type: V4,
        ports: Vec::new(),
        endpoints: endpoints.into_iter().map(std::sync::Arc::new).collect(),
    }
}

fn service(annotations: &[(&str, &str)], td: Option<&str>) -> Service {
    Service {
        meta: Meta {
            namespace: intern("ns"),
            name: intern("svc"),
            annotations: Labels::from_pairs(annotations.iter().copied()),
            ..Meta::default()
        },
        traffic_distribution: td.map(intern),
        ..Service::default()
    }
}

fn auto() -> Service {
    service(&[(keys::ANNOTATION_TOPOLOGY_MODE, "Auto")], None)
}

struct Run {
    out: TopologyOutput,
    creates: Vec<EndpointSlice>,
    updates: Vec<EndpointSlice>,
}

fn run(
    svc: &Service,
    cache: &TopologyCache,
    options: &Options,
    creates: Vec<EndpointSlice>,
    updates: Vec<EndpointSlice>,
    unchanged: &[&EndpointSlice],
) -> Run {
    let input = TopologyInput {
        service: svc,
        service_key: KEY,
        address_type: &V4,
        options,
        cache,
    };
    let (mut creates, mut updates) = (creates, updates);
    let out = apply_hints(&input, &mut creates, &mut updates, unchanged);
    Run {
        out,
        creates,
        updates,
    }
}

/// The zone hints of each endpoint, "-" for none.
fn zones(slice: &EndpointSlice) -> Vec<String> {
    slice
        .endpoints
        .iter()
        .map(|e| match &e.hints {
            Some(h) => h
                .for_zones
                .iter()
                .map(|z| z.to_string())
                .collect::<Vec<_>>()
                .join(","),
            None => "-".to_owned(),
        })
        .collect()
}

fn no_hints(slices: &[EndpointSlice]) -> bool {
    slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .all(|e| e.hints.is_none())
}

fn counts(change: &Option<TopologyChange>) -> Vec<(String, usize)> {
    match change {
        Some(TopologyChange::Populated { zone_counts, .. }) => zone_counts
            .iter()
            .map(|(z, n)| (z.to_string(), *n))
            .collect(),
        other => panic!("expected Populated, got {other:?}"),
    }
}

fn removed() -> Option<TopologyChange> {
    Some(TopologyChange::Removed { address_type: V4 })
}

fn event(out: &TopologyOutput) -> (EventType, &'static str, &str) {
    assert_eq!(out.events.len(), 1, "{:?}", out.events);
    let e = &out.events[0];
    (e.event_type, e.reason, e.message.as_str())
}

fn populated(cache: &mut TopologyCache, zone_counts: &[(&str, usize)]) {
    let change = TopologyChange::Populated {
        address_type: V4,
        zone_counts: zone_counts.iter().map(|(z, n)| (intern(z), *n)).collect(),
    };
    cache.apply(KEY, &[change]);
}

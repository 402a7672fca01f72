//! EndpointSlices and Endpoints, both ways. Writing gives what the API server would serve back, so
//! that reading it again gives the same model.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;

use super::{
    ConvertError, MetaRules, ip, meta_from_k8s, meta_to_k8s, opt_intern, opt_name, opt_string,
    owner_references, port, protocol, target_ref_from_k8s, target_ref_to_k8s,
};
use crate::model::{
    Address, AddressType, Conditions, Endpoint, EndpointAddress, EndpointPort, EndpointSlice,
    EndpointSubset, Endpoints, EndpointsPort, Hints, IpFamily, Name, intern,
};

const SLICE: MetaRules = MetaRules {
    namespaced: true,
    intern_name: false,
    generate_name: true,
};
const ENDPOINTS: MetaRules = MetaRules {
    namespaced: true,
    intern_name: true,
    generate_name: false,
};

pub fn endpoint_slice_from_k8s(
    s: &discovery::EndpointSlice,
) -> Result<EndpointSlice, ConvertError> {
    let meta = meta_from_k8s(&s.metadata, SLICE)?;
    let address_type = AddressType::parse(&s.address_type);
    let ports = s
        .ports
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, p)| {
            let at = |f: &str| format!("ports[{i}].{f}");
            Ok(EndpointPort {
                name: opt_intern(&p.name),
                port: p.port.map(|n| port(n, 0, || at("port"))).transpose()?,
                protocol: protocol(p.protocol.as_deref().unwrap_or_default(), || at("protocol"))?,
                app_protocol: opt_intern(&p.app_protocol),
            })
        })
        .collect::<Result<_, ConvertError>>()?;
    let endpoints = s
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| endpoint(i, e, &address_type).map(Arc::new))
        .collect::<Result<_, _>>()?;
    Ok(EndpointSlice {
        generate_name: s
            .metadata
            .generate_name
            .as_deref()
            .filter(|g| !g.is_empty())
            .map(intern),
        owner_references: owner_references(&s.metadata),
        meta,
        address_type,
        ports,
        endpoints,
    })
}

fn endpoint(
    i: usize,
    e: &discovery::Endpoint,
    address_type: &AddressType,
) -> Result<Endpoint, ConvertError> {
    let addresses = e
        .addresses
        .iter()
        .enumerate()
        .map(|(j, a)| address(a, address_type, || format!("endpoints[{i}].addresses[{j}]")))
        .collect::<Result<_, _>>()?;
    let conditions = e
        .conditions
        .as_ref()
        .map_or(Conditions::default(), |c| Conditions {
            ready: c.ready,
            serving: c.serving,
            terminating: c.terminating,
        });
    let hints = e.hints.as_ref().map(|h| {
        Box::new(Hints {
            for_zones: h
                .for_zones
                .iter()
                .flatten()
                .map(|z| intern(&z.name))
                .collect(),
            for_nodes: h
                .for_nodes
                .iter()
                .flatten()
                .map(|n| intern(&n.name))
                .collect(),
        })
    });
    Ok(Endpoint {
        addresses,
        conditions,
        hostname: opt_name(&e.hostname),
        target_ref: e.target_ref.as_ref().map(target_ref_from_k8s),
        node_name: opt_intern(&e.node_name),
        zone: opt_intern(&e.zone),
        hints,
    })
}

/// An address of an IPv4 or IPv6 slice must be an IP of that family, as API validation requires;
/// other address types keep the text.
fn address(
    s: &str,
    address_type: &AddressType,
    path: impl Fn() -> String,
) -> Result<Address, ConvertError> {
    let Some(family) = address_type.family() else {
        return Ok(Address::Text(Name::new(s)));
    };
    let ip = ip(s, &path)?;
    if IpFamily::of(&ip) != family {
        return Err(ConvertError::new(
            path(),
            format!("{s:?} is not an {address_type} address (addressType is {address_type})"),
        ));
    }
    Ok(Address::Ip(ip))
}

pub fn endpoint_slice_to_k8s(s: &EndpointSlice) -> discovery::EndpointSlice {
    discovery::EndpointSlice {
        metadata: meta_to_k8s(&s.meta, s.generate_name.as_ref(), &s.owner_references),
        address_type: s.address_type.to_string(),
        // Always a list, never null: what the controller writes.
        ports: Some(
            s.ports
                .iter()
                .map(|p| discovery::EndpointPort {
                    name: opt_string(&p.name),
                    port: p.port,
                    protocol: p.protocol.map(|p| p.as_str().to_owned()),
                    app_protocol: opt_string(&p.app_protocol),
                })
                .collect(),
        ),
        endpoints: s.endpoints.iter().map(|e| endpoint_to_k8s(e)).collect(),
    }
}

fn endpoint_to_k8s(e: &Endpoint) -> discovery::Endpoint {
    discovery::Endpoint {
        addresses: e.addresses.iter().map(|a| a.to_string()).collect(),
        // Go's struct is never omitted: the server always serves `conditions`.
        conditions: Some(discovery::EndpointConditions {
            ready: e.conditions.ready,
            serving: e.conditions.serving,
            terminating: e.conditions.terminating,
        }),
        deprecated_topology: None,
        hints: e.hints.as_ref().map(|h| discovery::EndpointHints {
            for_zones: (!h.for_zones.is_empty()).then(|| {
                h.for_zones
                    .iter()
                    .map(|z| discovery::ForZone {
                        name: z.to_string(),
                    })
                    .collect()
            }),
            for_nodes: (!h.for_nodes.is_empty()).then(|| {
                h.for_nodes
                    .iter()
                    .map(|n| discovery::ForNode {
                        name: n.to_string(),
                    })
                    .collect()
            }),
        }),
        hostname: opt_string(&e.hostname),
        node_name: opt_string(&e.node_name),
        target_ref: e.target_ref.as_ref().map(target_ref_to_k8s),
        zone: opt_string(&e.zone),
    }
}

pub fn endpoints_from_k8s(e: &core::Endpoints) -> Result<Endpoints, ConvertError> {
    let meta = meta_from_k8s(&e.metadata, ENDPOINTS)?;
    let subsets = e
        .subsets
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| subset(i, s))
        .collect::<Result<_, _>>()?;
    Ok(Endpoints { meta, subsets })
}

fn subset(i: usize, s: &core::EndpointSubset) -> Result<EndpointSubset, ConvertError> {
    let addresses = |field: &str, list: &Option<Vec<core::EndpointAddress>>| {
        list.iter()
            .flatten()
            .enumerate()
            .map(|(j, a)| {
                // Custom Endpoints may hold anything: mirroring skips what is not an IP, with a
                // warning, so it is kept as written rather than refused.
                let address = match ip(&a.ip, || format!("subsets[{i}].{field}[{j}].ip")) {
                    Ok(ip) => Address::Ip(ip),
                    Err(_) => Address::Text(Name::new(&a.ip)),
                };
                Ok(Arc::new(EndpointAddress {
                    ip: address,
                    hostname: opt_name(&a.hostname),
                    node_name: opt_intern(&a.node_name),
                    target_ref: a.target_ref.as_ref().map(target_ref_from_k8s),
                }))
            })
            .collect::<Result<Vec<_>, ConvertError>>()
    };
    let ports = s
        .ports
        .iter()
        .flatten()
        .enumerate()
        .map(|(j, p)| {
            let at = |f: &str| format!("subsets[{i}].ports[{j}].{f}");
            Ok(EndpointsPort {
                name: opt_intern(&p.name),
                port: port(p.port, 1, || at("port"))?,
                protocol: protocol(p.protocol.as_deref().unwrap_or_default(), || at("protocol"))?,
                app_protocol: opt_intern(&p.app_protocol),
            })
        })
        .collect::<Result<_, ConvertError>>()?;
    Ok(EndpointSubset {
        addresses: addresses("addresses", &s.addresses)?,
        not_ready_addresses: addresses("notReadyAddresses", &s.not_ready_addresses)?,
        ports,
    })
}

pub fn endpoints_to_k8s(e: &Endpoints) -> core::Endpoints {
    // Empty lists are omitted, as Go's omitempty does.
    fn addresses(list: &[Arc<EndpointAddress>]) -> Option<Vec<core::EndpointAddress>> {
        (!list.is_empty()).then(|| {
            list.iter()
                .map(|a| core::EndpointAddress {
                    ip: a.ip.to_string(),
                    hostname: opt_string(&a.hostname),
                    node_name: opt_string(&a.node_name),
                    target_ref: a.target_ref.as_ref().map(target_ref_to_k8s),
                })
                .collect()
        })
    }
    core::Endpoints {
        metadata: meta_to_k8s(&e.meta, None, &[]),
        subsets: (!e.subsets.is_empty()).then(|| {
            e.subsets
                .iter()
                .map(|s| core::EndpointSubset {
                    addresses: addresses(&s.addresses),
                    not_ready_addresses: addresses(&s.not_ready_addresses),
                    ports: (!s.ports.is_empty()).then(|| {
                        s.ports
                            .iter()
                            .map(|p| core::EndpointPort {
                                name: opt_string(&p.name),
                                port: p.port,
                                protocol: p.protocol.map(|p| p.as_str().to_owned()),
                                app_protocol: opt_string(&p.app_protocol),
                            })
                            .collect()
                    }),
                })
                .collect()
        }),
    }
}

//! Semantic equality of Endpoints content, as upstream's skip check sees it: Go strings make an
//! empty string and an absent one the same, pointers (nodeName, appProtocol) do not; a target's
//! resourceVersion is ignored. Order counts here; upstream also compares the stored subsets
//! repacked (see `sync`), so an object merely in another order is not rewritten.

use std::sync::Arc;

use crate::model::{EndpointAddress, EndpointSubset, EndpointsPort, Name, TargetRef, Uid};

/// A string field: `None` and `Some("")` are the same.
pub(crate) fn text(n: &Option<Name>) -> &str {
    n.as_ref().map_or("", |n| n.as_str())
}

pub(crate) fn same_port(a: &EndpointsPort, b: &EndpointsPort) -> bool {
    text(&a.name) == text(&b.name)
        && a.port == b.port
        && a.protocol == b.protocol
        && a.app_protocol == b.app_protocol
}

/// The same ports in the same order.
pub(crate) fn same_ports(a: &[EndpointsPort], b: &[EndpointsPort]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| same_port(p, q))
}

fn same_target(a: &TargetRef, b: &TargetRef) -> bool {
    text(&a.kind) == text(&b.kind)
        && text(&a.namespace) == text(&b.namespace)
        && text(&a.name) == text(&b.name)
        && a.uid.as_ref().unwrap_or(&Uid::EMPTY) == b.uid.as_ref().unwrap_or(&Uid::EMPTY)
        && text(&a.api_version) == text(&b.api_version)
}

pub(crate) fn same_address(a: &EndpointAddress, b: &EndpointAddress) -> bool {
    a.ip == b.ip
        && text(&a.hostname) == text(&b.hostname)
        && a.node_name == b.node_name
        && match (&a.target_ref, &b.target_ref) {
            (None, None) => true,
            (Some(x), Some(y)) => same_target(x, y),
            _ => false,
        }
}

fn same_addresses(a: &[Arc<EndpointAddress>], b: &[Arc<EndpointAddress>]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| Arc::ptr_eq(x, y) || same_address(x, y))
}

/// Two subset lists hold the same subsets in the same order.
pub fn same_subsets(a: &[EndpointSubset], b: &[EndpointSubset]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            same_ports(&x.ports, &y.ports)
                && same_addresses(&x.addresses, &y.addresses)
                && same_addresses(&x.not_ready_addresses, &y.not_ready_addresses)
        })
}

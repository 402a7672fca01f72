//! The service controller's decisions, by upstream's rules (`cloud-provider/controllers/service`):
//! which Services want a load balancer, which change needs a sync, which nodes back a load
//! balancer, and when a status is already what the provider reported.

use std::collections::BTreeMap;

use crate::model::{LoadBalancerIngress, Name, Node, Service, ServiceType};

/// The label that takes a node out of every load balancer's backends.
pub const LABEL_EXCLUDE_FROM_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// `--lb-class`: the `spec.loadBalancerClass` sliced answers for besides none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassFilter(pub Option<Name>);

impl ClassFilter {
    /// Upstream takes only Services without a class. sliced also takes those of its own class, so
    /// that it can run beside another implementation that answers for a different one.
    pub fn accepts(&self, class: Option<&Name>) -> bool {
        match class {
            None => true,
            Some(class) => self.0.as_ref() == Some(class),
        }
    }
}

/// Of type LoadBalancer, with no class or ours. As upstream's `wantsLoadBalancer`, the deletion
/// timestamp is not read here: [`needs_cleanup`] weighs it.
pub fn wants_load_balancer(service: &Service, classes: &ClassFilter) -> bool {
    service.service_type == ServiceType::LoadBalancer
        && classes.accepts(
            service
                .load_balancer
                .as_ref()
                .and_then(|lb| lb.class.as_ref()),
        )
}

/// Holds the cleanup finalizer and is being deleted or no longer of type LoadBalancer: the load
/// balancer must go before the finalizer does.
pub fn needs_cleanup(service: &Service) -> bool {
    let finalizer = service
        .load_balancer
        .as_ref()
        .is_some_and(|lb| lb.has_cleanup_finalizer());
    finalizer
        && (service.meta.deletion_timestamp.is_some()
            || service.service_type != ServiceType::LoadBalancer)
}

/// Upstream's `needsUpdate`: whether a change of a Service is one a load balancer reflects. Labels,
/// finalizers, status, the selector and the other traffic policies are not.
pub fn needs_update(old: &Service, new: &Service, classes: &ClassFilter) -> bool {
    let (old_wants, new_wants) = (
        wants_load_balancer(old, classes),
        wants_load_balancer(new, classes),
    );
    if !old_wants && !new_wants {
        return false;
    }
    if old_wants != new_wants {
        return true;
    }
    let (Some(a), Some(b)) = (&old.load_balancer, &new.load_balancer) else {
        // Both want a load balancer, so both carry the fields.
        return true;
    };
    a.source_ranges != b.source_ranges
        || !same_ports(old, new)
        || a.session_affinity != b.session_affinity
        || a.session_affinity_timeout != b.session_affinity_timeout
        || a.load_balancer_ip != b.load_balancer_ip
        || a.external_ips != b.external_ips
        || old.meta.annotations != new.meta.annotations
        || old.meta.uid != new.meta.uid
        || a.external_traffic_policy != b.external_traffic_policy
        || a.health_check_node_port != b.health_check_node_port
        || old.ip_families.len() != new.ip_families.len()
}

/// Ports compared index by index on what a load balancer forwards.
fn same_ports(old: &Service, new: &Service) -> bool {
    old.ports.len() == new.ports.len()
        && old.ports.iter().zip(&new.ports).all(|(a, b)| {
            a.name == b.name
                && a.protocol == b.protocol
                && a.port == b.port
                && a.node_port == b.node_port
                && a.target_port == b.target_port
                && a.app_protocol == b.app_protocol
        })
}

/// Whether `node` backs load balancers (upstream's stable node-set predicates since KEP-3458):
/// not being deleted, not excluded by label, not about to be removed by the cluster autoscaler.
/// Readiness and `spec.unschedulable` no longer count.
pub fn backs_load_balancers(node: &Node) -> bool {
    !node.deleting && !node.to_be_deleted && !excluded(node)
}

/// The exclusion label's value read as a Go boolean (upstream since PR #131085): `false` (and
/// its spellings) keeps the node, anything else, empty or unreadable included, excludes it.
fn excluded(node: &Node) -> bool {
    match node.labels.get(LABEL_EXCLUDE_FROM_LOAD_BALANCERS) {
        None => false,
        Some(value) => !matches!(
            value.as_str(),
            "0" | "f" | "F" | "false" | "FALSE" | "False"
        ),
    }
}

/// Upstream's `shouldSyncUpdatedNode`: a node change matters to load balancers only when the
/// predicates' verdict or the provider ID moves. Heartbeats, readiness, other labels and taints
/// cost nothing.
pub fn node_change_matters(old: &Node, new: &Node) -> bool {
    backs_load_balancers(old) != backs_load_balancers(new) || old.provider_id != new.provider_id
}

/// The backends of a load balancer: node names and their provider IDs.
pub type HostSet = BTreeMap<Name, Option<Name>>;

/// The nodes that back load balancers, out of `nodes`.
pub fn host_set<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> HostSet {
    nodes
        .into_iter()
        .filter(|n| backs_load_balancers(n))
        .map(|n| (n.name.clone(), n.provider_id.clone()))
        .collect()
}

/// Upstream's status comparison: the same entries in order by IP, hostname and IP mode.
pub fn same_ingress(a: &[LoadBalancerIngress], b: &[LoadBalancerIngress]) -> bool {
    a == b
}

#[cfg(test)]
mod tests;

//! What the service (LoadBalancer) controller reads of a Service, beyond what the endpoint
//! controllers read.

use std::net::IpAddr;

use smallvec::SmallVec;

use super::Name;

/// The finalizer the service controller puts on a Service before it ensures a load balancer, and
/// takes off once the load balancer is deleted.
pub const LOAD_BALANCER_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// A Service's load-balancer fields: kept only for a Service of type LoadBalancer, one carrying the
/// cleanup finalizer, or one with load-balancer ingress, so that the other Services of a large
/// cluster pay one pointer for them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceLoadBalancer {
    /// `spec.loadBalancerClass`.
    pub class: Option<Name>,
    /// `metadata.finalizers`, all of them, in order: a patch must keep the others'.
    pub finalizers: Vec<Name>,
    pub external_traffic_policy: TrafficPolicy,
    pub health_check_node_port: Option<i32>,
    /// `spec.loadBalancerIP` as written (deprecated upstream, still read by providers).
    pub load_balancer_ip: Option<Name>,
    /// `spec.loadBalancerSourceRanges`, in order (upstream compares them in order).
    pub source_ranges: Vec<Name>,
    pub external_ips: Vec<Name>,
    /// `spec.sessionAffinity`, as written.
    pub session_affinity: Option<Name>,
    /// `spec.sessionAffinityConfig.clientIP.timeoutSeconds`.
    pub session_affinity_timeout: Option<i32>,
    pub ip_family_policy: IpFamilyPolicy,
    /// `spec.clusterIPs`: an address allocator checks a dual-stack Service has two.
    pub cluster_ips: SmallVec<[IpAddr; 2]>,
    /// `status.loadBalancer.ingress`, in order.
    pub ingress: Vec<LoadBalancerIngress>,
}

impl ServiceLoadBalancer {
    pub fn has_cleanup_finalizer(&self) -> bool {
        self.finalizers
            .iter()
            .any(|f| f.as_str() == LOAD_BALANCER_CLEANUP_FINALIZER)
    }
}

/// `spec.externalTrafficPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrafficPolicy {
    #[default]
    Cluster,
    Local,
}

/// `spec.ipFamilyPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IpFamilyPolicy {
    #[default]
    SingleStack,
    PreferDualStack,
    RequireDualStack,
}

/// One entry of `status.loadBalancer.ingress` (its `ports` are not kept: upstream's status
/// comparison ignores them and sliced's provider reports none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadBalancerIngress {
    pub ip: Option<IpAddr>,
    pub hostname: Option<Name>,
    /// `ipMode`: `VIP` or `Proxy`.
    pub ip_mode: Option<Name>,
}

impl LoadBalancerIngress {
    pub fn ip(ip: IpAddr) -> Self {
        LoadBalancerIngress {
            ip: Some(ip),
            ..LoadBalancerIngress::default()
        }
    }
}

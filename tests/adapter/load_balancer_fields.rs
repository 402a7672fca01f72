//! What the service controller reads of a Service and a Node, from their JSON form: each field
//! named, and Services that no load balancer concerns left without the fields.

use k8s_openapi::api::core::v1 as core;
use serde_json::json;
use sliced::kube::convert::{node_from_k8s, service_from_k8s};
use sliced::model::{IpFamilyPolicy, LoadBalancerIngress, TrafficPolicy};

fn service(value: serde_json::Value) -> Result<sliced::model::Service, String> {
    let svc: core::Service = serde_json::from_value(value).map_err(|e| e.to_string())?;
    service_from_k8s(&svc).map_err(|e| e.to_string())
}

#[test]
fn a_load_balancer_services_fields_are_read() {
    let s = service(json!({
        "metadata": {"name": "web", "namespace": "shop",
            "finalizers": ["example.com/keep", "service.kubernetes.io/load-balancer-cleanup"]},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": "sliced.io/pools",
            "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::10"],
            "ipFamilyPolicy": "RequireDualStack", "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 31000, "loadBalancerIP": "192.0.2.10",
            "loadBalancerSourceRanges": ["10.0.0.0/8", "192.168.0.0/16"],
            "externalIPs": ["198.51.100.1"], "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
            "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [
            {"ip": "192.0.2.10", "ipMode": "VIP"}, {"hostname": "lb.example.com"}]}}
    }))
    .unwrap();
    let lb = s.load_balancer.as_deref().expect("load-balancer fields");
    assert_eq!(
        lb.class.as_deref().map(|c| c.to_string()),
        Some("sliced.io/pools".into())
    );
    assert!(lb.has_cleanup_finalizer());
    assert_eq!(lb.finalizers.len(), 2);
    assert_eq!(lb.finalizers[0].to_string(), "example.com/keep");
    assert_eq!(lb.external_traffic_policy, TrafficPolicy::Local);
    assert_eq!(lb.ip_family_policy, IpFamilyPolicy::RequireDualStack);
    assert_eq!(lb.health_check_node_port, Some(31000));
    assert_eq!(
        lb.load_balancer_ip.as_ref().map(|i| i.to_string()),
        Some("192.0.2.10".into())
    );
    let ranges: Vec<String> = lb.source_ranges.iter().map(|r| r.to_string()).collect();
    assert_eq!(ranges, ["10.0.0.0/8", "192.168.0.0/16"]);
    assert_eq!(lb.external_ips.len(), 1);
    assert_eq!(
        lb.session_affinity.as_ref().map(|a| a.to_string()),
        Some("ClientIP".into())
    );
    assert_eq!(lb.session_affinity_timeout, Some(600));
    let cluster_ips: Vec<String> = lb.cluster_ips.iter().map(|i| i.to_string()).collect();
    assert_eq!(cluster_ips, ["10.96.0.10", "fd00::10"]);
    assert_eq!(lb.ingress.len(), 2);
    assert_eq!(lb.ingress[0].ip, Some("192.0.2.10".parse().unwrap()));
    assert_eq!(
        lb.ingress[0].ip_mode.as_ref().map(|m| m.to_string()),
        Some("VIP".into())
    );
    assert_eq!(
        lb.ingress[1],
        LoadBalancerIngress {
            hostname: Some(sliced::model::Name::new("lb.example.com")),
            ..LoadBalancerIngress::default()
        }
    );
}

#[test]
fn services_no_load_balancer_concerns_carry_no_fields() {
    let plain = service(json!({"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}));
    assert!(plain.unwrap().load_balancer.is_none());
    // Still holding the finalizer after a type change: the controller must clean up.
    let left = service(json!({"metadata": {"name": "a",
        "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]},
        "spec": {"type": "ClusterIP", "ports": [{"port": 80}]}}));
    assert!(left.unwrap().load_balancer.is_some());
    let ingress = service(json!({"metadata": {"name": "a"},
        "spec": {"type": "NodePort", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}));
    assert!(ingress.unwrap().load_balancer.is_some());
}

#[test]
fn bad_load_balancer_fields_are_named() {
    let cases = [
        (
            json!({"externalTrafficPolicy": "Nowhere"}),
            "spec.externalTrafficPolicy",
        ),
        (
            json!({"ipFamilyPolicy": "TripleStack"}),
            "spec.ipFamilyPolicy",
        ),
    ];
    for (spec, field) in cases {
        let mut spec_value = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
        for (k, v) in spec.as_object().unwrap() {
            spec_value[k] = v.clone();
        }
        let error = service(json!({"metadata": {"name": "a"}, "spec": spec_value})).unwrap_err();
        assert!(error.contains(field), "{error}");
    }
    let error = service(json!({"metadata": {"name": "a"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}}))
    .unwrap_err();
    assert!(
        error.contains("status.loadBalancer.ingress[0].ip"),
        "{error}"
    );
}

#[test]
fn a_nodes_provider_id_deletion_and_autoscaler_taint_are_read() {
    let node: core::Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "deletionTimestamp": "2026-11-27T10:00:00Z"},
        "spec": {"providerID": "aws:///eu-west-1a/i-0abc", "taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
            {"key": "ToBeDeletedByClusterAutoscaler", "value": "1732700000", "effect": "NoSchedule"}]}
    }))
    .unwrap();
    let n = node_from_k8s(&node).unwrap();
    assert_eq!(
        n.provider_id.as_ref().map(|p| p.to_string()),
        Some("aws:///eu-west-1a/i-0abc".into())
    );
    assert!(n.deleting);
    assert!(n.to_be_deleted);
    let plain: core::Node = serde_json::from_value(json!({"metadata": {"name": "n2"},
        "spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscalerX", "effect": "NoSchedule"}]}}))
    .unwrap();
    let n = node_from_k8s(&plain).unwrap();
    assert!(!n.deleting && !n.to_be_deleted && n.provider_id.is_none());
}

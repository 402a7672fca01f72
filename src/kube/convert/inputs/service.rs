//! A Service written back as Kubernetes JSON: every field `service_from_k8s` reads.

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::Serializer;

use super::{Ip, LabelMap, Metadata, Object, opt_str};
use crate::model::{
    ClusterIp, IpFamily, IpFamilyPolicy, Name, Service, ServicePort, ServiceType, TargetPort,
    TrafficPolicy,
};

/// A Service as JSON: every field `service_from_k8s` reads.
pub struct ServiceJson<'a>(pub &'a Service);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceSpec<'a> {
    #[serde(rename = "type")]
    type_: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<LabelMap<'a>>,
    #[serde(rename = "clusterIP", skip_serializing_if = "Option::is_none")]
    cluster_ip: Option<Cow<'static, str>>,
    #[serde(rename = "clusterIPs", skip_serializing_if = "Vec::is_empty")]
    cluster_ips: Vec<Cow<'static, str>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ip_families: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_family_policy: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ports: Vec<ServicePortJson<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    publish_not_ready_addresses: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    traffic_distribution: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    external_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    load_balancer_class: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    external_traffic_policy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    health_check_node_port: Option<i32>,
    #[serde(rename = "loadBalancerIP", skip_serializing_if = "Option::is_none")]
    load_balancer_ip: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    load_balancer_source_ranges: Vec<&'a str>,
    #[serde(rename = "externalIPs", skip_serializing_if = "Vec::is_empty")]
    external_ips: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_affinity: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_affinity_config: Option<serde_json::Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServicePortJson<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    port: i32,
    target_port: TargetPortJson<'a>,
    protocol: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_protocol: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_port: Option<i32>,
}

struct TargetPortJson<'a>(&'a TargetPort);

impl Serialize for TargetPortJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            TargetPort::Number(n) => s.serialize_i32(*n),
            TargetPort::Name(name) => s.serialize_str(name),
        }
    }
}

#[derive(Serialize)]
struct ServiceStatus<'a> {
    #[serde(rename = "loadBalancer")]
    load_balancer: Ingresses<'a>,
}

#[derive(Serialize)]
struct Ingresses<'a> {
    ingress: Vec<IngressJson<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IngressJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ip: Option<Ip>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hostname: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_mode: Option<&'a str>,
}

fn cluster_ip_text(ip: &ClusterIp) -> Option<Cow<'static, str>> {
    match ip {
        ClusterIp::Unset => None,
        ClusterIp::Headless => Some(Cow::Borrowed("None")),
        ClusterIp::Ip(ip) => Some(Cow::Owned(ip.to_string())),
    }
}

fn service_port(p: &ServicePort) -> ServicePortJson<'_> {
    ServicePortJson {
        name: p.name.as_str(),
        port: p.port,
        target_port: TargetPortJson(&p.target_port),
        protocol: p.protocol.as_str(),
        app_protocol: opt_str(&p.app_protocol),
        node_port: p.node_port,
    }
}

impl Serialize for ServiceJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let svc = self.0;
        let lb = svc.load_balancer.as_deref();
        let mut metadata = Metadata::of(&svc.meta);
        if let Some(lb) = lb {
            metadata.finalizers = lb.finalizers.iter().map(Name::as_str).collect();
        }
        let primary = cluster_ip_text(&svc.cluster_ip);
        let mut cluster_ips: Vec<Cow<'static, str>> = Vec::new();
        if primary.is_some() || svc.secondary_cluster_ip.is_some() {
            cluster_ips.push(primary.clone().unwrap_or_default());
        }
        cluster_ips.extend(
            svc.secondary_cluster_ip
                .map(|ip| Cow::Owned(ip.to_string())),
        );
        let spec = ServiceSpec {
            type_: match svc.service_type {
                ServiceType::ClusterIp => "ClusterIP",
                ServiceType::NodePort => "NodePort",
                ServiceType::LoadBalancer => "LoadBalancer",
                ServiceType::ExternalName => "ExternalName",
            },
            selector: svc.selector.as_ref().map(LabelMap),
            cluster_ip: primary,
            cluster_ips,
            ip_families: (svc.ip_families.iter())
                .map(|f| match f {
                    IpFamily::V4 => "IPv4",
                    IpFamily::V6 => "IPv6",
                })
                .collect(),
            ip_family_policy: lb.map(|lb| match lb.ip_family_policy {
                IpFamilyPolicy::SingleStack => "SingleStack",
                IpFamilyPolicy::PreferDualStack => "PreferDualStack",
                IpFamilyPolicy::RequireDualStack => "RequireDualStack",
            }),
            ports: svc.ports.iter().map(service_port).collect(),
            publish_not_ready_addresses: svc.publish_not_ready_addresses,
            traffic_distribution: opt_str(&svc.traffic_distribution),
            external_name: opt_str(&svc.external_name),
            load_balancer_class: lb.and_then(|lb| opt_str(&lb.class)),
            external_traffic_policy: lb.map(|lb| match lb.external_traffic_policy {
                TrafficPolicy::Cluster => "Cluster",
                TrafficPolicy::Local => "Local",
            }),
            health_check_node_port: lb.and_then(|lb| lb.health_check_node_port),
            load_balancer_ip: lb.and_then(|lb| opt_str(&lb.load_balancer_ip)),
            load_balancer_source_ranges: lb
                .map(|lb| lb.source_ranges.iter().map(Name::as_str).collect())
                .unwrap_or_default(),
            external_ips: lb
                .map(|lb| lb.external_ips.iter().map(Name::as_str).collect())
                .unwrap_or_default(),
            session_affinity: lb.and_then(|lb| opt_str(&lb.session_affinity)),
            session_affinity_config: lb
                .and_then(|lb| lb.session_affinity_timeout)
                .map(|t| serde_json::json!({"clientIP": {"timeoutSeconds": t}})),
        };
        let status = lb
            .filter(|lb| !lb.ingress.is_empty())
            .map(|lb| ServiceStatus {
                load_balancer: Ingresses {
                    ingress: (lb.ingress.iter())
                        .map(|i| IngressJson {
                            ip: i.ip.map(Ip),
                            hostname: opt_str(&i.hostname),
                            ip_mode: opt_str(&i.ip_mode),
                        })
                        .collect(),
                },
            });
        Object {
            api_version: "v1",
            kind: "Service",
            metadata,
            spec: Some(spec),
            status,
        }
        .serialize(s)
    }
}

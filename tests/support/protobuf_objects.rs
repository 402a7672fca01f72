//! Pods, nodes, EndpointSlices and Endpoints as the API server sends them in protobuf, encoded by
//! prost from upstream's messages (`k8s-pb`): the reference the decoders in `src/kube/protobuf/`
//! are tested and benched against, and what the fake API server serves. Every field of the
//! fixtures' objects is carried over, the ones the decoders pass over as well, so that the bytes
//! have the real shape and size.

// Each including crate uses a different part.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity as PbQuantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime as pbruntime;
use prost::Message;

fn time(t: &Option<meta::Time>) -> Option<pbmeta::Time> {
    t.as_ref().map(|t| pbmeta::Time {
        seconds: Some(t.0.as_second()),
        nanos: Some(0),
    })
}

fn quantities(m: &Option<BTreeMap<String, Quantity>>) -> BTreeMap<String, PbQuantity> {
    m.iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.clone(),
                PbQuantity {
                    string: Some(v.0.clone()),
                },
            )
        })
        .collect()
}

fn object_meta(m: &meta::ObjectMeta) -> pbmeta::ObjectMeta {
    pbmeta::ObjectMeta {
        name: m.name.clone(),
        generate_name: m.generate_name.clone(),
        namespace: m.namespace.clone(),
        uid: m.uid.clone(),
        resource_version: m.resource_version.clone(),
        generation: m.generation,
        creation_timestamp: time(&m.creation_timestamp),
        deletion_timestamp: time(&m.deletion_timestamp),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.clone().unwrap_or_default(),
        annotations: m.annotations.clone().unwrap_or_default(),
        owner_references: m
            .owner_references
            .iter()
            .flatten()
            .map(|o| pbmeta::OwnerReference {
                api_version: Some(o.api_version.clone()),
                kind: Some(o.kind.clone()),
                name: Some(o.name.clone()),
                uid: Some(o.uid.clone()),
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.clone().unwrap_or_default(),
        managed_fields: m
            .managed_fields
            .iter()
            .flatten()
            .map(|f| pbmeta::ManagedFieldsEntry {
                manager: f.manager.clone(),
                operation: f.operation.clone(),
                api_version: f.api_version.clone(),
                time: time(&f.time),
                fields_type: f.fields_type.clone(),
                fields_v1: f.fields_v1.as_ref().map(|v| pbmeta::FieldsV1 {
                    raw: serde_json::to_vec(&v.0).ok(),
                }),
                subresource: f.subresource.clone(),
            })
            .collect(),
        ..Default::default()
    }
}

fn probe(p: &Option<core::Probe>) -> Option<pb::Probe> {
    p.as_ref().map(|p| pb::Probe {
        handler: p.http_get.as_ref().map(|h| pb::ProbeHandler {
            http_get: Some(pb::HttpGetAction {
                path: h.path.clone(),
                scheme: h.scheme.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        initial_delay_seconds: p.initial_delay_seconds,
        timeout_seconds: p.timeout_seconds,
        period_seconds: p.period_seconds,
        success_threshold: p.success_threshold,
        failure_threshold: p.failure_threshold,
        termination_grace_period_seconds: p.termination_grace_period_seconds,
    })
}

fn container(c: &core::Container) -> pb::Container {
    pb::Container {
        name: Some(c.name.clone()),
        image: c.image.clone(),
        command: c.command.clone().unwrap_or_default(),
        args: c.args.clone().unwrap_or_default(),
        working_dir: c.working_dir.clone(),
        ports: c
            .ports
            .iter()
            .flatten()
            .map(|p| pb::ContainerPort {
                name: p.name.clone(),
                host_port: p.host_port,
                container_port: Some(p.container_port),
                protocol: p.protocol.clone(),
                host_ip: p.host_ip.clone(),
            })
            .collect(),
        env: c
            .env
            .iter()
            .flatten()
            .map(|e| pb::EnvVar {
                name: Some(e.name.clone()),
                value: e.value.clone(),
                value_from: e.value_from.as_ref().map(|v| pb::EnvVarSource {
                    field_ref: v.field_ref.as_ref().map(|f| pb::ObjectFieldSelector {
                        api_version: f.api_version.clone(),
                        field_path: Some(f.field_path.clone()),
                    }),
                    secret_key_ref: v.secret_key_ref.as_ref().map(|s| pb::SecretKeySelector {
                        key: Some(s.key.clone()),
                        local_object_reference: Some(pb::LocalObjectReference {
                            name: Some(s.name.clone()),
                        }),
                        optional: s.optional,
                    }),
                    resource_field_ref: v.resource_field_ref.as_ref().map(|r| {
                        pb::ResourceFieldSelector {
                            container_name: r.container_name.clone(),
                            resource: Some(r.resource.clone()),
                            divisor: r.divisor.as_ref().map(|d| PbQuantity {
                                string: Some(d.0.clone()),
                            }),
                        }
                    }),
                    ..Default::default()
                }),
            })
            .collect(),
        resources: c.resources.as_ref().map(|r| pb::ResourceRequirements {
            limits: quantities(&r.limits),
            requests: quantities(&r.requests),
            ..Default::default()
        }),
        volume_mounts: c
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| pb::VolumeMount {
                name: Some(m.name.clone()),
                read_only: m.read_only,
                mount_path: Some(m.mount_path.clone()),
                sub_path: m.sub_path.clone(),
                ..Default::default()
            })
            .collect(),
        liveness_probe: probe(&c.liveness_probe),
        readiness_probe: probe(&c.readiness_probe),
        startup_probe: probe(&c.startup_probe),
        termination_message_path: c.termination_message_path.clone(),
        termination_message_policy: c.termination_message_policy.clone(),
        image_pull_policy: c.image_pull_policy.clone(),
        restart_policy: c.restart_policy.clone(),
        ..Default::default()
    }
}

fn spec(s: &core::PodSpec) -> pb::PodSpec {
    pb::PodSpec {
        volumes: s
            .volumes
            .iter()
            .flatten()
            .map(|v| pb::Volume {
                name: Some(v.name.clone()),
                volume_source: Some(pb::VolumeSource {
                    config_map: v.config_map.as_ref().map(|c| pb::ConfigMapVolumeSource {
                        local_object_reference: Some(pb::LocalObjectReference {
                            name: Some(c.name.clone()),
                        }),
                        default_mode: c.default_mode,
                        ..Default::default()
                    }),
                    projected: v.projected.as_ref().map(|p| pb::ProjectedVolumeSource {
                        default_mode: p.default_mode,
                        sources: p
                            .sources
                            .iter()
                            .flatten()
                            .map(|_| pb::VolumeProjection::default())
                            .collect(),
                    }),
                    ..Default::default()
                }),
            })
            .collect(),
        init_containers: s.init_containers.iter().flatten().map(container).collect(),
        containers: s.containers.iter().map(container).collect(),
        restart_policy: s.restart_policy.clone(),
        termination_grace_period_seconds: s.termination_grace_period_seconds,
        dns_policy: s.dns_policy.clone(),
        node_selector: s.node_selector.clone().unwrap_or_default(),
        service_account_name: s.service_account_name.clone(),
        service_account: s.service_account_name.clone(),
        node_name: s.node_name.clone(),
        security_context: s
            .security_context
            .as_ref()
            .map(|_| pb::PodSecurityContext::default()),
        hostname: s.hostname.clone(),
        subdomain: s.subdomain.clone(),
        scheduler_name: s.scheduler_name.clone(),
        tolerations: s
            .tolerations
            .iter()
            .flatten()
            .map(|t| pb::Toleration {
                key: t.key.clone(),
                operator: t.operator.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
                toleration_seconds: t.toleration_seconds,
            })
            .collect(),
        priority: s.priority,
        enable_service_links: s.enable_service_links,
        preemption_policy: s.preemption_policy.clone(),
        topology_spread_constraints: s
            .topology_spread_constraints
            .iter()
            .flatten()
            .map(|t| pb::TopologySpreadConstraint {
                max_skew: Some(t.max_skew),
                topology_key: Some(t.topology_key.clone()),
                when_unsatisfiable: Some(t.when_unsatisfiable.clone()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn container_status(c: &core::ContainerStatus) -> pb::ContainerStatus {
    pb::ContainerStatus {
        name: Some(c.name.clone()),
        state: c.state.as_ref().map(|s| pb::ContainerState {
            running: s.running.as_ref().map(|r| pb::ContainerStateRunning {
                started_at: time(&r.started_at),
            }),
            ..Default::default()
        }),
        ready: Some(c.ready),
        restart_count: Some(c.restart_count),
        image: Some(c.image.clone()),
        image_id: Some(c.image_id.clone()),
        container_id: c.container_id.clone(),
        started: c.started,
        ..Default::default()
    }
}

fn status(s: &core::PodStatus) -> pb::PodStatus {
    pb::PodStatus {
        phase: s.phase.clone(),
        conditions: s
            .conditions
            .iter()
            .flatten()
            .map(|c| pb::PodCondition {
                r#type: Some(c.type_.clone()),
                status: Some(c.status.clone()),
                last_probe_time: time(&c.last_probe_time),
                last_transition_time: time(&c.last_transition_time),
                reason: c.reason.clone(),
                message: c.message.clone(),
                observed_generation: c.observed_generation,
            })
            .collect(),
        host_ip: s.host_ip.clone(),
        host_ips: s
            .host_ips
            .iter()
            .flatten()
            .map(|h| pb::HostIp {
                ip: Some(h.ip.clone()),
            })
            .collect(),
        pod_ip: s.pod_ip.clone(),
        pod_ips: s
            .pod_ips
            .iter()
            .flatten()
            .map(|p| pb::PodIp {
                ip: Some(p.ip.clone()),
            })
            .collect(),
        start_time: time(&s.start_time),
        container_statuses: s
            .container_statuses
            .iter()
            .flatten()
            .map(container_status)
            .collect(),
        qos_class: s.qos_class.clone(),
        ..Default::default()
    }
}

/// The `core.v1.Pod` message of `pod`, without the envelope (a list's item).
pub fn pod_message(pod: &core::Pod) -> Vec<u8> {
    pb::Pod {
        metadata: Some(object_meta(&pod.metadata)),
        spec: pod.spec.as_ref().map(spec),
        status: pod.status.as_ref().map(status),
    }
    .encode_to_vec()
}

/// `raw` in the envelope the API server puts around an object: "k8s\0", then `runtime.Unknown`.
pub fn enveloped(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let mut out = b"k8s\0".to_vec();
    pbruntime::Unknown {
        type_meta: Some(pbruntime::TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    }
    .encode(&mut out)
    .expect("a Vec grows");
    out
}

/// The pod as a GET or a watch event's object carries it.
pub fn pod_object(pod: &core::Pod) -> Vec<u8> {
    enveloped("v1", "Pod", pod_message(pod))
}

/// One frame of a watch stream: the length, then a `meta.v1.WatchEvent` without an envelope.
pub fn watch_frame(event_type: &str, object: Vec<u8>) -> Vec<u8> {
    let event = pbmeta::WatchEvent {
        r#type: Some(event_type.to_string()),
        object: Some(pbruntime::RawExtension { raw: Some(object) }),
    }
    .encode_to_vec();
    let mut out = (event.len() as u32).to_be_bytes().to_vec();
    out.extend(event);
    out
}

/// A `PodList` page, enveloped.
pub fn pod_list(pods: &[core::Pod], resource_version: &str, continue_token: &str) -> Vec<u8> {
    let items: Vec<Vec<u8>> = pods.iter().map(pod_message).collect();
    list("v1", "PodList", &items, resource_version, continue_token)
}

/// A list page of any kind, enveloped: ListMeta 1, then each item's message as field 2, the
/// layout every `*List` message of upstream shares.
pub fn list(
    api_version: &str,
    list_kind: &str,
    items: &[Vec<u8>],
    resource_version: &str,
    continue_token: &str,
) -> Vec<u8> {
    let metadata = pbmeta::ListMeta {
        resource_version: Some(resource_version.to_string()),
        r#continue: Some(continue_token.to_string()),
        ..Default::default()
    };
    let mut raw = Vec::new();
    prost::encoding::message::encode(1, &metadata, &mut raw);
    for item in items {
        prost::encoding::bytes::encode(2, item, &mut raw);
    }
    enveloped(api_version, list_kind, raw)
}

/// A `meta.v1.Status`, enveloped: an error answer or a watch's ERROR event.
pub fn status_object(code: i32, reason: &str, message: &str) -> Vec<u8> {
    let status = pbmeta::Status {
        status: Some("Failure".to_string()),
        message: Some(message.to_string()),
        reason: Some(reason.to_string()),
        code: Some(code),
        ..Default::default()
    };
    enveloped("v1", "Status", status.encode_to_vec())
}

/// A bookmark's object: a pod with nothing but a resourceVersion (and annotations).
pub fn bookmark_pod(resource_version: &str, annotations: BTreeMap<String, String>) -> Vec<u8> {
    bookmark("v1", "Pod", resource_version, annotations)
}

/// A bookmark's object of any kind: nothing but metadata (field 1 of every kind) with a
/// resourceVersion and annotations.
pub fn bookmark(
    api_version: &str,
    kind: &str,
    resource_version: &str,
    annotations: BTreeMap<String, String>,
) -> Vec<u8> {
    let metadata = pbmeta::ObjectMeta {
        resource_version: Some(resource_version.to_string()),
        annotations,
        ..Default::default()
    };
    let mut raw = Vec::new();
    prost::encoding::message::encode(1, &metadata, &mut raw);
    enveloped(api_version, kind, raw)
}

fn object_reference(r: &core::ObjectReference) -> pb::ObjectReference {
    pb::ObjectReference {
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        uid: r.uid.clone(),
        api_version: r.api_version.clone(),
        resource_version: r.resource_version.clone(),
        field_path: r.field_path.clone(),
    }
}

/// The `discovery.v1.EndpointSlice` message of `slice`, every field carried over (the
/// deprecated topology too), without the envelope.
pub fn endpoint_slice_message(slice: &k8s_openapi::api::discovery::v1::EndpointSlice) -> Vec<u8> {
    use k8s_pb::api::discovery::v1 as pbd;
    pbd::EndpointSlice {
        metadata: Some(object_meta(&slice.metadata)),
        address_type: Some(slice.address_type.clone()),
        endpoints: slice
            .endpoints
            .iter()
            .map(|e| pbd::Endpoint {
                addresses: e.addresses.clone(),
                conditions: e.conditions.as_ref().map(|c| pbd::EndpointConditions {
                    ready: c.ready,
                    serving: c.serving,
                    terminating: c.terminating,
                }),
                hostname: e.hostname.clone(),
                target_ref: e.target_ref.as_ref().map(object_reference),
                deprecated_topology: e.deprecated_topology.clone().unwrap_or_default(),
                node_name: e.node_name.clone(),
                zone: e.zone.clone(),
                hints: e.hints.as_ref().map(|h| pbd::EndpointHints {
                    for_zones: h
                        .for_zones
                        .iter()
                        .flatten()
                        .map(|z| pbd::ForZone {
                            name: Some(z.name.clone()),
                        })
                        .collect(),
                    for_nodes: h
                        .for_nodes
                        .iter()
                        .flatten()
                        .map(|n| pbd::ForNode {
                            name: Some(n.name.clone()),
                        })
                        .collect(),
                }),
            })
            .collect(),
        ports: slice
            .ports
            .iter()
            .flatten()
            .map(|p| pbd::EndpointPort {
                name: p.name.clone(),
                protocol: p.protocol.clone(),
                port: p.port,
                app_protocol: p.app_protocol.clone(),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// The EndpointSlice as a GET or a watch event's object carries it.
pub fn endpoint_slice_object(slice: &k8s_openapi::api::discovery::v1::EndpointSlice) -> Vec<u8> {
    enveloped(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        endpoint_slice_message(slice),
    )
}

/// The `core.v1.Endpoints` message of `endpoints`, without the envelope.
pub fn endpoints_message(endpoints: &core::Endpoints) -> Vec<u8> {
    let address = |a: &core::EndpointAddress| pb::EndpointAddress {
        ip: Some(a.ip.clone()),
        hostname: a.hostname.clone(),
        node_name: a.node_name.clone(),
        target_ref: a.target_ref.as_ref().map(object_reference),
    };
    pb::Endpoints {
        metadata: Some(object_meta(&endpoints.metadata)),
        subsets: endpoints
            .subsets
            .iter()
            .flatten()
            .map(|s| pb::EndpointSubset {
                addresses: s.addresses.iter().flatten().map(address).collect(),
                not_ready_addresses: s
                    .not_ready_addresses
                    .iter()
                    .flatten()
                    .map(address)
                    .collect(),
                ports: s
                    .ports
                    .iter()
                    .flatten()
                    .map(|p| pb::EndpointPort {
                        name: p.name.clone(),
                        port: Some(p.port),
                        protocol: p.protocol.clone(),
                        app_protocol: p.app_protocol.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// The Endpoints object as a GET or a watch event's object carries it.
pub fn endpoints_object(endpoints: &core::Endpoints) -> Vec<u8> {
    enveloped("v1", "Endpoints", endpoints_message(endpoints))
}

/// The `core.v1.Node` message of `node`, without the envelope: the spec and the status a kubelet
/// reports (addresses, images, system info) carried over for their size.
pub fn node_message(node: &core::Node) -> Vec<u8> {
    let spec = node.spec.as_ref().map(|s| pb::NodeSpec {
        pod_cidr: s.pod_cidr.clone(),
        pod_cid_rs: s.pod_cidrs.clone().unwrap_or_default(),
        provider_id: s.provider_id.clone(),
        unschedulable: s.unschedulable,
        taints: s
            .taints
            .iter()
            .flatten()
            .map(|t| pb::Taint {
                key: Some(t.key.clone()),
                value: t.value.clone(),
                effect: Some(t.effect.clone()),
                time_added: time(&t.time_added),
            })
            .collect(),
        ..Default::default()
    });
    let status = node.status.as_ref().map(|s| pb::NodeStatus {
        capacity: quantities(&s.capacity),
        allocatable: quantities(&s.allocatable),
        phase: s.phase.clone(),
        conditions: s
            .conditions
            .iter()
            .flatten()
            .map(|c| pb::NodeCondition {
                r#type: Some(c.type_.clone()),
                status: Some(c.status.clone()),
                last_heartbeat_time: time(&c.last_heartbeat_time),
                last_transition_time: time(&c.last_transition_time),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
        addresses: s
            .addresses
            .iter()
            .flatten()
            .map(|a| pb::NodeAddress {
                r#type: Some(a.type_.clone()),
                address: Some(a.address.clone()),
            })
            .collect(),
        node_info: s.node_info.as_ref().map(|i| pb::NodeSystemInfo {
            machine_id: Some(i.machine_id.clone()),
            system_uuid: Some(i.system_uuid.clone()),
            boot_id: Some(i.boot_id.clone()),
            kernel_version: Some(i.kernel_version.clone()),
            os_image: Some(i.os_image.clone()),
            container_runtime_version: Some(i.container_runtime_version.clone()),
            kubelet_version: Some(i.kubelet_version.clone()),
            kube_proxy_version: Some(i.kube_proxy_version.clone()),
            operating_system: Some(i.operating_system.clone()),
            architecture: Some(i.architecture.clone()),
            ..Default::default()
        }),
        images: s
            .images
            .iter()
            .flatten()
            .map(|i| pb::ContainerImage {
                names: i.names.clone().unwrap_or_default(),
                size_bytes: i.size_bytes,
            })
            .collect(),
        volumes_in_use: s.volumes_in_use.clone().unwrap_or_default(),
        ..Default::default()
    });
    pb::Node {
        metadata: Some(object_meta(&node.metadata)),
        spec,
        status,
    }
    .encode_to_vec()
}

/// The node as a GET or a watch event's object carries it.
pub fn node_object(node: &core::Node) -> Vec<u8> {
    enveloped("v1", "Node", node_message(node))
}

/// The kinds the fake API server serves as protobuf to a client that asks: those sliced asks
/// for so (its Services are read with kube-rs, which speaks only JSON).
pub fn served_as_protobuf(plural: &str) -> bool {
    type_of(plural).is_some()
}

/// The apiVersion and kind of a kind served as protobuf, by its plural.
pub fn type_of(plural: &str) -> Option<(&'static str, &'static str)> {
    match plural {
        "pods" => Some(("v1", "Pod")),
        "nodes" => Some(("v1", "Node")),
        "endpoints" => Some(("v1", "Endpoints")),
        "endpointslices" => Some(("discovery.k8s.io/v1", "EndpointSlice")),
        _ => None,
    }
}

/// The message (without the envelope) of a stored object given as JSON, by its kind's plural.
pub fn message_of(plural: &str, json: &[u8]) -> Vec<u8> {
    const READABLE: &str = "the fake serves as protobuf only objects k8s-openapi reads";
    match plural {
        "pods" => pod_message(&serde_json::from_slice(json).expect(READABLE)),
        "nodes" => node_message(&serde_json::from_slice(json).expect(READABLE)),
        "endpoints" => endpoints_message(&serde_json::from_slice(json).expect(READABLE)),
        "endpointslices" => endpoint_slice_message(&serde_json::from_slice(json).expect(READABLE)),
        other => panic!("{other} are not served as protobuf"),
    }
}

/// A stored object given as JSON, enveloped, as a watch event carries it.
pub fn object_of(plural: &str, json: &[u8]) -> Vec<u8> {
    let (api_version, kind) = type_of(plural).expect("a kind served as protobuf");
    enveloped(api_version, kind, message_of(plural, json))
}

//! A pod as the watch decodes it: only the fields the controllers read. The parser skips the rest
//! of the JSON (managedFields, annotations, env, probes, volumes, container statuses) without
//! building it, so a real pod decodes several times faster than into k8s-openapi's full `Pod`,
//! and a list page of 500 pods never holds 500 full objects (`benches/watch.rs`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer};

/// `core::Pod` cut down to what [`super::pod_from_watched`] reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WatchedPod {
    #[serde(default, deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<WatchedPodSpec>,
    #[serde(default)]
    pub status: Option<WatchedPodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedPodSpec {
    pub node_name: Option<String>,
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
    pub containers: Option<Vec<WatchedContainer>>,
    pub init_containers: Option<Vec<WatchedContainer>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedContainer {
    pub ports: Option<Vec<core::ContainerPort>>,
    pub restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedPodStatus {
    pub phase: Option<String>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(rename = "podIPs")]
    pub pod_ips: Option<Vec<core::PodIP>>,
    pub conditions: Option<Vec<core::PodCondition>>,
}

/// The metadata fields a pod's conversion reads; the rest is skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
}

fn read_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = PodMetadata::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

fn watched_containers(containers: &[core::Container]) -> Vec<WatchedContainer> {
    containers
        .iter()
        .map(|c| WatchedContainer {
            ports: c.ports.clone(),
            restart_policy: c.restart_policy.clone(),
        })
        .collect()
}

/// The same cut of a full pod (manifests, fixtures): the one conversion serves both.
impl From<&core::Pod> for WatchedPod {
    fn from(pod: &core::Pod) -> Self {
        let m = &pod.metadata;
        WatchedPod {
            metadata: ObjectMeta {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                labels: m.labels.clone(),
                creation_timestamp: m.creation_timestamp.clone(),
                deletion_timestamp: m.deletion_timestamp.clone(),
                ..ObjectMeta::default()
            },
            spec: pod.spec.as_ref().map(|s| WatchedPodSpec {
                node_name: s.node_name.clone(),
                hostname: s.hostname.clone(),
                subdomain: s.subdomain.clone(),
                containers: Some(watched_containers(&s.containers)),
                init_containers: s.init_containers.as_deref().map(watched_containers),
            }),
            status: pod.status.as_ref().map(|s| WatchedPodStatus {
                phase: s.phase.clone(),
                pod_ip: s.pod_ip.clone(),
                pod_ips: s.pod_ips.clone(),
                conditions: s.conditions.clone(),
            }),
        }
    }
}

impl k8s_openapi::Resource for WatchedPod {
    const API_VERSION: &'static str = <core::Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <core::Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <core::Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <core::Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <core::Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for WatchedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

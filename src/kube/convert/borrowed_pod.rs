//! A pod's JSON read straight into [`PodFields`], borrowing every string it keeps from the text:
//! no `String` per field, no label map, no full `PodCondition`; only the lists of containers,
//! ports, pod IPs and conditions are allocated.
//!
//! It takes only what [`WatchedPod`](super::WatchedPod) takes, and reads the same fields from it:
//! each struct below mirrors one of `WatchedPod`'s, type for type, and is read from a mapping only.
//! Fields the controllers do not read are still checked for their type (a `message` that is a
//! number refuses the pod there as well). Where it cannot borrow (a kept string with an escape)
//! or would refuse for any reason, it says so with `None` and the caller decodes `WatchedPod`
//! instead, which words the error or reads the escape: refusing too much costs time, never a
//! different result.

use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use smallvec::SmallVec;

use super::objects::{Mapped, Mapping, mapping, mappings};
use super::pod::{ContainerFields, PodFields, PortFields, ReadyCondition, pod_from_fields};
use super::{ConvertError, time};
use crate::model::Pod;

/// The compact pod of a pod's JSON text, read on the borrowed path; `None` when that path does not
/// take the text (the caller decodes [`WatchedPod`](super::WatchedPod) then).
pub fn pod_from_json_text(text: &str) -> Option<Result<Pod, ConvertError>> {
    let pod: PodDoc<'_> = serde_json::from_str(text).ok()?;
    Some(pod_from_fields(&pod.fields()))
}

/// A string kept as a borrow of the text; one with an escape is refused.
#[derive(Clone, Copy, Default)]
struct Plain<'a>(&'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Plain<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Borrowed;
        impl<'de> Visitor<'de> for Borrowed {
            type Value = Plain<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string without escapes")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Plain<'de>, E> {
                Ok(Plain(s))
            }
        }
        d.deserialize_str(Borrowed)
    }
}

/// A string that is checked for being one, then dropped.
struct AnyString;

impl<'de> Deserialize<'de> for AnyString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Checked;
        impl Visitor<'_> for Checked {
            type Value = AnyString;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<AnyString, E> {
                Ok(AnyString)
            }
        }
        d.deserialize_str(Checked)
    }
}

fn plain(s: Option<Plain<'_>>) -> &str {
    s.map(|p| p.0).unwrap_or_default()
}

/// Labels in the order written, duplicates and all: [`PodFields::labels`] lets a later one win,
/// as the map `WatchedPod` reads into does.
#[derive(Default)]
struct LabelPairs<'a>(SmallVec<[(&'a str, &'a str); 8]>);

impl<'de: 'a, 'a> Deserialize<'de> for LabelPairs<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Pairs<'a>(PhantomData<&'a str>);
        impl<'de: 'a, 'a> Visitor<'de> for Pairs<'a> {
            type Value = LabelPairs<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LabelPairs<'a>, A::Error> {
                let mut pairs = SmallVec::new();
                while let Some((k, v)) = map.next_entry::<Plain<'a>, Plain<'a>>()? {
                    pairs.push((k.0, v.0));
                }
                Ok(LabelPairs(pairs))
            }
        }
        d.deserialize_map(Pairs(PhantomData))
    }
}

#[derive(Deserialize)]
struct PodDoc<'a> {
    #[serde(default, rename = "kind")]
    _kind: Option<IgnoredAny>,
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<IgnoredAny>,
    #[serde(default, borrow, deserialize_with = "metadata")]
    metadata: MetaDoc<'a>,
    #[serde(default, borrow, deserialize_with = "mapping")]
    spec: Option<SpecDoc<'a>>,
    #[serde(default, borrow, deserialize_with = "mapping")]
    status: Option<StatusDoc<'a>>,
}

/// Metadata, when present, is a mapping: `null` is refused, as `WatchedPod` refuses it.
fn metadata<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<MetaDoc<'a>, D::Error> {
    Mapped::<MetaDoc<'a>>::deserialize(d).map(|m| m.0)
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaDoc<'a> {
    #[serde(borrow)]
    name: Option<Plain<'a>>,
    #[serde(borrow)]
    namespace: Option<Plain<'a>>,
    #[serde(borrow)]
    uid: Option<Plain<'a>>,
    #[serde(borrow)]
    resource_version: Option<Plain<'a>>,
    #[serde(borrow)]
    labels: Option<LabelPairs<'a>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecDoc<'a> {
    #[serde(borrow)]
    node_name: Option<Plain<'a>>,
    #[serde(borrow)]
    hostname: Option<Plain<'a>>,
    #[serde(borrow)]
    subdomain: Option<Plain<'a>>,
    #[serde(default, borrow, deserialize_with = "mappings")]
    containers: Option<Vec<ContainerDoc<'a>>>,
    #[serde(default, borrow, deserialize_with = "mappings")]
    init_containers: Option<Vec<ContainerDoc<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerDoc<'a> {
    #[serde(default, borrow, deserialize_with = "mappings")]
    ports: Option<Vec<PortDoc<'a>>>,
    #[serde(borrow)]
    restart_policy: Option<Plain<'a>>,
}

/// k8s-openapi's `ContainerPort`, every field typed as there.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PortDoc<'a> {
    container_port: Option<i32>,
    #[serde(rename = "hostIP")]
    _host_ip: Option<AnyString>,
    #[serde(rename = "hostPort")]
    _host_port: Option<i32>,
    #[serde(borrow)]
    name: Option<Plain<'a>>,
    #[serde(borrow)]
    protocol: Option<Plain<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusDoc<'a> {
    #[serde(borrow)]
    phase: Option<Plain<'a>>,
    #[serde(rename = "podIP", borrow)]
    pod_ip: Option<Plain<'a>>,
    #[serde(rename = "podIPs", default, borrow, deserialize_with = "mappings")]
    pod_ips: Option<Vec<PodIpDoc<'a>>>,
    #[serde(default, borrow, deserialize_with = "mappings")]
    conditions: Option<Vec<ConditionDoc<'a>>>,
}

#[derive(Deserialize)]
struct PodIpDoc<'a> {
    #[serde(borrow)]
    ip: Option<Plain<'a>>,
}

/// k8s-openapi's `PodCondition`, every field typed as there.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConditionDoc<'a> {
    #[serde(rename = "lastProbeTime")]
    _last_probe_time: Option<Time>,
    last_transition_time: Option<Time>,
    #[serde(rename = "message")]
    _message: Option<AnyString>,
    #[serde(rename = "observedGeneration")]
    _observed_generation: Option<i64>,
    #[serde(rename = "reason")]
    _reason: Option<AnyString>,
    #[serde(borrow)]
    status: Option<Plain<'a>>,
    #[serde(rename = "type", borrow)]
    type_: Option<Plain<'a>>,
}

impl Mapping for MetaDoc<'_> {
    const NAME: &'static str = "ObjectMeta";
}

impl Mapping for SpecDoc<'_> {
    const NAME: &'static str = "PodSpec";
}

impl Mapping for StatusDoc<'_> {
    const NAME: &'static str = "PodStatus";
}

impl Mapping for ContainerDoc<'_> {
    const NAME: &'static str = "Container";
}

impl Mapping for PortDoc<'_> {
    const NAME: &'static str = "ContainerPort";
}

impl Mapping for PodIpDoc<'_> {
    const NAME: &'static str = "PodIP";
}

impl Mapping for ConditionDoc<'_> {
    const NAME: &'static str = "PodCondition";
}

fn containers<'a, const N: usize>(
    list: &Option<Vec<ContainerDoc<'a>>>,
) -> SmallVec<[ContainerFields<'a>; N]>
where
    [ContainerFields<'a>; N]: smallvec::Array<Item = ContainerFields<'a>>,
{
    list.iter()
        .flatten()
        .map(|c| ContainerFields {
            ports: c
                .ports
                .iter()
                .flatten()
                .map(|p| PortFields {
                    name: plain(p.name),
                    container_port: p.container_port.unwrap_or_default(),
                    protocol: plain(p.protocol),
                })
                .collect(),
            restart_policy: plain(c.restart_policy),
        })
        .collect()
}

impl<'a> PodDoc<'a> {
    fn fields(&self) -> PodFields<'a> {
        let m = &self.metadata;
        let mut fields = PodFields {
            name: plain(m.name),
            namespace: plain(m.namespace),
            uid: plain(m.uid),
            resource_version: plain(m.resource_version),
            labels: m.labels.as_ref().map(|l| l.0.clone()).unwrap_or_default(),
            creation_timestamp: time(&m.creation_timestamp),
            deletion_timestamp: time(&m.deletion_timestamp),
            ..PodFields::default()
        };
        if let Some(spec) = &self.spec {
            fields.node_name = plain(spec.node_name);
            fields.hostname = plain(spec.hostname);
            fields.subdomain = plain(spec.subdomain);
            fields.containers = containers(&spec.containers);
            fields.init_containers = containers(&spec.init_containers);
        }
        if let Some(status) = &self.status {
            fields.phase = plain(status.phase);
            fields.pod_ip = plain(status.pod_ip);
            fields.pod_ips = status
                .pod_ips
                .iter()
                .flatten()
                .map(|p| plain(p.ip))
                .collect();
            fields.ready = status
                .conditions
                .iter()
                .flatten()
                .find(|c| plain(c.type_) == "Ready")
                .map(|c| ReadyCondition {
                    status: plain(c.status),
                    last_transition_time: time(&c.last_transition_time),
                });
        }
        fields
    }
}

//! The objects of the upstream cluster (`fixtures/upstream-1.36/cluster.json`, as
//! kube-controller-manager 1.36 wrote them on a real API server), for the decoders' tests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::de::DeserializeOwned;
use serde_json::Value;

const CLUSTER: &str = include_str!("../../fixtures/upstream-1.36/cluster.json");

/// Every object of `kind` in the cluster, in its order.
pub fn objects_of_kind<T: DeserializeOwned>(kind: &str) -> Vec<T> {
    let list: Value = serde_json::from_str(CLUSTER).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == kind)
        .map(|i| serde_json::from_value(i.clone()).unwrap())
        .collect()
}

/// The metadata's times in whole seconds, as protobuf carries them.
pub fn whole_seconds(meta: &mut ObjectMeta) {
    for Time(time) in [&mut meta.creation_timestamp, &mut meta.deletion_timestamp]
        .into_iter()
        .flatten()
    {
        *time = jiff::Timestamp::from_second(time.as_second()).unwrap_or(*time);
    }
}

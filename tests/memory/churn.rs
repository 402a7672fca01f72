//! The churn the soak drives: rolling updates of real-shaped pods, readiness flaps, and Services
//! applied again with kubectl.

use serde_json::{Value, json};

use super::soak::{SOAK_NODES, SOAK_REPLICAS, SOAK_SERVICES};
use crate::fake_api::FakeApiServer;
use crate::real_pods;

/// Rolling updates of every service's pods, as a Deployment makes them.
pub struct Churn<'a> {
    fake: &'a FakeApiServer,
    template: k8s_openapi::api::core::v1::Pod,
    pub generation: usize,
    /// The live pods' names, per service.
    live: Vec<Vec<String>>,
    /// Pod creates, updates and deletes so far.
    pub pod_writes: u64,
    /// The name and resourceVersion of the pod last created or updated.
    pub last_write: (String, String),
}

impl<'a> Churn<'a> {
    pub fn new(fake: &'a FakeApiServer) -> Self {
        Churn {
            fake,
            template: real_pods::template(),
            generation: 0,
            live: vec![Vec::new(); SOAK_SERVICES],
            pod_writes: 0,
            last_write: Default::default(),
        }
    }

    /// A pod of the current rollout, as the API server would hold it after this write.
    fn pod(&self, service: usize, replica: usize, ready: bool) -> Value {
        let generation = self.generation;
        let mut pod = real_pods::variant(&self.template, service, SOAK_SERVICES);
        // Old and new pods of one service never share an IP; IPs come back two rollouts on.
        let ip = format!("10.{}.{}.{}", 64 + service, generation % 2, replica);
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(format!("node-{:04}", (service + replica) % SOAK_NODES));
        }
        if let Some(status) = pod.status.as_mut() {
            status.pod_ip = Some(ip.clone());
            status.pod_ips = Some(vec![k8s_openapi::api::core::v1::PodIP { ip }]);
        }
        real_pods::set_ready(&mut pod, ready);
        let mut pod = serde_json::to_value(pod).unwrap();
        // Fresh per rollout: the template hash and a controller uid (label values), the name and
        // the uid; fresh per pod: a label holding its name, as a StatefulSet's pods carry.
        let hash = format!(
            "{:010x}",
            generation.wrapping_mul(0x9e37_79b9) & 0xff_ffff_ffff
        );
        let name = format!("svc-{service}-{hash}-{replica:03}");
        let meta = &mut pod["metadata"];
        meta["name"] = json!(name);
        meta["uid"] = Value::Null;
        meta["resourceVersion"] = Value::Null;
        meta["creationTimestamp"] = json!(time(generation as u64));
        let labels = &mut meta["labels"];
        labels["pod-template-hash"] = json!(hash);
        labels["controller-uid"] = json!(format!("{service:08x}-0000-4000-8000-{generation:012x}"));
        labels["statefulset.kubernetes.io/pod-name"] = json!(name);
        // Each readiness change at its own time: the trigger times sliced writes are new too.
        for condition in pod["status"]["conditions"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            if condition["type"] == "Ready" {
                condition["lastTransitionTime"] = json!(time(self.pod_writes));
            }
        }
        pod
    }

    /// The Service applied again with kubectl: a new `last-applied-configuration`.
    pub fn reapply_service(&mut self, i: usize) {
        let mut service = serde_json::to_value(real_pods::service(i)).unwrap();
        service["metadata"]["uid"] = Value::Null;
        let applied =
            json!({"metadata": {"name": format!("svc-{i}")}, "generation": self.generation});
        service["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": applied.to_string()
        });
        self.fake.apply(service).unwrap();
    }

    fn write(&mut self, pod: Value) {
        self.last_write = self.fake.apply_version(pod).unwrap();
        self.pod_writes += 1;
    }

    /// The service's rollout to the current generation: new pods created not ready, then made
    /// ready, then the old ones deleted.
    pub fn roll(&mut self, service: usize) {
        let mut fresh = Vec::with_capacity(SOAK_REPLICAS);
        for replica in 0..SOAK_REPLICAS {
            let pod = self.pod(service, replica, false);
            fresh.push(
                pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            self.write(pod);
        }
        for replica in 0..SOAK_REPLICAS {
            self.write(self.pod(service, replica, true));
        }
        for name in std::mem::replace(&mut self.live[service], fresh) {
            self.fake.delete_unread("pods", "shop", &name).unwrap();
            self.pod_writes += 1;
        }
    }

    /// A readiness probe that fails and recovers on a few of the service's pods.
    pub fn flap(&mut self, service: usize) {
        for replica in (0..SOAK_REPLICAS).step_by(5) {
            for ready in [false, true] {
                self.write(self.pod(service, replica, ready));
            }
        }
    }
}

/// A time `seconds` after a fixed start, as the API server writes times.
fn time(seconds: u64) -> String {
    let start = 1_767_225_600; // 2026-01-01T00:00:00Z
    let at = jiff::Timestamp::from_second(start + seconds as i64).unwrap();
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

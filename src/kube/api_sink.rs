//! The sink over the Kubernetes API: the engine's writes as HTTP calls, made from the engine's
//! workers (several at once, up to `--concurrent-service-endpoint-syncs`), under a client-side
//! rate limit and only while this replica leads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::runtime::Handle;

use super::convert::{endpoint_slice_to_k8s, endpoints_to_k8s, time};
use crate::metrics::Metrics;
use crate::model::{LOAD_BALANCER_CLEANUP_FINALIZER, Name};
use crate::queue::{TokenBucket, WriteBudget};
use crate::sink::{Kind, Object, ServiceChange, ServicePatch, Sink, Verb, WriteError};

/// Whether this replica may write: set by leader election, cleared the moment the lease is lost.
#[derive(Clone, Debug, Default)]
pub struct WriteGate(Arc<AtomicBool>);

impl WriteGate {
    pub fn open() -> WriteGate {
        WriteGate(Arc::new(AtomicBool::new(true)))
    }

    pub fn closed() -> WriteGate {
        WriteGate::default()
    }

    pub fn set(&self, open: bool) {
        self.0.store(open, Ordering::SeqCst);
    }

    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Writes EndpointSlices and Endpoints through a `kube::Client`. Its methods block: call them from
/// a thread outside the tokio runtime whose handle it holds.
pub struct ApiSink {
    client: Client,
    runtime: Handle,
    gate: WriteGate,
    /// Counts the writes refused or not sent, as `sliced_write_errors_total`.
    metrics: Arc<Metrics>,
    /// `--kube-api-qps` / `--kube-api-burst`, over writes, and the qps it refills at.
    limiter: Mutex<(TokenBucket, f64)>,
    /// The qps the limiter follows when the budget moves (`--write-qps-steps`).
    budget: Option<Arc<WriteBudget>>,
    started: Instant,
    /// How long a write waits for its answer: a silent server must not stall the engine.
    request_timeout: Duration,
    /// Writes in flight at once, at most.
    concurrency: usize,
}

impl ApiSink {
    pub fn new(
        client: Client,
        runtime: Handle,
        gate: WriteGate,
        metrics: Arc<Metrics>,
        qps: f64,
        burst: u32,
    ) -> Self {
        ApiSink {
            client,
            runtime,
            gate,
            metrics,
            limiter: Mutex::new((TokenBucket::new(qps, burst), qps)),
            budget: None,
            started: Instant::now(),
            request_timeout: Duration::from_secs(30),
            concurrency: 1,
        }
    }

    /// Up to `writes` writes in flight at once: the engine then sends the writes of different
    /// services, and of one step of one sync, together.
    pub fn with_concurrency(mut self, writes: usize) -> Self {
        self.concurrency = writes.max(1);
        self
    }

    /// The limiter refills at `budget`'s qps, read before each write.
    pub fn with_budget(mut self, budget: Arc<WriteBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Writes not answered within `limit` fail (504, `Timeout`) and go back to the queue.
    pub fn with_request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// Counts a failed write. A delete answered NotFound is not counted: the caller takes it as
    /// done, as upstream does, which counts it as a success.
    fn counted<T>(
        &self,
        kind: Kind,
        verb: Verb,
        result: Result<T, WriteError>,
    ) -> Result<T, WriteError> {
        if let Err(e) = &result
            && !(verb == Verb::Delete && e.is_not_found())
        {
            self.metrics.record_write_error(kind, verb, e);
        }
        result
    }

    /// Waits for a write token, then checks that this replica still leads.
    fn admit(&self) -> Result<(), WriteError> {
        let wait = {
            let mut limiter = self.limiter.lock();
            let (bucket, qps) = &mut *limiter;
            if let Some(budget) = self.budget.as_ref().map(|b| b.qps())
                && budget != *qps
            {
                bucket.set_qps(budget);
                *qps = budget;
            }
            bucket.reserve(self.started.elapsed())
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        if self.gate.is_open() {
            Ok(())
        } else {
            Err(WriteError::Status {
                code: 503,
                reason: "NotLeader".to_string(),
                message: "this replica does not hold the leader lease; the write was not sent"
                    .to_string(),
            })
        }
    }

    fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn call<T>(
        &self,
        kind: Kind,
        (namespace, name): (&Name, &Name),
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WriteError> {
        let limit = self.request_timeout;
        match self
            .runtime
            .block_on(async move { tokio::time::timeout(limit, fut).await })
        {
            Ok(result) => result.map_err(|e| write_error(kind, namespace, name, e)),
            Err(_) => Err(WriteError::Status {
                code: 504,
                reason: "Timeout".to_string(),
                message: format!("no answer from the API server within {limit:?}"),
            }),
        }
    }

    /// Creates or replaces `object`, and takes the stored metadata from the server's answer: the
    /// object itself stays shared.
    fn write(&self, mut object: Object, create: bool) -> Result<Object, WriteError> {
        self.admit()?;
        let kind = object.kind();
        let meta = object.meta();
        let (namespace, name) = (meta.namespace.clone(), meta.name.clone());
        let stored = match &object {
            Object::EndpointSlice(slice) => self.send::<discovery::EndpointSlice>(
                kind,
                &namespace,
                &name,
                endpoint_slice_to_k8s(slice),
                create,
            )?,
            Object::Endpoints(endpoints) => self.send::<core::Endpoints>(
                kind,
                &namespace,
                &name,
                endpoints_to_k8s(endpoints),
                create,
            )?,
        };
        let meta = object.meta_mut();
        if let Some(n) = stored.name {
            meta.name = Name::new(&n);
        }
        meta.uid = stored.uid.as_deref().map(Name::new).unwrap_or_default();
        meta.resource_version = stored
            .resource_version
            .as_deref()
            .map(Name::new)
            .unwrap_or_default();
        meta.generation = stored.generation.unwrap_or(0);
        meta.creation_timestamp = time(&stored.creation_timestamp);
        Ok(object)
    }

    fn send<K>(
        &self,
        kind: Kind,
        namespace: &Name,
        name: &Name,
        k8s: K,
        create: bool,
    ) -> Result<ObjectMeta, WriteError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api = self.api::<K>(namespace);
        let params = PostParams::default();
        let stored = if create {
            self.call(kind, (namespace, name), api.create(&params, &k8s))?
        } else {
            self.call(kind, (namespace, name), api.replace(name, &params, &k8s))?
        };
        Ok(stored.meta().clone())
    }

    /// Deletes with the UID the engine saw as a precondition: a slice recreated under the same
    /// name since is left alone.
    fn remove(&self, object: &Object) -> Result<(), WriteError> {
        self.admit()?;
        let meta = object.meta();
        let params = DeleteParams {
            preconditions: (!meta.uid.is_empty()).then(|| Preconditions {
                uid: Some(meta.uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let (namespace, name) = (&meta.namespace, &meta.name);
        match object {
            Object::EndpointSlice(_) => {
                let api = self.api::<discovery::EndpointSlice>(namespace);
                self.call(object.kind(), (namespace, name), api.delete(name, &params))?;
            }
            Object::Endpoints(_) => {
                let api = self.api::<core::Endpoints>(namespace);
                self.call(object.kind(), (namespace, name), api.delete(name, &params))?;
            }
        }
        Ok(())
    }
}

/// Upstream's strategic-merge patches of a Service: the finalizer added or deleted alone (others'
/// finalizers stay, whoever added them meanwhile), the ingress replaced whole.
fn service_patch_body(change: &ServiceChange) -> serde_json::Value {
    use serde_json::json;
    match change {
        ServiceChange::Finalizers(finalizers)
            if finalizers
                .iter()
                .any(|f| f.as_str() == LOAD_BALANCER_CLEANUP_FINALIZER) =>
        {
            json!({"metadata": {"finalizers": [LOAD_BALANCER_CLEANUP_FINALIZER]}})
        }
        ServiceChange::Finalizers(_) => json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [LOAD_BALANCER_CLEANUP_FINALIZER]
        }}),
        ServiceChange::Ingress(ingress) if ingress.is_empty() => {
            json!({"status": {"loadBalancer": {"ingress": null}}})
        }
        ServiceChange::Ingress(ingress) => {
            let entries: Vec<core::LoadBalancerIngress> = ingress
                .iter()
                .map(|i| core::LoadBalancerIngress {
                    ip: i.ip.map(|ip| ip.to_string()),
                    hostname: i.hostname.as_ref().map(|h| h.to_string()),
                    ip_mode: i.ip_mode.as_ref().map(|m| m.to_string()),
                    ..core::LoadBalancerIngress::default()
                })
                .collect();
            json!({"status": {"loadBalancer": {"ingress": entries}}})
        }
    }
}

impl ApiSink {
    fn send_service_patch(&self, patch: &ServicePatch) -> Result<(), WriteError> {
        self.admit()?;
        let api = self.api::<core::Service>(&patch.namespace);
        let body = Patch::Strategic(service_patch_body(&patch.change));
        let params = PatchParams::default();
        let at = (&patch.namespace, &patch.name);
        if patch.status_subresource {
            self.call(
                Kind::Service,
                at,
                api.patch_status(&patch.name, &params, &body),
            )?;
        } else {
            self.call(Kind::Service, at, api.patch(&patch.name, &params, &body))?;
        }
        Ok(())
    }
}

impl Sink for ApiSink {
    fn patch_service(&self, patch: &ServicePatch) -> Result<(), WriteError> {
        let result = self.send_service_patch(patch);
        if let Err(e) = &result {
            self.metrics.record_patch_error(Kind::Service, e);
        }
        result
    }

    fn create(&self, object: Object) -> Result<Object, WriteError> {
        let kind = object.kind();
        self.counted(kind, Verb::Create, self.write(object, true))
    }

    fn update(&self, object: Object) -> Result<Object, WriteError> {
        let kind = object.kind();
        self.counted(kind, Verb::Update, self.write(object, false))
    }

    fn delete(&self, object: &Object) -> Result<(), WriteError> {
        self.counted(object.kind(), Verb::Delete, self.remove(object))
    }

    fn concurrency(&self) -> usize {
        self.concurrency
    }
}

/// The API server's refusal as the engine's error: conflicts, NotFound, AlreadyExists and
/// NamespaceTerminating keep their meaning; anything else (server errors, a broken connection)
/// is a status the queue retries with backoff.
pub fn write_error(kind: Kind, namespace: &Name, name: &Name, error: kube::Error) -> WriteError {
    let status = match error {
        kube::Error::Api(status) => status,
        other => {
            return WriteError::Status {
                code: 503,
                reason: "ServiceUnavailable".to_string(),
                message: super::watch::describe(&other),
            };
        }
    };
    let terminating = status
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"));
    match (status.code, status.reason.as_str()) {
        (403, _) if terminating => WriteError::NamespaceTerminating {
            kind: kind.resource(),
            name: name.clone(),
            namespace: namespace.clone(),
        },
        (409, "AlreadyExists") => WriteError::AlreadyExists {
            kind: kind.resource(),
            name: name.clone(),
        },
        (409, "Conflict") if !status.message.contains("Precondition failed") => {
            WriteError::Conflict {
                kind: kind.resource(),
                name: name.clone(),
            }
        }
        (404, _) => WriteError::NotFound {
            kind: kind.resource(),
            name: name.clone(),
        },
        (code, reason) => WriteError::Status {
            code,
            reason: reason.to_string(),
            message: status.message.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api_error(code: u16, reason: &str, message: &str, cause: Option<&str>) -> kube::Error {
        let mut status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "code": code, "reason": reason, "message": message,
        });
        if let Some(cause) = cause {
            status["details"] = serde_json::json!({"causes": [{"reason": cause, "message": "x"}]});
        }
        match serde_json::from_value::<Status>(status) {
            Ok(s) => kube::Error::Api(Box::new(s)),
            Err(e) => panic!("a Status: {e}"),
        }
    }

    fn map(e: kube::Error) -> WriteError {
        write_error(
            Kind::EndpointSlice,
            &Name::new("ns"),
            &Name::new("web-abc"),
            e,
        )
    }

    #[test]
    fn api_refusals_keep_their_meaning() {
        let conflict = map(api_error(
            409,
            "Conflict",
            "the object has been modified",
            None,
        ));
        assert!(matches!(conflict, WriteError::Conflict { .. }));
        let precondition = map(api_error(
            409,
            "Conflict",
            "Precondition failed: UID in precondition: a, UID in object meta: b",
            None,
        ));
        assert!(precondition.is_conflict());
        assert!(matches!(precondition, WriteError::Status { code: 409, .. }));
        assert!(matches!(
            map(api_error(409, "AlreadyExists", "exists", None)),
            WriteError::AlreadyExists { .. }
        ));
        assert!(map(api_error(404, "NotFound", "gone", None)).is_not_found());
        let terminating = map(api_error(
            403,
            "Forbidden",
            "unable to create new content in namespace ns because it is being terminated",
            Some("NamespaceTerminating"),
        ));
        assert!(terminating.is_namespace_terminating());
        // Forbidden for any other cause (RBAC) is not a terminating namespace.
        let rbac = map(api_error(403, "Forbidden", "cannot create", None));
        assert!(!rbac.is_namespace_terminating());
        assert_eq!(rbac.status_code(), 403);
        let invalid = map(api_error(422, "Invalid", "bad field", None));
        assert_eq!(invalid.status_code(), 422);
    }

    /// A client whose server refuses every write: POST with 500, PUT with 409, DELETE with 404.
    fn refusing_client() -> Client {
        let service = tower::service_fn(|request: http::Request<kube::client::Body>| async move {
            let (code, reason) = match *request.method() {
                http::Method::POST => (500, "InternalError"),
                http::Method::PUT => (409, "Conflict"),
                _ => (404, "NotFound"),
            };
            let status = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": code, "reason": reason, "message": "refused",
            });
            http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(hyper::body::Bytes::from(
                    status.to_string(),
                )))
        });
        Client::new(service, "default")
    }

    #[test]
    fn refused_writes_are_counted_except_a_delete_of_what_is_gone() {
        let runtime = match tokio::runtime::Runtime::new() {
            Ok(r) => r,
            Err(e) => panic!("a runtime: {e}"),
        };
        let client = {
            let _entered = runtime.enter();
            refusing_client()
        };
        let metrics = Arc::new(Metrics::new());
        let gate = WriteGate::open();
        let sink = ApiSink::new(
            client,
            runtime.handle().clone(),
            gate.clone(),
            Arc::clone(&metrics),
            1000.0,
            1000,
        );
        let object = Object::from(crate::model::Endpoints {
            meta: crate::model::Meta {
                namespace: Name::new("ns"),
                name: Name::new("web"),
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(
            sink.create(object.clone()).map(|_| ()),
            Err(WriteError::Status {
                code: 500,
                reason: "InternalError".to_string(),
                message: "refused".to_string(),
            })
        );
        assert!(sink.update(object.clone()).is_err_and(|e| e.is_conflict()));
        assert!(sink.delete(&object).is_err_and(|e| e.is_not_found()));
        gate.set(false);
        assert!(
            sink.delete(&object)
                .is_err_and(|e| e.reason() == "NotLeader")
        );

        let text = match metrics.encode() {
            Ok(text) => text,
            Err(e) => panic!("{e}"),
        };
        // A family's series come in no set order.
        let mut series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("sliced_write_errors_total{"))
            .collect();
        series.sort_unstable();
        assert_eq!(
            series,
            [
                r#"sliced_write_errors_total{kind="Endpoints",verb="create",reason="InternalError"} 1"#,
                r#"sliced_write_errors_total{kind="Endpoints",verb="delete",reason="NotLeader"} 1"#,
                r#"sliced_write_errors_total{kind="Endpoints",verb="update",reason="Conflict"} 1"#,
            ],
            "{text}"
        );
    }
}

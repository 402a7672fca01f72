//! An in-process fake Kubernetes API server for end-to-end tests: a tower
//! service that `kube::Client` talks to as it would to a real apiserver.
//!
//! Include it at the root of a test binary (`tests/<binary>/main.rs`; `run_harness.rs` finds it
//! at `crate::fake_api`):
//!
//! ```ignore
//! #[path = "../support/fake_api/mod.rs"]
//! mod fake_api;
//! use crate::fake_api::FakeApiServer;
//!
//! let server = FakeApiServer::new(); // inside a tokio runtime
//! server.create(&my_service)?;       // direct store write, emits watch events
//! let client = server.client();      // hand to the code under test
//! server.fail_next("update", "endpointslices", 409, 1);
//! assert_eq!(server.writes("endpointslices"), 3);
//! ```
//!
//! It behaves like the real server rather than replaying a script: one
//! global resourceVersion; lists paged with continue tokens served at the
//! first page's rv (MVCC over the change history); watches replayed from a
//! bounded per-resource window, with 410 Expired past it, bookmarks and
//! timeouts; optimistic concurrency; no-op updates that keep the rv;
//! per-kind generation and status-subresource rules; NamespaceLifecycle
//! admission; finalizers; graceful pod deletion; Status errors worded as
//! apimachinery's. List items carry no kind/apiVersion (as upstream; single
//! objects and watch events do). Starts with the four system namespaces.
//!
//! It also runs kube-controller-manager's garbage collector: an object whose
//! ownerReferences all name absent owners (looked up by kind and name in its
//! own namespace, and matched by uid) is deleted, each deletion its own change
//! with its own rv and watch event, after the owner's; one that keeps a live
//! owner only loses its references to the absent ones. propagationPolicy
//! Orphan and Foreground work through the `orphan` and `foregroundDeletion`
//! finalizers as upstream (Foreground waits for the dependents whose reference
//! blocks owner deletion).
//!
//! Approximations, on purpose:
//! - Strategic merge patch is applied as a JSON merge patch (lists replace
//!   rather than merge by key); server-side apply is create-or-merge, without
//!   field ownership or managedFields. JSON patch (415) and deletecollection
//!   (405) are refused.
//! - Compaction is by a count of changes per resource, not by time.
//! - Validation covers only a high-value subset (names; EndpointSlice
//!   addressType, its immutability and size limits).
//! - Defaulting covers what endpoint controllers read: Service type,
//!   ClusterIP(s) from 10.96.0.0/12, single-stack IPv4 families, node ports,
//!   port protocols and targetPort; a few Pod spec defaults.
//! - Endpoints subsets are stored as written (no RepackSubsets).
//! - core/v1 and events.k8s.io/v1 Events are separate stores, not one
//!   resource seen through two versions.
//! - `resourceVersion=0` lists honour `limit` (the watch cache may not).
//! - Slow watch consumers are never cut off (queues are unbounded).
//! - Direct store writes (not HTTP) set status when they carry one (as the
//!   kubelet or a controller would), auto-create a missing namespace, and
//!   are not in the request log.
//! - The garbage collector acts synchronously, under the store lock, right
//!   after the write that calls for it (upstream it lags by a watch event and
//!   a queue): a client sees the owner's DELETED event, then its dependents'.
//!   `Builder::garbage_collection(false)` stops it acting on its own; then
//!   `collect_garbage` makes one full pass, as a collector catching up would.
//!   Its requests are not in the request log. An owner it cannot look up (a
//!   kind the fake does not serve; a namespaced owner of a cluster-scoped
//!   object) counts as present: upstream never collects on it either. Cycles
//!   are broken only as upstream breaks them, by unblocking.

// Each including test crate uses a different part of this API.
#![allow(dead_code)]

mod faults;
mod gc;
mod handlers;
mod json;
// Pods served as protobuf are encoded by the reference encoder of the decoder's tests, which an
// including crate uses from here (a file is a module once).
#[path = "../protobuf_objects.rs"]
pub mod protobuf_objects;
mod resources;
mod selectors;
mod status;
mod store;
mod tcp;
pub mod testing;
mod watch;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use faults::RequestRecord;
pub use handlers::FakeService;
pub use status::ApiError;

use json::meta_str;
use resources::{KINDS, ResId};
use store::State;
use watch::Shared;
use writes::{Origin, Reply, WriteCtx};

const DIRECT: WriteCtx = WriteCtx {
    origin: Origin::Direct,
    dry_run: false,
};

/// Cheap-to-clone handle on one fake API server.
#[derive(Clone)]
pub struct FakeApiServer {
    shared: Shared,
    bookmark_every: Duration,
}

/// Settings for [`FakeApiServer`].
pub struct Builder {
    window: usize,
    retain: usize,
    bookmark_every: Duration,
    auto_namespaces: bool,
    garbage_collection: bool,
}

impl Builder {
    /// Changes per resource a watch can resume across (default 10,000);
    /// an older resourceVersion gets 410 Expired.
    pub fn history_window(mut self, events: usize) -> Self {
        self.window = events.max(1);
        self
    }

    /// Changes per resource after which continue tokens and Exact reads
    /// expire (default 100,000; caps the history window).
    pub fn compaction_window(mut self, events: usize) -> Self {
        self.retain = events.max(1);
        self
    }

    /// Period of BOOKMARK events on watches that allow them (default 1 s).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_every = every;
        self
    }

    /// Whether direct-store creates auto-create a missing namespace (default true).
    pub fn auto_create_namespaces(mut self, on: bool) -> Self {
        self.auto_namespaces = on;
        self
    }

    /// Whether the garbage collector acts on its own after every write (default
    /// true); off, dependents stay until [`FakeApiServer::collect_garbage`].
    pub fn garbage_collection(mut self, on: bool) -> Self {
        self.garbage_collection = on;
        self
    }

    /// A server holding the namespaces every cluster has.
    pub fn build(self) -> FakeApiServer {
        let mut state = State::new(
            self.window,
            self.retain,
            self.auto_namespaces,
            self.garbage_collection,
        );
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            state.ensure_namespace(ns);
        }
        FakeApiServer {
            shared: Arc::new(Mutex::new(state)),
            bookmark_every: self.bookmark_every,
        }
    }
}

impl Default for FakeApiServer {
    fn default() -> Self {
        Self::new()
    }
}

fn resource(name: &str) -> ResId {
    resources::by_name(name).unwrap_or_else(|| panic!("the fake serves no resource {name:?}"))
}

fn typed_resource(obj: &Value) -> Result<ResId, ApiError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    resources::by_type(api_version, kind).ok_or_else(|| {
        ApiError::bad_request(format!("the fake serves no {api_version:?} {kind:?}"))
    })
}

impl FakeApiServer {
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// From now on, creates keep the uid they carry (see `State::keep_uids`).
    pub fn keep_given_uids(&self) {
        self.shared.lock().keep_uids = true;
    }

    /// From now on, deleting a Service leaves its Endpoints (as when the API server's own delete
    /// of them fails): deleting them is left to the endpoints controller or another actor.
    pub fn keep_endpoints_of_deleted_services(&self) {
        self.shared.lock().services_take_endpoints = false;
    }

    pub fn builder() -> Builder {
        Builder {
            window: 10_000,
            retain: 100_000,
            bookmark_every: Duration::from_secs(1),
            auto_namespaces: true,
            garbage_collection: true,
        }
    }

    /// A client whose every request this server answers. Needs a tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(FakeService(self.clone()), "default")
    }

    pub fn service(&self) -> FakeService {
        FakeService(self.clone())
    }

    // ---- direct store operations (a user's kubectl, and the kubelet) ----

    /// Creates an object given with apiVersion and kind (typed or JSON).
    pub fn create(&self, obj: impl Serialize) -> Result<Value, ApiError> {
        let v = serde_json::to_value(obj).expect("object serializes");
        let res = typed_resource(&v)?;
        let out = self.shared.lock().create(res, "", v, DIRECT)?;
        Ok(reply_value(res, out.reply))
    }

    /// Creates many objects under one lock; returns how many.
    pub fn create_many<T: Serialize>(
        &self,
        objs: impl IntoIterator<Item = T>,
    ) -> Result<usize, ApiError> {
        let mut state = self.shared.lock();
        let mut n = 0;
        for obj in objs {
            let v = serde_json::to_value(obj).expect("object serializes");
            let res = typed_resource(&v)?;
            state.create(res, "", v, DIRECT)?;
            n += 1;
        }
        Ok(n)
    }

    /// Replaces an object; a resourceVersion in it is a precondition.
    pub fn replace(&self, obj: impl Serialize) -> Result<Value, ApiError> {
        let v = serde_json::to_value(obj).expect("object serializes");
        let res = typed_resource(&v)?;
        let name = meta_str(&v, "name").to_owned();
        let out = self
            .shared
            .lock()
            .update(res, "", &name, v, false, DIRECT)?;
        Ok(reply_value(res, out.reply))
    }

    /// Creates, or replaces unconditionally (the object's rv is ignored).
    pub fn apply(&self, obj: impl Serialize) -> Result<Value, ApiError> {
        let (res, reply) = self.apply_reply(obj)?;
        Ok(reply_value(res, reply))
    }

    /// [`FakeApiServer::apply`] for a driver that reads back only the name and resourceVersion
    /// written: the stored object is not decoded again (a tenth of a soak's CPU went to that).
    pub fn apply_version(&self, obj: impl Serialize) -> Result<(String, String), ApiError> {
        Ok(match self.apply_reply(obj)? {
            (_, Reply::Object(stored)) => (stored.name.to_string(), stored.rv.to_string()),
            (_, Reply::Json(v)) => (
                meta_str(&v, "name").to_owned(),
                meta_str(&v, "resourceVersion").to_owned(),
            ),
        })
    }

    fn apply_reply(&self, obj: impl Serialize) -> Result<(ResId, Reply), ApiError> {
        let mut v = serde_json::to_value(obj).expect("object serializes");
        let res = typed_resource(&v)?;
        json::set_meta(&mut v, "resourceVersion", None);
        let name = meta_str(&v, "name").to_owned();
        let ns = meta_str(&v, "namespace").to_owned();
        let ns = if ns.is_empty() && KINDS[res].namespaced {
            "default".to_owned()
        } else {
            ns
        };
        let mut state = self.shared.lock();
        let out = if state.get(res, &ns, &name).is_some() {
            state.update(res, &ns, &name, v, false, DIRECT)?
        } else {
            state.create(res, &ns, v, DIRECT)?
        };
        Ok((res, out.reply))
    }

    /// Deletes now (grace period 0); finalizers still hold the object.
    pub fn delete(&self, resource: &str, namespace: &str, name: &str) -> Result<Value, ApiError> {
        self.delete_with(resource, namespace, name, delete_now())
    }

    /// [`FakeApiServer::delete`] without decoding the reply, for a driver that does not read it.
    pub fn delete_unread(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        self.delete_reply(resource, namespace, name, &delete_now())
            .map(drop)
    }

    /// Deletes with DeleteOptions exactly as an HTTP DELETE would.
    pub fn delete_with(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        options: Value,
    ) -> Result<Value, ApiError> {
        let (res, reply) = self.delete_reply(resource, namespace, name, &options)?;
        Ok(reply_value(res, reply))
    }

    fn delete_reply(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        options: &Value,
    ) -> Result<(ResId, Reply), ApiError> {
        let res = self::resource(resource);
        let out = self
            .shared
            .lock()
            .delete(res, namespace, name, options, DIRECT)?;
        Ok((res, out.reply))
    }

    /// Current object with kind and apiVersion.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = self::resource(resource);
        let obj = self.shared.lock().get(res, namespace, name)?;
        Some(obj.typed_value(res))
    }

    pub fn get_as<K: DeserializeOwned>(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<K> {
        self.get(resource, namespace, name)
            .map(|v| serde_json::from_value(v).expect("stored object fits the type"))
    }

    /// Current objects in key order; namespace "" means all.
    pub fn list(&self, resource: &str, namespace: &str) -> Vec<Value> {
        let res = self::resource(resource);
        let items = self.shared.lock().all(res, namespace);
        items.iter().map(|o| o.typed_value(res)).collect()
    }

    pub fn list_as<K: DeserializeOwned>(&self, resource: &str, namespace: &str) -> Vec<K> {
        self.list(resource, namespace)
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("stored object fits the type"))
            .collect()
    }

    pub fn ensure_namespace(&self, namespace: &str) {
        self.shared.lock().ensure_namespace(namespace);
    }

    /// `kubectl delete namespace`: it goes Terminating and refuses new content.
    pub fn terminate_namespace(&self, namespace: &str) -> Result<(), ApiError> {
        self.delete_with("namespaces", "", namespace, Value::Null)
            .map(drop)
    }

    /// The namespace controller's work: remove everything in it, then it.
    pub fn finish_namespace(&self, namespace: &str) {
        self.shared.lock().finish_namespace(namespace);
    }

    /// One full pass of the garbage collector: what it would have done by now
    /// had it been running (see [`Builder::garbage_collection`]).
    pub fn collect_garbage(&self) {
        self.shared.lock().gc_sweep();
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    // ---- watches and faults ----

    /// Ends every open watch and compacts all history: a client resuming at
    /// its last rv gets 410 Expired and must relist.
    pub fn expire_watches(&self) {
        self.shared.lock().compact_all();
    }

    /// Ends every open watch, as an API server going away does, history kept: a client resuming
    /// at its last rv gets what it missed, with no relist.
    pub fn drop_watches(&self) {
        self.shared.lock().drop_watches();
    }

    /// Sends a BOOKMARK at the current rv on every watch that allows them.
    pub fn send_bookmarks(&self) {
        watch::bookmark_all(&mut self.shared.lock());
    }

    /// The newest resourceVersion of `resource` that a watch has put in its response: a client
    /// in another process has it once the bytes cross the socket.
    pub fn delivered(&self, resource: &str) -> u64 {
        self.shared.lock().tables[self::resource(resource)]
            .delivered
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn open_watches(&self) -> usize {
        watch::open_watches(&mut self.shared.lock())
    }

    /// The next `times` requests of `verb` on `resource` fail with `code`
    /// (worded as the server words that code) and change nothing.
    pub fn fail_next(&self, verb: &str, resource: &str, code: u16, times: usize) {
        let verb = faults::verb(verb);
        self.shared
            .lock()
            .faults
            .add(verb, self::resource(resource), code, times);
    }

    /// From now on, requests whose path contains `path_part` (e.g. `/leases`) are never
    /// answered, as by a server that accepts connections and goes silent.
    pub fn hang(&self, path_part: &str) {
        self.shared.lock().faults.hanging.push(path_part.to_owned());
    }

    /// From now on, every write request (POST, PUT, PATCH, DELETE) is answered `latency` after
    /// it arrives; writes in flight together wait together, as on a real server.
    pub fn set_write_latency(&self, latency: Duration) {
        self.shared.lock().faults.write_latency = latency;
    }

    pub(crate) fn write_latency(&self) -> Duration {
        self.shared.lock().faults.write_latency
    }

    /// From now on, everything is served as JSON even to a client that asks for protobuf.
    pub fn serve_json_only(&self) {
        self.shared.lock().faults.json_only = true;
    }

    /// How many lists and watches were answered as protobuf, of every kind.
    pub fn protobuf_answers(&self) -> usize {
        self.shared.lock().faults.protobuf_answers.values().sum()
    }

    /// How many lists and watches of `plural` (`pods`, `endpointslices`) were answered as
    /// protobuf.
    pub fn protobuf_answers_of(&self, plural: &str) -> usize {
        let state = self.shared.lock();
        state
            .faults
            .protobuf_answers
            .get(plural)
            .copied()
            .unwrap_or(0)
    }

    /// The most writes of EndpointSlices and Endpoints the server was handling at once.
    pub fn most_endpoint_writes_in_flight(&self) -> usize {
        self.shared.lock().faults.most_endpoint_writes_in_flight
    }

    /// Counts a write of an EndpointSlice or Endpoints as in flight until the guard drops.
    pub(crate) fn endpoint_write_started(&self) -> EndpointWriteInFlight {
        let mut state = self.shared.lock();
        let faults = &mut state.faults;
        faults.endpoint_writes_in_flight += 1;
        faults.most_endpoint_writes_in_flight = faults
            .most_endpoint_writes_in_flight
            .max(faults.endpoint_writes_in_flight);
        EndpointWriteInFlight(self.clone())
    }

    pub(crate) fn hangs(&self, path: &str) -> bool {
        let state = self.shared.lock();
        state
            .faults
            .hanging
            .iter()
            .any(|p| path.contains(p.as_str()))
    }

    // ---- observability ----

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().faults.log.clone()
    }

    /// Requests of `verb` on `resource`, whatever their outcome.
    pub fn count(&self, verb: &str, resource: &str) -> usize {
        self.shared
            .lock()
            .faults
            .count(faults::verb(verb), self::resource(resource))
    }

    /// create + update + patch + delete requests on `resource`.
    pub fn writes(&self, resource: &str) -> usize {
        ["create", "update", "patch", "delete"]
            .iter()
            .map(|v| self.count(v, resource))
            .sum()
    }

    /// Forgets the requests logged so far, and the memory that held them: a long soak measures
    /// the process's heap, and a log's capacity left at its longest would count.
    pub fn clear_requests(&self) {
        self.shared.lock().faults.log = Vec::new();
    }
}

/// A write of an EndpointSlice or Endpoints the server is handling.
pub(crate) struct EndpointWriteInFlight(FakeApiServer);

impl Drop for EndpointWriteInFlight {
    fn drop(&mut self) {
        self.0.shared.lock().faults.endpoint_writes_in_flight -= 1;
    }
}

/// DeleteOptions with grace period 0.
fn delete_now() -> Value {
    json!({"gracePeriodSeconds": 0})
}

fn reply_value(res: ResId, reply: Reply) -> Value {
    match reply {
        Reply::Object(obj) => obj.typed_value(res),
        Reply::Json(v) => v,
    }
}

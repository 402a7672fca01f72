//! The service (LoadBalancer) controller inside the engine: upstream's `syncService` over a
//! provider, with its own queue (5 s doubling to 300 s, no retry limit, as upstream's), its cache of
//! the last Service processed, and the host set last handed to the provider per Service.
//!
//! Node sync differs from upstream on purpose: upstream hands the node set to every LoadBalancer
//! Service on each node event that its predicates see; here only the Services whose host set
//! differs from the one last handed over are queued, and each of those gets `update_hosts` alone
//! when nothing else of it changed since its last successful sync.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

mod sync;

use super::Cluster;
use super::controller::{Controller, Handlers, HostUpdate, SyncOutcome, SyncRecord};
use crate::index::{Index, NodeMap, ServiceKey};
use crate::model::{Labels, LoadBalancerIngress, Name, Node, Service};
use crate::queue::{Clock, QueueConfig, WorkQueue};
use crate::reconcile::Event;
use crate::reconcile::load_balancer::pools::Pool;
use crate::reconcile::load_balancer::{
    ClassFilter, HostSet, LoadBalancerProvider, ProviderError, host_set, needs_cleanup,
    needs_update, node_change_matters, wants_load_balancer,
};
use crate::sink::Sink;
use sync::{KeySync, SyncError};

/// The controller name in sync records.
pub const SERVICE_LB_CONTROLLER: &str = "service-lb";
/// Upstream's name of its service queue.
pub const QUEUE_SERVICE: &str = "service";

/// Upstream's service queue: per-key backoff from 5 s to 300 s, no token bucket, retried forever.
fn queue_config() -> QueueConfig {
    QueueConfig {
        base_delay: Duration::from_secs(5),
        max_delay: Duration::from_secs(300),
        qps: 0.0,
        burst: 0,
        max_retries: u32::MAX,
    }
}

/// What the service controller runs with.
#[derive(Clone)]
pub struct LoadBalancerOptions {
    /// Who makes the load balancers: a cloud, or a fake for tests. `None`: the built-in address
    /// pools, each engine with its own, over `pools`.
    pub provider: Option<Arc<dyn LoadBalancerProvider>>,
    /// The built-in provider's pools, when `provider` is `None`.
    pub pools: Vec<Pool>,
    /// `--lb-class`.
    pub classes: ClassFilter,
    /// Keep every provider call for [`Engine::take_provider_calls`] (`sliced reconcile`).
    pub record_calls: bool,
    /// `--concurrent-service-syncs`: Services whose syncs (provider calls) run at once.
    pub workers: usize,
}

impl Default for LoadBalancerOptions {
    fn default() -> Self {
        LoadBalancerOptions {
            provider: None,
            pools: Vec::new(),
            classes: ClassFilter::default(),
            record_calls: false,
            // Upstream's default.
            workers: 1,
        }
    }
}

impl std::fmt::Debug for LoadBalancerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadBalancerOptions")
            .field(
                "provider",
                &self.provider.as_ref().map(|p| p.provider_name()),
            )
            .field("pools", &self.pools.len())
            .field("classes", &self.classes)
            .field("record_calls", &self.record_calls)
            .field("workers", &self.workers)
            .finish()
    }
}

/// One call made to the provider, as `sliced reconcile` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderCall {
    pub service: ServiceKey,
    pub operation: ProviderOperation,
    /// The backends handed over, by node name (empty for a delete).
    pub hosts: Vec<Name>,
    /// The ingress an ensure answered.
    pub ingress: Vec<LoadBalancerIngress>,
    pub error: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderOperation {
    Ensure,
    UpdateHosts,
    EnsureDeleted,
}

impl ProviderOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderOperation::Ensure => "ensure",
            ProviderOperation::UpdateHosts => "update",
            ProviderOperation::EnsureDeleted => "delete",
        }
    }
}

pub(super) struct LoadBalancerController {
    pub queue: WorkQueue<ServiceKey>,
    provider: Arc<dyn LoadBalancerProvider>,
    classes: ClassFilter,
    /// Upstream's cache: the Service each key's last sync processed. It deletes the load balancer
    /// of a Service that is gone or was replaced under the same name.
    processed: Mutex<HashMap<ServiceKey, Arc<Service>>>,
    /// The host set last handed to the provider, per Service: shared, as most are the same.
    last_hosts: Mutex<HashMap<ServiceKey, Arc<HostSet>>>,
    /// The host set of the node store's last snapshot, computed once for every Service.
    hosts: Mutex<Option<(Arc<NodeMap>, Arc<HostSet>)>>,
    /// Keys whose next sync must be a full one: queued for a change of the Service, at start,
    /// by a resync, or failed last time.
    full: Mutex<HashSet<ServiceKey>>,
    /// A node change the predicates see arrived since the last batch.
    nodes_moved: AtomicBool,
    /// Keys whose host set moved since their last sync: `update_hosts` is enough for those not
    /// also in `full`.
    hosts_moved: Mutex<HashSet<ServiceKey>>,
    /// Every provider call, for `sliced reconcile` to list; `None` when nobody reads them.
    calls: Mutex<Option<Vec<ProviderCall>>>,
    /// `--concurrent-service-syncs` above one: the threads that sync Services at once.
    pub workers: Option<rayon::ThreadPool>,
    /// `started` has run: a change of pools converges every Service at once.
    started: AtomicBool,
}

pub(super) struct Prepared {
    service: Option<Arc<Service>>,
    hosts: Arc<HostSet>,
}

impl LoadBalancerController {
    pub fn new(
        provider: Arc<dyn LoadBalancerProvider>,
        options: &LoadBalancerOptions,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let record_calls = options.record_calls;
        LoadBalancerController {
            queue: WorkQueue::new(queue_config(), clock),
            provider,
            classes: options.classes.clone(),
            workers: (options.workers > 1)
                .then(|| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(options.workers)
                        .thread_name(|i| format!("sliced-service-sync-{i}"))
                        .build()
                        .ok()
                })
                .flatten(),
            processed: Mutex::default(),
            last_hosts: Mutex::default(),
            hosts: Mutex::default(),
            full: Mutex::default(),
            nodes_moved: AtomicBool::new(false),
            hosts_moved: Mutex::default(),
            calls: Mutex::new(record_calls.then(Vec::new)),
            started: AtomicBool::new(false),
        }
    }

    /// The cluster's address pools changed: the provider takes them, takes back what statuses
    /// hold, and every Service is converged again (MetalLB's reprocess-all).
    pub fn pools_changed(&self, index: &Index, pools: Vec<Pool>) {
        if !self.provider.set_pools(pools) || !self.started.load(Ordering::Relaxed) {
            return;
        }
        self.restore_and_queue(index);
    }

    /// A namespace's labels changed (None: it is gone). When a pool selects namespaces by label,
    /// its Services are converged again; MetalLB reprocesses every Service instead.
    pub fn namespace_changed(&self, index: &Index, namespace: &str, labels: Option<&Labels>) {
        if !self.provider.namespace_labels(namespace, labels)
            || !self.started.load(Ordering::Relaxed)
        {
            return;
        }
        for service in index.services().in_namespace(namespace) {
            if self.wants(&service) {
                self.queue_full(ServiceKey::of(&service));
            }
        }
    }

    /// The provider takes back every address in status, then every Service it serves, or must
    /// clean up, is queued for a full sync.
    fn restore_and_queue(&self, index: &Index) {
        let services = index.services().list();
        // Those being cleaned up hold their addresses until their load balancer is deleted.
        let holding: Vec<&Service> = services
            .iter()
            .map(|s| s.as_ref())
            .filter(|s| self.wants(s) || needs_cleanup(s))
            .collect();
        self.provider.restore(&holding);
        for service in holding {
            self.queue_full(ServiceKey::of(service));
        }
    }

    /// The provider calls made so far, and forgets them.
    pub fn take_calls(&self) -> Vec<ProviderCall> {
        self.calls
            .lock()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Keeps the call made by `call`, when calls are recorded.
    fn note_call(&self, call: impl FnOnce() -> ProviderCall) {
        if let Some(calls) = self.calls.lock().as_mut() {
            calls.push(call());
        }
    }

    /// The nodes that back load balancers now: computed once per change of the node store.
    fn current_hosts(&self, index: &Index) -> Arc<HostSet> {
        let nodes = index.nodes().snapshot();
        let mut cached = self.hosts.lock();
        if let Some((seen, hosts)) = cached.as_ref()
            && Arc::ptr_eq(seen, &nodes)
        {
            return Arc::clone(hosts);
        }
        let hosts = Arc::new(host_set(nodes.values().map(|n| n.as_ref())));
        *cached = Some((nodes, Arc::clone(&hosts)));
        hosts
    }

    fn wants(&self, service: &Service) -> bool {
        wants_load_balancer(service, &self.classes)
    }

    /// Queues a full sync of `key`.
    fn queue_full(&self, key: ServiceKey) {
        self.full.lock().insert(key.clone());
        self.queue.add(key);
    }
}

impl Handlers for LoadBalancerController {
    fn queue(&self) -> &WorkQueue<ServiceKey> {
        &self.queue
    }

    fn queue_name(&self) -> &'static str {
        QUEUE_SERVICE
    }

    fn service_changed(&self, key: &ServiceKey, old: Option<&Service>, new: Option<&Service>) {
        let queue = match (old, new) {
            (_, Some(new)) if needs_cleanup(new) => true,
            (None, Some(new)) => self.wants(new),
            (Some(old), Some(new)) => needs_update(old, new, &self.classes),
            // Upstream has no delete handler and leaves the load balancer of a Service deleted
            // without the finalizer until something else queues its key; this queues it.
            (_, None) => self.processed.lock().contains_key(key),
        };
        if queue {
            self.queue_full(key.clone());
        }
    }

    fn node_changed(&self, old: Option<&Node>, new: Option<&Node>) {
        let matters = match (old, new) {
            (Some(old), Some(new)) => node_change_matters(old, new),
            _ => true,
        };
        if matters {
            self.nodes_moved.store(true, Ordering::Relaxed);
        }
    }

    /// Node sync: the host set computed once, and only the Services whose last one differs queued.
    fn before_batch(&self, index: &Index) {
        if !self.nodes_moved.swap(false, Ordering::Relaxed) {
            return;
        }
        let hosts = self.current_hosts(index);
        let processed = self.processed.lock();
        let last = self.last_hosts.lock();
        let moved = |key: &ServiceKey| {
            last.get(key)
                .is_none_or(|l| !Arc::ptr_eq(l, &hosts) && **l != *hosts)
        };
        let mut keys: Vec<&ServiceKey> = processed
            .iter()
            .filter(|(key, service)| self.wants(service) && moved(key))
            .map(|(key, _)| key)
            .collect();
        // Queued in key order, so that a run is the same every time.
        keys.sort_unstable();
        let mut moved = self.hosts_moved.lock();
        for key in keys {
            moved.insert(key.clone());
            self.queue.add(key.clone());
        }
    }

    /// Before the first sync the provider takes back what the cluster's statuses hold, so that
    /// a restart moves no address.
    fn started(&self, index: &Index) {
        self.started.store(true, Ordering::Relaxed);
        self.restore_and_queue(index);
    }

    fn resync(&self, index: &Index) {
        // Upstream's resync redelivers every Service unchanged: only cleanups are queued again.
        for service in index.services().list() {
            if needs_cleanup(&service) {
                self.queue_full(ServiceKey::of(&service));
            }
        }
    }
}

impl Controller for LoadBalancerController {
    type Prepared = Prepared;

    fn prepare(&self, cx: &Cluster<'_>, key: &ServiceKey) -> Prepared {
        Prepared {
            service: cx.index.services().get(&key.namespace, &key.name),
            hosts: self.current_hosts(cx.index),
        }
    }

    fn finish(
        &self,
        _cx: &Cluster<'_>,
        key: &ServiceKey,
        prepared: Prepared,
        sink: &dyn Sink,
        at: Duration,
        events: &mut Vec<(ServiceKey, Event)>,
    ) -> (SyncRecord, Option<String>) {
        let mut record = SyncRecord::new(at, key.clone(), SERVICE_LB_CONTROLLER);
        let moved = self.hosts_moved.lock().remove(key);
        let full = self.full.lock().remove(key);
        let known = self.processed.lock().contains_key(key);
        let hosts_only = moved && !full && known;
        let mut sync = KeySync {
            controller: self,
            key,
            sink,
            events,
        };
        let result = match prepared.service {
            None => sync.service_gone(),
            Some(service) if hosts_only => {
                let started = std::time::Instant::now();
                let result = sync.update_hosts(&service, prepared.hosts);
                record.host_update = Some(HostUpdate {
                    took: started.elapsed(),
                    succeeded: result.is_ok(),
                });
                result
            }
            Some(service) => sync.service(service, prepared.hosts),
        };
        match result {
            Ok(()) => (record, None),
            Err(error) => {
                // Whatever failed, the retry syncs in full.
                self.full.lock().insert(key.clone());
                record.outcome = SyncOutcome::Error;
                let message = error.to_string();
                record.message = Some(message.clone());
                if let SyncError::Provider(ProviderError::Retry { after, .. }) = error {
                    // A fixed delay the provider asked for: not a failure to back off from.
                    self.queue.add_after(key.clone(), after);
                    return (record, None);
                }
                (record, Some(message))
            }
        }
    }
}

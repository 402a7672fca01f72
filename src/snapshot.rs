//! One sync of every service over a snapshot of a cluster, as a controller that has just started
//! would do it: the offline form of the controller behind `sliced reconcile`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rayon::prelude::*;

use crate::change::{Change, Step};
pub use crate::controllers::Controllers;
use crate::engine::{Engine, EngineOptions, LoadBalancerOptions, ProviderCall, SyncOutcome};
use crate::model::{EndpointSlice, Endpoints, Name, Namespace, Node, Pod, Service};
use crate::queue::{Clock, VirtualClock};
use crate::reconcile::{Event, Options, mirroring};
use crate::sink::memory::{MemorySink, WriteRecord};
use crate::sink::{Object, ServicePatch};

/// The objects of a cluster at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub services: Vec<Service>,
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    pub namespaces: Vec<Namespace>,
    pub endpoint_slices: Vec<EndpointSlice>,
    pub endpoints: Vec<Endpoints>,
}

impl Snapshot {
    /// Appends the objects of `other`.
    pub fn merge(&mut self, other: Snapshot) {
        // The usual input is one List: its objects are moved whole, not copied one by one.
        if self.is_empty() {
            *self = other;
            return;
        }
        self.services.extend(other.services);
        self.pods.extend(other.pods);
        self.nodes.extend(other.nodes);
        self.namespaces.extend(other.namespaces);
        self.endpoint_slices.extend(other.endpoint_slices);
        self.endpoints.extend(other.endpoints);
    }

    pub fn len(&self) -> usize {
        self.services.len()
            + self.pods.len()
            + self.nodes.len()
            + self.namespaces.len()
            + self.endpoint_slices.len()
            + self.endpoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every object of a snapshot, arriving at time zero: namespaces, nodes, services, pods, then
    /// EndpointSlices and Endpoints.
    pub fn as_steps(&self) -> Vec<Step> {
        let mut steps: Vec<Step> = Vec::with_capacity(self.len());
        let mut add = |change| steps.push(Step::change(Duration::ZERO, change));
        for ns in &self.namespaces {
            add(Change::Namespace(ns.clone()));
        }
        for node in &self.nodes {
            add(Change::Node(node.clone()));
        }
        for service in &self.services {
            add(Change::Service(service.clone()));
        }
        for pod in &self.pods {
            add(Change::Pod(pod.clone()));
        }
        for slice in &self.endpoint_slices {
            add(Change::EndpointSlice(Arc::new(slice.clone())));
        }
        for endpoints in &self.endpoints {
            add(Change::Endpoints(Arc::new(endpoints.clone())));
        }
        steps
    }
}

/// A service whose sync failed, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncError {
    pub service: String,
    pub message: String,
}

/// What one pass over a snapshot did.
#[derive(Debug, Default)]
pub struct SnapshotResult {
    /// Accepted writes, in order.
    pub writes: Vec<WriteRecord>,
    /// Every object that exists afterwards, sorted by kind, namespace and name.
    pub objects: Vec<Object>,
    pub errors: Vec<SyncError>,
    /// Events recorded on services, with the service key.
    pub events: Vec<(String, Event)>,
    /// The service controller's patches of Services, in order, after every write of `writes`.
    pub service_patches: Vec<ServicePatch>,
    /// The service controller's calls to its provider, in order.
    pub provider_calls: Vec<ProviderCall>,
}

/// [`reconcile_snapshot_with`] for the EndpointSlice controller alone.
pub fn reconcile_snapshot(snapshot: &Snapshot, options: &Options, seed: u64) -> SnapshotResult {
    reconcile_snapshot_with(snapshot, options, Controllers::ENDPOINTSLICE, seed)
}

/// [`reconcile_snapshot_full`] with the mirroring controller's default options.
pub fn reconcile_snapshot_with(
    snapshot: &Snapshot,
    options: &Options,
    controllers: Controllers,
    seed: u64,
) -> SnapshotResult {
    reconcile_snapshot_full(
        snapshot,
        options,
        &mirroring::Options::default(),
        controllers,
        seed,
    )
}

/// Reconciles every service of the snapshot once against the objects that exist, as controllers
/// that have just started would: the engine, fed the snapshot, makes one pass
/// ([`Engine::sync_once`]) into an in-memory API server seeded with `seed`. Per service, in
/// namespace/name order, its EndpointSlices, then its Endpoints; then the Endpoints whose Service
/// is gone are deleted; last, the mirroring controller syncs every key it would be handed.
pub fn reconcile_snapshot_full(
    snapshot: &Snapshot,
    options: &Options,
    mirroring_options: &mirroring::Options,
    controllers: Controllers,
    seed: u64,
) -> SnapshotResult {
    reconcile_snapshot_owned(
        snapshot.clone(),
        options,
        mirroring_options,
        controllers,
        seed,
        LoadBalancerOptions::default(),
    )
}

/// [`reconcile_snapshot_full`] of a snapshot the caller no longer needs: its objects move into
/// the engine's index instead of being copied (a million pods' worth at the largest).
pub fn reconcile_snapshot_owned(
    snapshot: Snapshot,
    options: &Options,
    mirroring_options: &mirroring::Options,
    controllers: Controllers,
    seed: u64,
    load_balancers: LoadBalancerOptions,
) -> SnapshotResult {
    reconcile_snapshot_keeping_engine(
        snapshot,
        options,
        mirroring_options,
        controllers,
        seed,
        load_balancers,
    )
    .0
}

/// [`reconcile_snapshot_owned`], handing back the engine as well, with every pod, service and
/// node it holds: a command that ends next and allocates little meanwhile can forget it rather
/// than free each object (a tenth of a second at 100,000 pods). `sliced reconcile` does not:
/// rendering its output reuses the engine's memory, and keeping it raised the peak by a tenth.
pub fn reconcile_snapshot_keeping_engine(
    snapshot: Snapshot,
    options: &Options,
    mirroring_options: &mirroring::Options,
    controllers: Controllers,
    seed: u64,
    load_balancers: LoadBalancerOptions,
) -> (SnapshotResult, Engine) {
    let sink = MemorySink::new(seed);
    for ns in &snapshot.namespaces {
        sink.set_namespace_terminating(&ns.name, ns.terminating);
    }
    // Two input objects of one kind, namespace and name: the later one wins, as a later apply would.
    let Snapshot {
        services,
        pods,
        nodes,
        namespaces,
        endpoint_slices,
        endpoints,
    } = snapshot;
    for slice in endpoint_slices {
        let _ = sink.insert_existing(Object::from(slice));
    }
    for endpoints in endpoints {
        let _ = sink.insert_existing(Object::from(endpoints));
    }
    let clock = Arc::new(VirtualClock::new());
    let engine = Engine::new(
        EngineOptions {
            reconcile: options.clone(),
            controllers,
            mirroring: mirroring_options.clone(),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_balancers: LoadBalancerOptions {
                record_calls: true,
                ..load_balancers
            },
            ..EngineOptions::default()
        },
        Arc::clone(&clock) as Arc<dyn Clock>,
    );
    // As controllers that have just started: caches filled from lists, then the start-up work.
    deliver_cluster(&engine, namespaces, nodes, services, pods);
    load_stored(&engine, sink.objects());
    engine.start();
    // Past every delay that loading queued (the longest: slice-triggered syncs wait a second).
    clock.advance(Duration::from_secs(3600));
    let records = engine.sync_once(&sink);

    let mut result = SnapshotResult {
        writes: sink.take_writes(),
        objects: sink.objects(),
        service_patches: sink.take_service_patches(),
        provider_calls: engine.take_provider_calls(),
        ..SnapshotResult::default()
    };
    result.errors = records
        .into_iter()
        .filter(|r| r.outcome != SyncOutcome::Success)
        .map(|r| SyncError {
            service: r.service.to_string(),
            message: r.message.unwrap_or_default(),
        })
        .collect();
    result.events = engine
        .take_events()
        .into_iter()
        .map(|(key, event)| (key.to_string(), event))
        .collect();
    (result, engine)
}

/// The EndpointSlices kube-controller-manager's EndpointSlice controller, with its default flags,
/// leaves after one sync of `snapshot`: those it writes and those it leaves alone.
pub fn reconciled_slices(snapshot: Snapshot) -> Vec<Arc<EndpointSlice>> {
    let result = reconcile_snapshot_owned(
        snapshot,
        &Options::default(),
        &mirroring::Options::default(),
        Controllers::ENDPOINTSLICE,
        0,
        LoadBalancerOptions::default(),
    );
    (result.objects.into_iter())
        .filter_map(|o| match o {
            Object::EndpointSlice(slice) => Some(slice),
            Object::Endpoints(_) => None,
        })
        .collect()
}

impl Snapshot {
    /// Its Namespaces, Nodes, Services and Pods delivered to `engine`, as its informers' first lists deliver
    /// them. Its EndpointSlices and Endpoints are not: those the engine reads are the API
    /// server's, as it stores them ([`load_stored`]).
    pub fn load_cluster_into(&self, engine: &Engine) {
        deliver_cluster(
            engine,
            self.namespaces.iter().cloned(),
            self.nodes.iter().cloned(),
            self.services.iter().cloned(),
            self.pods.iter().cloned(),
        );
    }
}

/// Namespaces, Nodes, then Services, then Pods, as informers' first lists deliver them.
fn deliver_cluster(
    engine: &Engine,
    namespaces: impl IntoIterator<Item = Namespace>,
    nodes: impl IntoIterator<Item = Node>,
    services: impl IntoIterator<Item = Service>,
    pods: impl IntoIterator<Item = Pod>,
) {
    for namespace in namespaces {
        engine.handle(Change::Namespace(namespace));
    }
    for node in nodes {
        engine.handle(Change::Node(node));
    }
    for service in services {
        engine.handle(Change::Service(service));
    }
    // A namespace's pods in their order (the later of two of one name wins), namespaces side by
    // side: each is its own shard of the index, and queues and change logs take concurrent adds.
    let mut by_namespace: HashMap<Name, Vec<Pod>> = HashMap::new();
    for pod in pods {
        by_namespace
            .entry(pod.meta.namespace.clone())
            .or_default()
            .push(pod);
    }
    by_namespace.into_par_iter().for_each(|(_, pods)| {
        for pod in pods {
            engine.handle(Change::Pod(pod));
        }
    });
}

/// The EndpointSlices and Endpoints an API server holds, delivered to `engine` as its informers'
/// first lists deliver them.
pub fn load_stored(engine: &Engine, objects: impl IntoIterator<Item = Object>) {
    for object in objects {
        engine.handle(match object {
            Object::EndpointSlice(slice) => Change::EndpointSlice(slice),
            Object::Endpoints(endpoints) => Change::Endpoints(endpoints),
        });
    }
}

//! One sync of every service over a snapshot of a cluster, as a controller that has just started
//! would do it: the offline form of the controller behind `sliced reconcile`.

use std::collections::HashMap;
use std::sync::Arc;

use ahash::RandomState;

use crate::index::{Index, ServiceKey};
use crate::model::{EndpointSlice, Endpoints, Name, Namespace, Node, Pod, Service, keys};
use crate::reconcile::slices::{SyncInput, reconcile};
use crate::reconcile::topology::TopologyCache;
use crate::reconcile::{Event, Options};
use crate::sink::Object;
use crate::sink::apply::apply_plan;
use crate::sink::memory::{MemorySink, WriteRecord};

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
}

/// Reconciles every service of the snapshot once, in namespace/name order, against the slices that
/// exist, writing into an in-memory API server seeded with `seed`.
pub fn reconcile_snapshot(snapshot: &Snapshot, options: &Options, seed: u64) -> SnapshotResult {
    let sink = MemorySink::new(seed);
    for ns in &snapshot.namespaces {
        sink.set_namespace_terminating(&ns.name, ns.terminating);
    }
    // Two input objects of one kind, namespace and name: the later one wins, as a later apply would.
    for slice in &snapshot.endpoint_slices {
        let _ = sink.insert_existing(Object::from(slice.clone()));
    }
    for endpoints in &snapshot.endpoints {
        let _ = sink.insert_existing(Object::from(endpoints.clone()));
    }

    let nodes: HashMap<Name, Node, RandomState> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.clone()))
        .collect();
    let mut topology = TopologyCache::default();
    topology.set_nodes(snapshot.nodes.iter());

    let index = Index::new();
    for service in &snapshot.services {
        index.services().apply(service.clone());
    }
    for pod in &snapshot.pods {
        index.pods().apply(pod.clone());
    }
    let mut existing = managed_slices(&sink);
    let mut services: Vec<&Service> = snapshot.services.iter().collect();
    services
        .sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));

    let mut result = SnapshotResult::default();
    for service in services {
        if service.selector.is_none() {
            continue;
        }
        if service.service_type == crate::model::ServiceType::ExternalName {
            continue;
        }
        let members = index.members(&ServiceKey::of(service));
        let selected: Vec<&Pod> = members.iter().map(|p| p.as_ref()).collect();
        // Each service's sync writes only its own slices, so the slices listed before the pass are
        // what this sync would list.
        let current = existing
            .remove(&(service.meta.namespace.clone(), service.meta.name.clone()))
            .unwrap_or_default();
        let current_refs: Vec<&EndpointSlice> = current.iter().collect();
        let mut plan = reconcile(&SyncInput {
            service,
            pods: &selected,
            nodes: &nodes,
            slices: &current_refs,
            // A controller that has just started knows no earlier state: the trigger time of a
            // service's first sync is its creation time.
            trigger_time: service.meta.creation_timestamp,
            topology: &topology,
            options,
        });
        let key = plan.service_key.clone();
        topology.apply(&key, &plan.topology_changes);
        result
            .events
            .extend(plan.events.iter().map(|e| (key.clone(), e.clone())));
        let outcome = apply_plan(&sink, &mut plan);
        if let Some(message) = outcome.error_message() {
            result.events.push((
                key.clone(),
                Event::warning(
                    "FailedToUpdateEndpointSlices",
                    format!("Error updating Endpoint Slices for Service {key}: {message}"),
                ),
            ));
            result.errors.push(SyncError {
                service: key,
                message,
            });
        }
    }
    result.writes = sink.take_writes();
    result.objects = sink.objects();
    result
}

/// The slices this controller manages, without those being deleted, by (namespace, service name),
/// each list in name order.
fn managed_slices(sink: &MemorySink) -> HashMap<(Name, Name), Vec<EndpointSlice>, RandomState> {
    let mut by_service: HashMap<(Name, Name), Vec<EndpointSlice>, RandomState> = HashMap::default();
    for object in sink.objects() {
        let Object::EndpointSlice(slice) = object else {
            continue;
        };
        if slice.meta.deletion_timestamp.is_some()
            || slice.managed_by().map(|m| m.as_str()) != Some(keys::ENDPOINTSLICE_CONTROLLER)
        {
            continue;
        }
        if let Some(service) = slice.service_name().cloned() {
            by_service
                .entry((slice.meta.namespace.clone(), service))
                .or_default()
                .push(Arc::unwrap_or_clone(slice));
        }
    }
    by_service
}

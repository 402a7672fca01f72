//! The driver `sliced reconcile` ran before it ran the engine, kept as an independent reference:
//! one sync of every service over a snapshot, written straight from upstream's start-up rules on
//! the pure reconcilers, with none of the engine's queues, trackers, index of slices or feedback.
//! `tests/scenarios/one_driver.rs` holds the engine's pass (`Engine::sync_once`) to it; the
//! `run` harness and the slice properties compare with it. Include with
//! `#[path = "../support/snapshot_reference.rs"] mod snapshot_reference;`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ahash::RandomState;

use sliced::controllers::Controllers;
use sliced::index::{Index, ServiceKey};
use sliced::model::{EndpointSlice, Endpoints, Name, Node, Pod, Service, keys};
use sliced::reconcile::endpoints::{self, EndpointsInput};
use sliced::reconcile::mirroring::{self, MirrorInput};
use sliced::reconcile::slices::{SyncInput, reconcile};
use sliced::reconcile::topology::TopologyCache;
use sliced::reconcile::{Event, Options};
use sliced::sink::apply::apply_plan;
use sliced::sink::endpoints::apply_endpoints_plan;
use sliced::sink::memory::MemorySink;
use sliced::sink::{Kind, Object};
use sliced::snapshot::{Snapshot, SnapshotResult, SyncError};

/// Reconciles every service of the snapshot once, in namespace/name order, against the objects
/// that exist, writing into an in-memory API server seeded with `seed`. Per service the selected
/// controllers run in turn: its EndpointSlices, then its Endpoints. Then, as a controller that has
/// just started, the Endpoints controller deletes the Endpoints whose Service is gone. Last, the
/// mirroring controller, also just started, syncs every key it would be handed (see
/// [`sync_mirroring`]).
pub fn reconcile_snapshot(
    snapshot: &Snapshot,
    options: &Options,
    mirroring_options: &mirroring::Options,
    controllers: Controllers,
    seed: u64,
) -> SnapshotResult {
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

    let mut slices = SliceController {
        nodes: snapshot
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.clone()))
            .collect(),
        existing: managed_slices(&sink),
        topology: TopologyCache::default(),
        options,
    };
    // Of two Nodes with one name, the later one (the map's): each node's CPU counts once.
    slices.topology.set_nodes(slices.nodes.values());

    let index = Index::new();
    for service in &snapshot.services {
        index.services().apply(service.clone());
    }
    for pod in &snapshot.pods {
        index.pods().apply(pod.clone());
    }
    // In namespace/name order, each once: of two with one name, the later one (the index's).
    let services: Vec<Arc<Service>> = index
        .services()
        .keys()
        .into_iter()
        .filter_map(|k| index.services().get(&k.namespace, &k.name))
        .collect();
    // Listed before the pass, as the start-up check lists the informer cache.
    let existing_endpoints: Vec<Endpoints> = sink
        .objects()
        .into_iter()
        .filter_map(Object::into_endpoints)
        .collect();

    let mut result = SnapshotResult::default();
    for service in &services {
        // Neither controller reconciles these; their objects are left as they are.
        if service.selector.is_none()
            || service.service_type == sliced::model::ServiceType::ExternalName
        {
            continue;
        }
        let members = index.members(&ServiceKey::of(service));
        let selected: Vec<&Pod> = members.iter().map(|p| p.as_ref()).collect();
        if controllers.endpointslice {
            slices.sync(&sink, service, &selected, &mut result);
        }
        if controllers.endpoints {
            sync_endpoints(&sink, service, &selected, &mut result);
        }
    }
    if controllers.endpoints {
        let services: HashSet<(&Name, &Name), RandomState> = snapshot
            .services
            .iter()
            .map(|s| (&s.meta.namespace, &s.meta.name))
            .collect();
        let exists = |ns: &Name, name: &Name| services.contains(&(ns, name));
        // In namespace/name order, as the sink lists them.
        for plan in endpoints::leftovers(&existing_endpoints, exists) {
            record_endpoints(&sink, plan, &mut result);
        }
    }
    if controllers.mirroring {
        sync_mirroring(&sink, &index, snapshot, mirroring_options, &mut result);
    }
    result.writes = sink.take_writes();
    result.objects = sink.objects();
    result
}

/// What the EndpointSlice controller keeps across the services of one pass.
struct SliceController<'a> {
    nodes: HashMap<Name, Node, RandomState>,
    /// The managed slices listed before the pass, by (namespace, service name).
    existing: HashMap<(Name, Name), Vec<EndpointSlice>, RandomState>,
    topology: TopologyCache,
    options: &'a Options,
}

impl SliceController<'_> {
    /// One sync of one service's EndpointSlices.
    fn sync(
        &mut self,
        sink: &MemorySink,
        service: &Service,
        selected: &[&Pod],
        result: &mut SnapshotResult,
    ) {
        // Each service's sync writes only its own slices, so the slices listed before the pass are
        // what this sync would list.
        let current = self
            .existing
            .remove(&(service.meta.namespace.clone(), service.meta.name.clone()))
            .unwrap_or_default();
        let current_refs: Vec<&EndpointSlice> = current.iter().collect();
        let mut plan = reconcile(&SyncInput {
            service,
            pods: selected,
            nodes: &self.nodes,
            slices: &current_refs,
            // A controller that has just started knows no earlier state: the trigger time of a
            // service's first sync is its creation time.
            trigger_time: service.meta.creation_timestamp,
            topology: &self.topology,
            options: self.options,
        });
        let key = plan.service_key.clone();
        self.topology.apply(&key, &plan.topology_changes);
        result
            .events
            .extend(plan.events.iter().map(|e| (key.clone(), e.clone())));
        let outcome = apply_plan(sink, &mut plan);
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
}

/// The EndpointSlice mirroring controller that has just started: the custom Endpoints of
/// selector-less Services mirrored into EndpointSlices. It syncs every key its informers would hand
/// it, in namespace/name order: each Endpoints, each Service without a selector, and the
/// service-name label of each slice it manages, so that slices whose Endpoints or Service is gone
/// (or no longer mirrored) are deleted. It runs after the other controllers, so it sees the
/// Endpoints the Endpoints controller wrote or deleted; those of selector Services are not
/// mirrored ([`mirroring::decide`]).
fn sync_mirroring(
    sink: &MemorySink,
    index: &Index,
    snapshot: &Snapshot,
    options: &mirroring::Options,
    result: &mut SnapshotResult,
) {
    // What the listers hold when the pass starts. Each key's sync writes only the slices labelled
    // with its own name, so this is also what each sync would list.
    let mut keys: BTreeMap<(Name, Name), MirrorKey> = BTreeMap::new();
    for object in sink.objects() {
        match object {
            Object::Endpoints(endpoints) => {
                let key = (
                    endpoints.meta.namespace.clone(),
                    endpoints.meta.name.clone(),
                );
                keys.entry(key).or_default().endpoints = Some(Arc::unwrap_or_clone(endpoints));
            }
            // Upstream lists by label without looking at deletionTimestamp: a mirrored slice being
            // deleted is passed too.
            Object::EndpointSlice(slice) if mirroring::is_mirrored(&slice) => {
                let Some(service) = slice.service_name().cloned() else {
                    continue;
                };
                let key = (slice.meta.namespace.clone(), service);
                keys.entry(key)
                    .or_default()
                    .slices
                    .push(Arc::unwrap_or_clone(slice));
            }
            _ => {}
        }
    }
    for service in &snapshot.services {
        if service.selector.is_none() {
            let key = (service.meta.namespace.clone(), service.meta.name.clone());
            keys.entry(key).or_default();
        }
    }

    for ((namespace, name), state) in keys {
        // The index holds the last of several inputs of one name, as the sink does.
        let service = index.services().get(&namespace, &name);
        let slices: Vec<&EndpointSlice> = state.slices.iter().collect();
        let mut plan = mirroring::reconcile(&MirrorInput {
            namespace: &namespace,
            name: &name,
            service: service.as_deref(),
            endpoints: state.endpoints.as_ref(),
            slices: &slices,
            options,
        });
        let key = plan.service_key.clone();
        result
            .events
            .extend(plan.events.iter().map(|e| (key.clone(), e.clone())));
        // Upstream's mirroring controller records no event when a sync fails; it retries.
        if let Some(message) = apply_plan(sink, &mut plan).error_message() {
            result.errors.push(SyncError {
                service: key,
                message,
            });
        }
    }
}

/// What the mirroring controller's listers hold for one key.
#[derive(Default)]
struct MirrorKey {
    endpoints: Option<Endpoints>,
    /// Its mirrored slices, in name order.
    slices: Vec<EndpointSlice>,
}

/// One sync of one service's Endpoints.
fn sync_endpoints(
    sink: &MemorySink,
    service: &Service,
    selected: &[&Pod],
    result: &mut SnapshotResult,
) {
    // Each sync writes only its own Endpoints, so what the sink holds is what the lister would.
    let current = sink
        .get(Kind::Endpoints, &service.meta.namespace, &service.meta.name)
        .and_then(Object::into_endpoints);
    let plan = endpoints::sync(&EndpointsInput {
        service,
        pods: selected,
        current: current.as_ref(),
        // A tracker that has just started returns the service's creation time.
        trigger_time: service.meta.creation_timestamp,
        current_is_own_write: false,
    });
    record_endpoints(sink, plan, result);
}

fn record_endpoints(
    sink: &MemorySink,
    plan: endpoints::EndpointsPlan,
    result: &mut SnapshotResult,
) {
    let key = plan.service_key.clone();
    let outcome = apply_endpoints_plan(sink, plan);
    result
        .events
        .extend(outcome.events.into_iter().map(|e| (key.clone(), e)));
    if let Some(message) = outcome.error {
        result.errors.push(SyncError {
            service: key,
            message,
        });
    }
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

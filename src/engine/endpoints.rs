//! The Endpoints controller inside the engine: its own queue (client-go's default controller rate
//! limiter, as upstream's `endpoint` queue), trigger-time tracker and stale-version guard, fed by
//! the same index and selector cache as the EndpointSlice controller.

use std::sync::Arc;
use std::time::Duration;

use ahash::RandomState;
use dashmap::{DashMap, DashSet};

use super::Cluster;
use super::batch::BatchWindows;
use super::controller::{Controller, Handlers, PodRules, SyncOutcome, SyncRecord};
use super::incremental::ChangeLog;
use crate::index::{EndpointsStore, Index, ServiceKey};
use crate::model::{Endpoints, Name, Pod, Service, ServiceType, Timestamp, keys};
use crate::queue::{Clock, QueueConfig, WorkQueue};
use crate::reconcile::Event;
use crate::reconcile::endpoints::{
    self, ANNOTATION_LEADER, AddressCache, Edit, EndpointsInput, EndpointsPlan, Settled,
};
use crate::sink::endpoints::apply_endpoints_plan;
use crate::sink::{Object, Sink, Verb};
use crate::tracker::TriggerTimeTracker;

/// The controller name in sync records.
pub const ENDPOINTS_CONTROLLER: &str = "endpoints";

const STALE_MESSAGE: &str = "endpoints informer cache is out of date";

/// How long a sync queued by someone else's deletion of an Endpoints object waits (at least).
/// The API server deletes a Service's Endpoints with the Service, and its two watches deliver
/// the deletions in either order: a sync run at once could recreate the Endpoints of a Service
/// whose deletion is a moment behind, then delete them again. Upstream syncs at once.
const DELETED_BY_OTHERS_SYNC_DELAY: Duration = Duration::from_secs(1);

pub(super) struct EndpointsController {
    pub queue: WorkQueue<ServiceKey>,
    /// `--endpoint-updates-batch-period`: the delay of pod-triggered syncs, fixed or adaptive.
    batch: BatchWindows,
    triggers: TriggerTimeTracker,
    /// The pods changed since each service's last trigger-time computation: a pod event in a
    /// 5,000-pod service then costs a look at that pod, not at all 5,000.
    changes: ChangeLog,
    /// What this controller last wrote of each service's Endpoints.
    last_writes: DashMap<ServiceKey, LastWrite, RandomState>,
    /// Services deleted since their key's last sync and no Endpoints event since: the API server
    /// deleted their Endpoints with them, whatever the watch still shows.
    deleted_with_service: DashSet<ServiceKey, RandomState>,
    /// The addresses of services synced more than once, in order, kept by the changed pods
    /// (about 70 bytes a pod).
    addresses: DashMap<ServiceKey, AddressCache, RandomState>,
}

/// The versions of the last write of a service's Endpoints, as the API server answered it.
struct LastWrite {
    /// The version an update replaced: a cache still showing it is stale.
    replaced: Option<Name>,
    /// The version stored: held, the object is known to be in canonical order.
    stored: Name,
}

/// Pods by name as they are now: `None` when deleted or no longer selected.
type ChangedPods = Vec<(Name, Option<Arc<Pod>>)>;

pub(super) enum Prepared {
    Nothing,
    Stale,
    Plan {
        plan: Box<EndpointsPlan>,
        /// The service, when the plan came from its address cache: the write's answer settles it.
        cached: Option<Arc<Service>>,
    },
}

impl EndpointsController {
    pub fn new(batch: BatchWindows, clock: Arc<dyn Clock>) -> Self {
        EndpointsController {
            queue: WorkQueue::new(QueueConfig::controller_default(), clock),
            batch,
            triggers: TriggerTimeTracker::new(),
            changes: ChangeLog::default(),
            last_writes: DashMap::default(),
            deleted_with_service: DashSet::default(),
            addresses: DashMap::default(),
        }
    }

    /// What a sync would write now, read-only (no tracker moves): `None` when the Endpoints
    /// object is as a full sync leaves it.
    pub fn pending_write(
        index: &Index,
        store: &EndpointsStore,
        key: &ServiceKey,
    ) -> Option<endpoints::EndpointsWrite> {
        let current = store.get(key);
        let Some(service) = index.services().get(&key.namespace, &key.name) else {
            // Leftovers of a deleted service go; a leader-election record is not ours.
            return current
                .filter(|c| !c.meta.annotations.contains_key(ANNOTATION_LEADER))
                .and_then(|_| endpoints::sync_deleted(&key.namespace, &key.name).write);
        };
        let write = index.with_members(key, |pods| {
            endpoints::sync(&EndpointsInput {
                service: &service,
                pods,
                current: current.as_deref(),
                trigger_time: None,
                current_is_own_write: false,
            })
            .write
        })?;
        // The trigger time is the sync's, not a difference: an object over capacity is rewritten
        // by every sync (as upstream's), and only its trigger time changes.
        let trigger = keys::ANNOTATION_TRIGGER_TIME;
        match (&write, current.as_deref()) {
            (endpoints::EndpointsWrite::Update(new), Some(current))
                if new.subsets == current.subsets
                    && new.meta.labels == current.meta.labels
                    && new.meta.annotations.without(trigger)
                        == current.meta.annotations.without(trigger) =>
            {
                None
            }
            _ => Some(write),
        }
    }

    /// The pods changed since the service's last trigger-time computation, as they are now (`None`
    /// when deleted or no longer selected); `None` when the service needs a full computation.
    fn changed_pods(
        &self,
        index: &Index,
        key: &ServiceKey,
        service: &Service,
    ) -> Option<ChangedPods> {
        let changes = self.changes.take(key);
        // The tracker's state moves with every computation, whatever the sync's outcome.
        self.changes.synced(key);
        let selector = service.selector.as_ref()?;
        if changes.full {
            return None;
        }
        let current = changes
            .pods
            .into_iter()
            .map(|name| {
                let pod = index
                    .pods()
                    .get(&key.namespace, &name)
                    .filter(|p| p.meta.labels.matches(selector));
                (name, pod)
            })
            .collect();
        Some(current)
    }

    /// Brings the service's address cache up to date: edited by the changed pods, or built afresh
    /// (after a full change, or when an edit cannot be made). Returns what the changed pods did
    /// to it and whether it was edited rather than built, or `None` when the service keeps none. A cache is first built by a sync that knows
    /// its changed pods: a service synced once (a one-shot reconcile) never builds one.
    fn keep_addresses(
        &self,
        index: &Index,
        key: &ServiceKey,
        service: &Service,
        changed: Option<&ChangedPods>,
    ) -> Option<(Edit, bool)> {
        if !AddressCache::fits(service) {
            self.addresses.remove(key);
            return None;
        }
        match changed {
            Some(changed) => {
                let edit = self
                    .addresses
                    .get_mut(key)
                    .map(|mut cache| cache.apply(service, changed));
                if let Some(edit) = edit.filter(|e| *e != Edit::Unfit) {
                    return Some((edit, true));
                }
            }
            None if !self.addresses.contains_key(key) => return None,
            None => {}
        }
        match AddressCache::build(service, &index.members(key)) {
            Some(cache) => {
                self.addresses.insert(key.clone(), cache);
                Some((Edit::Moved, false))
            }
            None => {
                self.addresses.remove(key);
                None
            }
        }
    }

    /// The trigger time of this sync from the changed pods alone; `None` when the tracker needs
    /// every pod.
    fn trigger_time_of_changed(
        &self,
        key: &ServiceKey,
        service: &Service,
        changed: &ChangedPods,
    ) -> Option<Option<Timestamp>> {
        let changed: Vec<(Name, Option<&Pod>)> = changed
            .iter()
            .map(|(n, p)| (n.clone(), p.as_deref()))
            .collect();
        self.triggers
            .compute_changed(&key.namespace, &key.name, service, &changed)
    }

    /// Records what a sync planned from the cache found: the object as it is when the plan
    /// writes nothing; nothing yet when it writes (the write's answer settles it).
    fn settle(&self, key: &ServiceKey, settled: Option<Settled>) {
        if let Some(mut cache) = self.addresses.get_mut(key) {
            cache.settle(settled);
        }
    }
}

impl EndpointsController {
    fn rules(&self) -> PodRules<'_> {
        PodRules {
            changes: &self.changes,
            queue: &self.queue,
            batch: &self.batch,
        }
    }
}

impl Handlers for EndpointsController {
    fn queue(&self) -> &WorkQueue<ServiceKey> {
        &self.queue
    }

    fn queue_name(&self) -> &'static str {
        super::QUEUE_ENDPOINTS
    }

    fn service_changed(&self, key: &ServiceKey, _: Option<&Service>, new: Option<&Service>) {
        if new.is_none() {
            self.deleted_with_service.insert(key.clone());
        }
        self.rules().service_changed(key, new);
    }

    fn pod_changed(&self, key: &ServiceKey, pod: &Name, queued: bool) {
        self.rules().pod_changed(key, pod, queued);
    }

    fn wrote(&self, key: &ServiceKey, at: Duration) {
        self.batch.wrote(key, at);
    }

    /// Any event of the object says what the API server holds, and outdates a Service deletion
    /// seen before it. A deletion the watch told of syncs the service, which recreates the object
    /// if still wanted (upstream watches nothing else of Endpoints), after the batch period and
    /// at least [`DELETED_BY_OTHERS_SYNC_DELAY`]. The engine's own delete syncs nothing again: a
    /// second sync could only delete again, answered NotFound.
    fn endpoints_changed(&self, old: Option<&Endpoints>, new: Option<&Endpoints>, by_watch: bool) {
        if let Some(meta) = new.or(old).map(|e| &e.meta) {
            self.deleted_with_service
                .remove(&ServiceKey::new(&meta.namespace, &meta.name));
        }
        if let (Some(old), None, true) = (old, new, by_watch) {
            self.queue.add_after(
                ServiceKey::new(&old.meta.namespace, &old.meta.name),
                self.batch.floor().max(DELETED_BY_OTHERS_SYNC_DELAY),
            );
        }
    }

    /// Every Endpoints object but leader-election records is synced, so that those whose
    /// service is gone get deleted.
    fn started(&self, index: &Index) {
        let store = index.endpoints();
        for key in store.keys_where(|e| !e.meta.annotations.contains_key(ANNOTATION_LEADER)) {
            self.queue.add(key);
        }
    }

    fn resync(&self, index: &Index) {
        self.rules().resync(index);
    }
}

impl Controller for EndpointsController {
    type Prepared = Prepared;

    /// Everything of a sync that reads only: the plan.
    fn prepare(&self, cx: &Cluster<'_>, key: &ServiceKey) -> Prepared {
        let (index, store) = (cx.index, cx.index.endpoints());
        let Some(service) = index.services().get(&key.namespace, &key.name) else {
            self.triggers.delete_service(&key.namespace, &key.name);
            self.changes.forget(key);
            self.last_writes.remove(key);
            self.deleted_with_service.remove(key);
            self.addresses.remove(key);
            // The API server deletes a Service's Endpoints with it; one the watch has shown gone
            // needs no delete (upstream sends one anyway, and gets 404).
            if store.get(key).is_none() {
                return Prepared::Nothing;
            }
            return Prepared::Plan {
                plan: Box::new(endpoints::sync_deleted(&key.namespace, &key.name)),
                cached: None,
            };
        };
        if service.service_type == ServiceType::ExternalName || service.selector.is_none() {
            // Its Endpoints are the user's now: the addresses kept for it are of no further use.
            self.addresses.remove(key);
            return Prepared::Nothing;
        }
        let changed = self.changed_pods(index, key, &service);
        // An engine told to sync in full (the reference in tests) builds every time.
        let edit = cx
            .options
            .incremental
            .then(|| self.keep_addresses(index, key, &service, changed.as_ref()))
            .flatten();
        // A Service recreated before the watch shows the old one's Endpoints gone: they went with
        // it, and an update of them would be refused (NotFound). Created instead, as upstream's
        // retry does after that refusal. Should they still be there, the create is refused and
        // the retry updates.
        let deleted_with_service = self.deleted_with_service.remove(key).is_some();
        let current = store.get(key).filter(|_| !deleted_with_service);
        let (stale, current_is_own_write) = match (&current, self.last_writes.get(key)) {
            (Some(current), Some(last)) => {
                let held = &current.meta.resource_version;
                (last.replaced.as_ref() == Some(held), last.stored == *held)
            }
            _ => (false, false),
        };
        let known_trigger_time = changed
            .as_ref()
            .and_then(|changed| self.trigger_time_of_changed(key, &service, changed));
        let cache = edit.and_then(|_| self.addresses.get(key));
        let plan = match (known_trigger_time, edit, cache) {
            // Neither needs the other pods.
            (Some(trigger_time), Some((edit, edited)), Some(cache)) => {
                if stale {
                    return Prepared::Stale;
                }
                if edited {
                    cx.stats.lock().incremental_syncs += 1;
                }
                if matches!(edit, Edit::Kept | Edit::PastCut)
                    && let Some(plan) =
                        endpoints::sync_settled(&service, current.as_deref(), &cache)
                {
                    return Prepared::Plan {
                        plan: Box::new(plan),
                        cached: None,
                    };
                }
                endpoints::sync_cached(
                    &EndpointsInput {
                        service: &service,
                        pods: &[],
                        current: current.as_deref(),
                        trigger_time,
                        current_is_own_write,
                    },
                    &cache,
                )
            }
            // The members are borrowed, not cloned: a 5,000-pod service moves no reference count.
            (known, _, cache) => {
                let planned = index.with_members(key, |pods| {
                    let trigger_time = known.unwrap_or_else(|| {
                        self.triggers
                            .compute(&key.namespace, &key.name, &service, pods)
                    });
                    if stale {
                        return None;
                    }
                    let input = EndpointsInput {
                        service: &service,
                        pods,
                        current: current.as_deref(),
                        trigger_time,
                        current_is_own_write,
                    };
                    Some(match &cache {
                        Some(cache) => endpoints::sync_cached(&input, cache),
                        None => endpoints::sync(&input),
                    })
                });
                match planned {
                    Some(plan) => plan,
                    None => return Prepared::Stale,
                }
            }
        };
        if edit.is_none() {
            return Prepared::Plan {
                plan: Box::new(plan),
                cached: None,
            };
        }
        let found_right = current
            .as_ref()
            .filter(|_| plan.write.is_none())
            .map(|current| Settled {
                version: current.meta.resource_version.clone(),
                service: Arc::clone(&service),
                ready: plan.ready,
                not_ready: plan.not_ready,
                truncated: plan.truncated,
            });
        self.settle(key, found_right);
        Prepared::Plan {
            plan: Box::new(plan),
            cached: Some(service),
        }
    }

    /// Applies a prepared sync and feeds its result back to the queue. The caller feeds the write
    /// back as the watch would deliver it.
    fn finish(
        &self,
        cx: &Cluster<'_>,
        key: &ServiceKey,
        prepared: Prepared,
        sink: &dyn Sink,
        at: Duration,
        events: &mut Vec<(ServiceKey, Event)>,
    ) -> (SyncRecord, Option<String>) {
        let store = cx.index.endpoints();
        let mut record = SyncRecord::new(at, key.clone(), ENDPOINTS_CONTROLLER);
        let error = match prepared {
            Prepared::Nothing => None,
            Prepared::Stale => {
                record.outcome = SyncOutcome::Stale;
                Some(STALE_MESSAGE.to_string())
            }
            Prepared::Plan { plan, cached } => {
                let before = store.get(key);
                let (ready, not_ready, truncated) = (plan.ready, plan.not_ready, plan.truncated);
                let outcome = apply_endpoints_plan(sink, *plan);
                events.extend(outcome.events.into_iter().map(|e| (key.clone(), e)));
                if let Some(write) = outcome.record {
                    match (&write.verb, &write.object) {
                        (Verb::Create | Verb::Update, Object::Endpoints(stored)) => {
                            let stored = stored.meta.resource_version.clone();
                            let replaced = before
                                .as_ref()
                                .map(|b| &b.meta.resource_version)
                                .filter(|rv| matches!(write.verb, Verb::Update) && **rv != stored)
                                .cloned();
                            if let Some(service) = cached {
                                self.settle(
                                    key,
                                    Some(Settled {
                                        version: stored.clone(),
                                        service,
                                        ready,
                                        not_ready,
                                        truncated,
                                    }),
                                );
                            }
                            self.last_writes
                                .insert(key.clone(), LastWrite { replaced, stored });
                        }
                        _ => {
                            self.last_writes.remove(key);
                        }
                    }
                    record.writes.push(write);
                }
                if outcome.error.is_some() {
                    record.outcome = SyncOutcome::Error;
                }
                record.abandoned = outcome.abandoned;
                // The delete names no uid; what is gone is the object held when the sync began,
                // and not a newer one that may have come since.
                if outcome.gone.is_some()
                    && let Some(held) = before
                {
                    record.gone.push(Object::Endpoints(held));
                }
                outcome.error
            }
        };
        (record, error)
    }
}

impl EndpointsController {
    /// The adaptive batch period's window now, when the batch period is adaptive.
    pub fn adaptive_window(&self) -> Option<Duration> {
        self.batch.adaptive_window()
    }
}

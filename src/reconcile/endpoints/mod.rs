//! The Endpoints controller: one v1 Endpoints object per selector Service, subsets repacked into
//! upstream's canonical order, as one `syncService` of upstream's endpoint controller does it,
//! returned as a plan instead of an API call.

mod cache;
mod capacity;
mod compare;
mod desired;
mod memo;
mod repack;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::model::{Endpoints, Labels, Meta, Name, Pod, Service, ServiceType, Timestamp, keys};
use crate::reconcile::slices::format_rfc3339_nano;

pub use cache::{AddressCache, Edit, Settled};
pub use capacity::{ANNOTATION_OVER_CAPACITY, MAX_CAPACITY, OVER_CAPACITY_TRUNCATED};
pub use compare::same_subsets;
pub use desired::pod_in_endpoints;
pub(crate) use repack::write_v4;
pub use repack::{address_order, repack};

/// Endpoints carrying this annotation hold a leader-election record, not a Service's endpoints:
/// the start-up cleanup leaves them alone.
pub const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";

/// Event reasons, as upstream records them when a write fails.
pub const REASON_FAILED_TO_CREATE: &str = "FailedToCreateEndpoint";
pub const REASON_FAILED_TO_UPDATE: &str = "FailedToUpdateEndpoint";

/// Everything one sync of one existing service reads.
pub struct EndpointsInput<'a> {
    pub service: &'a Service,
    /// The pods the service's selector matches, in a stable order.
    pub pods: &'a [&'a Pod],
    /// The Endpoints object of the same namespace and name, if there is one.
    pub current: Option<&'a Endpoints>,
    /// The last-change-trigger-time to write; `None` removes the annotation.
    pub trigger_time: Option<Timestamp>,
    /// `current` is the object this controller last wrote, as the API server answered it: in
    /// canonical order unless truncated, so comparing it repacked would only repeat the
    /// comparison (at the cost of a sort of every address).
    pub current_is_own_write: bool,
}

/// The one write a sync makes, if any.
#[derive(Clone, Debug, PartialEq)]
pub enum EndpointsWrite {
    Create(Endpoints),
    /// The whole object, conditional on `meta.resource_version`.
    Update(Endpoints),
    /// Only namespace and name are set: upstream deletes with no precondition.
    Delete(Endpoints),
}

impl EndpointsWrite {
    pub fn object(&self) -> &Endpoints {
        match self {
            EndpointsWrite::Create(e) | EndpointsWrite::Update(e) | EndpointsWrite::Delete(e) => e,
        }
    }
}

/// One sync of one service's Endpoints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointsPlan {
    /// "namespace/name" of the service.
    pub service_key: String,
    pub write: Option<EndpointsWrite>,
    /// Ready and not-ready addresses desired, before truncation.
    pub ready: usize,
    pub not_ready: usize,
    /// The object written is cut down to [`MAX_CAPACITY`] addresses.
    pub truncated: bool,
}

impl EndpointsPlan {
    pub fn write_count(&self) -> usize {
        usize::from(self.write.is_some())
    }
}

/// Syncs the Endpoints of a service that exists.
///
/// ExternalName services and services without a selector get nothing, and their Endpoints (user
/// managed) are left as they are. Otherwise the desired subsets are compared with the current
/// object as upstream does (subsets, labels without the headless label, and the over-capacity
/// annotation; not other annotations), and only a difference makes a write. The Endpoints carry
/// the service's labels and the controller's managed-by label.
pub fn sync(input: &EndpointsInput) -> EndpointsPlan {
    sync_from(input, None)
}

/// [`sync`] with the service's addresses taken from `cache` (kept current by its caller) rather
/// than built from `input.pods`: the same plan, with only the pods written read.
pub fn sync_cached(input: &EndpointsInput, cache: &AddressCache) -> EndpointsPlan {
    sync_from(input, Some(cache))
}

/// A sync whose changed pods left every address as it was ([`Edit::Kept`]), or moved only
/// addresses past the cut ([`Edit::PastCut`]), over the object the cache settled, for the very
/// same service: a full sync would write nothing, and no other pod need be read to say so.
/// `None` when that is not known, and a full comparison must decide.
pub fn sync_settled(
    service: &Arc<Service>,
    current: Option<&Endpoints>,
    cache: &AddressCache,
) -> Option<EndpointsPlan> {
    let settled = cache.settled()?;
    let current = current?;
    // An object without a version (never stored by an API server) cannot be told apart.
    let same = !settled.version.is_empty()
        && settled.version == current.meta.resource_version
        && Arc::ptr_eq(&settled.service, service);
    same.then(|| EndpointsPlan {
        service_key: service.meta.key(),
        write: None,
        ready: settled.ready,
        not_ready: settled.not_ready,
        truncated: settled.truncated,
    })
}

fn sync_from(input: &EndpointsInput, cache: Option<&AddressCache>) -> EndpointsPlan {
    let service = input.service;
    let mut plan = EndpointsPlan {
        service_key: service.meta.key(),
        ..EndpointsPlan::default()
    };
    if service.service_type == ServiceType::ExternalName || service.selector.is_none() {
        return plan;
    }
    let mut desired = match cache {
        Some(cache) => cache.desired(service),
        None => desired::Desired::build(service, input.pods),
    };
    plan.ready = desired.ready_count();
    plan.not_ready = desired.not_ready_count();

    // Upstream (1.35 and later) also accepts the stored subsets once repacked, so an object in an
    // older release's order (MD5 rather than FNV) is not rewritten for its order alone.
    // Over the cap the object is never as it should be, since it must be cut (and a cut build
    // could not say): upstream's check fails on the capacity annotation. That check and the
    // labels' come first, being cheap: an object cut to the cap fails them every sync, and its
    // subsets need neither comparing nor repacking.
    // Whether the desired subsets are the current ones, once compared: the no-op check below
    // needs the same answer, and comparing costs a walk over the addresses.
    // An edit that moved an address off the object the cache settled answers it at once.
    let mut same_subsets = cache
        .zip(input.current)
        .is_some_and(|(cache, current)| cache.moved_since(current, service))
        .then_some(false);
    if let Some(current) = input.current
        && same_subsets.is_none()
        && !desired.is_cut()
        && capacity::annotation_set_correctly(&current.meta.annotations, current)
        && service_labels_kept(&current.meta.labels, &service.meta.labels)
    {
        let same = desired.same_as(&current.subsets);
        same_subsets = Some(same);
        if same
            || (!is_canonical(input, current) && desired.same_as(&repack::repack(&current.subsets)))
        {
            return plan;
        }
    }

    plan.truncated = desired.is_cut() || capacity::truncate(&mut desired.groups);
    if plan.truncated {
        // Cut here: not the subsets compared above.
        same_subsets = None;
    }
    let labels = endpoints_labels(service);
    let base = input.current.map(|c| &c.meta.annotations);
    let annotations = endpoints_annotations(base, input.trigger_time, plan.truncated);
    let write = match input.current {
        None => EndpointsWrite::Create(Endpoints {
            meta: Meta {
                namespace: service.meta.namespace.clone(),
                name: service.meta.name.clone(),
                labels,
                annotations,
                ..Meta::default()
            },
            subsets: desired.to_subsets(&[]),
        }),
        // Upstream sends this update whenever its check above fails, which for an object over
        // capacity is every sync, and so rewrites the trigger time of an unchanged object (on a
        // restart, to the Service's creation time). An update that would change nothing else is
        // dropped: no pod change is being propagated, so there is no trigger time to record.
        Some(current)
            if current.meta.labels == labels
                && same_except_trigger_time(&current.meta.annotations, &annotations)
                && same_subsets.unwrap_or_else(|| desired.same_as(&current.subsets)) =>
        {
            return plan;
        }
        Some(current) => {
            let mut meta = current.meta.clone();
            meta.labels = labels;
            meta.annotations = annotations;
            EndpointsWrite::Update(Endpoints {
                meta,
                subsets: desired.to_subsets(&current.subsets),
            })
        }
    };
    plan.write = Some(write);
    plan
}

/// `current` is known to be in the layout repacking gives: the controller's own write, and not
/// truncated unless it has one subset (cutting addresses keeps their order, but can change the
/// hashes that order several subsets).
fn is_canonical(input: &EndpointsInput, current: &Endpoints) -> bool {
    input.current_is_own_write
        && (current.subsets.len() <= 1
            || !current
                .meta
                .annotations
                .contains_key(ANNOTATION_OVER_CAPACITY))
}

/// Syncs the Endpoints of a service that no longer exists: they are deleted (a missing object is
/// not an error when the plan is applied).
pub fn sync_deleted(namespace: &Name, name: &Name) -> EndpointsPlan {
    EndpointsPlan {
        service_key: format!("{namespace}/{name}"),
        write: Some(EndpointsWrite::Delete(Endpoints {
            meta: Meta {
                namespace: namespace.clone(),
                name: name.clone(),
                ..Meta::default()
            },
            subsets: Vec::new(),
        })),
        ..EndpointsPlan::default()
    }
}

/// The start-up check for Endpoints left behind by deleted services: every Endpoints object but
/// leader-election records is synced, which for those whose service is gone means a delete. Returns
/// those deletes, in the order given.
pub fn leftovers<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoints>,
    service_exists: impl Fn(&Name, &Name) -> bool,
) -> Vec<EndpointsPlan> {
    endpoints
        .into_iter()
        .filter(|e| !e.meta.annotations.contains_key(ANNOTATION_LEADER))
        .filter(|e| !service_exists(&e.meta.namespace, &e.meta.name))
        .map(|e| sync_deleted(&e.meta.namespace, &e.meta.name))
        .collect()
}

/// Upstream's label check: the current labels, the headless label aside, are the service's plus
/// the controller's managed-by label.
fn service_labels_kept(current: &Labels, service: &Labels) -> bool {
    let ours = |k: &str| k == keys::LABEL_HEADLESS || k == keys::LABEL_ENDPOINTS_MANAGED_BY;
    current
        .get(keys::LABEL_ENDPOINTS_MANAGED_BY)
        .map(|v| v.as_str())
        == Some(keys::ENDPOINTS_CONTROLLER)
        && {
            let mut kept = current.iter().filter(|(k, _)| !ours(k.as_str()));
            let mut wanted = service
                .iter()
                .filter(|(k, _)| k.as_str() != keys::LABEL_ENDPOINTS_MANAGED_BY);
            loop {
                match (kept.next(), wanted.next()) {
                    (None, None) => break true,
                    (Some(a), Some(b)) if a == b => {}
                    _ => break false,
                }
            }
        }
}

/// The service's labels, replacing any others, with the controller's managed-by label, and the
/// headless label exactly when the service has no cluster IP.
fn endpoints_labels(service: &Service) -> Labels {
    let labels = service
        .meta
        .labels
        .with(keys::LABEL_ENDPOINTS_MANAGED_BY, keys::ENDPOINTS_CONTROLLER);
    if service.is_headless() {
        labels.with(keys::LABEL_HEADLESS, "")
    } else {
        labels.without(keys::LABEL_HEADLESS)
    }
}

fn same_except_trigger_time(a: &Labels, b: &Labels) -> bool {
    let other = |(k, _): &(&Name, &Name)| k.as_str() != keys::ANNOTATION_TRIGGER_TIME;
    a.iter().filter(other).eq(b.iter().filter(other))
}

/// The current annotations (user annotations survive) with the trigger time and the over-capacity
/// mark set or removed.
fn endpoints_annotations(
    current: Option<&Labels>,
    trigger_time: Option<Timestamp>,
    truncated: bool,
) -> Labels {
    let mut annotations = current.cloned().unwrap_or_default();
    annotations = match trigger_time {
        Some(t) => annotations.with(keys::ANNOTATION_TRIGGER_TIME, &format_rfc3339_nano(t)),
        None => annotations.without(keys::ANNOTATION_TRIGGER_TIME),
    };
    if truncated {
        annotations.with(ANNOTATION_OVER_CAPACITY, OVER_CAPACITY_TRUNCATED)
    } else {
        annotations.without(ANNOTATION_OVER_CAPACITY)
    }
}

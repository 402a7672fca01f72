//! Controller state about earlier writes: the EndpointSlice generation tracker and trigger times.
//!
//! - [`EndpointSliceTracker`] remembers the generation the API server returned for every slice the
//!   controller wrote (or that it deleted), so a sync can tell a lagging informer cache from the
//!   truth, and slice events caused by the controller's own writes are not queued again.
//! - [`on_slice_add`], [`on_slice_update`] and [`on_slice_delete`] ([`on_slice_changed`] for any
//!   of them) decide which services a slice event queues. The delay ([`slice_event_delay`]) and
//!   the queue itself belong to the caller.
//! - [`TriggerTimeTracker`] computes the value of the last-change-trigger-time annotation.
//!
//! All of it is pure state: no I/O, safe to share between worker threads.

mod generations;
mod trigger;

use std::sync::LazyLock;

use crate::model::{EndpointSlice, Name, intern, keys};

pub use generations::{
    EndpointSliceTracker, Expectation, Queued, SLICE_CHANGE_MIN_SYNC_DELAY,
    is_managed_by_controller, on_slice_add, on_slice_changed, on_slice_delete, on_slice_update,
    slice_event_delay,
};
pub use trigger::TriggerTimeTracker;

/// A Service's namespace and name: the identity the trackers key their state by, the same as the
/// engine's queue key.
pub use crate::index::ServiceKey as ServiceId;

/// The service a slice belongs to, from its namespace and `kubernetes.io/service-name` label. A
/// missing or empty label is an error: such a slice cannot queue a service.
pub fn service_of_slice(slice: &EndpointSlice) -> Result<ServiceId, MissingServiceLabel> {
    match slice.service_name() {
        Some(name) => Ok(ServiceId::from_names(
            slice.meta.namespace.clone(),
            name.clone(),
        )),
        None => Err(MissingServiceLabel {
            namespace: slice.meta.namespace.clone(),
            slice: slice.meta.name.clone(),
        }),
    }
}

/// A slice event wanted to queue the slice's service, but the slice has no (or an empty)
/// `kubernetes.io/service-name` label, so there is no service to queue. Upstream logs this and
/// moves on; nothing is retried.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("EndpointSlice {namespace}/{slice} is missing the {label} label", label = keys::LABEL_SERVICE_NAME)]
pub struct MissingServiceLabel {
    pub namespace: Name,
    pub slice: Name,
}

static EMPTY: LazyLock<Name> = LazyLock::new(|| intern(""));

/// The service the generation tracker files a slice under. Unlike [`service_of_slice`] this
/// never fails: a slice without the label is filed under the empty service name, as upstream does.
pub(crate) fn tracked_service(slice: &EndpointSlice) -> ServiceId {
    let name = slice
        .meta
        .labels
        .get(keys::LABEL_SERVICE_NAME)
        .cloned()
        .unwrap_or_else(|| EMPTY.clone());
    ServiceId::from_names(slice.meta.namespace.clone(), name)
}

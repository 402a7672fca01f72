//! A pod event reduced to what decides which services to sync: upstream's
//! `GetPodUpdateProjectionKey` and `podEndpointsChanged`, rule for rule.
//!
//! Upstream tells a nil label map from an empty one; the model keeps labels as sorted pairs and
//! cannot. A pod read from the API server never has an empty non-nil map (empty maps are not
//! serialised), so an empty label set here stands for upstream's nil. Two consequences: a change
//! between nil and empty, which upstream would see as a label change, cannot be seen; and old labels
//! that are empty are treated as nil when resolving services (see `Index::services_to_update`).

use crate::model::{Labels, Name, Pod};

/// The part of a pod event that decides which services to sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodProjection {
    pub namespace: Name,
    /// The pod's labels after the event; for a delete, its last labels.
    pub labels: Labels,
    /// The labels before the event, set only when an update changed the labels, hostname or
    /// subdomain.
    pub old_labels: Option<Labels>,
    /// An update changed the pod in a way that can change its endpoint: deletion timestamp,
    /// readiness or IPs. Only read with `old_labels`, as upstream does; false for adds and deletes.
    pub pod_changed: bool,
}

/// Projects a pod event: `(None, Some)` is an add, `(Some, Some)` an update, `(Some, None)` a
/// delete. `None` when the event cannot change any service's endpoints.
pub fn pod_projection(old: Option<&Pod>, new: Option<&Pod>) -> Option<PodProjection> {
    let (old, new) = match (old, new) {
        (None, None) => return None,
        (None, Some(pod)) | (Some(pod), None) => {
            return Some(PodProjection {
                namespace: pod.meta.namespace.clone(),
                labels: pod.meta.labels.clone(),
                old_labels: None,
                pod_changed: false,
            });
        }
        (Some(old), Some(new)) => (old, new),
    };
    // An informer resync redelivers the same version; the service resync covers it. Upstream also
    // compares empty versions, which the API server never sends; objects built in code often
    // carry none, so those are compared in full.
    if new.meta.has_resource_version() && new.meta.resource_version() == old.meta.resource_version()
    {
        return None;
    }
    let (pod_changed, labels_changed) = endpoints_changed(old, new);
    if !pod_changed && !labels_changed {
        return None;
    }
    Some(PodProjection {
        namespace: new.meta.namespace.clone(),
        labels: new.meta.labels.clone(),
        old_labels: labels_changed.then(|| old.meta.labels.clone()),
        pod_changed,
    })
}

/// Upstream's `podEndpointsChanged`: (pod changed, labels changed). Node name, phase, annotations
/// and container ports are not looked at, so a phase-only change triggers nothing.
fn endpoints_changed(old: &Pod, new: &Pod) -> (bool, bool) {
    let labels_changed = old.meta.labels != new.meta.labels
        || text(old.hostname()) != text(new.hostname())
        || text(old.subdomain()) != text(new.subdomain());
    // Upstream compares deletionTimestamp pointers: two decoded objects never share one, so an
    // update where both versions are terminating counts as a change.
    let pod_changed = old.meta.deletion_timestamp().is_some()
        || new.meta.deletion_timestamp().is_some()
        || old.ready != new.ready
        // Upstream compares the podIPs strings; the model holds them parsed.
        || old.ips() != new.ips();
    (pod_changed, labels_changed)
}

/// Upstream's hostname and subdomain are plain strings: unset is "".
fn text(n: Option<&Name>) -> &str {
    n.as_ref().map_or("", |n| n.as_str())
}

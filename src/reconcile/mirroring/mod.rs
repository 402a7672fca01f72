//! EndpointSlice mirroring: the custom Endpoints of selector-less Services copied into EndpointSlices,
//! as kube-controller-manager's endpointslice-mirroring controller does it. One sync of one
//! Endpoints key, returned as a plan of writes.
//!
//! Shape of a sync: decide whether the Endpoints is mirrored at all (else every mirrored slice goes);
//! canonicalise its subsets ([`repack`]); turn each subset into one desired set of endpoints per IP
//! family, capped per subset ([`desired`]); then keep, rewrite, create or delete one slice per
//! (address type, ports) key ([`writes`]).

mod desired;
mod writes;

use super::{AddressTypePlan, Event, Plan};
use crate::model::{EndpointSlice, Endpoints, Service, keys};

/// The managed-by value of slices this controller owns.
pub const CONTROLLER_NAME: &str = "endpointslicemirroring-controller.k8s.io";
/// Set to "true" on an Endpoints, it keeps the Endpoints from being mirrored.
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// Endpoints used as leader-election locks carry this annotation and are never mirrored.
pub const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
/// kubectl's copy of the applied object: meaningless on a slice, so never copied.
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Event reasons, recorded on the Endpoints.
pub const REASON_INVALID_IP: &str = "InvalidIPAddress";
pub const REASON_TOO_MANY_ADDRESSES: &str = "TooManyAddressesToMirror";

/// Options of the mirroring reconciler, named after kube-controller-manager's flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--mirroring-max-endpoints-per-subset`: addresses mirrored per Endpoints subset, and so the
    /// size of a mirrored slice. Values below 1 count as 1, as the flag's validation allows no less.
    pub max_endpoints_per_subset: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_endpoints_per_subset: 1000,
        }
    }
}

/// Everything one sync of one Endpoints key reads. The key names both the Endpoints and its
/// Service: either may be missing.
pub struct MirrorInput<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub service: Option<&'a Service>,
    pub endpoints: Option<&'a Endpoints>,
    /// The slices labelled with this service name and this controller's managed-by value. Any other
    /// slice given is ignored, never written.
    pub slices: &'a [&'a EndpointSlice],
    pub options: &'a Options,
}

/// Why an Endpoints key is not mirrored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    EndpointsNotFound,
    SkipMirrorLabel,
    LeaderElection,
    ServiceNotFound,
    ServiceHasSelector,
}

/// The checks on the Endpoints alone: what upstream's Endpoints event handlers filter on. An
/// Endpoints written by the Endpoints controller passes them; its Service's selector excludes it.
pub fn should_mirror(endpoints: &Endpoints) -> bool {
    skip_reason(Some(endpoints)).is_none()
}

fn skip_reason(endpoints: Option<&Endpoints>) -> Option<Skip> {
    let Some(endpoints) = endpoints else {
        return Some(Skip::EndpointsNotFound);
    };
    // Only the exact value "true" skips.
    if endpoints
        .meta
        .labels
        .get(LABEL_SKIP_MIRROR)
        .is_some_and(|v| v.as_str() == "true")
    {
        return Some(Skip::SkipMirrorLabel);
    }
    if endpoints.meta.annotations.contains_key(ANNOTATION_LEADER) {
        return Some(Skip::LeaderElection);
    }
    None
}

/// Whether this key is mirrored: the Endpoints passes [`should_mirror`] and its Service exists
/// without a selector (of any type, ExternalName included).
pub fn decide(service: Option<&Service>, endpoints: Option<&Endpoints>) -> Result<(), Skip> {
    if let Some(skip) = skip_reason(endpoints) {
        return Err(skip);
    }
    match service {
        None => Err(Skip::ServiceNotFound),
        Some(s) if s.selector.is_some() => Err(Skip::ServiceHasSelector),
        Some(_) => Ok(()),
    }
}

/// True for a slice this controller manages.
pub fn is_mirrored(slice: &EndpointSlice) -> bool {
    slice
        .managed_by()
        .is_some_and(|m| m.as_str() == CONTROLLER_NAME)
}

/// One sync of one Endpoints key. A key that is not mirrored deletes every mirrored slice, each
/// attempted (`unsupported_deletes`). A mirrored one yields a single group of writes in upstream's
/// order, creates of every address type, then updates, then deletes, stopping at the first error
/// (`per_type[0]`, with no address type). Events concern the Endpoints of the key.
pub fn reconcile(input: &MirrorInput) -> Plan {
    let mut plan = Plan {
        service_key: format!("{}/{}", input.namespace, input.name),
        ..Plan::default()
    };
    // Never touch a slice that another controller or another service owns.
    let mut ours: Vec<&EndpointSlice> = input
        .slices
        .iter()
        .copied()
        .filter(|s| {
            is_mirrored(s)
                && s.meta.namespace.as_str() == input.namespace
                && s.service_name().is_some_and(|n| n.as_str() == input.name)
        })
        .collect();
    // Upstream takes lister order, which is arbitrary; name order makes the plan depend on the set
    // of slices only.
    ours.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));

    let endpoints = match (decide(input.service, input.endpoints), input.endpoints) {
        (Ok(()), Some(endpoints)) => endpoints,
        _ => {
            plan.unsupported_deletes = ours.into_iter().cloned().collect();
            return plan;
        }
    };

    let max = input.options.max_endpoints_per_subset.max(1);
    let desired = desired::desired_endpoints(&endpoints.subsets, max);
    if desired.invalid > 0 {
        plan.events.push(Event::warning(
            REASON_INVALID_IP,
            format!(
                "Skipped {} invalid IP addresses when mirroring to EndpointSlices",
                desired.invalid
            ),
        ));
    }
    if desired.skipped > desired.invalid {
        plan.events.push(Event::warning(
            REASON_TOO_MANY_ADDRESSES,
            format!(
                "A max of {max} addresses can be mirrored to EndpointSlices per Endpoints subset. {} addresses were skipped",
                desired.skipped
            ),
        ));
    }

    let out: AddressTypePlan = writes::plan_writes(endpoints, &desired.groups, &ours, max);
    plan.per_type.push(out);
    plan.addresses_skipped = desired.skipped;
    plan
}

/// The labels of a mirrored slice: the Endpoints' own, with the service name and managed-by set.
fn slice_labels(endpoints: &Endpoints) -> crate::model::Labels {
    endpoints
        .meta
        .labels
        .with(keys::LABEL_SERVICE_NAME, &endpoints.meta.name)
        .with(keys::LABEL_MANAGED_BY, CONTROLLER_NAME)
}

/// The annotations of a mirrored slice: the Endpoints' own but the trigger time (the Endpoints
/// controller's business) and kubectl's last-applied copy.
fn slice_annotations(endpoints: &Endpoints) -> crate::model::Labels {
    endpoints
        .meta
        .annotations
        .filtered(|k| k != keys::ANNOTATION_TRIGGER_TIME && k != ANNOTATION_LAST_APPLIED)
}

//! Carrying out a plan with upstream ordering and error rules (`finalize` and the tail of
//! `Reconcile` in k8s.io/endpointslice/reconciler.go).
//!
//! Per address type, in plan order: creates, then updates, then deletes, each sequential. The first
//! failure ends that address type (upstream returns from `finalize`) but the next address type
//! still runs. A create refused because the namespace is terminating ends the address type without
//! an error. Slices of unsupported address types are deleted last, every one attempted. A delete
//! answered NotFound counts as done but, as upstream, is neither recorded nor counted; the object is
//! listed in `gone`, so that the caller's view drops it before the watch says so.

use super::{Object, Sink, Verb, WriteError};
use crate::model::AddressType;
use crate::reconcile::{AddressTypePlan, Plan};

/// A write the server accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedWrite {
    pub verb: Verb,
    /// The server's answer for a create or update (its generation is what the tracker records); the
    /// object deleted for a delete.
    pub object: Object,
}

/// How one address type's writes ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeStatus {
    /// Every write succeeded: upstream then observes `endpointslices_changed_per_sync`.
    Completed,
    /// A create hit a terminating namespace; the rest was abandoned without error.
    NamespaceTerminating,
    /// A write failed; the rest of this address type was skipped.
    Failed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TypeOutcome {
    pub address_type: Option<AddressType>,
    pub status: TypeStatus,
    /// Creates + updates + deletes planned for this address type.
    pub planned: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApplyOutcome {
    /// Accepted writes, in the order they were made.
    pub records: Vec<AppliedWrite>,
    /// Objects the plan deleted that the server no longer had (answered NotFound).
    pub gone: Vec<Object>,
    /// Write errors in order, then the plan's own sync errors.
    pub errors: Vec<String>,
    /// One entry per `plan.per_type`, in order.
    pub per_type: Vec<TypeOutcome>,
    /// Successful writes per verb: upstream's `endpoint_slice_controller_changes{operation}`.
    pub creates: usize,
    pub updates: usize,
    pub deletes: usize,
}

impl ApplyOutcome {
    pub fn is_success(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn changes(&self, verb: Verb) -> usize {
        match verb {
            Verb::Create => self.creates,
            Verb::Update => self.updates,
            Verb::Delete => self.deletes,
        }
    }

    /// The errors as one message, the way Go's `utilerrors.NewAggregate(...).Error()` prints them:
    /// duplicates dropped, a single message bare, several as `[a, b]`. `None` on success.
    pub fn error_message(&self) -> Option<String> {
        let mut distinct: Vec<&str> = Vec::new();
        for e in &self.errors {
            if !distinct.contains(&e.as_str()) {
                distinct.push(e);
            }
        }
        match distinct.as_slice() {
            [] => None,
            [one] => Some((*one).to_string()),
            many => Some(format!("[{}]", many.join(", "))),
        }
    }

    fn record(&mut self, verb: Verb, object: Object) {
        match verb {
            Verb::Create => self.creates += 1,
            Verb::Update => self.updates += 1,
            Verb::Delete => self.deletes += 1,
        }
        self.records.push(AppliedWrite { verb, object });
    }
}

/// Carries out the writes of `plan` against `sink`. Its slices are moved into the writes, not
/// copied; the plan keeps its events and topology changes.
pub fn apply_plan(sink: &dyn Sink, plan: &mut Plan) -> ApplyOutcome {
    let mut out = ApplyOutcome::default();
    let service = plan.service_key.as_str();
    for tp in &mut plan.per_type {
        let planned = tp.write_count();
        let status = match apply_type(sink, service, tp, &mut out) {
            Ok(status) => status,
            Err(e) => {
                out.errors.push(e);
                TypeStatus::Failed
            }
        };
        out.per_type.push(TypeOutcome {
            address_type: tp.address_type.clone(),
            status,
            planned,
        });
    }
    for slice in std::mem::take(&mut plan.unsupported_deletes) {
        let name = slice.meta.name.clone();
        if let Err(e) = delete(sink, Object::from(slice), &mut out) {
            out.errors.push(format!(
                "error deleting {name} EndpointSlice for Service {service}: {e}"
            ));
        }
    }
    out.errors.extend(plan.errors.iter().cloned());
    out
}

/// Upstream's `finalize` after recycling: returns the error that ended the address type.
fn apply_type(
    sink: &dyn Sink,
    service: &str,
    tp: &mut AddressTypePlan,
    out: &mut ApplyOutcome,
) -> Result<TypeStatus, String> {
    for slice in std::mem::take(&mut tp.creates) {
        match sink.create(Object::from(slice)) {
            Ok(created) => out.record(Verb::Create, created),
            // Creates will keep failing in a dying namespace: drop the work, do not retry.
            Err(e) if e.is_namespace_terminating() => return Ok(TypeStatus::NamespaceTerminating),
            Err(e) => {
                return Err(format!(
                    "failed to create EndpointSlice for Service {service}: {e}"
                ));
            }
        }
    }
    for slice in std::mem::take(&mut tp.updates) {
        let name = slice.meta.name.clone();
        match sink.update(Object::from(slice)) {
            Ok(updated) => out.record(Verb::Update, updated),
            Err(e) => {
                return Err(format!(
                    "failed to update {name} EndpointSlice for Service {service}: {e}"
                ));
            }
        }
    }
    for slice in std::mem::take(&mut tp.deletes) {
        let name = slice.meta.name.clone();
        if let Err(e) = delete(sink, Object::from(slice), out) {
            return Err(format!(
                "failed to delete {name} EndpointSlice for Service {service}: {e}"
            ));
        }
    }
    Ok(TypeStatus::Completed)
}

/// Upstream's `deleteEndpointSlice`: NotFound is success, but nothing is recorded or counted.
fn delete(sink: &dyn Sink, object: Object, out: &mut ApplyOutcome) -> Result<(), WriteError> {
    match sink.delete(&object) {
        Ok(()) => {
            out.record(Verb::Delete, object);
            Ok(())
        }
        Err(e) if e.is_not_found() => {
            out.gone.push(object);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

//! Carrying out a plan with upstream ordering and error rules (`finalize` and the tail of
//! `Reconcile` in k8s.io/endpointslice/reconciler.go).
//!
//! Per address type, in plan order: creates, then updates, then deletes, each sequential (or, when
//! the sink takes several writes at once, each step's writes sent together). The first
//! failure ends that address type (upstream returns from `finalize`) but the next address type
//! still runs. A create refused because the namespace is terminating ends the address type without
//! an error. Slices of unsupported address types are deleted last, every one attempted. A delete
//! answered NotFound counts as done but, as upstream, is neither recorded nor counted; the object is
//! listed in `gone`, so that the caller's view drops it before the watch says so.

use rayon::prelude::*;

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
    /// A write failed: not every write planned was made.
    pub write_failed: bool,
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
                out.write_failed = true;
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
        let object = Object::from(slice);
        let answer = sink.delete(&object);
        if let Err(e) = deleted(object, answer, &mut out) {
            out.write_failed = true;
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
    let creates = std::mem::take(&mut tp.creates);
    let ended = step(
        sink,
        creates,
        |slice| sink.create(Object::from(slice)),
        |answer| match answer {
            Ok(created) => {
                out.record(Verb::Create, created);
                None
            }
            // Creates will keep failing in a dying namespace: drop the work, do not retry.
            Err(e) if e.is_namespace_terminating() => Some(Ok(TypeStatus::NamespaceTerminating)),
            Err(e) => Some(Err(format!(
                "failed to create EndpointSlice for Service {service}: {e}"
            ))),
        },
    );
    if let Some(end) = ended {
        return end;
    }
    let updates = std::mem::take(&mut tp.updates);
    let ended = step(
        sink,
        updates,
        |slice| {
            let name = slice.meta.name.clone();
            sink.update(Object::from(slice)).map_err(|e| (name, e))
        },
        |answer| match answer {
            Ok(updated) => {
                out.record(Verb::Update, updated);
                None
            }
            Err((name, e)) => Some(Err(format!(
                "failed to update {name} EndpointSlice for Service {service}: {e}"
            ))),
        },
    );
    if let Some(end) = ended {
        return end;
    }
    let deletes = std::mem::take(&mut tp.deletes);
    let ended = step(
        sink,
        deletes,
        |slice| {
            let object = Object::from(slice);
            let answer = sink.delete(&object);
            (object, answer)
        },
        |(object, answer)| {
            let name = object.meta().name.clone();
            deleted(object, answer, out).err().map(|e| {
                Err(format!(
                    "failed to delete {name} EndpointSlice for Service {service}: {e}"
                ))
            })
        },
    );
    ended.unwrap_or(Ok(TypeStatus::Completed))
}

/// Sends one step's writes (the creates, the updates or the deletes of an address type) and
/// hands each answer, in plan order, to `take`, which says when the address type ends. One at a
/// time, the step stops there, as upstream's does. When the sink takes several writes at once
/// they are sent together: a refusal cannot recall those already on their way, so every answer
/// is taken (each accepted write recorded) and the first ending in plan order is returned.
fn step<T: Send, A: Send, E>(
    sink: &dyn Sink,
    writes: Vec<T>,
    send: impl Fn(T) -> A + Sync,
    mut take: impl FnMut(A) -> Option<E>,
) -> Option<E> {
    if sink.concurrency() > 1 && writes.len() > 1 {
        let answers: Vec<A> = writes.into_par_iter().with_max_len(1).map(&send).collect();
        let mut ended = None;
        for answer in answers {
            let end = take(answer);
            if ended.is_none() {
                ended = end;
            }
        }
        ended
    } else {
        for write in writes {
            if let Some(end) = take(send(write)) {
                return Some(end);
            }
        }
        None
    }
}

/// Upstream's `deleteEndpointSlice`: NotFound is success, but nothing is recorded or counted.
fn deleted(
    object: Object,
    answer: Result<(), WriteError>,
    out: &mut ApplyOutcome,
) -> Result<(), WriteError> {
    match answer {
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

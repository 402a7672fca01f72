//! Carrying out an Endpoints plan with upstream's error rules (the tail of `syncService` in
//! pkg/controller/endpoint/endpoints_controller.go).
//!
//! A create refused because the namespace is terminating drops the work without an error: creates
//! there will keep failing. Any other failed create or update is an error for the service (so it is
//! retried) and a Warning event. A delete answered NotFound is done, and neither recorded nor
//! counted.

use super::{AppliedWrite, Object, Sink, Verb};
use crate::reconcile::Event;
use crate::reconcile::endpoints::{
    EndpointsPlan, EndpointsWrite, REASON_FAILED_TO_CREATE, REASON_FAILED_TO_UPDATE,
};

/// How an Endpoints plan ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointsOutcome {
    /// The write the server accepted, if any.
    pub record: Option<AppliedWrite>,
    /// Why the sync failed; `None` on success.
    pub error: Option<String>,
    /// Events to record: upstream records them on the Endpoints object, we key them by service.
    pub events: Vec<Event>,
    /// The create met a terminating namespace and was dropped without an error.
    pub abandoned: bool,
    /// The object the plan deleted, when the server no longer had it (answered NotFound).
    pub gone: Option<Object>,
}

impl EndpointsOutcome {
    pub fn is_success(&self) -> bool {
        self.error.is_none()
    }
}

/// Carries out `plan` against `sink`. The object is moved into the write, not copied.
pub fn apply_endpoints_plan(sink: &dyn Sink, plan: EndpointsPlan) -> EndpointsOutcome {
    let mut out = EndpointsOutcome::default();
    let Some(write) = plan.write else {
        return out;
    };
    let service = plan.service_key.as_str();
    let (kind, endpoints) = match write {
        EndpointsWrite::Create(e) => (Verb::Create, e),
        EndpointsWrite::Update(e) => (Verb::Update, e),
        EndpointsWrite::Delete(e) => (Verb::Delete, e),
    };
    let object = Object::from(endpoints);
    match kind {
        Verb::Create => match sink.create(object) {
            Ok(created) => out.record = Some(applied(Verb::Create, created)),
            Err(e) if e.is_namespace_terminating() => out.abandoned = true,
            Err(e) => {
                out.events.push(Event::warning(
                    REASON_FAILED_TO_CREATE,
                    format!("Failed to create endpoint for service {service}: {e}"),
                ));
                out.error = Some(format!(
                    "failed to create Endpoints for Service {service}: {e}"
                ));
            }
        },
        Verb::Update => match sink.update(object) {
            Ok(updated) => out.record = Some(applied(Verb::Update, updated)),
            Err(e) => {
                out.events.push(Event::warning(
                    REASON_FAILED_TO_UPDATE,
                    format!("Failed to update endpoint {service}: {e}"),
                ));
                out.error = Some(format!(
                    "failed to update Endpoints for Service {service}: {e}"
                ));
            }
        },
        Verb::Delete => match sink.delete(&object) {
            Ok(()) => out.record = Some(applied(Verb::Delete, object)),
            Err(e) if e.is_not_found() => out.gone = Some(object),
            Err(e) => {
                out.error = Some(format!(
                    "failed to delete Endpoints for Service {service}: {e}"
                ));
            }
        },
    }
    out
}

fn applied(verb: Verb, object: Object) -> AppliedWrite {
    AppliedWrite { verb, object }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoints, Meta, intern};
    use crate::reconcile::endpoints::sync_deleted;
    use crate::sink::memory::MemorySink;
    use crate::sink::{Kind, WriteError};

    fn create_plan(namespace: &str) -> EndpointsPlan {
        EndpointsPlan {
            service_key: format!("{namespace}/web"),
            write: Some(EndpointsWrite::Create(Endpoints {
                meta: Meta {
                    namespace: intern(namespace),
                    name: intern("web"),
                    ..Meta::default()
                },
                subsets: Vec::new(),
            })),
            ..EndpointsPlan::default()
        }
    }

    #[test]
    fn create_into_terminating_namespace_is_dropped_quietly() {
        let sink = MemorySink::new(1);
        sink.set_namespace_terminating("doomed", true);
        let out = apply_endpoints_plan(&sink, create_plan("doomed"));
        assert_eq!(
            out,
            EndpointsOutcome {
                abandoned: true,
                ..EndpointsOutcome::default()
            }
        );
        assert!(sink.is_empty());
    }

    #[test]
    fn failed_writes_are_errors_with_an_event() {
        let sink = MemorySink::new(1);
        let error = WriteError::Status {
            code: 500,
            reason: "InternalError".into(),
            message: "etcd timeout".into(),
        };
        sink.fail_next(Verb::Create, Kind::Endpoints, error, 1);
        let out = apply_endpoints_plan(&sink, create_plan("default"));
        assert_eq!(
            out.error.as_deref(),
            Some("failed to create Endpoints for Service default/web: etcd timeout")
        );
        assert_eq!(out.events.len(), 1);
        assert_eq!(out.events[0].reason, REASON_FAILED_TO_CREATE);
        assert_eq!(
            out.events[0].message,
            "Failed to create endpoint for service default/web: etcd timeout"
        );

        // Updating an object that is gone fails too.
        let mut plan = create_plan("default");
        plan.write = plan
            .write
            .map(|w| EndpointsWrite::Update(w.object().clone()));
        let out = apply_endpoints_plan(&sink, plan);
        assert!(!out.is_success());
        assert_eq!(out.events[0].reason, REASON_FAILED_TO_UPDATE);
    }

    #[test]
    fn deleting_what_is_not_there_is_done() {
        let sink = MemorySink::new(1);
        let plan = sync_deleted(&intern("default"), &intern("web"));
        // Done, with no write and no error; the object is reported gone for the caller's view.
        let missing = apply_endpoints_plan(&sink, plan.clone());
        assert_eq!(
            missing,
            EndpointsOutcome {
                gone: missing.gone.clone(),
                ..EndpointsOutcome::default()
            }
        );
        assert_eq!(
            missing.gone.as_ref().map(|o| o.meta().name.as_str()),
            Some("web")
        );
        let created = apply_endpoints_plan(&sink, create_plan("default"));
        assert!(created.record.is_some());
        let deleted = apply_endpoints_plan(&sink, plan);
        assert_eq!(deleted.record.map(|r| r.verb), Some(Verb::Delete));
        assert!(sink.is_empty());
    }
}

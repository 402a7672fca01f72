//! One sync of one key of the service controller: upstream's `syncService`, its deletion of a
//! Service gone or replaced, and node sync's call for a Service whose backends moved.

use std::sync::Arc;

use super::{LoadBalancerController, ProviderCall, ProviderOperation};
use crate::index::ServiceKey;
use crate::model::{LOAD_BALANCER_CLEANUP_FINALIZER, LoadBalancerIngress, Name, Service};
use crate::reconcile::Event;
use crate::reconcile::load_balancer::{HostSet, ProviderError, needs_cleanup};
use crate::sink::{ServiceChange, ServicePatch, Sink};

#[derive(Debug, thiserror::Error)]
pub(super) enum SyncError {
    #[error(transparent)]
    Provider(ProviderError),
    #[error("{0}")]
    Other(String),
}

/// One sync of one key.
pub(super) struct KeySync<'a> {
    pub controller: &'a LoadBalancerController,
    pub key: &'a ServiceKey,
    pub sink: &'a dyn Sink,
    pub events: &'a mut Vec<(ServiceKey, Event)>,
}

impl KeySync<'_> {
    fn event(&mut self, event: Event) {
        self.events.push((self.key.clone(), event));
    }

    fn call(
        &self,
        operation: ProviderOperation,
        hosts: &HostSet,
        ingress: &[LoadBalancerIngress],
        error: Option<&ProviderError>,
    ) {
        self.controller.note_call(|| ProviderCall {
            service: self.key.clone(),
            operation,
            hosts: hosts.keys().cloned().collect(),
            ingress: ingress.to_vec(),
            error: error.map(ToString::to_string),
        });
    }

    /// Upstream's `processServiceDeletion`: the Service is gone; its load balancer goes too.
    pub(super) fn service_gone(&mut self) -> Result<(), SyncError> {
        let cached = self.controller.processed.lock().remove(self.key);
        let Some(cached) = cached else {
            return Ok(());
        };
        if let Err(error) = self.delete_previous(&cached) {
            self.controller
                .processed
                .lock()
                .insert(self.key.clone(), cached);
            return Err(error);
        }
        self.controller.last_hosts.lock().remove(self.key);
        Ok(())
    }

    /// The load balancer of a Service that no longer exists as it was: deleted when it wanted one.
    fn delete_previous(&mut self, previous: &Service) -> Result<(), SyncError> {
        if !self.controller.wants(previous) {
            return Ok(());
        }
        match self.delete_balancer(previous) {
            Ok(()) => {
                self.event(Event::normal(
                    "DeletedLoadBalancer",
                    "Deleted load balancer",
                ));
                Ok(())
            }
            Err(error) => {
                self.event(Event::warning(
                    "DeleteLoadBalancerFailed",
                    format!("Error deleting load balancer: {error}"),
                ));
                Err(SyncError::Provider(error))
            }
        }
    }

    /// The provider's delete, told as an event and a call; implemented elsewhere is done.
    fn delete_balancer(&mut self, service: &Service) -> Result<(), ProviderError> {
        self.event(Event::normal(
            "DeletingLoadBalancer",
            "Deleting load balancer",
        ));
        let outcome = self.controller.provider.ensure_deleted(service);
        self.call(
            ProviderOperation::EnsureDeleted,
            &HostSet::new(),
            &[],
            outcome.as_ref().err(),
        );
        match outcome {
            Err(ProviderError::ImplementedElsewhere) => Ok(()),
            other => other,
        }
    }

    /// Upstream's `syncService` for a Service that exists.
    pub(super) fn service(
        &mut self,
        service: Arc<Service>,
        hosts: Arc<HostSet>,
    ) -> Result<(), SyncError> {
        let previous = self
            .controller
            .processed
            .lock()
            .insert(self.key.clone(), Arc::clone(&service));
        if let Some(previous) = previous
            && previous.meta.uid != service.meta.uid
        {
            // A new Service under the same name: the old one's load balancer goes first.
            if let Err(error) = self.delete_previous(&previous) {
                self.controller
                    .processed
                    .lock()
                    .insert(self.key.clone(), previous);
                return Err(error);
            }
        }
        // A Service being deleted gets no load balancer, finalizer or not: the API server refuses
        // a new finalizer on it (upstream then retries for ever, cloud-provider-gcp#981).
        let ensure = self.controller.wants(&service)
            && !needs_cleanup(&service)
            && service.meta.deletion_timestamp.is_none();
        let result = if !ensure {
            self.cleanup(&service)
        } else {
            self.ensure(&service, hosts)
        };
        if let Err(error) = &result {
            self.event(Event::warning(
                "SyncLoadBalancerFailed",
                format!("Error syncing load balancer: {error}"),
            ));
        }
        result
    }

    fn cleanup(&mut self, service: &Service) -> Result<(), SyncError> {
        let provider = &self.controller.provider;
        let exists = provider.get(service).map_err(|e| {
            SyncError::Other(format!(
                "failed to check if load balancer exists before cleanup: {e}"
            ))
        })?;
        if exists.is_some() {
            self.delete_balancer(service).map_err(SyncError::Provider)?;
        }
        let lb = service.load_balancer.as_deref();
        if lb.is_some_and(|lb| lb.has_cleanup_finalizer()) {
            let kept: Vec<Name> = lb
                .into_iter()
                .flat_map(|lb| lb.finalizers.iter())
                .filter(|f| f.as_str() != LOAD_BALANCER_CLEANUP_FINALIZER)
                .cloned()
                .collect();
            self.patch(service, ServiceChange::Finalizers(kept))?;
        }
        self.event(Event::normal(
            "DeletedLoadBalancer",
            "Deleted load balancer",
        ));
        if lb.is_some_and(|lb| !lb.ingress.is_empty()) {
            self.patch_status(service, ServiceChange::Ingress(Vec::new()))?;
        }
        self.controller.processed.lock().remove(self.key);
        self.controller.last_hosts.lock().remove(self.key);
        Ok(())
    }

    fn ensure(&mut self, service: &Service, hosts: Arc<HostSet>) -> Result<(), SyncError> {
        self.event(Event::normal(
            "EnsuringLoadBalancer",
            "Ensuring load balancer",
        ));
        let lb = service.load_balancer.as_deref();
        if !lb.is_some_and(|lb| lb.has_cleanup_finalizer()) {
            let mut finalizers: Vec<Name> = lb.map(|lb| lb.finalizers.clone()).unwrap_or_default();
            finalizers.push(crate::model::intern(LOAD_BALANCER_CLEANUP_FINALIZER));
            self.patch(service, ServiceChange::Finalizers(finalizers))?;
        }
        if hosts.is_empty() {
            self.event(Event::warning(
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            ));
        }
        self.controller
            .last_hosts
            .lock()
            .insert(self.key.clone(), Arc::clone(&hosts));
        let outcome = self.controller.provider.ensure(service, &hosts);
        let ingress = outcome
            .as_ref()
            .map(|e| e.ingress.as_slice())
            .unwrap_or(&[]);
        self.call(
            ProviderOperation::Ensure,
            &hosts,
            ingress,
            outcome.as_ref().err(),
        );
        let ensured = match outcome {
            Ok(ensured) => ensured,
            Err(ProviderError::ImplementedElsewhere) => return Ok(()),
            Err(mut error) => {
                if let ProviderError::Failed {
                    events, withdrawn, ..
                } = &mut error
                {
                    for event in std::mem::take(events) {
                        self.event(event);
                    }
                    if *withdrawn && lb.is_some_and(|lb| !lb.ingress.is_empty()) {
                        self.patch_status(service, ServiceChange::Ingress(Vec::new()))?;
                    }
                }
                return Err(SyncError::Provider(error));
            }
        };
        for event in ensured.events {
            self.event(event);
        }
        self.event(Event::normal(
            "EnsuredLoadBalancer",
            "Ensured load balancer",
        ));
        let held: &[LoadBalancerIngress] = lb.map(|lb| lb.ingress.as_slice()).unwrap_or(&[]);
        if held != ensured.ingress.as_slice() {
            self.patch_status(service, ServiceChange::Ingress(ensured.ingress))?;
        }
        Ok(())
    }

    /// Node sync's call for one Service whose host set moved and nothing else.
    pub(super) fn update_hosts(
        &mut self,
        service: &Service,
        hosts: Arc<HostSet>,
    ) -> Result<(), SyncError> {
        self.controller
            .last_hosts
            .lock()
            .insert(self.key.clone(), Arc::clone(&hosts));
        let outcome = self.controller.provider.update_hosts(service, &hosts);
        self.call(
            ProviderOperation::UpdateHosts,
            &hosts,
            &[],
            outcome.as_ref().err(),
        );
        match outcome {
            Ok(()) if hosts.is_empty() => self.event(Event::warning(
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            )),
            Ok(()) => self.event(Event::normal(
                "UpdatedLoadBalancer",
                "Updated load balancer with new hosts",
            )),
            Err(ProviderError::ImplementedElsewhere) => {}
            Err(error) => {
                let names: Vec<&str> = hosts.keys().take(20).map(|n| n.as_str()).collect();
                self.event(Event::warning(
                    "UpdateLoadBalancerFailed",
                    format!(
                        "Error updating load balancer with new hosts {names:?} [node number: {}]: {error}",
                        hosts.len()
                    ),
                ));
                return Err(SyncError::Provider(error));
            }
        }
        Ok(())
    }

    /// The patch of `service` upstream sends: to the status subresource, or to the Service
    /// itself once it is being deleted.
    fn service_patch(&self, service: &Service, change: ServiceChange) -> ServicePatch {
        ServicePatch {
            namespace: self.key.namespace.clone(),
            name: self.key.name.clone(),
            status_subresource: service.meta.deletion_timestamp.is_none(),
            change,
        }
    }

    fn patch(&self, service: &Service, change: ServiceChange) -> Result<(), SyncError> {
        self.sink
            .patch_service(&self.service_patch(service, change))
            .map_err(|e| SyncError::Other(e.to_string()))
    }

    /// A status patch: a Service gone meanwhile (NotFound) is no failure, as upstream.
    fn patch_status(&self, service: &Service, change: ServiceChange) -> Result<(), SyncError> {
        match self
            .sink
            .patch_service(&self.service_patch(service, change))
        {
            Err(e) if !e.is_not_found() => Err(SyncError::Other(e.to_string())),
            _ => Ok(()),
        }
    }
}

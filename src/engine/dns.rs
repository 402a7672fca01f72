//! The DNS view of what the engine holds, for `sliced run`'s debug endpoint: read-only, built per
//! request from only the objects the question needs. The slices are those sliced's controllers
//! keep; another manager's are not held.

use std::sync::Arc;

use super::Engine;
use crate::dns::{DnsOptions, DnsView, Explanation, QueryScope, Record, canonical, scope};
use crate::index::ServiceKey;
use crate::model::{EndpointSlice, Pod, Service};

impl Engine {
    /// The slices of `service`, of every controller that runs.
    fn slices_of(&self, service: &ServiceKey) -> Vec<Arc<EndpointSlice>> {
        (self.index.slice_stores().iter())
            .flat_map(|store| store.for_service(service))
            .collect()
    }

    /// Every slice held.
    fn all_slices(&self) -> Vec<Arc<EndpointSlice>> {
        (self.index.slice_stores().iter())
            .flat_map(|store| {
                (store.keys().into_iter()).filter_map(|(ns, name)| store.get(&ns, &name))
            })
            .collect()
    }

    /// The records of `name`, as CoreDNS would answer it from the engine's objects.
    pub fn dns_query(&self, name: &str, options: DnsOptions) -> Vec<Record> {
        let name = canonical(name);
        let (services, slices, pods): (Vec<Arc<Service>>, _, Vec<Arc<Pod>>) =
            match scope(&name, &options.zone) {
                QueryScope::Service { namespace, service } => {
                    let held = self.index.services().get(namespace, service);
                    let slices = match &held {
                        Some(s) => self.slices_of(&ServiceKey::of(s)),
                        None => Vec::new(),
                    };
                    (held.into_iter().collect(), slices, Vec::new())
                }
                QueryScope::Pod { namespace, .. } => (
                    Vec::new(),
                    Vec::new(),
                    self.index.pods().in_namespace(namespace),
                ),
                QueryScope::Reverse(_) => {
                    (self.index.services().list(), self.all_slices(), Vec::new())
                }
                QueryScope::Outside => return Vec::new(),
            };
        let view = DnsView::new(
            services.iter().map(Arc::as_ref),
            slices.iter().map(Arc::as_ref),
            pods.iter().map(Arc::as_ref),
            options,
        );
        view.query(&name)
    }

    /// Why the pod `namespace/name` has no name, or fewer, from the engine's objects; `None` when
    /// no such pod is held. Container readiness is not kept, so it is not told.
    pub fn dns_explain(
        &self,
        namespace: &str,
        name: &str,
        options: DnsOptions,
    ) -> Option<Explanation> {
        self.index.pods().get(namespace, name)?;
        let services = self.index.services().in_namespace(namespace);
        let slices: Vec<Arc<EndpointSlice>> = (services.iter())
            .flat_map(|s| self.slices_of(&ServiceKey::of(s)))
            .collect();
        let pods = self.index.pods().in_namespace(namespace);
        let view = DnsView::new(
            services.iter().map(Arc::as_ref),
            slices.iter().map(Arc::as_ref),
            pods.iter().map(Arc::as_ref),
            options,
        )
        .with_nodes(self.index.nodes().names());
        view.explain_pod(namespace, name, None)
    }
}

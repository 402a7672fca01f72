//! The invariant checked when `EngineOptions::check_invariants` is on: after a sync that succeeded
//! in full, the objects its controller keeps for the service are what a full reconcile of the same
//! state keeps, so that a second sync would write nothing. For the EndpointSlice controller that
//! means each desired endpoint is in exactly one managed slice, with the conditions, node and zone
//! due, and nothing else is; for the Endpoints controller, the object equals the desired one.
//!
//! The full reconcile is the oracle of the incremental path and of the feedback of the engine's own
//! writes; it reads the engine's view (its index), not the API server, whose later changes the
//! engine has not seen yet. Checking moves no tracker and queues nothing.

use std::fmt;

use super::controller::{SyncOutcome, SyncRecord};
use super::endpoints::EndpointsController;
use super::{ENDPOINTS_CONTROLLER, ENDPOINTSLICE_CONTROLLER, Engine, MIRRORING_CONTROLLER};
use crate::index::ServiceKey;
use crate::model::{EndpointSlice, ServiceType};
use crate::reconcile::Plan;
use crate::reconcile::endpoints::EndpointsWrite;

/// The most violations kept for reporting; all are counted.
const KEPT: usize = 100;

/// Objects a controller keeps that a full reconcile would still change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub controller: &'static str,
    pub service: ServiceKey,
    /// The writes a full reconcile would still make.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.controller, self.service, self.message)
    }
}

/// The writes of a slice plan, as "verb name" words.
fn describe_plan(plan: &Plan) -> String {
    let mut words = Vec::new();
    let name = |s: &EndpointSlice| {
        if s.meta.name.is_empty() {
            format!("{}(new)", s.generate_name.as_deref().unwrap_or(""))
        } else {
            s.meta.name.to_string()
        }
    };
    for tp in &plan.per_type {
        let at = tp
            .address_type
            .as_ref()
            .map_or(String::new(), |t| format!(" {t}"));
        for s in &tp.creates {
            words.push(format!(
                "create{at} {} ({} endpoints)",
                name(s),
                s.endpoints.len()
            ));
        }
        for s in &tp.updates {
            words.push(format!(
                "update{at} {} ({} endpoints)",
                name(s),
                s.endpoints.len()
            ));
        }
        for s in &tp.deletes {
            words.push(format!("delete{at} {}", name(s)));
        }
    }
    for s in &plan.unsupported_deletes {
        words.push(format!("delete {}", name(s)));
    }
    words.join(", ")
}

impl Engine {
    /// Checks the objects of a finished sync's service, when the sync succeeded in full.
    pub(super) fn check_after_sync(&self, record: &SyncRecord) {
        if !self.options.check_invariants
            || !self.options.observe_writes
            || record.outcome != SyncOutcome::Success
            || record.abandoned
        {
            return;
        }
        let found = match record.controller {
            ENDPOINTSLICE_CONTROLLER => self.check_slices(&record.service),
            ENDPOINTS_CONTROLLER => self.check_endpoints(&record.service),
            MIRRORING_CONTROLLER => self.check_mirroring(&record.service),
            _ => None,
        };
        self.count_check(found);
    }

    fn count_check(&self, found: Option<Violation>) {
        let mut stats = self.stats.lock();
        stats.invariant_checks += 1;
        if let Some(violation) = found {
            stats.invariant_violations += 1;
            let mut kept = self.violations.lock();
            if kept.len() < KEPT {
                kept.push(violation);
            }
        }
    }

    /// Checks every service of every running controller; returns what does not hold. After the
    /// faults stop, a resync ([`Engine::resync`]) and a drain, everything must.
    pub fn check_all(&self) -> Vec<Violation> {
        let mut found = Vec::new();
        let services = self.index.services().keys();
        if self.options.controllers.endpointslice {
            found.extend(services.iter().filter_map(|k| self.check_slices(k)));
        }
        if self.endpoints.is_some() {
            let mut keys = services.clone();
            keys.extend(self.index.endpoints().keys());
            keys.sort_unstable();
            keys.dedup();
            found.extend(keys.iter().filter_map(|k| self.check_endpoints(k)));
        }
        if self.mirroring.is_some() {
            let mut keys = services;
            keys.extend(self.index.endpoints().keys());
            let mirrored = self.index.mirrored_slices();
            keys.extend(mirrored.keys().into_iter().filter_map(|(ns, name)| {
                let slice = mirrored.get(&ns, &name)?;
                Some(ServiceKey::new(&ns, slice.service_name()?))
            }));
            keys.sort_unstable();
            keys.dedup();
            found.extend(keys.iter().filter_map(|k| self.check_mirroring(k)));
        }
        found
    }

    /// Whether a full sync of `controller` (`endpointslice`, `endpoints` or `mirroring`) for this
    /// service would write anything now, given what the engine holds. Shadow mode asks it to drop
    /// differences that someone else has fixed since.
    pub fn would_write(&self, controller: &str, key: &ServiceKey) -> bool {
        match controller {
            ENDPOINTSLICE_CONTROLLER => {
                self.options.controllers.endpointslice && self.check_slices(key).is_some()
            }
            ENDPOINTS_CONTROLLER => self.endpoints.is_some() && self.check_endpoints(key).is_some(),
            MIRRORING_CONTROLLER => self.check_mirroring(key).is_some(),
            _ => false,
        }
    }

    /// The violations kept since the last call (at most a hundred), and forgets them.
    pub fn take_violations(&self) -> Vec<Violation> {
        std::mem::take(&mut *self.violations.lock())
    }

    fn check_slices(&self, key: &ServiceKey) -> Option<Violation> {
        let service = self.index.services().get(&key.namespace, &key.name)?;
        if service.service_type == ServiceType::ExternalName || service.selector.is_none() {
            return None;
        }
        let slices = super::slices::managed_slices(&self.index, key);
        let refs: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
        let violation = |message: String| {
            Some(Violation {
                controller: ENDPOINTSLICE_CONTROLLER,
                service: key.clone(),
                message,
            })
        };
        let max = self.options.reconcile.max_endpoints_per_slice;
        if let Some(over) = refs.iter().find(|s| s.endpoints.len() > max) {
            return violation(format!(
                "slice {} holds {} endpoints, more than {max}",
                over.meta.name,
                over.endpoints.len()
            ));
        }
        let plan = self
            .endpointslice
            .full_plan(&self.cluster(), key, &service, &refs, |_| None);
        if plan.write_count() > 0 {
            let held: Vec<String> = refs
                .iter()
                .map(|s| {
                    format!(
                        "{} ({} {}, {} endpoints)",
                        s.meta.name,
                        s.address_type,
                        if s.is_owned_by(&service.meta.uid) {
                            "owned"
                        } else {
                            "not owned"
                        },
                        s.endpoints.len()
                    )
                })
                .collect();
            return violation(format!(
                "a full reconcile would still write: {}; slices held: {}",
                describe_plan(&plan),
                held.join(", ")
            ));
        }
        None
    }

    fn check_endpoints(&self, key: &ServiceKey) -> Option<Violation> {
        let write = EndpointsController::pending_write(&self.index, self.index.endpoints(), key)?;
        let (verb, object) = match &write {
            EndpointsWrite::Create(e) => ("create", e),
            EndpointsWrite::Update(e) => ("update", e),
            EndpointsWrite::Delete(e) => ("delete", e),
        };
        let addresses: usize = object
            .subsets
            .iter()
            .map(|s| s.addresses.len() + s.not_ready_addresses.len())
            .sum();
        Some(Violation {
            controller: ENDPOINTS_CONTROLLER,
            service: key.clone(),
            message: format!(
                "a full sync would still {verb} the Endpoints ({addresses} addresses desired)"
            ),
        })
    }

    fn check_mirroring(&self, key: &ServiceKey) -> Option<Violation> {
        let controller = self.mirroring.as_ref()?;
        let plan = controller.pending_plan(&self.index, self.index.endpoints(), key);
        (plan.write_count() > 0).then(|| Violation {
            controller: MIRRORING_CONTROLLER,
            service: key.clone(),
            message: format!(
                "a full reconcile would still write: {}",
                describe_plan(&plan)
            ),
        })
    }
}

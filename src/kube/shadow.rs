//! Shadow mode (`run --dry-run`): every write the engine would make is reported instead of sent.
//! A write sliced would make is exactly a place where the cluster differs from what sliced would
//! leave: the report keeps, per service and controller, the writes of its latest sync, so a
//! service that converges (its next sync writes nothing) drops out of it. Upstream's rules queue
//! no sync when another controller creates or updates an Endpoints, so the run loop also rechecks
//! a service in the report against a full sync of the engine's view whenever its slices,
//! Endpoints or Service change ([`DryRunReport::revalidate`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{Engine, SyncOutcome, SyncRecord};
use crate::index::ServiceKey;
use crate::model::{Address, Endpoint, EndpointSlice, Endpoints};
use crate::sink::{Kind, Object, Sink, Verb, WriteError};

/// Accepts every write and sends nothing. The engine runs with `observe_writes` off beside it, so
/// its index keeps holding only what the cluster holds.
pub struct DryRunSink {
    engine: Arc<Engine>,
}

impl DryRunSink {
    pub fn new(engine: Arc<Engine>) -> Self {
        DryRunSink { engine }
    }

    fn report(&self, verb: Verb, object: &Object) {
        let meta = object.meta();
        let name = if meta.name.is_empty() {
            let prefix = match object {
                Object::EndpointSlice(s) => s.generate_name.as_deref().unwrap_or(""),
                Object::Endpoints(_) => "",
            };
            format!("{prefix}<generated>")
        } else {
            meta.name.to_string()
        };
        let detail = match (verb, object) {
            (Verb::Update, Object::EndpointSlice(new)) => self
                .engine
                .stored_slice(&meta.namespace, &meta.name)
                .map(|old| slice_difference(&old, new))
                .unwrap_or_default(),
            (Verb::Update, Object::Endpoints(new)) => self
                .engine
                .stored_endpoints(&ServiceKey::new(&meta.namespace, &meta.name))
                .map(|old| endpoints_difference(&old, new))
                .unwrap_or_default(),
            (Verb::Create, Object::EndpointSlice(new)) => {
                format!("{} endpoints", new.endpoints.len())
            }
            _ => String::new(),
        };
        tracing::info!(
            target: "sliced::dry_run",
            verb = verb.as_str(),
            kind = object.kind().as_str(),
            object = %format!("{}/{name}", meta.namespace),
            detail = %detail,
            "dry run: the cluster differs; sliced would {} {} {}/{name}",
            verb.as_str(),
            object.kind(),
            meta.namespace,
        );
    }
}

impl Sink for DryRunSink {
    fn create(&self, object: Object) -> Result<Object, WriteError> {
        self.report(Verb::Create, &object);
        Ok(object)
    }

    fn update(&self, object: Object) -> Result<Object, WriteError> {
        self.report(Verb::Update, &object);
        Ok(object)
    }

    fn delete(&self, object: &Object) -> Result<(), WriteError> {
        self.report(Verb::Delete, object);
        Ok(())
    }

    fn patch_service(&self, patch: &crate::sink::ServicePatch) -> Result<(), WriteError> {
        tracing::info!(
            service = %format!("{}/{}", patch.namespace, patch.name),
            "dry run: sliced would patch the Service's {}",
            match patch.change {
                crate::sink::ServiceChange::Finalizers(_) => "finalizers",
                crate::sink::ServiceChange::Ingress(_) => "load-balancer status",
            }
        );
        Ok(())
    }
}

fn first_address(e: &Endpoint) -> String {
    e.addresses
        .first()
        .map(Address::to_string)
        .unwrap_or_default()
}

/// What an update of a slice changes, in a few words: endpoints added, removed and changed, and
/// whether ports, labels or annotations differ.
pub fn slice_difference(old: &EndpointSlice, new: &EndpointSlice) -> String {
    let before: HashMap<String, &Endpoint> = old
        .endpoints
        .iter()
        .map(|e| (first_address(e), &**e))
        .collect();
    let after: HashMap<String, &Endpoint> = new
        .endpoints
        .iter()
        .map(|e| (first_address(e), &**e))
        .collect();
    let added: Vec<&str> = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .map(String::as_str)
        .collect();
    let changed = after
        .iter()
        .filter(|(k, e)| before.get(*k).is_some_and(|o| !o.same_attributes(e)))
        .count();
    let mut out = String::new();
    let list = |v: &[&str]| {
        let mut v: Vec<&str> = v.to_vec();
        v.sort_unstable();
        let more = v.len().saturating_sub(5);
        v.truncate(5);
        let mut s = v.join(",");
        if more > 0 {
            let _ = write!(s, ",+{more} more");
        }
        s
    };
    if !added.is_empty() {
        let _ = write!(out, "+[{}] ", list(&added));
    }
    if !removed.is_empty() {
        let _ = write!(out, "-[{}] ", list(&removed));
    }
    if changed > 0 {
        let _ = write!(out, "{changed} endpoints changed ");
    }
    if old.ports != new.ports {
        out.push_str("ports differ ");
    }
    if old.meta.labels != new.meta.labels {
        out.push_str("labels differ ");
    }
    if old.meta.annotations != new.meta.annotations {
        out.push_str("annotations differ ");
    }
    if old.owner_references != new.owner_references {
        out.push_str("owner references differ ");
    }
    out.trim_end().to_string()
}

/// What an update of an Endpoints object changes, in a few words.
pub fn endpoints_difference(old: &Endpoints, new: &Endpoints) -> String {
    let count = |e: &Endpoints| -> (usize, usize) {
        e.subsets.iter().fold((0, 0), |(r, n), s| {
            (r + s.addresses.len(), n + s.not_ready_addresses.len())
        })
    };
    let (old_ready, old_not_ready) = count(old);
    let (ready, not_ready) = count(new);
    let mut out = format!(
        "ready {old_ready}->{ready}, not ready {old_not_ready}->{not_ready}, subsets {}->{}",
        old.subsets.len(),
        new.subsets.len()
    );
    if old.meta.labels != new.meta.labels {
        out.push_str(", labels differ");
    }
    if old.meta.annotations != new.meta.annotations {
        out.push_str(", annotations differ");
    }
    out
}

/// A controller's name and a service.
type ControllerService = (&'static str, ServiceKey);

/// The differences found by the latest sync of each service, per controller.
#[derive(Default)]
pub struct DryRunReport {
    latest: Mutex<HashMap<ControllerService, Vec<(Kind, Verb)>>>,
}

/// The report's totals at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DryRunSummary {
    /// Services with at least one difference.
    pub services: usize,
    /// Objects that differ, by kind and by the write that would fix them.
    pub objects: BTreeMap<(Kind, Verb), usize>,
}

impl DryRunSummary {
    pub fn objects_of(&self, kind: Kind) -> usize {
        self.objects
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|(_, n)| n)
            .sum()
    }
}

impl DryRunReport {
    /// Takes in a batch of syncs. A failed sync changes nothing: its writes were not all planned.
    pub fn observe(&self, records: &[SyncRecord]) {
        let mut latest = self.latest.lock();
        for r in records.iter().filter(|r| r.outcome == SyncOutcome::Success) {
            let key = (r.controller, r.service.clone());
            if r.writes.is_empty() {
                latest.remove(&key);
            } else {
                latest.insert(
                    key,
                    r.writes.iter().map(|w| (w.object.kind(), w.verb)).collect(),
                );
            }
        }
    }

    /// Drops the differences of these services that a full sync would no longer write: another
    /// controller (or a person) has fixed them, or the objects went with their Service. Upstream's
    /// rules queue no sync for such a change, so without this the report would keep them forever.
    pub fn revalidate<'a>(
        &self,
        engine: &Engine,
        services: impl IntoIterator<Item = &'a ServiceKey>,
    ) {
        let mut latest = self.latest.lock();
        if latest.is_empty() {
            return;
        }
        let touched: std::collections::HashSet<&ServiceKey> = services.into_iter().collect();
        latest.retain(|(controller, key), _| {
            !touched.contains(key) || engine.would_write(controller, key)
        });
    }

    /// [`DryRunReport::revalidate`] for every service in the report: after a relist.
    pub fn revalidate_all(&self, engine: &Engine) {
        self.latest
            .lock()
            .retain(|(controller, key), _| engine.would_write(controller, key));
    }

    pub fn summary(&self) -> DryRunSummary {
        let latest = self.latest.lock();
        let mut summary = DryRunSummary {
            services: latest
                .keys()
                .map(|(_, s)| s)
                .collect::<std::collections::HashSet<_>>()
                .len(),
            ..DryRunSummary::default()
        };
        for writes in latest.values() {
            for &(kind, verb) in writes {
                *summary.objects.entry((kind, verb)).or_default() += 1;
            }
        }
        summary
    }

    /// Sets the `sliced_dry_run_differences` gauges.
    pub fn export(&self, metrics: &crate::metrics::DryRunMetrics) {
        let summary = self.summary();
        for kind in [Kind::EndpointSlice, Kind::Endpoints] {
            metrics.set_differences(kind, summary.objects_of(kind));
        }
    }

    /// One log line with the totals, and the first few services that differ.
    pub fn log_summary(&self) {
        let summary = self.summary();
        let mut services: Vec<String> = self
            .latest
            .lock()
            .keys()
            .map(|(_, s)| s.to_string())
            .collect();
        services.sort_unstable();
        services.dedup();
        services.truncate(10);
        let by_write: Vec<String> = summary
            .objects
            .iter()
            .map(|((kind, verb), n)| format!("{kind} {}: {n}", verb.as_str()))
            .collect();
        tracing::info!(
            target: "sliced::dry_run",
            services = summary.services,
            slices = summary.objects_of(Kind::EndpointSlice),
            endpoints = summary.objects_of(Kind::Endpoints),
            "dry run summary: {} services differ from what sliced would write [{}]; first: {}",
            summary.services,
            by_write.join(", "),
            services.join(" "),
        );
    }
}

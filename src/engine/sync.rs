//! One batch of service syncs: plans computed in parallel, applied in order, results fed back.

use super::Engine;
use super::controller::Handlers;
use super::record::{SyncOutcome, SyncRecord};
use crate::sink::Sink;

impl Engine {
    /// Takes the services that are ready now, reconciles them in parallel and applies their plans
    /// to `sink`: the EndpointSlice controller's, then the Endpoints controller's, then the
    /// mirroring controller's, each in the order they became ready.
    pub fn sync_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.before_batch();
        let max = self.options.max_batch;
        // Every queue is read before anything is written, so that no sync of this batch waits for
        // another's writes.
        let slices = self.endpointslice.queue().pop_ready(max);
        let endpoints = self
            .endpoints
            .as_ref()
            .map(|c| (c, c.queue().pop_ready(max)));
        let mirroring = self
            .mirroring
            .as_ref()
            .map(|c| (c, c.queue().pop_ready(max)));
        let slices = self.plan(&self.endpointslice, slices);
        let endpoints = endpoints.map(|(c, keys)| (c, self.plan(c, keys)));
        let mirroring = mirroring.map(|(c, keys)| (c, self.plan(c, keys)));
        let at = self.clock.now();
        let mut records: Vec<SyncRecord> = slices
            .into_iter()
            .map(|p| self.finish(&self.endpointslice, p, sink, at))
            .collect();
        if let Some((c, planned)) = endpoints {
            records.extend(planned.into_iter().map(|p| self.finish(c, p, sink, at)));
        }
        if let Some((c, planned)) = mirroring {
            records.extend(planned.into_iter().map(|p| self.finish(c, p, sink, at)));
        }
        records
    }

    /// [`Engine::sync_ready`] until nothing is ready now: every record, in order. What is delayed
    /// stays queued (see `replay::drain` to let virtual time run on to it).
    pub fn sync_all_ready(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        let mut records = Vec::new();
        loop {
            let batch = self.sync_ready(sink);
            if batch.is_empty() {
                return records;
            }
            records.extend(batch);
        }
    }

    /// One pass of controllers that have just started (`sliced reconcile`): every ready key of
    /// every controller synced once, and failures not retried. A service's EndpointSlices and
    /// then its Endpoints, services in namespace/name order, those that no longer exist (whose
    /// Endpoints are left over) last; then the mirroring controller's keys in the same order, so
    /// that it reads what the Endpoints controller wrote.
    pub fn sync_once(&self, sink: &dyn Sink) -> Vec<SyncRecord> {
        self.before_batch();
        let services = self.index.services();
        let order = |key: &crate::index::ServiceKey| {
            let gone = services.get(&key.namespace, &key.name).is_none();
            (gone, key.clone())
        };
        let mut slices = self.endpointslice.queue().pop_ready(usize::MAX);
        slices.sort_by_cached_key(order);
        let slices = self.plan(&self.endpointslice, slices);
        let endpoints = self.endpoints.as_ref().map(|c| {
            let mut keys = c.queue().pop_ready(usize::MAX);
            keys.sort_by_cached_key(order);
            (c, self.plan(c, keys))
        });
        let at = self.clock.now();
        let mut records = Vec::with_capacity(slices.len());
        match endpoints {
            None => {
                records.extend(
                    slices
                        .into_iter()
                        .map(|p| self.finish(&self.endpointslice, p, sink, at)),
                );
            }
            Some((c, endpoints)) => {
                // Merged in key order, a service's slices before its Endpoints.
                let mut slices = slices.into_iter().peekable();
                let mut endpoints = endpoints.into_iter().peekable();
                loop {
                    let slices_first = match (slices.peek(), endpoints.peek()) {
                        (Some(s), Some(e)) => order(s.key()) <= order(e.key()),
                        (Some(_), None) => true,
                        (None, Some(_)) => false,
                        (None, None) => break,
                    };
                    let record = if slices_first {
                        slices
                            .next()
                            .map(|p| self.finish(&self.endpointslice, p, sink, at))
                    } else {
                        endpoints.next().map(|p| self.finish(c, p, sink, at))
                    };
                    records.extend(record);
                }
            }
        }
        if let Some(c) = &self.mirroring {
            let mut keys = c.queue().pop_ready(usize::MAX);
            keys.sort();
            records.extend(self.sync_keys(c, keys, sink));
        }
        records
    }

    pub(super) fn count(&self, record: &SyncRecord) {
        let mut stats = self.stats.lock();
        stats.syncs += 1;
        match record.outcome {
            SyncOutcome::Success => {}
            SyncOutcome::Error => stats.sync_errors += 1,
            SyncOutcome::Stale => stats.stale += 1,
        }
        stats.dropped += u64::from(record.dropped);
    }
}

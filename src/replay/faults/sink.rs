//! The API server's side of the faults: writes refused, answers lost after the write landed, slow
//! writes. Every write that lands is also turned into the watch event the API server sends for it,
//! since the engine's own writes come back through the watch, late, as in a real cluster. And every
//! write is checked against what the controllers may touch.

use std::time::Duration;

use parking_lot::Mutex;

use super::FaultCounts;
use super::profile::FaultProfile;
use crate::change::Change;
use crate::model::{EndpointSlice, Name, keys};
use crate::reconcile::endpoints::ANNOTATION_LEADER;
use crate::sim::Rng;
use crate::sink::memory::MemorySink;
use crate::sink::{Kind, Object, Sink, Verb, WriteError};

/// What becomes of one write.
enum Fate {
    Lands,
    Refused(WriteError),
    /// Lands, then the client sees a timeout.
    AnswerLost,
}

struct State {
    rng: Rng,
    active: bool,
    counts: FaultCounts,
    /// Watch events of the writes that landed, in order.
    echoes: Vec<Change>,
    /// How long the writes since the last take took.
    took: Duration,
    /// Writes of Endpoints, for the caller to check against the Services of the time (only it
    /// knows them).
    endpoints_writes: Vec<(Verb, Name, Name)>,
    /// Writes to objects no controller of sliced manages.
    unmanaged: Vec<String>,
}

/// A [`MemorySink`] whose writes fail as `profile` says, while faults are on.
pub struct FaultySink<'a> {
    inner: &'a MemorySink,
    profile: FaultProfile,
    state: Mutex<State>,
}

const TIMEOUT_MESSAGE: &str = "the server was unable to return a response in the time allotted, but may still be processing the request";

fn status(code: u16, reason: &str, message: &str) -> WriteError {
    WriteError::Status {
        code,
        reason: reason.to_string(),
        message: message.to_string(),
    }
}

fn is_ours(slice: &EndpointSlice) -> bool {
    matches!(
        slice.managed_by().map(|m| m.as_str()),
        Some(keys::ENDPOINTSLICE_CONTROLLER | keys::MIRRORING_CONTROLLER)
    )
}

impl<'a> FaultySink<'a> {
    pub fn new(inner: &'a MemorySink, profile: FaultProfile, seed: u64) -> FaultySink<'a> {
        FaultySink {
            inner,
            profile,
            state: Mutex::new(State {
                rng: Rng::stream(seed, 0x5157),
                active: true,
                counts: FaultCounts::default(),
                echoes: Vec::new(),
                took: Duration::ZERO,
                endpoints_writes: Vec::new(),
                unmanaged: Vec::new(),
            }),
        }
    }

    /// Faults stop: every later write lands and is answered at once.
    pub fn stop_faults(&self) {
        self.state.lock().active = false;
    }

    /// The watch events of the writes that landed since the last call.
    pub fn take_echoes(&self) -> Vec<Change> {
        std::mem::take(&mut self.state.lock().echoes)
    }

    /// How long the writes since the last call took.
    pub fn take_time(&self) -> Duration {
        std::mem::take(&mut self.state.lock().took)
    }

    pub fn take_endpoints_writes(&self) -> Vec<(Verb, Name, Name)> {
        std::mem::take(&mut self.state.lock().endpoints_writes)
    }

    pub fn unmanaged_writes(&self) -> Vec<String> {
        self.state.lock().unmanaged.clone()
    }

    /// What was injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.state.lock().counts.clone()
    }

    fn fate(&self, verb: Verb, kind: Kind, name: &str) -> Fate {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if !st.active {
            return Fate::Lands;
        }
        let p = &self.profile;
        if st.rng.chance(p.slow) {
            st.counts.slow_writes += 1;
            let max = u64::try_from(p.slow_max.as_millis()).unwrap_or(u64::MAX);
            st.took += Duration::from_millis(st.rng.between(1, max.max(1)));
        }
        if st.rng.chance(p.answer_lost) {
            st.counts.answers_lost += 1;
            return Fate::AnswerLost;
        }
        if !st.rng.chance(p.refused) {
            return Fate::Lands;
        }
        let error = match (st.rng.below(5), verb) {
            (0, Verb::Update) => {
                st.counts.conflicts += 1;
                WriteError::Conflict {
                    kind: kind.resource(),
                    name: Name::new(name),
                }
            }
            (0 | 1, _) => {
                st.counts.throttled += 1;
                status(
                    429,
                    "TooManyRequests",
                    "the server has received too many requests and has asked us to try again later",
                )
            }
            (2, _) => {
                st.counts.server_errors += 1;
                status(
                    500,
                    "InternalError",
                    "Internal error occurred: etcdserver: leader changed",
                )
            }
            (3, _) => {
                st.counts.server_errors += 1;
                status(
                    503,
                    "ServiceUnavailable",
                    "the server is currently unable to handle the request",
                )
            }
            _ => {
                st.counts.timeouts += 1;
                status(504, "Timeout", TIMEOUT_MESSAGE)
            }
        };
        Fate::Refused(error)
    }

    /// Notes a write about to be sent: Endpoints writes for the caller, slices not ours here.
    fn check(&self, verb: Verb, sent: &Object, stored: Option<&Object>) {
        let mut st = self.state.lock();
        match (sent, stored) {
            (Object::Endpoints(e), stored) => {
                let leader_record = stored
                    .and_then(Object::as_endpoints)
                    .is_some_and(|s| s.meta.annotations.contains_key(ANNOTATION_LEADER));
                if leader_record {
                    st.unmanaged.push(format!(
                        "{} Endpoints {}/{} (a leader-election record)",
                        verb.as_str(),
                        e.meta.namespace,
                        e.meta.name
                    ));
                }
                st.endpoints_writes
                    .push((verb, e.meta.namespace.clone(), e.meta.name.clone()));
            }
            (Object::EndpointSlice(s), stored) => {
                let before_ours = stored.and_then(Object::as_slice).is_none_or(is_ours);
                if !(before_ours && (verb == Verb::Delete || is_ours(s))) {
                    st.unmanaged.push(format!(
                        "{} EndpointSlice {}/{}",
                        verb.as_str(),
                        s.meta.namespace,
                        s.meta.name
                    ));
                }
            }
        }
    }

    fn landed(&self, echo: Change) {
        self.state.lock().echoes.push(echo);
    }
}

/// The watch event of a stored object.
fn applied(object: &Object) -> Change {
    match object {
        Object::EndpointSlice(s) => Change::EndpointSlice(std::sync::Arc::clone(s)),
        Object::Endpoints(e) => Change::Endpoints(std::sync::Arc::clone(e)),
    }
}

impl Sink for FaultySink<'_> {
    fn patch_service(&self, patch: &crate::sink::ServicePatch) -> Result<(), WriteError> {
        self.inner.patch_service(patch)
    }

    fn create(&self, object: Object) -> Result<Object, WriteError> {
        self.check(Verb::Create, &object, None);
        let fate = self.fate(Verb::Create, object.kind(), &object.meta().name);
        if let Fate::Refused(error) = fate {
            return Err(error);
        }
        let created = self.inner.create(object)?;
        self.landed(applied(&created));
        match fate {
            Fate::AnswerLost => Err(status(504, "Timeout", TIMEOUT_MESSAGE)),
            _ => Ok(created),
        }
    }

    fn update(&self, object: Object) -> Result<Object, WriteError> {
        let meta = object.meta();
        let stored = self.inner.get(object.kind(), &meta.namespace, &meta.name);
        self.check(Verb::Update, &object, stored.as_ref());
        let fate = self.fate(Verb::Update, object.kind(), &object.meta().name);
        if let Fate::Refused(error) = fate {
            return Err(error);
        }
        let updated = self.inner.update(object)?;
        self.landed(applied(&updated));
        match fate {
            Fate::AnswerLost => Err(status(504, "Timeout", TIMEOUT_MESSAGE)),
            _ => Ok(updated),
        }
    }

    fn delete(&self, object: &Object) -> Result<(), WriteError> {
        let meta = object.meta();
        let stored = self.inner.get(object.kind(), &meta.namespace, &meta.name);
        self.check(Verb::Delete, object, stored.as_ref());
        let fate = self.fate(Verb::Delete, object.kind(), &meta.name);
        if let Fate::Refused(error) = fate {
            return Err(error);
        }
        self.inner.delete(object)?;
        let (namespace, name) = (meta.namespace.clone(), meta.name.clone());
        self.landed(match object {
            Object::EndpointSlice(_) => Change::EndpointSliceDeleted { namespace, name },
            Object::Endpoints(_) => Change::EndpointsDeleted {
                namespace,
                name,
                uid: stored.map(|s| s.meta().uid.clone()).unwrap_or_default(),
            },
        });
        match fate {
            Fate::AnswerLost => Err(status(504, "Timeout", TIMEOUT_MESSAGE)),
            _ => Ok(()),
        }
    }
}

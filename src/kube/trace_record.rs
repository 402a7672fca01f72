//! `sliced run --record-trace FILE`: every watch event the engine takes, and every deletion a
//! relist makes, written in the order taken as the steps `sliced simulate --events` and `sliced
//! tune --events` replay. Times are the engine clock's since the caches were filled; what came
//! before (the initial lists) is at `0s`, as a replay lists its initial objects at time zero.
//!
//! The watch echoes of sliced's own writes are left out: the replay makes those writes itself,
//! under names of its own. Which events are echoes is told by the writes themselves
//! ([`RecordingSink`] notes the resourceVersion the API server gave each): an EndpointSlice or
//! Endpoints event carrying one of those is an echo. Slices and Endpoints found at the initial
//! list (kube-controller-manager's, before a take-over) and those others write are recorded.
//!
//! Not recorded as such: the service controller's patches of Services come back as Service
//! events, which are recorded whole (the Service is others' object too); the replay patches them
//! again to the same finalizers and ingress.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::change::{Change, ChangeKind};
use crate::engine::Engine;
use crate::kube::convert::{NamespaceJson, NodeJson, ObjectJson, PodJson, ServiceJson};
use crate::model::{Name, Namespace};
use crate::sink::{Kind, Object, ServicePatch, Sink, WriteError};

mod file;

pub use file::{Limits, parse_size};
use file::{TraceWriter, apply_line, delete_line};

/// `--record-trace` and its limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordTrace {
    pub path: PathBuf,
    pub limits: Limits,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("--record-trace {path}: cannot create the file: {source}")]
    Create {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Whether `path` can be written, before anything else starts: a run that cannot record is
/// refused at once rather than found out later.
pub fn check_writable(path: &Path) -> Result<(), RecordError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .map_err(|source| RecordError::Create {
            path: path.display().to_string(),
            source,
        })
}

/// An EndpointSlice or Endpoints: kind, namespace, name.
type Key = (Kind, Name, Name);

/// The resourceVersions the API server gave sliced's own writes, by object, until their echoes
/// come back; and the objects sliced deleted.
#[derive(Default)]
pub struct OwnWrites {
    written: HashMap<Key, SmallVec<[Name; 2]>>,
    deleted: HashSet<Key>,
}

/// A watch delivers an object's events in order, so an echo older than the newest few cannot be
/// waited on any more (a relist shows the latest version only).
const ECHOES_KEPT: usize = 4;

impl OwnWrites {
    fn wrote(&mut self, object: &Object) {
        let meta = object.meta();
        let key = (object.kind(), meta.namespace.clone(), meta.name.clone());
        self.deleted.remove(&key);
        let list = self.written.entry(key).or_default();
        if list.len() == ECHOES_KEPT {
            list.remove(0);
        }
        list.push(meta.resource_version.clone());
    }

    /// Whether this version of the object is one sliced wrote. Older versions' echoes are no
    /// longer waited on; this one is kept, as a relist delivers it again.
    fn is_echo(&mut self, key: &Key, resource_version: &Name) -> bool {
        let Some(list) = self.written.get_mut(key) else {
            return false;
        };
        match list.iter().position(|rv| rv == resource_version) {
            Some(i) => {
                list.drain(..i);
                true
            }
            None => false,
        }
    }
}

/// The sink `sliced run` writes through, noting what it wrote (see [`OwnWrites`]).
pub struct RecordingSink {
    inner: Box<dyn Sink>,
    own: Arc<Mutex<OwnWrites>>,
}

impl RecordingSink {
    pub fn new(inner: Box<dyn Sink>, recorder: &TraceRecorder) -> RecordingSink {
        RecordingSink {
            inner,
            own: Arc::clone(&recorder.own),
        }
    }
}

impl Sink for RecordingSink {
    fn create(&self, object: Object) -> Result<Object, WriteError> {
        let stored = self.inner.create(object)?;
        self.own.lock().wrote(&stored);
        Ok(stored)
    }

    fn update(&self, object: Object) -> Result<Object, WriteError> {
        let stored = self.inner.update(object)?;
        self.own.lock().wrote(&stored);
        Ok(stored)
    }

    fn delete(&self, object: &Object) -> Result<(), WriteError> {
        self.inner.delete(object)?;
        let meta = object.meta();
        let key = (object.kind(), meta.namespace.clone(), meta.name.clone());
        let mut own = self.own.lock();
        own.written.remove(&key);
        own.deleted.insert(key);
        Ok(())
    }

    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn patch_service(&self, patch: &ServicePatch) -> Result<(), WriteError> {
        self.inner.patch_service(patch)
    }
}

/// Records on the engine's thread: a pod event costs one serialisation into a buffer.
pub struct TraceRecorder {
    /// `None` once writing failed: the run goes on unrecorded, as said in the log.
    writer: Option<TraceWriter>,
    path: PathBuf,
    /// The engine clock when the caches were filled: time zero of the trace.
    started: Option<Duration>,
    line: Vec<u8>,
    own: Arc<Mutex<OwnWrites>>,
    /// The engine keeps no Namespaces (only their labels, and only for the service controller):
    /// kept here, for the state a rotated file starts with.
    namespaces: BTreeMap<Name, Namespace>,
    /// Slices and Endpoints recorded as input, as last recorded: the state a new file starts with.
    inputs: BTreeMap<Key, Object>,
    steps: u64,
}

impl TraceRecorder {
    pub fn create(options: &RecordTrace) -> Result<TraceRecorder, RecordError> {
        let writer = TraceWriter::create(&options.path, options.limits).map_err(|source| {
            RecordError::Create {
                path: options.path.display().to_string(),
                source,
            }
        })?;
        Ok(TraceRecorder {
            writer: Some(writer),
            path: options.path.clone(),
            started: None,
            line: Vec::with_capacity(4096),
            own: Arc::default(),
            namespaces: BTreeMap::new(),
            inputs: BTreeMap::new(),
            steps: 0,
        })
    }

    /// Steps recorded so far, the state at the start of rotated files not counted.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The caches are filled: the trace's time zero.
    pub fn started(&mut self, engine: &Engine) {
        self.started = Some(engine.now());
    }

    fn at(&self, engine: &Engine) -> Duration {
        self.started
            .map_or(Duration::ZERO, |t| engine.now().saturating_sub(t))
    }

    /// A change as the watch delivers it, before the engine takes it.
    pub fn change(&mut self, change: &Change, engine: &Engine) {
        if self.writer.is_none() || !self.keep(change) {
            return;
        }
        let at = self.at(engine);
        let encoded = encode(&mut self.line, at, change);
        self.write(encoded, engine, at);
    }

    /// A relist of `kind` saw only `seen`: before the engine takes it, the deletions it makes, in
    /// the engine's order. Namespaces and slices no controller of sliced keeps are not held by the
    /// engine; their deletions are told from what was recorded.
    pub fn relisted(&mut self, kind: ChangeKind, seen: &HashSet<(Name, Name)>, engine: &Engine) {
        if self.writer.is_none() {
            return;
        }
        let mut gone = engine.stored_keys(kind);
        match kind {
            ChangeKind::Namespace => {
                gone.extend((self.namespaces.keys()).map(|name| (Name::default(), name.clone())))
            }
            ChangeKind::EndpointSlice | ChangeKind::Endpoints => gone.extend(
                (self.inputs.keys())
                    .filter(|(k, _, _)| change_kind(*k) == kind)
                    .map(|(_, namespace, name)| (namespace.clone(), name.clone())),
            ),
            _ => {}
        }
        gone.retain(|key| !seen.contains(key));
        gone.sort_unstable();
        gone.dedup();
        for (namespace, name) in gone {
            self.change(&Change::deleted(kind, namespace, name), engine);
        }
    }

    /// Whether to record `change`, keeping what the state of a new file needs.
    fn keep(&mut self, change: &Change) -> bool {
        let (key, object) = match change {
            Change::Namespace(ns) => {
                self.namespaces.insert(ns.name.clone(), ns.clone());
                return true;
            }
            Change::NamespaceDeleted { name } => {
                self.namespaces.remove(name);
                return true;
            }
            Change::EndpointSlice(s) => (
                (
                    Kind::EndpointSlice,
                    s.meta.namespace.clone(),
                    s.meta.name.clone(),
                ),
                Object::EndpointSlice(Arc::clone(s)),
            ),
            Change::Endpoints(e) => (
                (
                    Kind::Endpoints,
                    e.meta.namespace.clone(),
                    e.meta.name.clone(),
                ),
                Object::Endpoints(Arc::clone(e)),
            ),
            Change::EndpointSliceDeleted { namespace, name } => {
                return self.keep_deletion((Kind::EndpointSlice, namespace.clone(), name.clone()));
            }
            Change::EndpointsDeleted {
                namespace, name, ..
            } => {
                return self.keep_deletion((Kind::Endpoints, namespace.clone(), name.clone()));
            }
            _ => return true,
        };
        let mut own = self.own.lock();
        if own.is_echo(&key, &object.meta().resource_version) {
            // Now sliced's version: the replay writes its own.
            self.inputs.remove(&key);
            return false;
        }
        // Someone else's version: sliced's earlier writes of it are no longer echoes to come.
        own.written.remove(&key);
        own.deleted.remove(&key);
        self.inputs.insert(key, object);
        true
    }

    /// A deletion is recorded unless sliced made it, or the object was sliced's own (the garbage
    /// collector's deletion of a deleted Service's slices: the replay collects them itself; a
    /// slice sliced created is named otherwise in the replay, so no other deletion of it could be
    /// replayed by name either).
    fn keep_deletion(&mut self, key: Key) -> bool {
        let mut own = self.own.lock();
        let by_sliced = own.deleted.remove(&key);
        let sliceds = own.written.remove(&key).is_some();
        let input = self.inputs.remove(&key).is_some();
        !by_sliced && (input || !sliceds)
    }

    fn write(&mut self, encoded: serde_json::Result<()>, engine: &Engine, at: Duration) {
        let result = encoded.map_err(io::Error::other).and_then(|()| {
            let Some(writer) = &mut self.writer else {
                return Ok(());
            };
            if writer.full_for(&self.line) {
                let step = std::mem::take(&mut self.line);
                writer.rotate()?;
                let state = write_state(writer, &self.namespaces, &self.inputs, engine, at);
                self.line = step;
                state?;
            }
            writer.write_step(&self.line)
        });
        match result {
            Ok(()) => self.steps += 1,
            Err(e) => self.failed(&e),
        }
    }

    /// Called every turn of the engine's loop: buffered steps reach the file at least once a
    /// second.
    pub fn tick(&mut self) {
        if let Some(Err(e)) = self.writer.as_mut().map(TraceWriter::flush_if_due) {
            self.failed(&e);
        }
    }

    /// The run stops: everything buffered is written.
    pub fn finish(&mut self) {
        if let Some(Err(e)) = self.writer.as_mut().map(TraceWriter::flush) {
            self.failed(&e);
        }
        if self.writer.is_some() {
            tracing::info!(file = %self.path.display(), steps = self.steps, "trace recorded");
        }
    }

    fn failed(&mut self, e: &io::Error) {
        tracing::error!(
            file = %self.path.display(),
            steps = self.steps,
            "--record-trace: writing failed, recording stops: {e}"
        );
        self.writer = None;
    }
}

/// The watched kind of a kept key (only slices and Endpoints are kept).
fn change_kind(kind: Kind) -> ChangeKind {
    match kind {
        Kind::Endpoints => ChangeKind::Endpoints,
        _ => ChangeKind::EndpointSlice,
    }
}

/// One step's line.
fn encode(line: &mut Vec<u8>, at: Duration, change: &Change) -> serde_json::Result<()> {
    let delete = |line: &mut Vec<u8>,
                  kind: ChangeKind,
                  namespace: &str,
                  name: &str|
     -> serde_json::Result<()> {
        delete_line(line, at, kind.as_str(), namespace, name)
    };
    match change {
        Change::Pod(p) => apply_line(line, at, &PodJson(p)),
        Change::Service(s) => apply_line(line, at, &ServiceJson(s)),
        Change::Node(n) => apply_line(line, at, &NodeJson(n)),
        Change::Namespace(n) => apply_line(line, at, &NamespaceJson(n)),
        Change::EndpointSlice(s) => {
            apply_line(line, at, &ObjectJson(&Object::EndpointSlice(Arc::clone(s))))
        }
        Change::Endpoints(e) => {
            apply_line(line, at, &ObjectJson(&Object::Endpoints(Arc::clone(e))))
        }
        Change::PodDeleted { namespace, name }
        | Change::ServiceDeleted { namespace, name }
        | Change::EndpointSliceDeleted { namespace, name }
        | Change::EndpointsDeleted {
            namespace, name, ..
        } => delete(line, change.kind(), namespace, name),
        Change::NodeDeleted { name } | Change::NamespaceDeleted { name } => {
            delete(line, change.kind(), "", name)
        }
    }
}

/// What a new file starts with, so that it replays alone: every object the engine holds of the
/// kinds it reads, the Namespaces, and the slices and Endpoints that are input, at time `at`.
fn write_state(
    writer: &mut TraceWriter,
    namespaces: &BTreeMap<Name, Namespace>,
    inputs: &BTreeMap<Key, Object>,
    engine: &Engine,
    at: Duration,
) -> io::Result<()> {
    let mut line = Vec::with_capacity(4096);
    let mut put = |object: &dyn erased::Json| -> io::Result<()> {
        object.apply_line(&mut line, at).map_err(io::Error::other)?;
        writer.write_state(&line)
    };
    for ns in namespaces.values() {
        put(&NamespaceJson(ns))?;
    }
    let index = engine.index();
    let mut nodes = index.nodes().list();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    for node in &nodes {
        put(&NodeJson(node))?;
    }
    let mut services = index.services().list();
    services
        .sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    for service in &services {
        put(&ServiceJson(service))?;
    }
    let mut pods = index.pods().keys();
    pods.sort_unstable();
    for (namespace, name) in pods {
        if let Some(pod) = index.pods().get(&namespace, &name) {
            put(&PodJson(&pod))?;
        }
    }
    for object in inputs.values() {
        put(&ObjectJson(object))?;
    }
    Ok(())
}

/// One object's `apply` line, whatever its type.
mod erased {
    use std::time::Duration;

    pub(super) trait Json {
        fn apply_line(&self, line: &mut Vec<u8>, at: Duration) -> serde_json::Result<()>;
    }

    impl<T: serde::Serialize> Json for T {
        fn apply_line(&self, line: &mut Vec<u8>, at: Duration) -> serde_json::Result<()> {
            super::apply_line(line, at, self)
        }
    }
}

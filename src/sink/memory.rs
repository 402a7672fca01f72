//! The in-memory API server: enough of kube-apiserver's write semantics for EndpointSlices and
//! Endpoints (generateName, resourceVersion, generation, optimistic concurrency, UID preconditions,
//! namespace lifecycle) to test the controllers and drive the simulator. Deterministic under a seed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use parking_lot::Mutex;

use super::{Kind, Object, ServicePatch, Sink, Verb, WriteError};
use crate::model::{Name, Timestamp};

/// Upstream's `utilrand.String` alphabet: no vowels, no confusable characters.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const NAME_SUFFIX_LEN: usize = 5;
/// A generated name must still fit in 63 characters, so the prefix is cut to 58 as upstream does.
const MAX_GENERATED_PREFIX: usize = 63 - NAME_SUFFIX_LEN;
/// Attempts at a free generated name before giving up with AlreadyExists.
const NAME_ATTEMPTS: usize = 16;
/// The sink's clock until `set_now`: 2024-01-01T00:00:00Z.
const DEFAULT_NOW_SECONDS: i64 = 1_704_067_200;

/// One accepted write.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteRecord {
    pub verb: Verb,
    /// The object as the client sent it.
    pub sent: Object,
    /// The server's copy after the write; `None` for a delete.
    pub stored: Option<Object>,
}

type Key = (Kind, Name, Name);

struct Injected {
    verb: Verb,
    kind: Kind,
    error: WriteError,
    remaining: usize,
}

struct State {
    rng: u64,
    /// The last resourceVersion handed out; shared by all objects like etcd's revision.
    revision: u64,
    now: Timestamp,
    objects: BTreeMap<Key, Object>,
    terminating: BTreeSet<Name>,
    injected: VecDeque<Injected>,
    log: Vec<WriteRecord>,
    /// Accepted patches of Services, in order, until taken. Services are not stored: they are
    /// the input.
    service_patches: Vec<ServicePatch>,
    /// Whether accepted writes are kept in `log` (a long run that never reads it turns this off).
    logging: bool,
}

/// A thread-safe in-memory API server. All methods take `&self`.
pub struct MemorySink {
    state: Mutex<State>,
}

impl MemorySink {
    /// An empty server whose generated names and UIDs are drawn from a PRNG seeded by `seed`.
    pub fn new(seed: u64) -> MemorySink {
        MemorySink {
            state: Mutex::new(State {
                rng: seed,
                revision: 0,
                now: Timestamp::constant(DEFAULT_NOW_SECONDS, 0),
                objects: BTreeMap::new(),
                terminating: BTreeSet::new(),
                injected: VecDeque::new(),
                log: Vec::new(),
                service_patches: Vec::new(),
                logging: true,
            }),
        }
    }

    /// Preloads an object as it is, replacing one of the same kind and name. Missing server fields
    /// are filled in: uid, resourceVersion, generation 1, creationTimestamp. Not logged as a write.
    /// A numeric resourceVersion moves the revision counter past it, so later writes stay newer.
    pub fn insert_existing(&self, object: Object) -> Result<Object, WriteError> {
        let mut st = self.state.lock();
        let mut object = object;
        if object.meta().name.is_empty() {
            let name = st.generate_name(&object)?;
            object.meta_mut().name = name;
        }
        let now = st.now;
        let meta = object.meta_mut();
        if meta.uid.is_empty() {
            meta.uid = st.next_uid();
        }
        match meta.resource_version.parse::<u64>() {
            Ok(rv) => st.revision = st.revision.max(rv),
            Err(_) if meta.resource_version.is_empty() => meta.resource_version = st.next_rv(),
            // An opaque resourceVersion is kept as it is; only equality is ever checked.
            Err(_) => {}
        }
        if meta.generation == 0 {
            meta.generation = 1;
        }
        if meta.creation_timestamp.is_none() {
            meta.creation_timestamp = Some(now);
        }
        st.objects.insert(key_of(&object), object.clone());
        Ok(object)
    }

    /// An edit by someone other than the controllers: the object is created, or updated without
    /// preconditions if it exists, and nothing is logged as a write. Returns the stored object.
    pub fn apply_external(&self, object: Object) -> Result<Object, WriteError> {
        let mut st = self.state.lock();
        if st.objects.contains_key(&key_of(&object)) {
            let mut sent = object;
            let meta = sent.meta_mut();
            meta.resource_version = Name::default();
            meta.uid = Name::default();
            return st.update(sent);
        }
        drop(st);
        let mut object = object;
        object.meta_mut().resource_version = Name::default();
        self.insert_existing(object)
    }

    /// Removes an object without logging a write: a deletion by someone else, or by the garbage
    /// collector. Returns the removed object.
    pub fn remove_external(&self, kind: Kind, namespace: &str, name: &str) -> Option<Object> {
        let key = (kind, Name::new(namespace), Name::new(name));
        self.state.lock().objects.remove(&key)
    }

    /// Keeps (the default) or stops keeping accepted writes for `writes()` and `take_writes()`.
    pub fn set_logging(&self, on: bool) {
        let mut st = self.state.lock();
        st.logging = on;
        if !on {
            st.log = Vec::new();
        }
    }

    /// Marks a namespace as terminating (or not): creates into it then fail with
    /// `WriteError::NamespaceTerminating`; updates and deletes still work.
    pub fn set_namespace_terminating(&self, namespace: &str, terminating: bool) {
        let mut st = self.state.lock();
        if terminating {
            st.terminating.insert(Name::from(namespace));
        } else {
            st.terminating.remove(namespace);
        }
    }

    /// Sets the clock that stamps creationTimestamp.
    pub fn set_now(&self, now: Timestamp) {
        self.state.lock().now = now;
    }

    pub fn now(&self) -> Timestamp {
        self.state.lock().now
    }

    /// The last resourceVersion handed out.
    pub fn revision(&self) -> u64 {
        self.state.lock().revision
    }

    /// The next `times` writes of this verb and kind fail with `error` and change nothing. Several
    /// injections for the same verb and kind are used up in the order given.
    pub fn fail_next(&self, verb: Verb, kind: Kind, error: WriteError, times: usize) {
        if times == 0 {
            return;
        }
        self.state.lock().injected.push_back(Injected {
            verb,
            kind,
            error,
            remaining: times,
        });
    }

    /// Every accepted write so far, in order.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.state.lock().log.clone()
    }

    /// Every accepted write since the last take, in order; clears the log.
    pub fn take_writes(&self) -> Vec<WriteRecord> {
        std::mem::take(&mut self.state.lock().log)
    }

    /// Every accepted patch of a Service since the last take, in order; clears them.
    pub fn take_service_patches(&self) -> Vec<ServicePatch> {
        std::mem::take(&mut self.state.lock().service_patches)
    }

    /// All stored objects: EndpointSlices before Endpoints, then by namespace and name.
    pub fn objects(&self) -> Vec<Object> {
        self.state.lock().objects.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.state.lock().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.state.lock().objects.is_empty()
    }

    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Object> {
        let key = (kind, Name::from(namespace), Name::new(name));
        self.state.lock().objects.get(&key).cloned()
    }

    /// The EndpointSlices of a namespace, by name.
    pub fn list_slices(&self, namespace: &str) -> Vec<crate::model::EndpointSlice> {
        let ns = Name::from(namespace);
        let from = (Kind::EndpointSlice, ns.clone(), Name::default());
        self.state
            .lock()
            .objects
            .range(from..)
            .take_while(|((kind, n, _), _)| *kind == Kind::EndpointSlice && *n == ns)
            .filter_map(|(_, o)| o.as_slice().cloned())
            .collect()
    }
}

impl Sink for MemorySink {
    /// Kept until taken, logging or not: Services are not stored here, so the patches are how
    /// the caller (the replay's world) learns what to apply to them.
    fn patch_service(&self, patch: &ServicePatch) -> Result<(), WriteError> {
        self.state.lock().service_patches.push(patch.clone());
        Ok(())
    }

    fn create(&self, object: Object) -> Result<Object, WriteError> {
        let mut st = self.state.lock();
        st.take_injected(Verb::Create, object.kind())?;
        let kind = object.kind();
        let meta = object.meta();
        // Namespace lifecycle admission runs before the name is generated.
        if st.terminating.contains(meta.namespace.as_str()) {
            return Err(WriteError::NamespaceTerminating {
                kind: kind.resource(),
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
            });
        }
        let name = if meta.name.is_empty() {
            st.generate_name(&object)?
        } else if st.objects.contains_key(&key_of(&object)) {
            return Err(WriteError::AlreadyExists {
                kind: kind.resource(),
                name: meta.name.clone(),
            });
        } else {
            meta.name.clone()
        };
        // Only a logged write keeps what was sent apart from what was stored.
        let sent = st.logging.then(|| object.clone());
        let mut stored = object;
        let uid = st.next_uid();
        let rv = st.next_rv();
        let now = st.now;
        let m = stored.meta_mut();
        m.name = name;
        m.uid = uid;
        m.resource_version = rv;
        m.generation = 1;
        m.creation_timestamp = Some(now);
        m.deletion_timestamp = None;
        st.objects.insert(key_of(&stored), stored.clone());
        if let Some(sent) = sent {
            st.record(WriteRecord {
                verb: Verb::Create,
                sent,
                stored: Some(stored.clone()),
            });
        }
        Ok(stored)
    }

    fn update(&self, object: Object) -> Result<Object, WriteError> {
        let mut st = self.state.lock();
        st.take_injected(Verb::Update, object.kind())?;
        let sent = st.logging.then(|| object.clone());
        let stored = st.update(object)?;
        if let Some(sent) = sent {
            st.record(WriteRecord {
                verb: Verb::Update,
                sent,
                stored: Some(stored.clone()),
            });
        }
        Ok(stored)
    }

    fn delete(&self, object: &Object) -> Result<(), WriteError> {
        let mut st = self.state.lock();
        let kind = object.kind();
        st.take_injected(Verb::Delete, kind)?;
        let sent = object.meta();
        let key = key_of(object);
        let current = stored(&st.objects, &key, kind, &sent.name)?;
        let stored_uid = &current.meta().uid;
        if !sent.uid.is_empty() && sent.uid != *stored_uid {
            return Err(WriteError::uid_precondition(
                kind, &sent.name, &sent.uid, stored_uid,
            ));
        }
        st.objects.remove(&key);
        st.record(WriteRecord {
            verb: Verb::Delete,
            sent: object.clone(),
            stored: None,
        });
        Ok(())
    }
}

impl State {
    fn record(&mut self, record: WriteRecord) {
        if self.logging {
            self.log.push(record);
        }
    }

    /// An update as the API server applies it: preconditions, immutable fields, generation.
    fn update(&mut self, object: Object) -> Result<Object, WriteError> {
        let st = self;
        let kind = object.kind();
        let sent = object.meta();
        let key = key_of(&object);
        let current = stored(&st.objects, &key, kind, &sent.name)?;
        let cur = current.meta();
        // An empty resourceVersion makes the update unconditional.
        if !sent.resource_version.is_empty() && sent.resource_version != cur.resource_version {
            return Err(WriteError::Conflict {
                kind: kind.resource(),
                name: sent.name.clone(),
            });
        }
        if !sent.uid.is_empty() && sent.uid != cur.uid {
            return Err(WriteError::uid_precondition(
                kind, &sent.name, &sent.uid, &cur.uid,
            ));
        }
        if let (Object::EndpointSlice(new), Object::EndpointSlice(old)) = (&object, current)
            && new.address_type != old.address_type
        {
            let detail = format!(
                "addressType: Invalid value: \"{}\": field is immutable",
                new.address_type
            );
            return Err(WriteError::invalid(kind, &sent.name, &detail));
        }
        let spec_changed = !same_spec(&object, current);
        let (namespace, name, uid) = (cur.namespace.clone(), cur.name.clone(), cur.uid.clone());
        let (created, deleted) = (cur.creation_timestamp, cur.deletion_timestamp);
        let (generation, resource_version) = (cur.generation, cur.resource_version.clone());
        let mut stored = object;
        let m = stored.meta_mut();
        m.namespace = namespace;
        m.name = name;
        m.uid = uid;
        m.creation_timestamp = created;
        m.deletion_timestamp = deleted;
        m.generation = generation + i64::from(spec_changed);
        m.resource_version = resource_version;
        // Like etcd, a write that changes nothing is a no-op: the resourceVersion stays.
        if st.objects.get(&key) != Some(&stored) {
            stored.meta_mut().resource_version = st.next_rv();
            st.objects.insert(key, stored.clone());
        }
        Ok(stored)
    }

    /// Consumes one injected failure for this verb and kind, if any.
    fn take_injected(&mut self, verb: Verb, kind: Kind) -> Result<(), WriteError> {
        let Some(pos) = self
            .injected
            .iter()
            .position(|i| i.verb == verb && i.kind == kind)
        else {
            return Ok(());
        };
        let entry = &mut self.injected[pos];
        let error = entry.error.clone();
        entry.remaining -= 1;
        if entry.remaining == 0 {
            self.injected.remove(pos);
        }
        Err(error)
    }

    /// splitmix64: tiny, fast and good enough for names and UIDs.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next_rv(&mut self) -> Name {
        self.revision += 1;
        Name::new(&self.revision.to_string())
    }

    /// A version-4-looking UUID drawn from the PRNG.
    fn next_uid(&mut self) -> Name {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let hi = (hi & !0xF000) | 0x4000; // version 4
        let lo = (lo & !(0xC << 60)) | (0x8 << 60); // RFC 4122 variant
        let uid = format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        );
        Name::new(&uid)
    }

    /// `<generateName><5 random chars>`, retried on collision; Invalid without a generateName.
    fn generate_name(&mut self, object: &Object) -> Result<Name, WriteError> {
        let kind = object.kind();
        let prefix = match object {
            Object::EndpointSlice(s) => s.generate_name.as_ref().filter(|p| !p.is_empty()),
            Object::Endpoints(_) => None,
        };
        let Some(prefix) = prefix else {
            return Err(WriteError::invalid(
                kind,
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        };
        let mut base = prefix.as_str();
        if base.len() > MAX_GENERATED_PREFIX {
            let mut cut = MAX_GENERATED_PREFIX;
            while !base.is_char_boundary(cut) {
                cut -= 1;
            }
            base = &base[..cut];
        }
        let namespace = object.meta().namespace.clone();
        let mut name = String::with_capacity(base.len() + NAME_SUFFIX_LEN);
        for _ in 0..NAME_ATTEMPTS {
            name.clear();
            name.push_str(base);
            for _ in 0..NAME_SUFFIX_LEN {
                let i = (self.next_u64() % NAME_ALPHABET.len() as u64) as usize;
                name.push(char::from(NAME_ALPHABET[i]));
            }
            let candidate = Name::new(&name);
            if !self
                .objects
                .contains_key(&(kind, namespace.clone(), candidate.clone()))
            {
                return Ok(candidate);
            }
        }
        Err(WriteError::AlreadyExists {
            kind: kind.resource(),
            name: Name::new(&name),
        })
    }
}

/// The stored object an update or delete is about, or the API server's NotFound.
fn stored<'a>(
    objects: &'a BTreeMap<Key, Object>,
    key: &Key,
    kind: Kind,
    name: &Name,
) -> Result<&'a Object, WriteError> {
    objects.get(key).ok_or_else(|| WriteError::NotFound {
        kind: kind.resource(),
        name: name.clone(),
    })
}

fn key_of(object: &Object) -> Key {
    let meta = object.meta();
    (object.kind(), meta.namespace.clone(), meta.name.clone())
}

/// The API server's rule for bumping generation: anything but metadata changed, or, for an
/// EndpointSlice, its labels (the controllers' tracker relies on label edits being seen).
fn same_spec(a: &Object, b: &Object) -> bool {
    match (a, b) {
        (Object::EndpointSlice(a), Object::EndpointSlice(b)) => {
            a.address_type == b.address_type
                && a.ports == b.ports
                && a.endpoints == b.endpoints
                && a.meta.labels == b.meta.labels
        }
        (Object::Endpoints(a), Object::Endpoints(b)) => a.subsets == b.subsets,
        _ => false,
    }
}

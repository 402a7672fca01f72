//! The etcd-like store: one global resourceVersion, per-resource ordered maps of
//! immutable serialized objects, and per-resource bounded change histories
//! that serve both watch replay and consistent paged reads at an older rv.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use hyper::body::Bytes;
use serde_json::Value;

use super::faults::Faults;
use super::gc::{Gc, GcMeta};
use super::json::{field_string, labels, meta_str};
use super::resources::{Allocator, KINDS, NAMESPACES, ResId};
use super::selectors::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::watch::{Msg, WatcherTx};

/// One stored object version. The JSON has no `kind`/`apiVersion` (list items
/// from the real server carry none); single objects get them spliced in.
#[derive(Debug)]
pub struct Stored {
    pub json: Bytes,
    pub rv: u64,
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// Values of the kind's extra field-selector keys, in `Kind::fields` order.
    pub fields: Box<[Box<str>]>,
    pub gc: GcMeta,
}

impl Stored {
    /// `obj` must already carry its final metadata (rv included) and no type fields.
    pub fn new(res: ResId, obj: &Value, rv: u64) -> Arc<Self> {
        Arc::new(Stored {
            json: Bytes::from(serde_json::to_vec(obj).expect("JSON values serialize")),
            rv,
            namespace: meta_str(obj, "namespace").into(),
            name: meta_str(obj, "name").into(),
            labels: labels(obj).into_boxed_slice(),
            fields: KINDS[res]
                .fields
                .iter()
                .map(|f| field_string(obj, f).into_boxed_str())
                .collect(),
            gc: GcMeta::of(obj),
        })
    }

    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("stored bytes are JSON")
    }

    /// The object with `kind` and `apiVersion`, as GET and watch return it.
    pub fn typed_bytes(&self, res: ResId) -> Vec<u8> {
        let prefix = KINDS[res].type_prefix();
        let mut out = Vec::with_capacity(prefix.len() + self.json.len());
        out.extend_from_slice(prefix.as_bytes());
        if self.json.len() <= 2 {
            out.pop(); // `{}`: drop the prefix's trailing comma
            out.push(b'}');
        } else {
            out.extend_from_slice(&self.json[1..]);
        }
        out
    }

    pub fn typed_value(&self, res: ResId) -> Value {
        serde_json::from_slice(&self.typed_bytes(res)).expect("stored bytes are JSON")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One committed write; `prev` is the object before it (for DELETED on
/// selector exit and for reads at an older rv).
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub ty: ChangeType,
    pub key: String,
    pub obj: Arc<Stored>,
    pub prev: Option<Arc<Stored>>,
}

#[derive(Default)]
pub struct Table {
    pub objects: BTreeMap<String, Arc<Stored>>,
    /// Changes kept for paged reads at an older rv (the newest `window` of
    /// them also serve watch replay).
    pub history: VecDeque<Arc<Change>>,
    /// The oldest rv one can still read at (etcd's compaction point).
    pub floor_rv: u64,
    pub watchers: Vec<WatcherTx>,
    /// The newest change of this resource a client has been sent: by a watch, as it hands the
    /// change to its response body, or by the last page of a list across namespaces.
    pub delivered: Arc<std::sync::atomic::AtomicU64>,
}

/// etcd's key order: `ns/name` for namespaced kinds, `name` otherwise.
pub fn key(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}/{name}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsState {
    Missing,
    Active,
    Terminating,
}

pub struct ListQuery<'a> {
    pub namespace: Option<&'a str>,
    pub labels: &'a LabelSelector,
    pub fields: &'a FieldSelector,
    pub limit: Option<usize>,
    /// Exclusive start key (from a continue token).
    pub after: Option<&'a str>,
    pub at_rv: u64,
}

pub struct Page {
    pub items: Vec<Arc<Stored>>,
    /// Last returned key when more keys follow in the range.
    pub more_after: Option<String>,
}

pub struct State {
    pub rv: u64,
    pub tables: Vec<Table>,
    pub alloc: Allocator,
    /// Changes per resource a watch can replay (the watch cache's size).
    pub window: usize,
    /// Changes per resource kept for consistent paged reads (etcd's
    /// compaction, which is by time upstream; by count here).
    pub retain: usize,
    pub auto_namespaces: bool,
    pub faults: Faults,
    pub gc: Gc,
    /// Creates keep a uid they carry, as a restore from a backup does (tests that load objects
    /// whose contents depend on uids).
    pub keep_uids: bool,
    /// A Service's deletion deletes its Endpoints, as kube-apiserver's Service storage does
    /// (default); off, they stay for another actor (or the endpoints controller) to delete.
    pub services_take_endpoints: bool,
}

impl State {
    pub fn new(window: usize, retain: usize, auto_namespaces: bool, auto_gc: bool) -> Self {
        State {
            rv: 1,
            tables: KINDS.iter().map(|_| Table::default()).collect(),
            alloc: Allocator::default(),
            window: window.min(retain),
            retain,
            auto_namespaces,
            faults: Faults::default(),
            gc: Gc::new(auto_gc),
            keep_uids: false,
            services_take_endpoints: true,
        }
    }

    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub fn get(&self, res: ResId, ns: &str, name: &str) -> Option<Arc<Stored>> {
        self.tables[res].objects.get(&key(ns, name)).cloned()
    }

    pub fn namespace_state(&self, ns: &str) -> NsState {
        match self.tables[NAMESPACES].objects.get(ns) {
            None => NsState::Missing,
            // The namespace kind's first extra field is status.phase.
            Some(s) if &*s.fields[0] == "Terminating" => NsState::Terminating,
            Some(_) => NsState::Active,
        }
    }

    /// Stores `obj` at `key` and records the change for watchers and old reads; then the
    /// garbage collector acts on it.
    pub fn put(&mut self, res: ResId, key: String, obj: Arc<Stored>) {
        let prev = self.tables[res].objects.insert(key.clone(), obj.clone());
        let ty = if prev.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.gc_changed(res, &key, prev.as_ref(), Some(&obj));
        self.record(res, ty, key, obj, prev);
        self.gc_run();
    }

    /// Removes `key`; `last` is the final state stamped with the deletion's rv. Then the
    /// garbage collector acts on it.
    pub fn remove(&mut self, res: ResId, key: &str, last: Arc<Stored>) {
        let prev = self.tables[res].objects.remove(key);
        self.gc_changed(res, key, prev.as_ref(), None);
        self.record(res, ChangeType::Deleted, key.to_owned(), last, prev);
        self.gc_run();
    }

    fn record(
        &mut self,
        res: ResId,
        ty: ChangeType,
        key: String,
        obj: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) {
        let change = Arc::new(Change {
            rv: obj.rv,
            ty,
            key,
            obj,
            prev,
        });
        let retain = self.retain;
        let table = &mut self.tables[res];
        table.history.push_back(change.clone());
        while table.history.len() > retain {
            if let Some(old) = table.history.pop_front() {
                table.floor_rv = old.rv;
            }
        }
        table
            .watchers
            .retain(|w| w.tx.send(Msg::Change(change.clone())).is_ok());
    }

    /// Ends every open watch, history kept: a client resumes where it was.
    pub fn drop_watches(&mut self) {
        for table in &mut self.tables {
            for w in table.watchers.drain(..) {
                w.kill();
            }
        }
    }

    /// Forgets every history (as an etcd compaction would) and ends every watch.
    pub fn compact_all(&mut self) {
        // Move the rv on first, so every rv a client holds is now too old.
        let rv = self.next_rv();
        for table in &mut self.tables {
            table.history.clear();
            table.floor_rv = rv;
            for w in table.watchers.drain(..) {
                w.kill();
            }
        }
    }

    /// Changes of `res` strictly after `rv`, or Expired when `rv` is compacted.
    pub fn changes_since(&self, res: ResId, rv: u64) -> Result<Vec<Arc<Change>>, ApiError> {
        let table = &self.tables[res];
        let len = table.history.len();
        let floor = match len.checked_sub(self.window + 1) {
            Some(i) => table.history[i].rv,
            None => table.floor_rv,
        };
        if rv < floor {
            return Err(ApiError::expired(format!(
                "too old resource version: {rv} ({floor})"
            )));
        }
        let start = table.history.partition_point(|c| c.rv <= rv);
        Ok(table.history.range(start..).cloned().collect())
    }

    /// One page of `res` as of `q.at_rv`: the current map, with every key
    /// touched after `at_rv` rolled back to its state before that first touch.
    pub fn list(&self, res: ResId, q: &ListQuery<'_>) -> Result<Page, ApiError> {
        let table = &self.tables[res];
        let mut overlay: BTreeMap<&str, Option<&Arc<Stored>>> = BTreeMap::new();
        if q.at_rv < self.rv {
            if q.at_rv < table.floor_rv {
                return Err(ApiError::expired(format!(
                    "too old resource version: {} ({})",
                    q.at_rv, table.floor_rv
                )));
            }
            let start = table.history.partition_point(|c| c.rv <= q.at_rv);
            for c in table.history.range(start..) {
                overlay.entry(c.key.as_str()).or_insert(c.prev.as_ref());
            }
        }
        let prefix = q
            .namespace
            .filter(|ns| !ns.is_empty())
            .map(|ns| format!("{ns}/"));
        let lower = match (q.after, &prefix) {
            (Some(after), _) => Bound::Excluded(after.to_owned()),
            (None, Some(p)) => Bound::Included(p.clone()),
            (None, None) => Bound::Unbounded,
        };
        let in_scope = |k: &str| prefix.as_deref().is_none_or(|p| k.starts_with(p));
        let mut current = table
            .objects
            .range::<String, _>((lower.clone(), Bound::Unbounded))
            .map(|(k, v)| (k.as_str(), Some(v)))
            .peekable();
        let lower_str = match &lower {
            Bound::Excluded(s) => Bound::Excluded(s.as_str()),
            Bound::Included(s) => Bound::Included(s.as_str()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut old = overlay
            .range::<&str, _>((lower_str, Bound::Unbounded))
            .map(|(k, v)| (*k, *v))
            .peekable();
        let limit = q.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<&str> = None;
        loop {
            // Merge the two ordered streams; the overlay wins on equal keys.
            let (k, v) = match (current.peek(), old.peek()) {
                (None, None) => break,
                (Some(_), None) => current.next().expect("peeked"),
                (None, Some(_)) => old.next().expect("peeked"),
                (Some((ck, _)), Some((ok, _))) => {
                    if ck < ok {
                        current.next().expect("peeked")
                    } else {
                        if ck == ok {
                            current.next();
                        }
                        old.next().expect("peeked")
                    }
                }
            };
            if !in_scope(k) {
                break;
            }
            let Some(obj) = v else { continue };
            if items.len() == limit {
                return Ok(Page {
                    items,
                    more_after: last_key.map(str::to_owned),
                });
            }
            last_key = Some(k);
            if q.labels.matches(&obj.labels)
                && q.fields.matches(&obj.namespace, &obj.name, &obj.fields)
            {
                items.push(obj.clone());
            }
        }
        Ok(Page {
            items,
            more_after: None,
        })
    }

    /// Every object of `res` in `ns` ("" = all), current state.
    pub fn all(&self, res: ResId, ns: &str) -> Vec<Arc<Stored>> {
        let (ls, fs) = (LabelSelector::default(), FieldSelector::default());
        let q = ListQuery {
            namespace: Some(ns),
            labels: &ls,
            fields: &fs,
            limit: None,
            after: None,
            at_rv: self.rv,
        };
        self.list(res, &q).map(|p| p.items).unwrap_or_default()
    }
}

//! The garbage collector of kube-controller-manager, as upstream's graph builder and
//! attemptToDeleteItem / orphanDependents / processDeletingDependentsItem behave: an object whose
//! owners are all gone is deleted; one with a live owner loses its references to gone ones;
//! `Orphan` strips the owner from its dependents; `Foreground` holds the owner until its blocking
//! dependents are gone. It runs under the store lock right after the write that calls for it, so
//! each of its writes is an ordinary change (own rv, own watch event) that follows the cause's.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};

use super::json::set_meta;
use super::resources::{KINDS, ResId, by_type};
use super::store::{State, Stored, key};
use super::writes::{Origin, WriteCtx};

pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

/// The collector is an API client like any other; its requests are not in the request log.
const GC: WriteCtx = WriteCtx {
    origin: Origin::Http,
    dry_run: false,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: Box<str>,
    pub kind: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub block: bool,
}

/// What the collector reads of a stored object, parsed once when it is stored.
#[derive(Debug, Default)]
pub struct GcMeta {
    pub uid: Box<str>,
    pub owners: Box<[OwnerRef]>,
    pub deleting: bool,
    pub orphan: bool,
    pub foreground: bool,
}

impl GcMeta {
    pub fn of(obj: &Value) -> Self {
        let Some(meta) = obj.get("metadata") else {
            return GcMeta::default();
        };
        let text = |v: &Value, k: &str| -> Box<str> {
            v.get(k).and_then(Value::as_str).unwrap_or("").into()
        };
        let owners = meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerRef {
                        api_version: text(r, "apiVersion"),
                        kind: text(r, "kind"),
                        name: text(r, "name"),
                        uid: text(r, "uid"),
                        block: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let finalizer = |f: &str| {
            meta.get("finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == f))
        };
        GcMeta {
            uid: text(meta, "uid"),
            owners,
            deleting: meta.get("deletionTimestamp").is_some(),
            orphan: finalizer(ORPHAN),
            foreground: finalizer(FOREGROUND),
        }
    }

    fn waits_for_dependents(&self) -> bool {
        self.deleting && self.foreground
    }

    fn has_gc_work(&self) -> bool {
        self.deleting && (self.orphan || self.foreground)
    }
}

#[derive(Debug)]
enum Task {
    /// The object with this uid is gone: its dependents may be garbage.
    OwnerGone(Box<str>),
    /// attemptToDeleteItem: the object at this key may have lost its owners.
    Attempt(ResId, String),
    /// An object being deleted with the orphan or foregroundDeletion finalizer.
    Owner(ResId, String),
}

#[derive(Debug)]
pub struct Gc {
    /// Acts right after every write; off, only on a sweep.
    pub auto: bool,
    sweeping: bool,
    running: bool,
    queue: VecDeque<Task>,
    /// Owner uid → the (resource, key) of every object naming it.
    dependents: HashMap<Box<str>, BTreeSet<(ResId, String)>>,
}

impl Gc {
    pub fn new(auto: bool) -> Self {
        Gc {
            auto,
            sweeping: false,
            running: false,
            queue: VecDeque::new(),
            dependents: HashMap::new(),
        }
    }

    fn active(&self) -> bool {
        self.auto || self.sweeping
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    Solid,
    Dangling,
    Waiting,
}

fn owners(s: Option<&Arc<Stored>>) -> &[OwnerRef] {
    s.map_or(&[], |s| &s.gc.owners)
}

impl State {
    /// The graph builder: keeps the owner index and queues the collector's work for a change
    /// about to be recorded (`now` is None for a removal).
    pub(super) fn gc_changed(
        &mut self,
        res: ResId,
        key: &str,
        prev: Option<&Arc<Stored>>,
        now: Option<&Arc<Stored>>,
    ) {
        let (before, after) = (owners(prev), owners(now));
        let refs_changed = before != after;
        if refs_changed {
            for r in before {
                if let Some(set) = self.gc.dependents.get_mut(&r.uid) {
                    set.remove(&(res, key.to_owned()));
                    if set.is_empty() {
                        self.gc.dependents.remove(&r.uid);
                    }
                }
            }
            for r in after {
                let set = self.gc.dependents.entry(r.uid.clone()).or_default();
                set.insert((res, key.to_owned()));
            }
        }
        if !self.gc.active() {
            return;
        }
        match (prev, now) {
            (Some(gone), None) => {
                self.gc
                    .queue
                    .push_back(Task::OwnerGone(gone.gc.uid.clone()));
                for r in before {
                    self.queue_if_waiting(&gone.namespace, r);
                }
            }
            (_, Some(obj)) => {
                if refs_changed {
                    if !after.is_empty() {
                        self.gc.queue.push_back(Task::Attempt(res, key.to_owned()));
                    }
                    for r in before.iter().filter(|r| !after.contains(r)) {
                        self.queue_if_waiting(&obj.namespace, r);
                    }
                }
                let was = prev.is_some_and(|p| {
                    p.gc.has_gc_work()
                        && (p.gc.orphan, p.gc.foreground) == (obj.gc.orphan, obj.gc.foreground)
                });
                if obj.gc.has_gc_work() && !was {
                    self.gc.queue.push_back(Task::Owner(res, key.to_owned()));
                }
            }
            (None, None) => {}
        }
    }

    /// Runs queued work to the end, unless already running (the collector's own writes queue
    /// more) or off.
    pub(super) fn gc_run(&mut self) {
        if self.gc.running || !self.gc.active() {
            return;
        }
        self.gc.running = true;
        while let Some(task) = self.gc.queue.pop_front() {
            match task {
                Task::OwnerGone(uid) => {
                    for (res, key) in self.dependents_of(&uid) {
                        self.gc.queue.push_back(Task::Attempt(res, key));
                    }
                }
                Task::Attempt(res, key) => self.attempt(res, &key),
                Task::Owner(res, key) => self.owner_being_deleted(res, &key),
            }
        }
        self.gc.running = false;
    }

    /// A full pass, as a collector that lagged behind would make on catching up.
    pub fn gc_sweep(&mut self) {
        self.gc.sweeping = true;
        for (res, table) in self.tables.iter().enumerate() {
            for (key, obj) in &table.objects {
                if obj.gc.has_gc_work() {
                    self.gc.queue.push_back(Task::Owner(res, key.clone()));
                }
                if !obj.gc.owners.is_empty() {
                    self.gc.queue.push_back(Task::Attempt(res, key.clone()));
                }
            }
        }
        self.gc_run();
        self.gc.sweeping = false;
    }

    /// While a change is held back (the namespace controller's purge), work only queues.
    pub(super) fn gc_hold(&mut self, hold: bool) {
        self.gc.running = hold;
    }

    fn dependents_of(&self, uid: &str) -> Vec<(ResId, String)> {
        self.gc
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn current(&self, res: ResId, key: &str) -> Option<Arc<Stored>> {
        self.tables[res].objects.get(key).cloned()
    }

    /// The owner a reference names, looked up by kind and name in the dependent's namespace
    /// (or cluster-wide for a cluster-scoped kind). None when it cannot be: a kind the fake does
    /// not serve, or a namespaced owner of a cluster-scoped dependent.
    fn resolve(&self, ns: &str, r: &OwnerRef) -> Option<(ResId, String)> {
        let res = by_type(&r.api_version, &r.kind)?;
        match (KINDS[res].namespaced, ns.is_empty()) {
            (true, true) => None,
            (true, false) => Some((res, key(ns, &r.name))),
            (false, _) => Some((res, key("", &r.name))),
        }
    }

    fn owner_state(&self, ns: &str, r: &OwnerRef) -> OwnerState {
        // An unresolvable reference: upstream retries or warns, and never collects.
        let Some((res, key)) = self.resolve(ns, r) else {
            return OwnerState::Solid;
        };
        match self.current(res, &key) {
            Some(o) if o.gc.uid == r.uid && o.gc.waits_for_dependents() => OwnerState::Waiting,
            Some(o) if o.gc.uid == r.uid => OwnerState::Solid,
            _ => OwnerState::Dangling,
        }
    }

    fn queue_if_waiting(&mut self, ns: &str, r: &OwnerRef) {
        if self.owner_state(ns, r) == OwnerState::Waiting
            && let Some((res, key)) = self.resolve(ns, r)
        {
            self.gc.queue.push_back(Task::Owner(res, key));
        }
    }

    /// attemptToDeleteItem.
    fn attempt(&mut self, res: ResId, key: &str) {
        let Some(obj) = self.current(res, key) else {
            return;
        };
        // Being deleted already: an Owner task carries a foreground deletion on.
        if obj.gc.deleting || obj.gc.owners.is_empty() {
            return;
        }
        let states: Vec<OwnerState> = obj
            .gc
            .owners
            .iter()
            .map(|r| self.owner_state(&obj.namespace, r))
            .collect();
        if states.contains(&OwnerState::Solid) {
            if states.iter().any(|s| *s != OwnerState::Solid) {
                let keep: Vec<bool> = states.iter().map(|s| *s == OwnerState::Solid).collect();
                self.rewrite_owners(res, &obj, |i, _| keep[i]);
            }
            return;
        }
        let waiting = states.contains(&OwnerState::Waiting);
        let policy = if waiting && !self.dependents_of(&obj.gc.uid).is_empty() {
            // A dependent that waits on this one would deadlock: unblock its owners first.
            let cycle = self.dependents_of(&obj.gc.uid).iter().any(|(r, k)| {
                self.current(*r, k)
                    .is_some_and(|d| d.gc.waits_for_dependents())
            });
            if cycle {
                self.rewrite_owners(res, &obj, |_, r| {
                    if let Some(m) = r.as_object_mut()
                        && m.get("blockOwnerDeletion") == Some(&json!(true))
                    {
                        m.insert("blockOwnerDeletion".into(), json!(false));
                    }
                    true
                });
            }
            "Foreground"
        } else if obj.gc.orphan {
            "Orphan"
        } else if obj.gc.foreground {
            "Foreground"
        } else {
            "Background"
        };
        let opts = json!({"propagationPolicy": policy, "preconditions": {"uid": &*obj.gc.uid}});
        let _ = self.delete(res, &obj.namespace, &obj.name, &opts, GC);
    }

    /// orphanDependents, or processDeletingDependentsItem.
    fn owner_being_deleted(&mut self, res: ResId, key: &str) {
        let Some(obj) = self.current(res, key) else {
            return;
        };
        if !obj.gc.has_gc_work() {
            return;
        }
        let uid = obj.gc.uid.clone();
        let deps = self.dependents_of(&uid);
        if obj.gc.orphan {
            for (dres, dkey) in deps {
                if let Some(d) = self.current(dres, &dkey) {
                    let mine: Vec<bool> = d.gc.owners.iter().map(|r| r.uid == uid).collect();
                    self.rewrite_owners(dres, &d, |i, _| !mine[i]);
                }
            }
            self.drop_finalizer(res, key, ORPHAN);
            return;
        }
        let blocking = deps.iter().any(|(dres, dkey)| {
            self.current(*dres, dkey)
                .is_some_and(|d| d.gc.owners.iter().any(|r| r.uid == uid && r.block))
        });
        for (dres, dkey) in deps {
            self.gc.queue.push_back(Task::Attempt(dres, dkey));
        }
        if !blocking {
            self.drop_finalizer(res, key, FOREGROUND);
        }
    }

    /// Updates `obj` keeping the owner references `keep` accepts (it may edit them).
    fn rewrite_owners(
        &mut self,
        res: ResId,
        obj: &Stored,
        mut keep: impl FnMut(usize, &mut Value) -> bool,
    ) {
        let mut v = obj.value();
        let mut refs = v["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut i = 0;
        refs.retain_mut(|r| {
            i += 1;
            keep(i - 1, r)
        });
        set_meta(
            &mut v,
            "ownerReferences",
            (!refs.is_empty()).then(|| json!(refs)),
        );
        let _ = self.update(res, &obj.namespace, &obj.name, v, false, GC);
    }

    fn drop_finalizer(&mut self, res: ResId, key: &str, finalizer: &str) {
        let Some(obj) = self.current(res, key) else {
            return;
        };
        let mut v = obj.value();
        if let Some(list) = v["metadata"]["finalizers"].as_array_mut() {
            list.retain(|f| f != finalizer);
        }
        let _ = self.update(res, &obj.namespace, &obj.name, v, false, GC);
    }
}

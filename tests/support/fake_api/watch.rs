//! Watch streams: replay from the history window (or the current state),
//! then live changes, as newline-delimited JSON events; bookmarks; 410 on
//! a compacted rv; timeouts; and the cacher's selector-transition rules.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::Stream;
use hyper::body::{Bytes, Frame};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::json::set_meta;
use super::resources::{KINDS, ResId};
use super::selectors::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Change, ChangeType, State, Stored};

pub type Shared = Arc<Mutex<State>>;

pub enum Msg {
    Change(Arc<Change>),
    Bookmark(u64),
}

/// The store's end of one open watch.
pub struct WatcherTx {
    pub tx: mpsc::UnboundedSender<Msg>,
    killed: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl WatcherTx {
    /// Ends the stream at once, dropping whatever it had not sent yet.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

pub enum Start {
    /// Synthetic ADDED for the current state first; `end_bookmark` adds the
    /// `k8s.io/initial-events-end` bookmark (sendInitialEvents).
    State {
        end_bookmark: bool,
    },
    After(u64),
}

pub struct WatchSpec {
    pub res: ResId,
    pub namespace: String,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub start: Start,
    pub bookmark_every: Duration,
    /// Asked for as protobuf: each event a length-framed `WatchEvent`.
    pub protobuf: bool,
}

enum Item {
    Added(Arc<Stored>),
    Change(Arc<Change>),
    InitialEnd(u64),
    Error(Value),
}

struct Watch {
    shared: Shared,
    spec: WatchSpec,
    backlog: VecDeque<Item>,
    rx: Option<mpsc::UnboundedReceiver<Msg>>,
    killed: Arc<AtomicBool>,
    wake: Arc<Notify>,
    delivered: Arc<AtomicU64>,
    deadline: Option<Instant>,
    next_bookmark: Instant,
    done: bool,
}

/// Registers a watch under the store lock (so nothing slips between the
/// replayed part and the live part) and returns its event stream.
pub fn start(
    shared: &Shared,
    state: &mut State,
    spec: WatchSpec,
) -> Result<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static, ApiError> {
    let mut backlog = VecDeque::new();
    let mut expired = false;
    match spec.start {
        Start::After(rv) if rv > state.rv => return Err(ApiError::too_large_rv(rv, state.rv)),
        Start::After(rv) => match state.changes_since(spec.res, rv) {
            Ok(changes) => backlog.extend(changes.into_iter().map(Item::Change)),
            Err(e) => {
                // The real server answers 200 and sends the 410 as an ERROR event.
                backlog.push_back(Item::Error(e.to_status()));
                expired = true;
            }
        },
        Start::State { end_bookmark } => {
            let ns = spec.namespace.as_str();
            for obj in state.all(spec.res, ns) {
                backlog.push_back(Item::Added(obj));
            }
            if end_bookmark {
                backlog.push_back(Item::InitialEnd(state.rv));
            }
        }
    }
    let killed = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Notify::new());
    let rx = if expired {
        None
    } else {
        let (tx, rx) = mpsc::unbounded_channel();
        state.tables[spec.res].watchers.push(WatcherTx {
            tx,
            killed: killed.clone(),
            wake: wake.clone(),
        });
        Some(rx)
    };
    let now = Instant::now();
    let watch = Watch {
        shared: shared.clone(),
        delivered: state.tables[spec.res].delivered.clone(),
        deadline: spec.timeout.map(|t| now + t),
        next_bookmark: now + spec.bookmark_every,
        spec,
        backlog,
        rx,
        killed,
        wake,
        done: false,
    };
    Ok(futures::stream::unfold(watch, |mut w| async move {
        let line = w.next_line().await?;
        Some((Ok(Frame::data(line)), w))
    }))
}

impl WatchSpec {
    fn passes(&self, obj: &Stored) -> bool {
        (self.namespace.is_empty() || *obj.namespace == *self.namespace)
            && self.labels.matches(&obj.labels)
            && self.fields.matches(&obj.namespace, &obj.name, &obj.fields)
    }

    fn event(&self, ty: &str, obj: &Stored) -> Bytes {
        let body = obj.typed_bytes(self.res);
        if self.protobuf {
            let object = super::protobuf_objects::object_of(KINDS[self.res].plural, &body);
            return Bytes::from(super::protobuf_objects::watch_frame(ty, object));
        }
        let mut out = Vec::with_capacity(body.len() + 32);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&body);
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    /// The cacher's rules: entering the selector is ADDED, leaving it is
    /// DELETED (old object at the new rv), staying is MODIFIED.
    fn encode_change(&self, c: &Change) -> Option<Bytes> {
        let cur = c.ty != ChangeType::Deleted && self.passes(&c.obj);
        let old = match c.ty {
            ChangeType::Deleted => self.passes(&c.obj),
            _ => c.prev.as_deref().is_some_and(|p| self.passes(p)),
        };
        match (cur, old) {
            (true, false) => Some(self.event("ADDED", &c.obj)),
            (true, true) => Some(self.event("MODIFIED", &c.obj)),
            (false, true) if c.ty == ChangeType::Deleted => Some(self.event("DELETED", &c.obj)),
            (false, true) => {
                let prev = c.prev.as_ref().expect("old passed, so it exists");
                let mut v = prev.value();
                set_meta(&mut v, "resourceVersion", Some(json!(c.rv.to_string())));
                Some(self.event("DELETED", &Stored::new(self.res, &v, c.rv)))
            }
            (false, false) => None,
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        if self.protobuf {
            let mut annotations = std::collections::BTreeMap::new();
            if initial_end {
                annotations.insert("k8s.io/initial-events-end".to_string(), "true".to_string());
            }
            let k = &KINDS[self.res];
            let object = super::protobuf_objects::bookmark(
                &k.api_version(),
                k.kind,
                &rv.to_string(),
                annotations,
            );
            return Bytes::from(super::protobuf_objects::watch_frame("BOOKMARK", object));
        }
        let k = &KINDS[self.res];
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let ev = json!({
            "type": "BOOKMARK",
            "object": {"kind": k.kind, "apiVersion": k.api_version(), "metadata": meta},
        });
        let mut out = serde_json::to_vec(&ev).expect("JSON serializes");
        out.push(b'\n');
        Bytes::from(out)
    }
}

impl Watch {
    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if self.done || self.killed.load(Ordering::SeqCst) {
                return None;
            }
            if let Some(item) = self.backlog.pop_front() {
                let spec = &self.spec;
                let line = match item {
                    Item::Added(obj) => spec.passes(&obj).then(|| spec.event("ADDED", &obj)),
                    Item::Change(c) => {
                        self.delivered.fetch_max(c.rv, Ordering::Relaxed);
                        spec.encode_change(&c)
                    }
                    Item::InitialEnd(rv) => Some(spec.bookmark(rv, true)),
                    Item::Error(status) if spec.protobuf => {
                        self.done = true;
                        let text = |f: &str| status[f].as_str().unwrap_or_default().to_string();
                        let code = status["code"].as_i64().unwrap_or(500) as i32;
                        let object = super::protobuf_objects::status_object(
                            code,
                            &text("reason"),
                            &text("message"),
                        );
                        Some(Bytes::from(super::protobuf_objects::watch_frame(
                            "ERROR", object,
                        )))
                    }
                    Item::Error(status) => {
                        self.done = true;
                        let ev = json!({"type": "ERROR", "object": status});
                        let mut out = serde_json::to_vec(&ev).expect("JSON serializes");
                        out.push(b'\n');
                        Some(Bytes::from(out))
                    }
                };
                match line {
                    Some(l) => return Some(l),
                    None => continue,
                }
            }
            let rx = self.rx.as_mut()?;
            let far = Instant::now() + Duration::from_secs(86_400);
            let deadline = self.deadline.unwrap_or(far);
            let tick = if self.spec.bookmarks {
                self.next_bookmark
            } else {
                far
            };
            tokio::select! {
                biased;
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(deadline) => return None,
                msg = rx.recv() => match msg {
                    None => return None,
                    Some(Msg::Change(c)) => {
                        self.delivered.fetch_max(c.rv, Ordering::Relaxed);
                        if let Some(line) = self.spec.encode_change(&c) {
                            return Some(line);
                        }
                    }
                    Some(Msg::Bookmark(rv)) if self.spec.bookmarks => return Some(self.spec.bookmark(rv, false)),
                    Some(Msg::Bookmark(_)) => {}
                },
                _ = tokio::time::sleep_until(tick) => {
                    self.next_bookmark = Instant::now() + self.spec.bookmark_every;
                    // Under the lock an empty queue means every change up to
                    // the current rv was already sent, so the bookmark is true.
                    let rv = {
                        let state = self.shared.lock();
                        rx.is_empty().then_some(state.rv)
                    };
                    if let Some(rv) = rv {
                        return Some(self.spec.bookmark(rv, false));
                    }
                }
            }
        }
    }
}

/// Queues an on-demand bookmark at the current rv on every open watch.
pub fn bookmark_all(state: &mut State) {
    let rv = state.rv;
    for table in &mut state.tables {
        table
            .watchers
            .retain(|w| w.tx.send(Msg::Bookmark(rv)).is_ok());
    }
}

pub fn open_watches(state: &mut State) -> usize {
    state
        .tables
        .iter_mut()
        .map(|t| {
            t.watchers.retain(|w| !w.tx.is_closed());
            t.watchers.len()
        })
        .sum()
}

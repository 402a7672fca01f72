//! Watches of the kinds the engine reads, turned into engine input. Objects are converted into
//! the compact model as they arrive and the API types dropped at once, so that nothing but the
//! index holds the cluster.
//!
//! The list-then-watch loop is sliced's own rather than kube-runtime's watcher: the watcher
//! resumes a watch that ended or broke without a word to its caller, so a restart of the API
//! server that the watches ride out at the same resourceVersion could not be counted.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1 as core;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::convert::{ConvertError, namespace_from_k8s, service_from_k8s};
use super::protobuf_source::{Decoded, ProtobufSource};
use crate::change::{Change, ChangeKind};
use crate::controllers::Controllers;
use crate::metrics::PlainCounter;
use crate::model::{EndpointSlice, Endpoints, Name, Node, Pod};

/// What the watches tell the engine's thread, in the order each watch saw it.
#[derive(Debug)]
pub enum Input {
    Change(Change),
    /// Every address pool, the cluster's and the files', whenever the cluster's change.
    Pools(Vec<crate::reconcile::load_balancer::pools::Pool>),
    /// A full list of `kind` has been delivered. `seen` holds every listed object when the list
    /// replaced an earlier one (a relist after the watch expired): stored objects missing from it
    /// were deleted meanwhile. The first list has nothing to compare with.
    Listed {
        kind: ChangeKind,
        seen: Option<HashSet<(Name, Name)>>,
    },
    /// An object could not be read: it is ignored, and the version already held, if any, kept.
    Invalid {
        kind: ChangeKind,
        object: String,
        error: ConvertError,
    },
    /// A request of the watch failed; it is resumed or relisted after `retry_in`.
    WatchError {
        kind: ChangeKind,
        /// What was being done: `list`, `watch` (starting one), `watch stream`.
        request: &'static str,
        /// The error and its causes.
        message: String,
        retry_in: Duration,
    },
}

/// A request to the API server that failed or went unanswered.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("no answer from the API server within {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl RequestError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, RequestError::Api(kube::Error::Api(s)) if s.code == 409)
    }

    fn is_expired(&self) -> bool {
        matches!(self, RequestError::Api(e) if is_expired(e))
    }
}

/// `fut`, given up after `limit`: a server that accepts connections and never answers must not
/// hold anything up for ever.
pub async fn within<T>(
    limit: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, RequestError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result.map_err(RequestError::Api),
        Err(_) => Err(RequestError::TimedOut(limit)),
    }
}

/// An error and its causes on one line, each said once: kube's errors hide the cause
/// ("client error (Connect)") in their sources ("Connection refused").
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// Counters a watch keeps as it goes.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Objects delivered (listed or watched).
    pub events: PlainCounter,
    /// Restarts after the first list: once per outage (an error, a watch the server ended early,
    /// an expired resource version), whether the watch then relists or resumes where it was.
    pub restarts: PlainCounter,
}

/// The kinds the given controllers read.
pub fn watched_kinds(controllers: Controllers) -> Vec<ChangeKind> {
    let mut kinds = vec![ChangeKind::Node, ChangeKind::Service, ChangeKind::Pod];
    if controllers.endpointslice || controllers.mirroring {
        kinds.push(ChangeKind::EndpointSlice);
    }
    if controllers.endpoints || controllers.mirroring {
        kinds.push(ChangeKind::Endpoints);
    }
    // Address pools may select namespaces by label.
    if controllers.load_balancer {
        kinds.push(ChangeKind::Namespace);
    }
    kinds
}

/// Where a watch lists and watches from: kube-rs's typed API (JSON), or the pod watch's own
/// requests (`protobuf_source.rs`: protobuf when the server offers it).
pub trait Source<K: Clone>: Send + Sync {
    fn list(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = Result<ObjectList<K>, kube::Error>> + Send;

    fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> impl Future<Output = Result<BoxStream<'static, kube::Result<WatchEvent<K>>>, kube::Error>> + Send;
}

impl<K> Source<K> for Api<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        Api::list(self, params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> Result<BoxStream<'static, kube::Result<WatchEvent<K>>>, kube::Error> {
        Ok(Api::watch(self, params, version).await?.boxed())
    }
}

/// Starts a watch of `kind` on the current tokio runtime, feeding `out` until it is closed. Each
/// list page and each watch request gets an answer within `request_timeout` or is retried.
pub fn spawn(
    client: Client,
    kind: ChangeKind,
    page_size: u32,
    request_timeout: Duration,
    out: Sender<Input>,
    counters: Counters,
) -> tokio::task::JoinHandle<()> {
    let feed = Feed {
        kind,
        out,
        counters,
        request_timeout,
    };
    match kind {
        ChangeKind::Service => tokio::spawn(watch::<core::Service, _>(
            Api::<core::Service>::all(client),
            page_size,
            feed,
            |s| service_from_k8s(s).map(Change::Service),
        )),
        // The rest are asked for as protobuf, as client-go's controllers ask, and converted as
        // they are decoded: pods are most of a cluster's bytes, and the slices and Endpoints
        // watched are mostly sliced's own writes coming back.
        ChangeKind::Pod => tokio::spawn(watch::<Decoded<Pod>, _>(
            ProtobufSource::new(client),
            page_size,
            feed,
            |p| p.take().map(Change::Pod),
        )),
        ChangeKind::Node => tokio::spawn(watch::<Decoded<Node>, _>(
            ProtobufSource::new(client),
            page_size,
            feed,
            |n| n.take().map(Change::Node),
        )),
        ChangeKind::EndpointSlice => tokio::spawn(watch::<Decoded<EndpointSlice>, _>(
            ProtobufSource::new(client),
            page_size,
            feed,
            |s| s.take().map(|s| Change::EndpointSlice(Arc::new(s))),
        )),
        ChangeKind::Endpoints => tokio::spawn(watch::<Decoded<Endpoints>, _>(
            ProtobufSource::new(client),
            page_size,
            feed,
            |e| e.take().map(|e| Change::Endpoints(Arc::new(e))),
        )),
        // Watched for the service controller's address pools only: for the endpoint
        // controllers, the API server refuses creates in a terminating namespace, and the sink
        // reports it.
        ChangeKind::Namespace => tokio::spawn(watch::<core::Namespace, _>(
            Api::<core::Namespace>::all(client),
            page_size,
            feed,
            |n| namespace_from_k8s(n).map(Change::Namespace),
        )),
    }
}

/// How long the server keeps a watch open before it ends it (client-go's and kube-runtime's).
const WATCH_TIMEOUT: Duration = Duration::from_secs(290);
/// A watch that ended this much sooner than asked was cut short: the server went away (a
/// restart, a connection lost), not a timeout.
const EARLY_END_MARGIN: Duration = Duration::from_secs(5);
/// No event or bookmark for the timeout and this much more: the connection is dead.
const IDLE_MARGIN: Duration = Duration::from_secs(5);
/// A watch stream open this long was working, whatever it delivered: a failure after it is
/// another outage. (A server that answers a resume with 410 does so at once.)
const WORKED_AFTER: Duration = Duration::from_secs(5);
/// The retry delays after failures: kube-runtime's default backoff.
const BACKOFF_MIN: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Where a watch delivers.
struct Feed {
    kind: ChangeKind,
    out: Sender<Input>,
    counters: Counters,
    request_timeout: Duration,
}

/// The engine's thread has gone: the watch stops.
struct Closed;

impl Feed {
    fn send(&self, input: Input) -> Result<(), Closed> {
        self.out.send(input).map_err(|_| Closed)
    }

    fn error(&self, failure: Failure, retry_in: Duration) -> Result<(), Closed> {
        self.send(Input::WatchError {
            kind: self.kind,
            request: failure.request,
            message: failure.message,
            retry_in,
        })
    }

    fn object<K: Resource>(
        &self,
        object: &K,
        convert: &impl Fn(&K) -> Result<Change, ConvertError>,
    ) -> Result<(), Closed> {
        self.counters.events.inc();
        let input = match convert(object) {
            Ok(change) => Input::Change(change),
            Err(error) => {
                let (namespace, name) = key_of(object);
                Input::Invalid {
                    kind: self.kind,
                    object: if namespace.is_empty() {
                        name.to_string()
                    } else {
                        format!("{namespace}/{name}")
                    },
                    error,
                }
            }
        };
        self.send(input)
    }

    fn deleted<K: Resource>(&self, object: &K) -> Result<(), Closed> {
        self.counters.events.inc();
        let (namespace, name) = key_of(object);
        let uid = object
            .meta()
            .uid
            .as_deref()
            .map(Name::new)
            .unwrap_or_default();
        self.send(Input::Change(Change::deleted_with_uid(
            self.kind, namespace, name, uid,
        )))
    }
}

fn key_of<K: Resource>(object: &K) -> (Name, Name) {
    let meta = object.meta();
    (
        meta.namespace.as_deref().map(Name::new).unwrap_or_default(),
        meta.name.as_deref().map(Name::new).unwrap_or_default(),
    )
}

/// Counts a watch's restarts: once per outage, from the end of its first list on. An outage
/// begins with any failure and ends when the watch is seen working again (an event, a bookmark,
/// a list, a stream that lasted): the retries, relists and failed resumes in between are the
/// same restart.
#[derive(Debug)]
struct Restarts {
    counter: PlainCounter,
    listed: bool,
    down: bool,
}

impl Restarts {
    fn new(counter: PlainCounter) -> Self {
        Restarts {
            counter,
            listed: false,
            down: false,
        }
    }

    /// The watch failed. Returns whether this begins an outage (and was counted, after the
    /// first list).
    fn failed(&mut self) -> bool {
        let begins = !self.down;
        if begins && self.listed {
            self.counter.inc();
        }
        self.down = true;
        begins
    }

    fn working(&mut self) {
        self.down = false;
    }

    fn listed(&mut self) {
        self.listed = true;
        self.down = false;
    }
}

/// Exponential delays with jitter, from `BACKOFF_MIN` up to `BACKOFF_MAX`.
struct Backoff {
    next: Duration,
    rng: crate::sim::Rng,
}

impl Backoff {
    fn new(kind: ChangeKind) -> Self {
        // Seeded apart per process and kind: replicas and watches that failed together do not
        // all retry together.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seed = kind
            .as_str()
            .bytes()
            .chain(std::process::id().to_le_bytes())
            .fold(now ^ 0x9e37_79b9_7f4a_7c15, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        Backoff {
            next: BACKOFF_MIN,
            rng: crate::sim::Rng::new(seed),
        }
    }

    fn reset(&mut self) {
        self.next = BACKOFF_MIN;
    }

    /// The next delay, jittered, and the one after doubled.
    fn delay(&mut self) -> Duration {
        let delay = self.next.mul_f64(0.5 + self.rng.unit()).min(BACKOFF_MAX);
        // Whole milliseconds: they read better in the log.
        let delay = Duration::from_millis(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        self.next = self.next.saturating_mul(2).min(BACKOFF_MAX);
        delay
    }
}

/// A failed request of a watch: which, and why.
struct Failure {
    request: &'static str,
    message: String,
}

impl Failure {
    fn new(request: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            request,
            message: message.into(),
        }
    }
}

/// Tells the engine's thread of the failure (which logs it once), then waits `delay`.
async fn report(feed: &Feed, failure: Failure, delay: Duration) -> Result<(), Closed> {
    feed.error(failure, delay)?;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    Ok(())
}

/// How a watch request's stream ended.
enum Ended {
    /// At the server's timeout: resume where it was.
    Normally,
    /// Cut short, broken or silent: resume from the resource version held.
    Resume(Failure),
    /// The resource version is too old (410), or an event carried none: list again.
    Relist(Failure),
}

/// How a list ended.
enum Listing {
    /// Every object delivered; the watch starts at this resource version.
    Done(String),
    Failed(Failure),
}

fn is_expired(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 410)
}

async fn watch<K, S>(
    source: S,
    page_size: u32,
    feed: Feed,
    convert: impl Fn(&K) -> Result<Change, ConvertError> + Send + Sync + 'static,
) where
    K: Resource + Clone + Send + 'static,
    S: Source<K>,
{
    // Ends when the engine's thread has gone.
    let _closed: Result<(), Closed> = list_and_watch(&source, page_size, &feed, &convert).await;
}

async fn list_and_watch<K, S>(
    source: &S,
    page_size: u32,
    feed: &Feed,
    convert: &(impl Fn(&K) -> Result<Change, ConvertError> + Sync),
) -> Result<(), Closed>
where
    K: Resource + Clone + Send + 'static,
    S: Source<K>,
{
    let mut restarts = Restarts::new(feed.counters.restarts.clone());
    let mut backoff = Backoff::new(feed.kind);
    let mut lists = 0u64;
    // Where the watch resumes; none: list first.
    let mut resume: Option<String> = None;
    let params = WatchParams {
        bookmarks: true,
        timeout: u32::try_from(WATCH_TIMEOUT.as_secs()).ok(),
        ..WatchParams::default()
    };
    loop {
        let mut version = match resume.take() {
            Some(version) => version,
            None => {
                if lists > 0 {
                    restarts.failed();
                }
                match list(source, page_size, lists > 0, feed, convert).await? {
                    Listing::Done(version) => {
                        lists += 1;
                        restarts.listed();
                        backoff.reset();
                        version
                    }
                    Listing::Failed(failure) => {
                        restarts.failed();
                        report(feed, failure, backoff.delay()).await?;
                        continue;
                    }
                }
            }
        };
        let stream = match within(feed.request_timeout, source.watch(&params, &version)).await {
            Ok(stream) => stream,
            Err(error) => {
                restarts.failed();
                if !error.is_expired() {
                    resume = Some(version);
                }
                report(
                    feed,
                    Failure::new("watch", describe(&error)),
                    backoff.delay(),
                )
                .await?;
                continue;
            }
        };
        let opened = Instant::now();
        let ended = read(stream, &mut version, feed, convert, &mut restarts).await?;
        if opened.elapsed() >= WORKED_AFTER {
            restarts.working();
        }
        match ended {
            Ended::Normally => {
                backoff.reset();
                resume = Some(version);
            }
            Ended::Resume(failure) => {
                // The first failure resumes at once (the server may be back already); another
                // before the watch worked again waits.
                let first = restarts.failed();
                let delay = if first {
                    Duration::ZERO
                } else {
                    backoff.delay()
                };
                report(feed, failure, delay).await?;
                resume = Some(version);
            }
            Ended::Relist(failure) => {
                restarts.failed();
                report(feed, failure, backoff.delay()).await?;
            }
        }
    }
}

/// Lists every object of the kind, page by page, into the feed.
async fn list<K, S>(
    source: &S,
    page_size: u32,
    relist: bool,
    feed: &Feed,
    convert: &(impl Fn(&K) -> Result<Change, ConvertError> + Sync),
) -> Result<Listing, Closed>
where
    K: Resource + Clone,
    S: Source<K>,
{
    let mut seen = relist.then(HashSet::new);
    let mut params = ListParams::default().limit(page_size);
    loop {
        let page = match within(feed.request_timeout, source.list(&params)).await {
            Ok(page) => page,
            Err(error) => return Ok(Listing::Failed(Failure::new("list", describe(&error)))),
        };
        for object in &page.items {
            if let Some(seen) = &mut seen {
                seen.insert(key_of(object));
            }
            feed.object(object, convert)?;
        }
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => {
                let Some(version) = page.metadata.resource_version.filter(|v| !v.is_empty()) else {
                    return Ok(Listing::Failed(Failure::new(
                        "list",
                        "the list carried no resourceVersion",
                    )));
                };
                feed.send(Input::Listed {
                    kind: feed.kind,
                    seen,
                })?;
                return Ok(Listing::Done(version));
            }
        }
    }
}

/// Reads one watch request's events into the feed until its stream ends; `version` follows
/// them.
async fn read<K>(
    mut stream: futures::stream::BoxStream<'static, kube::Result<WatchEvent<K>>>,
    version: &mut String,
    feed: &Feed,
    convert: &impl Fn(&K) -> Result<Change, ConvertError>,
    restarts: &mut Restarts,
) -> Result<Ended, Closed>
where
    K: Resource,
{
    let opened = Instant::now();
    let idle = WATCH_TIMEOUT + IDLE_MARGIN;
    loop {
        let Ok(item) = tokio::time::timeout(idle, stream.next()).await else {
            return Ok(Ended::Resume(Failure::new(
                "watch stream",
                format!("no event or bookmark for {} s", idle.as_secs()),
            )));
        };
        let event = match item {
            None if opened.elapsed() + EARLY_END_MARGIN >= WATCH_TIMEOUT => {
                return Ok(Ended::Normally);
            }
            None => {
                return Ok(Ended::Resume(Failure::new(
                    "watch stream",
                    "the API server ended the watch early",
                )));
            }
            // One event that does not decode spoils nothing else: the stream goes on.
            Some(Err(kube::Error::SerdeError(error))) => {
                tracing::warn!(
                    kind = feed.kind.as_str(),
                    error = %error,
                    "ignoring a watch event that cannot be decoded"
                );
                continue;
            }
            Some(Err(error)) if is_expired(&error) => {
                return Ok(Ended::Relist(Failure::new(
                    "watch stream",
                    describe(&error),
                )));
            }
            Some(Err(error)) => {
                return Ok(Ended::Resume(Failure::new(
                    "watch stream",
                    describe(&error),
                )));
            }
            Some(Ok(event)) => event,
        };
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                let Some(at) = resource_version(&object) else {
                    return Ok(Ended::Relist(Failure::new(
                        "watch stream",
                        "an event carried no resourceVersion",
                    )));
                };
                *version = at;
                restarts.working();
                feed.object(&object, convert)?;
            }
            WatchEvent::Deleted(object) => {
                let Some(at) = resource_version(&object) else {
                    return Ok(Ended::Relist(Failure::new(
                        "watch stream",
                        "an event carried no resourceVersion",
                    )));
                };
                *version = at;
                restarts.working();
                feed.deleted(&object)?;
            }
            WatchEvent::Bookmark(bookmark) => {
                *version = bookmark.metadata.resource_version;
                restarts.working();
            }
            WatchEvent::Error(status) if status.code == 410 => {
                return Ok(Ended::Relist(Failure::new("watch stream", status.message)));
            }
            WatchEvent::Error(status) => {
                return Ok(Ended::Resume(Failure::new(
                    "watch stream",
                    format!("{} ({})", status.message, status.code),
                )));
            }
        }
    }
}

fn resource_version<K: Resource>(object: &K) -> Option<String> {
    object
        .meta()
        .resource_version
        .clone()
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_outage_is_one_restart_however_many_retries() {
        let counter = PlainCounter::default();
        let mut restarts = Restarts::new(counter.clone());
        // Failures before the first list are not restarts.
        assert!(restarts.failed());
        restarts.listed();
        assert_eq!(counter.get(), 0);

        // An outage: the stream ends early, resumes fail, the resume is refused as expired, a
        // relist fails, a relist succeeds.
        assert!(restarts.failed());
        assert!(!restarts.failed());
        assert!(!restarts.failed());
        restarts.listed();
        assert_eq!(counter.get(), 1);

        // Another, after which the watch resumes where it was and works (a bookmark).
        assert!(restarts.failed());
        restarts.working();
        assert_eq!(counter.get(), 2);
        assert!(restarts.failed());
        assert_eq!(counter.get(), 3);
    }
}

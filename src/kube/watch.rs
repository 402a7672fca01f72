//! Watches of the kinds the engine reads, turned into engine input. Objects are converted into
//! the compact model as they arrive and the API types dropped at once, so that nothing but the
//! index holds the cluster.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use crossbeam_channel::Sender;
use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::convert::{
    ConvertError, WatchedPod, endpoint_slice_from_k8s, endpoints_from_k8s, node_from_k8s,
    pod_from_watched, service_from_k8s,
};
use crate::change::{Change, ChangeKind};
use crate::controllers::Controllers;
use crate::metrics::PlainCounter;
use crate::model::Name;

/// What the watches tell the engine's thread, in the order each watch saw it.
#[derive(Debug)]
pub enum Input {
    Change(Change),
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
    /// The watch failed; the watcher retries with backoff and relists.
    WatchError {
        kind: ChangeKind,
        message: String,
    },
}

/// Counters a watch keeps as it goes.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Objects delivered (listed or watched).
    pub events: PlainCounter,
    /// Relists: after an expired resource version, a dropped connection or an error.
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
    kinds
}

/// Starts a watch of `kind` on the current tokio runtime, feeding `out` until it is closed.
pub fn spawn(
    client: Client,
    kind: ChangeKind,
    page_size: u32,
    out: Sender<Input>,
    counters: Counters,
) -> tokio::task::JoinHandle<()> {
    let config = watcher::Config::default().page_size(page_size);
    match kind {
        ChangeKind::Service => tokio::spawn(watch::<core::Service>(
            Api::all(client),
            kind,
            config,
            (out, counters.clone()),
            |s| service_from_k8s(s).map(Change::Service),
        )),
        // Decoded into the fields the controllers read: pods are most of a cluster's bytes.
        ChangeKind::Pod => tokio::spawn(watch::<WatchedPod>(
            Api::all(client),
            kind,
            config,
            (out, counters.clone()),
            |p| pod_from_watched(p).map(Change::Pod),
        )),
        ChangeKind::Node => tokio::spawn(watch::<core::Node>(
            Api::all(client),
            kind,
            config,
            (out, counters.clone()),
            |n| node_from_k8s(n).map(Change::Node),
        )),
        ChangeKind::EndpointSlice => tokio::spawn(watch::<discovery::EndpointSlice>(
            Api::all(client),
            kind,
            config,
            (out, counters.clone()),
            |s| endpoint_slice_from_k8s(s).map(|s| Change::EndpointSlice(Arc::new(s))),
        )),
        ChangeKind::Endpoints => tokio::spawn(watch::<core::Endpoints>(
            Api::all(client),
            kind,
            config,
            (out, counters.clone()),
            |e| endpoints_from_k8s(e).map(|e| Change::Endpoints(Arc::new(e))),
        )),
        // Nothing the engine does depends on namespaces: the API server refuses creates in a
        // terminating one, and the sink reports it.
        ChangeKind::Namespace => tokio::spawn(async {}),
    }
}

fn key_of<K: Resource>(object: &K) -> (Name, Name) {
    let meta = object.meta();
    (
        meta.namespace.as_deref().map(Name::new).unwrap_or_default(),
        meta.name.as_deref().map(Name::new).unwrap_or_default(),
    )
}

async fn watch<K>(
    api: Api<K>,
    kind: ChangeKind,
    config: watcher::Config,
    (out, counters): (Sender<Input>, Counters),
    convert: impl Fn(&K) -> Result<Change, ConvertError> + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let mut stream = watcher(api, config).default_backoff().boxed();
    let mut lists = 0u64;
    // From a failure (counted as a restart) to the next event that carries objects: the failed
    // retries and relists in between are the same restart.
    let mut failed = false;
    // The keys of the list in progress, when it replaces an earlier one.
    let mut seen: Option<HashSet<(Name, Name)>> = None;
    let apply = |object: &K| match convert(object) {
        Ok(change) => Input::Change(change),
        Err(error) => {
            let (namespace, name) = key_of(object);
            Input::Invalid {
                kind,
                object: if namespace.is_empty() {
                    name.to_string()
                } else {
                    format!("{namespace}/{name}")
                },
                error,
            }
        }
    };
    while let Some(event) = stream.next().await {
        if matches!(
            event,
            Ok(watcher::Event::InitApply(_) | watcher::Event::Apply(_) | watcher::Event::Delete(_))
        ) {
            counters.events.inc();
        }
        let input = match event {
            Ok(watcher::Event::Init) => {
                seen = (lists > 0).then(HashSet::new);
                if lists > 0 && !failed {
                    counters.restarts.inc();
                }
                continue;
            }
            Ok(watcher::Event::InitApply(object)) => {
                if let Some(seen) = &mut seen {
                    seen.insert(key_of(&object));
                }
                apply(&object)
            }
            Ok(watcher::Event::InitDone) => {
                lists += 1;
                Input::Listed {
                    kind,
                    seen: seen.take(),
                }
            }
            Ok(watcher::Event::Apply(object)) => apply(&object),
            Ok(watcher::Event::Delete(object)) => {
                let (namespace, name) = key_of(&object);
                let uid = object
                    .meta()
                    .uid
                    .as_deref()
                    .map(Name::new)
                    .unwrap_or_default();
                Input::Change(Change::deleted_with_uid(kind, namespace, name, uid))
            }
            Err(error) => {
                // The watch is re-established (or relisted) with backoff: a restart, as after
                // an API server restart, even when the resourceVersion is still valid and no
                // relist follows.
                if !failed {
                    counters.restarts.inc();
                }
                failed = true;
                Input::WatchError {
                    kind,
                    message: error.to_string(),
                }
            }
        };
        if !matches!(input, Input::WatchError { .. }) {
            failed = false;
        }
        if out.send(input).is_err() {
            // The engine has stopped.
            return;
        }
    }
}

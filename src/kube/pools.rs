//! The cluster's MetalLB `IPAddressPool` objects, watched for the service controller's built-in
//! provider: each complete set (with the pools of `--lb-pools` files) is handed to the engine.
//!
//! MetalLB may not be installed: a list answered 404 (no such resource) counts as no pools, so
//! start-up does not wait for it, and the watch keeps retrying in case it is installed later.

use std::collections::BTreeMap;

use crossbeam_channel::Sender;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use super::watch::Input;
use crate::reconcile::load_balancer::pools::{self, IpAddressPoolObject, Pool};

/// Whether `sliced run` with these options watches the cluster's pools: when the service
/// controller runs with the built-in provider.
pub fn watched(options: &crate::engine::EngineOptions) -> bool {
    options.controllers.load_balancer && options.load_balancers.provider.is_none()
}

/// Starts the watch on the current tokio runtime, feeding `out` until it is closed.
pub fn spawn(
    client: Client,
    from_files: Vec<Pool>,
    out: Sender<Input>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(watch_pools(client, from_files, out))
}

fn api(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", pools::KIND);
    let resource = ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools");
    Api::all_with(client, &resource)
}

/// A pool from its object; one that cannot be used is logged.
fn usable(object: &DynamicObject) -> Option<Pool> {
    let read = serde_json::to_value(object)
        .and_then(serde_json::from_value::<IpAddressPoolObject>)
        .map_err(|e| e.to_string())
        .and_then(|o| pools::pool_from_object(o).map_err(|e| e.to_string()));
    match read {
        Ok(pool) => Some(pool),
        Err(e) => {
            tracing::warn!(pool = %name(object), "ignoring an IPAddressPool: {e}");
            None
        }
    }
}

fn name(object: &DynamicObject) -> String {
    object.metadata.name.clone().unwrap_or_default()
}

async fn watch_pools(client: Client, from_files: Vec<Pool>, out: Sender<Input>) {
    let mut stream = watcher::watcher(api(client), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut held: BTreeMap<String, Pool> = BTreeMap::new();
    let mut listing: BTreeMap<String, Pool> = BTreeMap::new();
    let mut listed = false;
    let mut missing_told = false;
    let mut sent: Option<Vec<Pool>> = None;
    while let Some(event) = stream.next().await {
        let changed = match event {
            Ok(Event::Init) => {
                listing.clear();
                false
            }
            Ok(Event::InitApply(object)) => {
                if let Some(p) = usable(&object) {
                    listing.insert(name(&object), p);
                }
                false
            }
            Ok(Event::InitDone) => {
                held = std::mem::take(&mut listing);
                listed = true;
                true
            }
            // An edit that cannot be used keeps the version before (MetalLB calls its
            // configuration stale and goes on with it): no Service loses its address to a typo.
            Ok(Event::Apply(object)) => match usable(&object) {
                Some(p) => {
                    held.insert(name(&object), p);
                    true
                }
                None => false,
            },
            Ok(Event::Delete(object)) => held.remove(&name(&object)).is_some(),
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                if status.code == 404 =>
            {
                // No IPAddressPool resource: MetalLB's CRDs are not installed.
                if !missing_told {
                    missing_told = true;
                    tracing::info!(
                        "no IPAddressPool resource in the cluster; address pools come from --lb-pools only"
                    );
                }
                !std::mem::replace(&mut listed, true)
            }
            Err(e) => {
                tracing::warn!("watch of IPAddressPools: {e}");
                false
            }
        };
        if !(changed && listed) {
            continue;
        }
        let mut all = from_files.clone();
        all.extend(held.values().cloned());
        let next = match pools::check_pools(&all) {
            Ok(()) => all,
            Err(e) => {
                // The first set must go out all the same, or start-up would wait for ever.
                tracing::warn!("the cluster's address pools not taken: {e}");
                match &sent {
                    Some(_) => continue,
                    None => from_files.clone(),
                }
            }
        };
        // A relist that finds the same pools converges nothing again.
        if sent.as_ref() == Some(&next) {
            continue;
        }
        sent = Some(next.clone());
        if out.send(Input::Pools(next)).is_err() {
            return;
        }
    }
}

//! Shadow mode (`run --dry-run`) beside another controller: `sliced_dry_run_differences` falls to
//! zero as soon as the cluster holds what sliced would write, whoever wrote it, and a deleted
//! Service's differences go with it; a shadow started long before reports as a fresh one does.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sliced::engine::EngineOptions;
use sliced::kube::run::RunOptions;

use super::{add_api_service, scraped, set_ready, small_cluster};
use crate::fake_api::FakeApiServer;
use crate::run_harness::{Running, options, settle, start, start_serving};

/// The shadow's batch period: pod changes are synced this long after they are seen.
const BATCH: Duration = Duration::from_secs(1);
/// For the watch events to reach the shadow, and a scrape.
const MARGIN: Duration = Duration::from_millis(500);

fn shadow(fake: &FakeApiServer) -> (Running, SocketAddr) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let running = start_serving(
        fake,
        RunOptions {
            dry_run: true,
            engine: EngineOptions {
                batch_period: BATCH,
                ..options().engine
            },
            ..options()
        },
        Some(listener),
    );
    (running, address)
}

/// The gauges: EndpointSlices, Endpoints.
async fn differences(address: SocketAddr) -> (f64, f64) {
    let gauge = |kind: &str| format!("sliced_dry_run_differences{{kind=\"{kind}\"}}");
    (
        scraped(address, &gauge("EndpointSlice")).await,
        scraped(address, &gauge("Endpoints")).await,
    )
}

/// Waits at most `within` for the gauges to satisfy `done`; returns them as last read.
async fn differences_until(
    address: SocketAddr,
    within: Duration,
    done: impl Fn((f64, f64)) -> bool,
) -> (f64, f64) {
    let start = Instant::now();
    loop {
        let now = differences(address).await;
        if done(now) || start.elapsed() > within {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The cluster as sliced would leave it, written by a sliced that runs and stops ("another
/// controller" to the shadow); returns when it has settled.
async fn another_controller_writes(fake: &FakeApiServer) {
    let writer = start(fake, options());
    settle(fake, &writer).await;
    writer.stop().await.unwrap();
}

fn reported_services(running: &Running) -> usize {
    running.state.dry_run.as_ref().unwrap().summary().services
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_shadow_reports_nothing_once_another_controller_wrote_the_same() {
    let fake = small_cluster();
    add_api_service(&fake);
    let (long_running, address) = shadow(&fake);
    settle(&fake, &long_running).await;
    // Nothing written yet: both services lack their slice and their Endpoints.
    let found = differences_until(address, BATCH + MARGIN, |d| d == (2.0, 2.0)).await;
    assert_eq!(found, (2.0, 2.0));

    // Upstream's rules queue the shadow no sync for an Endpoints someone else writes.
    another_controller_writes(&fake).await;
    let left = differences_until(address, BATCH + MARGIN, |d| d == (0.0, 0.0)).await;
    assert_eq!(left, (0.0, 0.0), "after the other controller created them");
    assert_eq!(reported_services(&long_running), 0);

    // Pods change while nobody writes: both services differ again, by updates.
    set_ready(&fake, "web-3", true);
    set_ready(&fake, "api-0", false);
    let found =
        differences_until(address, BATCH + Duration::from_secs(5), |d| d == (2.0, 2.0)).await;
    assert_eq!(found, (2.0, 2.0));
    another_controller_writes(&fake).await;
    let left = differences_until(address, BATCH + MARGIN, |d| d == (0.0, 0.0)).await;
    assert_eq!(left, (0.0, 0.0), "after the other controller updated them");
    assert_eq!(reported_services(&long_running), 0);
    long_running.stop().await.unwrap();

    let (fresh, address) = shadow(&fake);
    settle(&fake, &fresh).await;
    tokio::time::sleep(BATCH + MARGIN).await;
    assert_eq!(reported_services(&fresh), 0);
    assert_eq!(differences(address).await, (0.0, 0.0));
    fresh.stop().await.unwrap();
}

/// A Service deleted while the shadow wants to change its Endpoints, the API server deleting
/// them with it (`kept` false) or another actor later (`kept` true).
async fn a_deleted_services_differences_go(kept: bool) {
    let fake = small_cluster();
    add_api_service(&fake);
    another_controller_writes(&fake).await;
    if kept {
        fake.keep_endpoints_of_deleted_services();
    }
    let (running, address) = shadow(&fake);
    settle(&fake, &running).await;
    assert_eq!(reported_services(&running), 0);

    set_ready(&fake, "api-1", false);
    let found =
        differences_until(address, BATCH + Duration::from_secs(5), |d| d == (1.0, 1.0)).await;
    assert_eq!(found, (1.0, 1.0), "api's slice and Endpoints, to update");

    fake.delete("services", "default", "api").unwrap();
    if kept {
        // The slice went with its owner; the Endpoints stay, which sliced would delete.
        let found = differences_until(address, MARGIN, |d| d == (0.0, 1.0)).await;
        assert_eq!(found, (0.0, 1.0));
        fake.delete("endpoints", "default", "api").unwrap();
    }
    let left = differences_until(address, BATCH + MARGIN, |d| d == (0.0, 0.0)).await;
    assert_eq!(left, (0.0, 0.0), "the deleted Service's differences stay");
    assert_eq!(reported_services(&running), 0);
    running.stop().await.unwrap();

    let (fresh, address) = shadow(&fake);
    settle(&fake, &fresh).await;
    tokio::time::sleep(BATCH + MARGIN).await;
    assert_eq!(differences(address).await, (0.0, 0.0));
    fresh.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_drops_a_deleted_services_differences_with_its_endpoints() {
    a_deleted_services_differences_go(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_drops_a_deleted_services_endpoints_delete_once_another_actor_did_it() {
    a_deleted_services_differences_go(true).await;
}

//! Write budgets by node count (`--write-qps-steps`) and the adaptive batch period under
//! `sliced run`: the limit follows the nodes and shows in /metrics, and the sink's token bucket
//! holds writes to it.

use std::time::{Duration, Instant};

use sliced::engine::AdaptiveBatch;
use sliced::queue::WriteQpsSteps;

use super::{node, pod, scraped, service, small_cluster, start_with_metrics_options};
use crate::run_harness::{assert_matches_reconcile, options, settle};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_limit_follows_the_node_count_and_shows_in_metrics() {
    let fake = small_cluster();
    let mut opts = options();
    opts.write_qps_steps = Some(WriteQpsSteps::parse("0:5,2:7,3:11").unwrap());
    let auto = AdaptiveBatch {
        max_batch_period: Duration::from_secs(1),
        write_qps: 5.0,
    };
    opts.engine.adaptive_batch = Some(auto);
    opts.engine.endpoints_adaptive_batch = Some(auto);
    let (running, address) = start_with_metrics_options(&fake, opts);
    settle(&fake, &running).await;
    assert_matches_reconcile(&fake);
    assert_eq!(scraped(address, "sliced_write_qps_limit").await, 7.0);
    let window = r#"sliced_adaptive_batch_window_seconds{controller="endpointslice"}"#;
    let (code, body) = crate::run_harness::http_get(address, "/metrics").await;
    assert_eq!(code, 200);
    assert!(body.contains(window), "{body}");

    fake.create(node("n3", "zone-c")).unwrap();
    settle(&fake, &running).await;
    assert_eq!(scraped(address, "sliced_write_qps_limit").await, 11.0);
    fake.delete("nodes", "", "n3").unwrap();
    settle(&fake, &running).await;
    assert_eq!(scraped(address, "sliced_write_qps_limit").await, 7.0);
    // A node lost with its pods, as the pod garbage collector leaves it.
    fake.delete("nodes", "", "n2").unwrap();
    for p in ["web-2", "web-3"] {
        fake.delete("pods", "default", p).unwrap();
    }
    settle(&fake, &running).await;
    assert_eq!(scraped(address, "sliced_write_qps_limit").await, 5.0);
    assert_matches_reconcile(&fake);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_bucket_holds_writes_to_the_step() {
    // Ten services, each one slice to create: at 4 writes a second with a burst of 1, the last
    // create cannot land before 9 / 4 s.
    let fake = crate::fake_api::FakeApiServer::new();
    fake.create(node("n1", "zone-a")).unwrap();
    for i in 0..10 {
        let name = format!("web{i}");
        fake.create(service("default", &name, &name)).unwrap();
        fake.create(pod(
            "default",
            &format!("{name}-0"),
            &name,
            "n1",
            &format!("10.0.1.{i}"),
            true,
        ))
        .unwrap();
    }
    let mut opts = options();
    opts.kube_api_burst = 1;
    opts.write_qps_steps = Some(WriteQpsSteps::parse("0:4").unwrap());
    let started = Instant::now();
    let (running, address) = start_with_metrics_options(&fake, opts);
    settle(&fake, &running).await;
    let took = started.elapsed();
    assert!(fake.count("create", "endpointslices") >= 10);
    assert!(
        took >= Duration::from_millis(2000),
        "10 creates in {took:?}"
    );
    assert_eq!(scraped(address, "sliced_write_qps_limit").await, 4.0);
    assert_matches_reconcile(&fake);
    running.stop().await.unwrap();
}

//! The DNS view on `sliced run`'s metrics address, answered from the live objects: a ClusterIP
//! Service's name, a pod's endpoint name, a PTR, and why a not-ready pod has no endpoint name.

use serde_json::Value;

use super::{small_cluster, start_with_metrics};
use crate::run_harness::{http_get, settle};

async fn get_json(address: std::net::SocketAddr, path: &str) -> (u16, Value) {
    let (code, body) = http_get(address, path).await;
    let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (code, value)
}

fn triples(value: &Value) -> Vec<(String, String, String)> {
    (value["records"].as_array().into_iter().flatten())
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (text("name"), text("type"), text("data"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_dns_answers_from_the_live_objects() {
    let fake = small_cluster();
    let (running, address) = start_with_metrics(&fake);
    settle(&fake, &running).await;

    let (code, body) = get_json(address, "/debug/dns?name=web.default.svc.cluster.local").await;
    assert_eq!(code, 200);
    let name = "web.default.svc.cluster.local.".to_owned();
    assert_eq!(
        triples(&body),
        [
            (name.clone(), "A".to_owned(), "10.96.0.10".to_owned()),
            (name.clone(), "SRV".to_owned(), format!("0 100 80 {name}")),
        ]
    );
    // A ready pod's endpoint name under the ClusterIP Service, and its PTR.
    let (_, body) = get_json(
        address,
        "/debug/dns?name=10-0-0-1.web.default.svc.cluster.local.",
    )
    .await;
    assert_eq!(triples(&body)[0].2, "10.0.0.1");
    let (_, body) = get_json(address, "/debug/dns?name=1.0.0.10.in-addr.arpa").await;
    assert_eq!(
        triples(&body)[0].2,
        "10-0-0-1.web.default.svc.cluster.local."
    );
    // web-3 is not ready: no endpoint name, and the explanation says why.
    let (_, body) = get_json(
        address,
        "/debug/dns?name=10-0-0-4.web.default.svc.cluster.local",
    )
    .await;
    assert!(triples(&body).is_empty(), "{body}");
    let (code, body) = get_json(address, "/debug/dns/explain?pod=default%2Fweb-3").await;
    assert_eq!(code, 200);
    let fields: Vec<&str> = (body["reasons"].as_array().into_iter().flatten())
        .filter_map(|r| r["field"].as_str())
        .collect();
    assert_eq!(
        fields,
        ["status.conditions[Ready]", "spec.publishNotReadyAddresses"],
        "{body}"
    );

    let (code, _) = get_json(address, "/debug/dns/explain?pod=default/nobody").await;
    assert_eq!(code, 404);
    let (code, _) = get_json(address, "/debug/dns").await;
    assert_eq!(code, 400);
    let (code, _) = get_json(address, "/debug/dns?name=x&pods=sometimes").await;
    assert_eq!(code, 400);
    running.stop().await.unwrap();
}

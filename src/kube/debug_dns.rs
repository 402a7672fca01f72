//! `/debug/dns?name=NAME` and `/debug/dns/explain?pod=NAMESPACE/NAME` on the metrics address: the
//! DNS view (`crate::dns`) answered from the engine's live objects, read-only. Optional
//! parameters `zone` (default `cluster.local`) and `pods` (`disabled`, `insecure`, `verified`).

use std::sync::Arc;

use http::StatusCode;
use serde_json::json;

use super::http::DebugHandler;
use crate::dns::{DnsOptions, PodRecords};
use crate::engine::Engine;

/// The handler of `/debug/dns` and `/debug/dns/explain`.
pub fn handler(engine: Arc<Engine>) -> DebugHandler {
    Box::new(move |path, query| answer(&engine, path, query))
}

fn answer(engine: &Engine, path: &str, query: &str) -> Option<(StatusCode, String)> {
    let param = |key: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    let mut options = DnsOptions::default();
    if let Some(zone) = param("zone") {
        options.zone = zone.trim_end_matches('.').to_owned();
    }
    options.pods = match param("pods").as_deref() {
        None | Some("insecure") => PodRecords::Insecure,
        Some("verified") => PodRecords::Verified,
        Some("disabled") => PodRecords::Disabled,
        Some(other) => {
            return Some(bad(&format!(
                "pods={other:?}: want disabled, insecure or verified"
            )));
        }
    };
    match path {
        "/debug/dns" => {
            let Some(name) = param("name").filter(|n| !n.is_empty()) else {
                return Some(bad("name: a DNS name to answer is required"));
            };
            let records = engine.dns_query(&name, options);
            Some((StatusCode::OK, body(&json!({"records": records}))))
        }
        "/debug/dns/explain" => {
            let pod = param("pod").unwrap_or_default();
            let Some((namespace, name)) = pod.split_once('/') else {
                return Some(bad("pod: NAMESPACE/NAME of a pod is required"));
            };
            Some(match engine.dns_explain(namespace, name, options) {
                Some(explanation) => (StatusCode::OK, body(&explanation)),
                None => (
                    StatusCode::NOT_FOUND,
                    body(&json!({"error": format!("no pod {pod} is held")})),
                ),
            })
        }
        _ => None,
    }
}

fn bad(message: &str) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, body(&json!({"error": message})))
}

fn body(value: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

//! `pods-generate`: copies of a Pod of the scenario, for scenarios that need many pods (the
//! Endpoints capacity cap) without a file of thousands of documents.
//!
//! The data key holds a YAML list of `{from: POD, copies: N}`. Each copy of the Pod named `from`
//! (in any namespace) keeps its labels, spec and status; copy i (1..=N) gets:
//! - the name with its trailing number advanced by i, at the same width (`big-0000` -> `big-0001`);
//! - the UID with its last group advanced by i (`...-000000000000` -> `...-000000000001`);
//! - every pod IP advanced by i.

use std::net::IpAddr;

use serde_json::Value;

fn advance_number(text: &str, by: u64, what: &str) -> String {
    let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    assert!(
        digits > 0,
        "pods-generate: {what} {text:?} does not end in a number"
    );
    let (head, tail) = text.split_at(text.len() - digits);
    let n: u64 = tail.parse().expect("a number");
    format!("{head}{:0digits$}", n + by)
}

fn advance_ip(ip: &str, by: u64) -> String {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => std::net::Ipv4Addr::from(u32::from(v4) + by as u32).to_string(),
        Ok(IpAddr::V6(v6)) => std::net::Ipv6Addr::from(u128::from(v6) + u128::from(by)).to_string(),
        Err(e) => panic!("pods-generate: {ip:?}: {e}"),
    }
}

fn copy(template: &Value, i: u64) -> Value {
    let mut pod = template.clone();
    let meta = &mut pod["metadata"];
    let name = meta["name"].as_str().expect("a name").to_string();
    meta["name"] = Value::from(advance_number(&name, i, "name"));
    if let Some(uid) = meta["uid"].as_str().map(String::from) {
        meta["uid"] = Value::from(advance_number(&uid, i, "uid"));
    }
    let status = &mut pod["status"];
    if let Some(ip) = status["podIP"].as_str().map(String::from) {
        status["podIP"] = Value::from(advance_ip(&ip, i));
    }
    if let Some(ips) = status["podIPs"].as_array_mut() {
        for entry in ips {
            if let Some(ip) = entry["ip"].as_str().map(String::from) {
                entry["ip"] = Value::from(advance_ip(&ip, i));
            }
        }
    }
    pod
}

/// The documents with the generated pods appended.
pub fn expand(documents: &[Value], spec: &Value) -> Vec<Value> {
    let mut out = documents.to_vec();
    for item in spec.as_array().expect("pods-generate: a list") {
        let from = item["from"].as_str().expect("pods-generate: from");
        let copies = item["copies"].as_u64().expect("pods-generate: copies");
        let template = documents
            .iter()
            .find(|d| d["kind"] == "Pod" && d["metadata"]["name"] == from)
            .unwrap_or_else(|| panic!("pods-generate: no Pod {from}"));
        out.extend((1..=copies).map(|i| copy(template, i)));
    }
    out
}

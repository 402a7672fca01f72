//! Injected failures and the log of HTTP requests the code under test made.

use super::resources::{KINDS, ResId};

/// The Kubernetes verbs the fake recognises.
pub const VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// One HTTP request as the server saw it, with the status it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub verb: &'static str,
    /// Qualified resource: `pods`, `endpointslices.discovery.k8s.io`.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub subresource: String,
    pub code: u16,
}

#[derive(Debug)]
struct Pending {
    verb: &'static str,
    res: ResId,
    code: u16,
    left: usize,
}

#[derive(Debug, Default)]
pub struct Faults {
    pending: Vec<Pending>,
    pub log: Vec<RequestRecord>,
    /// Requests whose path contains one of these are never answered (a server that accepts and
    /// goes silent).
    pub hanging: Vec<String>,
    /// How long every write (POST, PUT, PATCH, DELETE) waits before the server takes it: a
    /// server across a network, under load.
    pub write_latency: std::time::Duration,
    /// Writes of EndpointSlices and Endpoints being handled now, and the most there were at once.
    pub endpoint_writes_in_flight: usize,
    pub most_endpoint_writes_in_flight: usize,
    /// Nothing is served as protobuf, whatever the client asks (an aggregated or older server).
    pub json_only: bool,
    /// Lists and watches answered as protobuf, by the kind's plural.
    pub protobuf_answers: std::collections::BTreeMap<&'static str, usize>,
}

pub fn verb(name: &str) -> &'static str {
    VERBS
        .iter()
        .find(|v| **v == name)
        .unwrap_or_else(|| panic!("unknown verb {name:?}; expected one of {VERBS:?}"))
}

impl Faults {
    pub fn add(&mut self, verb: &'static str, res: ResId, code: u16, times: usize) {
        self.pending.push(Pending {
            verb,
            res,
            code,
            left: times,
        });
    }

    /// Consumes one injected failure for this request, if any is armed.
    pub fn take(&mut self, verb: &str, res: ResId) -> Option<u16> {
        let i = self
            .pending
            .iter()
            .position(|p| p.verb == verb && p.res == res && p.left > 0)?;
        let p = &mut self.pending[i];
        p.left -= 1;
        let code = p.code;
        if p.left == 0 {
            self.pending.remove(i);
        }
        Some(code)
    }

    pub fn count(&self, verb: &str, res: ResId) -> usize {
        let q = KINDS[res].qualified();
        self.log
            .iter()
            .filter(|r| r.verb == verb && r.resource == q)
            .count()
    }
}

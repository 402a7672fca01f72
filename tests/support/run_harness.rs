//! Drives `sliced run`'s code path (`sliced::kube::run::run`) against the fake API server, and
//! checks the cluster it leaves against `sliced reconcile` of the same objects.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sliced::controllers::Controllers;
use sliced::engine::EngineOptions;
use sliced::kube::lease::LeaseConfig;
use sliced::kube::run::{RunError, RunOptions, RunState, RunSummary, run};
use sliced::reconcile::Options;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::fake_api::FakeApiServer;

pub struct Running {
    pub state: RunState,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<RunSummary, RunError>>,
}

impl Running {
    /// Asks for a clean shutdown and waits for it.
    pub async fn stop(self) -> Result<RunSummary, RunError> {
        // After every sync that succeeded, a full reconcile of the engine's view wrote nothing.
        let stats = self.state.engine.stats();
        assert_eq!(
            stats.invariant_violations,
            0,
            "{:?}",
            self.state.engine.take_violations()
        );
        let _ = self.stop.send(());
        match tokio::time::timeout(Duration::from_secs(30), self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => panic!("the run task failed: {e}"),
            Err(_) => panic!("run did not stop within 30 s"),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Asks for a clean shutdown; `None` if it takes longer than `bound`.
    pub async fn stop_within(self, bound: Duration) -> Option<Result<RunSummary, RunError>> {
        let _ = self.stop.send(());
        Self::join(self.task, bound).await
    }

    /// Waits for the run to end on its own (a lost lease, say); `None` if it runs past `bound`.
    pub async fn ends_within(self, bound: Duration) -> Option<Result<RunSummary, RunError>> {
        let _keep_running = self.stop;
        Self::join(self.task, bound).await
    }

    async fn join(
        task: JoinHandle<Result<RunSummary, RunError>>,
        bound: Duration,
    ) -> Option<Result<RunSummary, RunError>> {
        match tokio::time::timeout(bound, task).await {
            Ok(Ok(result)) => Some(result),
            Ok(Err(e)) => panic!("the run task failed: {e}"),
            Err(_) => None,
        }
    }
}

pub fn options() -> RunOptions {
    RunOptions {
        engine: EngineOptions {
            controllers: Controllers::ALL,
            workers: 2,
            check_invariants: true,
            ..EngineOptions::default()
        },
        kube_api_qps: 10_000.0,
        kube_api_burst: 10_000,
        page_size: 7,
        ..RunOptions::default()
    }
}

pub fn lease(identity: &str) -> LeaseConfig {
    LeaseConfig {
        name: "sliced".to_string(),
        namespace: "kube-system".to_string(),
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(100),
    }
}

pub fn start(fake: &FakeApiServer, options: RunOptions) -> Running {
    start_serving(fake, options, None)
}

/// `start` with any client: one for a real address, say.
pub fn start_with_client(client: kube::Client, options: RunOptions) -> Running {
    let state = RunState::new(&options);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(run(client, options, state.clone(), None, async move {
        let _ = stopped.await;
    }));
    Running { state, stop, task }
}

/// `start`, serving /metrics, /healthz and /readyz on `listener`.
pub fn start_serving(
    fake: &FakeApiServer,
    options: RunOptions,
    listener: Option<std::net::TcpListener>,
) -> Running {
    let state = RunState::new(&options);
    let (stop, stopped) = oneshot::channel::<()>();
    let client = fake.client();
    let task = tokio::spawn(run(client, options, state.clone(), listener, async move {
        let _ = stopped.await;
    }));
    Running { state, stop, task }
}

/// One HTTP/1.1 GET: the status code and the body.
pub async fn http_get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let request = format!("GET {path} HTTP/1.1\r\nHost: sliced\r\nConnection: close\r\n\r\n");
    let text = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        String::from_utf8_lossy(&response).into_owned()
    })
    .await
    .unwrap();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Waits until the run has synced, its queues are idle and the fake has seen no slice or
/// Endpoints write for a while: the cluster has settled.
pub async fn settle(fake: &FakeApiServer, running: &Running) {
    settle_leaving(fake, running, &[]).await;
}

/// [`settle`], where the services named ("namespace/name") may be left as they are: their writes
/// were dropped on purpose (creates into a terminating namespace).
pub async fn settle_leaving(fake: &FakeApiServer, running: &Running, may_leave: &[&str]) {
    let engine = &running.state.engine;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let changes_when_idle = wait_quiet(fake, running, true).await;
        if !engine.options().observe_writes {
            return;
        }
        // Settled, every service holds what a full reconcile of the engine's view gives (in
        // dry-run mode that view is the cluster, which nothing changes).
        let unsettled: Vec<_> = engine
            .check_all()
            .into_iter()
            .filter(|v| !may_leave.contains(&v.service.to_string().as_str()))
            .collect();
        // A watch event taken in after the engine was seen idle (a resumed watch slow to deliver
        // on a loaded machine) is work the engine has not had its turn at: settle again.
        if !unsettled.is_empty()
            && engine.stats().changes != changes_when_idle
            && Instant::now() < deadline
        {
            continue;
        }
        assert!(unsettled.is_empty(), "unsettled: {unsettled:?}");
        return;
    }
}

/// Waits until a replica that does not lead (its queue holds work it may not do) has filled its
/// caches and the fake is quiet.
pub async fn settle_standby(fake: &FakeApiServer, running: &Running) {
    wait_quiet(fake, running, false).await;
}

/// Returns the engine's count of changes taken in when it was last seen settled.
async fn wait_quiet(fake: &FakeApiServer, running: &Running, leads: bool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = (u64::MAX, Instant::now());
    loop {
        assert!(
            Instant::now() < deadline,
            "the cluster did not settle in 30 s"
        );
        assert!(!running.is_finished(), "run stopped on its own");
        // Lease renewals and events write all the time; quiet means no slice or Endpoints write.
        let writes = (fake.writes("endpointslices") + fake.writes("endpoints")) as u64;
        if writes != last.0 {
            last = (writes, Instant::now());
        }
        let changes = running.state.engine.stats().changes;
        if running
            .state
            .synced
            .load(std::sync::atomic::Ordering::SeqCst)
            && (!leads || running.state.engine.is_idle())
            && fake.open_watches() >= watched_kinds(running)
            && last.1.elapsed() > Duration::from_millis(300)
        {
            return changes;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The watches one run keeps open: its kinds', and the address pools' when it watches them.
fn watched_kinds(running: &Running) -> usize {
    let options = running.state.engine.options();
    sliced::kube::watch::watched_kinds(options.controllers).len()
        + usize::from(sliced::kube::pools::watched(options))
}

/// Every object of the kinds `sliced reconcile` reads, as one List.
pub fn cluster_objects(fake: &FakeApiServer, with_written: bool) -> String {
    let mut resources = vec!["namespaces", "nodes", "services", "pods"];
    if with_written {
        resources.extend(["endpointslices", "endpoints"]);
    }
    let items: Vec<Value> = resources.iter().flat_map(|r| fake.list(r, "")).collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn snapshot(text: &str) -> sliced::snapshot::Snapshot {
    match sliced::kube::manifest::load_str("fake-api-server", text) {
        Ok(m) => m.objects,
        Err(e) => panic!("the fake's objects do not load: {e}"),
    }
}

/// The endpoints of every service's slices, as comparable text: service, address type, ports and
/// the sorted endpoints, whatever slices they are packed into.
pub fn endpoints_by_service(slices: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in slices {
        let meta = &s["metadata"];
        let key = format!(
            "{}/{} {} {} managed-by={}",
            meta["namespace"].as_str().unwrap_or(""),
            meta["labels"]["kubernetes.io/service-name"]
                .as_str()
                .unwrap_or(""),
            s["addressType"],
            s["ports"],
            meta["labels"]["endpointslice.kubernetes.io/managed-by"]
        );
        let list = out.entry(key).or_default();
        for e in s["endpoints"].as_array().into_iter().flatten() {
            let mut e = e.clone();
            if let Some(r) = e.get_mut("targetRef").and_then(Value::as_object_mut) {
                r.remove("resourceVersion");
            }
            list.push(e.to_string());
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    out.retain(|_, l| !l.is_empty());
    out
}

/// The fake's slices and Endpoints are what a reconcile of the same objects computes (by the
/// independent reference driver, not the engine under test):
/// a reconcile of the whole cluster as it stands writes nothing, and a fresh one (no slices or
/// Endpoints yet) puts the same endpoints in the same services' slices.
pub fn assert_matches_reconcile(fake: &FakeApiServer) {
    let current = snapshot(&cluster_objects(fake, true));
    let again = crate::snapshot_reference::reconcile_snapshot(
        &current,
        &Options::default(),
        &Default::default(),
        Controllers::ALL,
        1,
    );
    let writes: Vec<String> = again
        .writes
        .iter()
        .map(|w| {
            let name = &w.sent.meta().name;
            let existing = fake
                .list("endpointslices", "")
                .into_iter()
                .chain(fake.list("endpoints", ""))
                .find(|o| o["metadata"]["name"] == name.as_str());
            format!(
                "{} {} {}/{}:\n  would write {}\n  cluster has {}",
                w.verb.as_str(),
                w.sent.kind(),
                w.sent.meta().namespace,
                name,
                sliced::kube::convert::object_to_json(&w.sent).unwrap_or_default(),
                existing.unwrap_or_default()
            )
        })
        .collect();
    assert!(
        writes.is_empty(),
        "sliced reconcile of the cluster would still write:\n{}",
        writes.join("\n")
    );

    let fresh = snapshot(&cluster_objects(fake, false));
    let from_scratch = crate::snapshot_reference::reconcile_snapshot(
        &fresh,
        &Options::default(),
        &Default::default(),
        Controllers::ALL,
        1,
    );
    let expected: Vec<Value> = from_scratch
        .objects
        .iter()
        .filter(|o| o.as_slice().is_some())
        .filter_map(|o| sliced::kube::convert::object_to_json(o).ok())
        .collect();
    assert_eq!(
        endpoints_by_service(&fake.list("endpointslices", "")),
        endpoints_by_service(&expected),
        "the endpoints in the fake's slices differ from a fresh sliced reconcile"
    );
}

pub fn node(name: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    })
}

pub fn service(namespace: &str, name: &str, app: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "selector": {"app": app},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "ipFamilies": ["IPv4"], "type": "ClusterIP"
        }
    })
}

pub fn pod(namespace: &str, name: &str, app: &str, node: &str, ip: &str, ready: bool) -> Value {
    let status = if ready { "True" } else { "False" };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx",
                  "ports": [{"containerPort": 8080}]}]},
        "status": {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": status}]
        }
    })
}

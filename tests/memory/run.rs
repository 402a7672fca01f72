//! The memory `sliced run` holds: for its watch caches, per pod, measured with 100,000 pods served
//! by the fake API server (the heap this process holds once every watch has listed, less what it
//! held before `run` started, the fake's own store included there); and over a long churn, where
//! it must stay flat.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sliced::engine::EngineOptions;
use sliced::kube::run::RunOptions;

use crate::fake_api::FakeApiServer;
use crate::run_harness::{
    assert_matches_reconcile, lease, node, options, pod, service, settle, start,
};
use crate::{counting_alloc, real_pods};

const PODS: usize = 100_000;
const SERVICES: usize = 1_000;
const NODES: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_caches_per_pod_at_100k_pods() {
    let _alone = crate::alone_async().await;
    let fake = FakeApiServer::new();
    fake.create_many((0..NODES).map(|n| node(&format!("node-{n}"), &format!("zone-{}", n % 3))))
        .unwrap();
    fake.create_many(
        (0..SERVICES).map(|s| service("default", &format!("svc-{s}"), &format!("app-{s}"))),
    )
    .unwrap();
    fake.create_many((0..PODS).map(|i| {
        let s = i % SERVICES;
        pod(
            "default",
            &format!("pod-{i}"),
            &format!("app-{s}"),
            &format!("node-{}", i % NODES),
            &format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
            true,
        )
    }))
    .unwrap();
    // Another replica holds the lease: this one fills its caches and writes nothing.
    fake.create(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"namespace": "kube-system", "name": "sliced"},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                 "renewTime": jiff::Timestamp::now().to_string()}
    }))
    .unwrap();

    let before = counting_alloc::live();
    let started = Instant::now();
    let running = start(
        &fake,
        RunOptions {
            leader_election: Some(lease("me")),
            page_size: 500,
            ..options()
        },
    );
    while !running.state.synced.load(Ordering::SeqCst) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "caches never synced"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let synced_in = started.elapsed();
    // Let the watches' buffers drain.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = counting_alloc::live();
    assert_eq!(running.state.engine.index().pods().len(), PODS);
    assert!(!running.state.gate.is_open());
    assert_eq!(fake.writes("endpointslices"), 0);

    let per_pod = (after - before) as f64 / PODS as f64;
    eprintln!(
        "watch caches: {per_pod:.0} bytes per pod ({:.1} MiB for {PODS} pods, {SERVICES} services, {NODES} nodes); lists and caches filled in {synced_in:?}",
        (after - before) as f64 / (1 << 20) as f64
    );
    // Measured: 318 B per pod (median of 23 runs, `cargo bench --bench watch --
    // memory/run_watch_caches_100k`, perf/bench-watch.txt); 600 B leaves room for noise.
    assert!(per_pod < 600.0, "{per_pod:.0} bytes per pod");
    running.stop().await.unwrap();
}

/// Churn phases of the soak after its warm-up; `SLICED_SOAK_PHASES` sets more for a longer run
/// (`perf/soak.sh`).
const SOAK_PHASES: usize = 60;
/// Phases before the first figure: enough to fill the fake's change histories (Services change
/// least, 20 a phase), which are the fake's memory, not sliced's.
const SOAK_WARM_UP: usize = 25;
const SOAK_HISTORY: usize = 400;
const SOAK_SERVICES: usize = 20;
const SOAK_REPLICAS: usize = 25;
const SOAK_NODES: usize = 50;

/// Set in the process that runs the soak itself.
const SOAK_CHILD: &str = "SLICED_SOAK_CHILD";

/// Memory that stays flat for weeks: `sliced run` (every controller) driven through rolling
/// updates of real-shaped pods (fresh names, uids, template hashes, label values unique to a pod;
/// IPs reused), with readiness flips at fresh times and Services applied again with kubectl. The
/// heap after the last phase is within a few percent of the heap after the first, as is the
/// resident set, and the interner holds no more strings than the cluster uses. The process holds
/// the fake API server too: its stores are the same size at both points, and its change histories
/// are full from the warm-up on.
///
/// The soak runs in a process of its own (this test binary again, with only this test): the pages
/// an earlier test left to the allocator moved the resident set by up to 15% in 60 phases.
#[test]
fn memory_stays_flat_through_churn() {
    let _alone = crate::alone();
    if std::env::var_os(SOAK_CHILD).is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        return runtime.block_on(soak());
    }
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let exe = std::env::current_exe().unwrap();
    // The child's output shows as this test's would: live with `--nocapture`, else on failure.
    let nocapture = std::env::args().any(|arg| arg == "--nocapture");
    let status = std::process::Command::new(exe)
        .args(["--exact", "--test-threads", "1"])
        .args(nocapture.then_some("--nocapture"))
        .arg(format!("{module}::memory_stays_flat_through_churn"))
        .env(SOAK_CHILD, "1")
        .status()
        .unwrap();
    assert!(status.success(), "the soak failed: {status}");
}

async fn soak() {
    let phases = std::env::var("SLICED_SOAK_PHASES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(SOAK_PHASES)
        .max(1);
    // Short histories: the fake keeps every version in its windows, and that is not sliced's.
    let fake = FakeApiServer::builder()
        .history_window(SOAK_HISTORY)
        .compaction_window(SOAK_HISTORY)
        .build();
    fake.ensure_namespace("shop");
    fake.create_many(
        (0..SOAK_NODES).map(|n| node(&format!("node-{n:04}"), &format!("zone-{}", n % 3))),
    )
    .unwrap();
    fake.create_many((0..SOAK_SERVICES).map(real_pods::service))
        .unwrap();
    let mut churn = Churn::new(&fake);
    churn.generation = 1;
    for service in 0..SOAK_SERVICES {
        churn.roll(service);
    }

    let running = start(
        &fake,
        RunOptions {
            engine: EngineOptions {
                // Checked by every other run test; here the figure is memory over many phases.
                check_invariants: false,
                ..options().engine
            },
            page_size: 500,
            ..options()
        },
    );
    let events = || {
        ["Pod", "Service", "Node", "EndpointSlice", "Endpoints"]
            .iter()
            .map(|kind| running.state.metrics.watch_events(kind).get())
            .sum::<u64>()
    };
    let mut baseline = None;
    let started = Instant::now();
    let (first, last) = (SOAK_WARM_UP, SOAK_WARM_UP + phases);
    for phase in 1..=last {
        churn.generation += 1;
        for service in 0..SOAK_SERVICES {
            churn.roll(service);
            churn.flap(service);
            churn.reapply_service(service);
            // Paced on the watch, well within the fake's history window: on once sliced holds
            // the pod last written, as written (a relist, should one happen, delivers it too).
            let deadline = Instant::now() + Duration::from_secs(60);
            let (name, version) = &churn.last_write;
            while running
                .state
                .engine
                .index()
                .pods()
                .get("shop", name)
                .is_none_or(|pod| pod.meta.resource_version().as_str() != version.as_str())
            {
                assert!(
                    Instant::now() < deadline,
                    "phase {phase}: the pod watch fell behind"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        if phase == first || phase == last {
            // On a loaded machine the Endpoints watch can lag sliced's own writes for seconds:
            // each sync that finds the cache stale goes back with a longer backoff (upstream's
            // rule), which may outlast `settle`'s 30 s. Let those retries run out first.
            let deadline = Instant::now() + Duration::from_secs(180);
            while !running.state.engine.is_idle() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            settle(&fake, &running).await;
            fake.clear_requests();
            // Let the watches' buffers drain and the fake's history fill to its window.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let figure = Figure::now();
            eprintln!("after phase {phase}: {figure}");
            if phase == first {
                baseline = Some((figure, events()));
            } else if let Some((at_first, events_at_first)) = &baseline {
                eprintln!(
                    "soak: {last} phases, {} pod changes, {} watch events ({} between the figures) in {:.1?}",
                    churn.pod_writes,
                    events(),
                    events() - events_at_first,
                    started.elapsed()
                );
                at_first.assert_flat(&figure);
            }
        }
        if phase % 10 == 0 {
            fake.clear_requests();
        }
        // The trend between the two figures, unsettled: a plateau or a slope.
        if phase > first && phase < last && (phase - first) % 100 == 0 {
            eprintln!("at phase {phase}: {}", Figure::now());
        }
    }
    assert_matches_reconcile(&fake);
    running.stop().await.unwrap();
}

/// What the process holds at one point of the soak.
struct Figure {
    heap: isize,
    resident: u64,
    interned: usize,
}

impl Figure {
    fn now() -> Figure {
        Figure {
            heap: counting_alloc::live(),
            resident: resident_bytes(),
            interned: sliced::model::interned_count(),
        }
    }

    fn assert_flat(&self, last: &Figure) {
        let grew = |first: f64, last: f64| (last - first) / first;
        let heap = grew(self.heap as f64, last.heap as f64);
        assert!(heap < 0.03, "the heap grew {:.1}%", heap * 100.0);
        let resident = grew(self.resident as f64, last.resident as f64);
        assert!(
            resident < 0.05,
            "the resident set grew {:.1}%",
            resident * 100.0
        );
        // The interner sweeps a shard when it doubles: at most twice what is in use.
        assert!(
            last.interned <= 2 * self.interned + 64,
            "interned strings: {} then {}",
            self.interned,
            last.interned
        );
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "heap {:.2} MiB, resident {:.1} MiB, {} interned strings",
            self.heap as f64 / (1 << 20) as f64,
            self.resident as f64 / (1 << 20) as f64,
            self.interned
        )
    }
}

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Rolling updates of every service's pods, as a Deployment makes them.
struct Churn<'a> {
    fake: &'a FakeApiServer,
    template: k8s_openapi::api::core::v1::Pod,
    generation: usize,
    /// The live pods' names, per service.
    live: Vec<Vec<String>>,
    /// Pod creates, updates and deletes so far.
    pod_writes: u64,
    /// The name and resourceVersion of the pod last created or updated.
    last_write: (String, String),
}

impl<'a> Churn<'a> {
    fn new(fake: &'a FakeApiServer) -> Self {
        Churn {
            fake,
            template: real_pods::template(),
            generation: 0,
            live: vec![Vec::new(); SOAK_SERVICES],
            pod_writes: 0,
            last_write: Default::default(),
        }
    }

    /// A pod of the current rollout, as the API server would hold it after this write.
    fn pod(&self, service: usize, replica: usize, ready: bool) -> Value {
        let generation = self.generation;
        let mut pod = real_pods::variant(&self.template, service, SOAK_SERVICES);
        // Old and new pods of one service never share an IP; IPs come back two rollouts on.
        let ip = format!("10.{}.{}.{}", 64 + service, generation % 2, replica);
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(format!("node-{:04}", (service + replica) % SOAK_NODES));
        }
        if let Some(status) = pod.status.as_mut() {
            status.pod_ip = Some(ip.clone());
            status.pod_ips = Some(vec![k8s_openapi::api::core::v1::PodIP { ip }]);
        }
        real_pods::set_ready(&mut pod, ready);
        let mut pod = serde_json::to_value(pod).unwrap();
        // Fresh per rollout: the template hash and a controller uid (label values), the name and
        // the uid; fresh per pod: a label holding its name, as a StatefulSet's pods carry.
        let hash = format!(
            "{:010x}",
            generation.wrapping_mul(0x9e37_79b9) & 0xff_ffff_ffff
        );
        let name = format!("svc-{service}-{hash}-{replica:03}");
        let meta = &mut pod["metadata"];
        meta["name"] = json!(name);
        meta["uid"] = Value::Null;
        meta["resourceVersion"] = Value::Null;
        meta["creationTimestamp"] = json!(time(generation as u64));
        let labels = &mut meta["labels"];
        labels["pod-template-hash"] = json!(hash);
        labels["controller-uid"] = json!(format!("{service:08x}-0000-4000-8000-{generation:012x}"));
        labels["statefulset.kubernetes.io/pod-name"] = json!(name);
        // Each readiness change at its own time: the trigger times sliced writes are new too.
        for condition in pod["status"]["conditions"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            if condition["type"] == "Ready" {
                condition["lastTransitionTime"] = json!(time(self.pod_writes));
            }
        }
        pod
    }

    /// The Service applied again with kubectl: a new `last-applied-configuration`.
    fn reapply_service(&mut self, i: usize) {
        let mut service = serde_json::to_value(real_pods::service(i)).unwrap();
        service["metadata"]["uid"] = Value::Null;
        let applied =
            json!({"metadata": {"name": format!("svc-{i}")}, "generation": self.generation});
        service["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": applied.to_string()
        });
        self.fake.apply(service).unwrap();
    }

    fn write(&mut self, pod: Value) {
        let stored = self.fake.apply(pod).unwrap();
        let meta = &stored["metadata"];
        let text = |field: &str| meta[field].as_str().unwrap_or_default().to_string();
        self.last_write = (text("name"), text("resourceVersion"));
        self.pod_writes += 1;
    }

    /// The service's rollout to the current generation: new pods created not ready, then made
    /// ready, then the old ones deleted.
    fn roll(&mut self, service: usize) {
        let mut fresh = Vec::with_capacity(SOAK_REPLICAS);
        for replica in 0..SOAK_REPLICAS {
            let pod = self.pod(service, replica, false);
            fresh.push(
                pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            self.write(pod);
        }
        for replica in 0..SOAK_REPLICAS {
            self.write(self.pod(service, replica, true));
        }
        for name in std::mem::replace(&mut self.live[service], fresh) {
            self.fake.delete("pods", "shop", &name).unwrap();
            self.pod_writes += 1;
        }
    }

    /// A readiness probe that fails and recovers on a few of the service's pods.
    fn flap(&mut self, service: usize) {
        for replica in (0..SOAK_REPLICAS).step_by(5) {
            for ready in [false, true] {
                self.write(self.pod(service, replica, ready));
            }
        }
    }
}

/// A time `seconds` after a fixed start, as the API server writes times.
fn time(seconds: u64) -> String {
    let start = 1_767_225_600; // 2026-01-01T00:00:00Z
    let at = jiff::Timestamp::from_second(start + seconds as i64).unwrap();
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

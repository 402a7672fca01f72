//! The soak: memory over a long `sliced run` (every controller) through churn, which must stay
//! flat. Run twice: in the test's process (heap, resident set and interned strings, the fake API
//! server included), and as the `sliced` binary in a process of its own against the fake on a
//! socket (the resident set, sliced's alone). `perf/soak.sh` runs either for longer.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sliced::engine::EngineOptions;
use sliced::kube::run::RunOptions;

use super::churn::Churn;
use crate::fake_api::FakeApiServer;
use crate::run_harness::{Running, assert_matches_reconcile, node, options, settle, start};
use crate::{counting_alloc, real_pods};

/// Churn phases of the soak after its warm-up; `SLICED_SOAK_PHASES` sets more for a longer run
/// (`perf/soak.sh`).
const SOAK_PHASES: usize = 60;
/// Phases before the first figure: enough to fill the fake's change histories (Services change
/// least, 20 a phase), which are the fake's memory, not sliced's.
const SOAK_WARM_UP: usize = 25;
const SOAK_HISTORY: usize = 400;
pub const SOAK_SERVICES: usize = 20;
pub const SOAK_REPLICAS: usize = 25;
pub const SOAK_NODES: usize = 50;

/// Set in the process that runs the in-process soak itself.
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
/// an earlier test left to the allocator moved the resident set by up to 15% in 60 phases. Its
/// figures are that process's own, so this one does not hold the others back meanwhile: the
/// other soak runs beside it, and the two soaks take the time of one.
#[test]
fn memory_stays_flat_through_churn() {
    if std::env::var_os(SOAK_CHILD).is_some() {
        let _alone = crate::alone();
        return runtime().block_on(soak(Under::InProcess));
    }
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let exe = std::env::current_exe().unwrap();
    // The child's output shows as this test's would: live with `--nocapture`, else on failure.
    let nocapture = std::env::args().any(|arg| arg == "--nocapture");
    let status = Command::new(exe)
        .args(["--exact", "--test-threads", "1"])
        .args(nocapture.then_some("--nocapture"))
        .arg(format!("{module}::memory_stays_flat_through_churn"))
        .env(SOAK_CHILD, "1")
        .status()
        .unwrap();
    assert!(status.success(), "the soak failed: {status}");
}

/// The same soak with the `sliced` binary as a user runs it, in a process of its own against
/// the fake on a socket: its resident set, which holds nothing of the fake's, stays flat.
#[test]
fn the_sliced_binary_stays_flat_through_churn() {
    // Alone among this process's tests: the fake API server it holds here would move their
    // figures (the in-process soak, in a process of its own, may run beside it).
    let _alone = crate::alone();
    runtime().block_on(soak(Under::Binary));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Where the `sliced run` under the soak runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Under {
    InProcess,
    Binary,
}

async fn soak(under: Under) {
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

    let sliced = if under == Under::Binary {
        Sliced::binary(&fake).await
    } else {
        Sliced::InProcess(start(
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
        ))
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
            while !sliced.holds(&fake, name, version) {
                assert!(
                    Instant::now() < deadline,
                    "phase {phase}: the pod watch fell behind"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        if phase == first || phase == last {
            sliced.settle(&fake).await;
            fake.clear_requests();
            // Let the watches' buffers drain and the fake's history fill to its window.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let figure = sliced.figure();
            eprintln!("after phase {phase}: {figure}");
            if phase == first {
                baseline = Some((figure, sliced.events()));
            } else if let Some((at_first, events_at_first)) = &baseline {
                let events = sliced.events();
                eprintln!(
                    "soak: {last} phases, {} pod changes, {events} watch events ({} between the figures) in {:.1?}",
                    churn.pod_writes,
                    events - events_at_first,
                    started.elapsed()
                );
                at_first.assert_flat(&figure);
            }
        }
        if phase % 10 == 0 {
            fake.clear_requests();
        }
        // The trend between the two figures, unsettled: a plateau or a slope. Every ten phases
        // when sliced runs alone (a reading costs nothing there).
        let every = if sliced.is_binary() { 10 } else { 100 };
        if phase > first && phase < last && (phase - first) % every == 0 {
            eprintln!("at phase {phase}: {}", sliced.figure());
        }
    }
    assert_matches_reconcile(&fake);
    sliced.stop().await;
}

/// The `sliced run` under the soak.
enum Sliced {
    InProcess(Running),
    /// The `sliced` binary, its metrics served at `metrics`.
    Binary {
        child: KillOnDrop,
        metrics: SocketAddr,
        kubeconfig: PathBuf,
    },
}

impl Sliced {
    /// `sliced run` as a user starts it, with the in-process run's settings (two workers, no
    /// write limit, no lease), against the fake on a socket.
    async fn binary(fake: &FakeApiServer) -> Sliced {
        let api = fake.serve_tcp().await.unwrap();
        let kubeconfig =
            std::env::temp_dir().join(format!("sliced-soak-{}.yaml", std::process::id()));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
                 clusters: [{{name: fake, cluster: {{server: \"http://{api}\"}}}}]\n\
                 users: [{{name: fake, user: {{}}}}]\n\
                 contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n"
            ),
        )
        .unwrap();
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_sliced"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "--leader-elect=false",
                "--concurrent-service-endpoint-syncs",
                "2",
            ])
            .args(["--kube-api-qps", "10000", "--kube-api-burst", "10000"])
            .args(["--metrics-bind-address", &metrics.to_string()])
            .env(
                "RUST_LOG",
                std::env::var("SLICED_SOAK_LOG").unwrap_or_else(|_| "warn".to_string()),
            )
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Sliced::Binary {
            child: KillOnDrop(child),
            metrics,
            kubeconfig,
        }
    }

    fn is_binary(&self) -> bool {
        matches!(self, Sliced::Binary { .. })
    }

    /// Whether sliced holds the pod `name` at `version` (in another process: whether the watch
    /// has sent it).
    fn holds(&self, fake: &FakeApiServer, name: &str, version: &str) -> bool {
        match self {
            Sliced::InProcess(running) => running
                .state
                .engine
                .index()
                .pods()
                .get("shop", name)
                .is_some_and(|pod| pod.meta.resource_version().as_str() == version),
            Sliced::Binary { .. } => version
                .parse::<u64>()
                .is_ok_and(|v| fake.delivered("pods") >= v),
        }
    }

    async fn settle(&self, fake: &FakeApiServer) {
        match self {
            Sliced::InProcess(running) => {
                // On a loaded machine the Endpoints watch can lag sliced's own writes for
                // seconds: each sync that finds the cache stale goes back with a longer backoff
                // (upstream's rule), which may outlast `settle`'s 30 s. Let those retries run
                // out first.
                let deadline = Instant::now() + Duration::from_secs(180);
                while !running.state.engine.is_idle() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                settle(fake, running).await;
            }
            Sliced::Binary { .. } => {
                // Settled when two seconds pass without a write (the engine's retries included);
                // the last phase checks what it wrote against a full reconcile.
                let writes = || fake.writes("endpointslices") + fake.writes("endpoints");
                let deadline = Instant::now() + Duration::from_secs(180);
                let mut seen = writes();
                loop {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    let now = writes();
                    if now == seen || Instant::now() > deadline {
                        break;
                    }
                    seen = now;
                }
            }
        }
    }

    fn figure(&self) -> Figure {
        match self {
            Sliced::InProcess(_) => Figure {
                heap: Some(counting_alloc::live()),
                resident: resident_bytes("self"),
                interned: Some(sliced::model::interned_count()),
            },
            Sliced::Binary { child, .. } => Figure {
                heap: None,
                resident: resident_bytes(&child.0.id().to_string()),
                interned: None,
            },
        }
    }

    /// Watch events sliced has taken in, every kind.
    fn events(&self) -> u64 {
        const KINDS: [&str; 5] = ["Pod", "Service", "Node", "EndpointSlice", "Endpoints"];
        match self {
            Sliced::InProcess(running) => KINDS
                .iter()
                .map(|kind| running.state.metrics.watch_events(kind).get())
                .sum(),
            Sliced::Binary { metrics, .. } => scrape(*metrics)
                .lines()
                .filter(|line| line.starts_with("sliced_watch_events_total{"))
                .filter_map(|line| line.rsplit_once(' ')?.1.parse::<u64>().ok())
                .sum(),
        }
    }

    async fn stop(self) {
        match self {
            Sliced::InProcess(running) => {
                running.stop().await.unwrap();
            }
            Sliced::Binary {
                mut child,
                kubeconfig,
                ..
            } => {
                let _ = std::fs::remove_file(kubeconfig);
                // SIGTERM, as a kubelet stops it, where a `kill` command is at hand; then a
                // prompt, clean exit. Without one, the child is killed when dropped.
                let sent = Command::new("kill")
                    .args(["-TERM", &child.0.id().to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                if !sent {
                    return;
                }
                let deadline = Instant::now() + Duration::from_secs(30);
                let status = loop {
                    if let Some(status) = child.0.try_wait().unwrap() {
                        break status;
                    }
                    assert!(Instant::now() < deadline, "sliced run ignored SIGTERM");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                assert!(status.success(), "sliced run ended with {status}");
            }
        }
    }
}

/// A child that does not outlive a failed soak.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Already ended when the soak stopped it: then this fails, harmlessly.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /metrics`, the body as text.
fn scrape(address: SocketAddr) -> String {
    let mut text = String::new();
    let sent = TcpStream::connect(address).and_then(|mut stream| {
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: sliced\r\n\r\n")?;
        stream.read_to_string(&mut text)
    });
    assert!(sent.is_ok(), "scraping {address}: {sent:?}");
    text
}

/// What the process holds at one point of the soak (heap and interned strings only in process).
struct Figure {
    heap: Option<isize>,
    resident: u64,
    interned: Option<usize>,
}

impl Figure {
    fn assert_flat(&self, last: &Figure) {
        let grew = |first: f64, last: f64| (last - first) / first;
        if let (Some(first), Some(last)) = (self.heap, last.heap) {
            let heap = grew(first as f64, last as f64);
            assert!(heap < 0.03, "the heap grew {:.1}%", heap * 100.0);
        }
        let resident = grew(self.resident as f64, last.resident as f64);
        assert!(
            resident < 0.05,
            "the resident set grew {:.1}%",
            resident * 100.0
        );
        // The interner sweeps a shard when it doubles: at most twice what is in use.
        if let (Some(first), Some(last)) = (self.interned, last.interned) {
            assert!(
                last <= 2 * first + 64,
                "interned strings: {first} then {last}"
            );
        }
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |bytes: f64| bytes / (1 << 20) as f64;
        if let Some(heap) = self.heap {
            write!(f, "heap {:.2} MiB, ", mib(heap as f64))?;
        }
        write!(f, "resident {:.1} MiB", mib(self.resident as f64))?;
        if let Some(interned) = self.interned {
            write!(f, ", {interned} interned strings")?;
        }
        Ok(())
    }
}

/// VmRSS of a process (`self` or a pid).
fn resident_bytes(process: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

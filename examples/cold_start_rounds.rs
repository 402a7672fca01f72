//! The cold-start loop of `cargo bench --bench engine -- cold_start` (every Service queued again
//! over slices that are already right, then synced until nothing is ready), round by round, with
//! what the bench cannot show: the time to queue apart from the time to sync, the process's CPU
//! time and the heap allocations of each round.
//!
//! ```text
//! cargo run --release --example cold_start_rounds -- [PODS] [SERVICES] [ROUNDS]
//! ```
//!
//! Defaults: 1,000,000 pods, 100,000 services, 5 rounds. Allocations are a figure a noisy host
//! does not move; under `valgrind --tool=cachegrind` at a smaller size, so are instructions.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sliced::change::Change;
use sliced::controllers::Controllers;
use sliced::engine::{Engine, EngineOptions};
use sliced::queue::{Clock, VirtualClock};
use sliced::sim;
use sliced::sink::memory::MemorySink;

/// mimalloc, as the binary and the benches use, counting each allocation.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed to mimalloc unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is mimalloc's.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// User and system CPU time of the whole process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given; all-zero is a valid rusage.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let of = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_micros(t.tv_usec.unsigned_abs())
    };
    of(usage.ru_utime) + of(usage.ru_stime)
}

fn argument(position: usize, default: usize) -> anyhow::Result<usize> {
    match std::env::args().nth(position) {
        Some(value) => value
            .parse()
            .with_context(|| format!("argument {position}: {value:?} is not a count")),
        None => Ok(default),
    }
}

fn main() -> anyhow::Result<()> {
    let pods = argument(1, 1_000_000)?;
    let services = argument(2, 100_000)?;
    let rounds = argument(3, 5)?;
    let snapshot = sim::cluster(pods, services, 1);
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new());
    let options = EngineOptions {
        controllers: Controllers::ENDPOINTSLICE,
        ..EngineOptions::default()
    };
    let engine = Engine::new(options, clock);
    snapshot.load_cluster_into(&engine);
    let sink = MemorySink::new(1);
    sink.set_logging(false);
    while !engine.sync_ready(&sink).is_empty() {}

    println!("{pods} pods, {services} services; each round queues every service and syncs them");
    for round in 1..=rounds {
        let (started, cpu, allocations) = (
            Instant::now(),
            cpu_time(),
            ALLOCATIONS.load(Ordering::Relaxed),
        );
        for service in &snapshot.services {
            engine.handle(Change::Service(service.clone()));
        }
        let queued = started.elapsed();
        let (mut syncs, mut writes) = (0, 0);
        loop {
            let records = engine.sync_ready(&sink);
            if records.is_empty() {
                break;
            }
            syncs += records.len();
            writes += records.iter().map(|r| r.writes.len()).sum::<usize>();
        }
        let synced = started.elapsed() - queued;
        if writes != 0 {
            bail!("round {round}: {writes} writes over slices that were already right");
        }
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations;
        println!(
            "round {round}: queue {queued:.1?}, sync {synced:.1?} ({syncs} syncs), CPU {:.1?}, \
             {:.1} allocations a service",
            cpu_time() - cpu,
            allocations as f64 / services.max(1) as f64,
        );
    }
    Ok(())
}

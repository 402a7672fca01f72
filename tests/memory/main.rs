//! The memory tests: the heap `sliced run` holds for its watch caches and over a long churn
//! (`run`, `soak`), the bytes the index spends per pod (`index`), and what holding real-shaped pods costs
//! against a kube-runtime reflector store (`watch`).
//!
//! A global allocator (`counting_alloc`) counts the live heap bytes of the whole process, every
//! thread's. So no other test may live in this binary, and the tests here run one at a time in
//! it: each holds the lock `alone` gives for its whole run, from before its first allocation to
//! its end. The in-process soak runs in a child process of its own, which takes the lock there,
//! so it runs beside the others.
//! Taking the lock sets the allocator as the `sliced` binary sets it, so resident figures are the
//! shipped binary's.

#[path = "../support/counting_alloc.rs"]
mod counting_alloc;
#[path = "../support/fake_api/mod.rs"]
mod fake_api;
#[path = "../support/real_pods.rs"]
mod real_pods;
#[path = "../support/run_harness.rs"]
mod run_harness;
#[path = "../support/snapshot_reference.rs"]
mod snapshot_reference;

mod churn;
mod index;
mod run;
mod soak;
mod watch;

use tokio::sync::{Mutex, MutexGuard};

/// Held by the test that is measuring; released when it ends, passed or failed.
static ALONE: Mutex<()> = Mutex::const_new(());

/// The process to this test alone, for a test on a thread of its own (not inside a runtime).
fn alone() -> MutexGuard<'static, ()> {
    let guard = ALONE.blocking_lock();
    sliced::allocator::return_freed_pages_at_once();
    sliced::allocator::no_transparent_huge_pages();
    guard
}

/// The process to this test alone, for a test in a tokio runtime.
async fn alone_async() -> MutexGuard<'static, ()> {
    let guard = ALONE.lock().await;
    sliced::allocator::return_freed_pages_at_once();
    sliced::allocator::no_transparent_huge_pages();
    guard
}

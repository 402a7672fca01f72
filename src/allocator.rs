//! The settings of mimalloc, the allocator `sliced` ships with (the global allocator of the binary,
//! the benches and the memory tests).

/// `mi_option_purge_delay` in mimalloc 3's `mimalloc.h` (libmimalloc-sys names no constant for it).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// `mi_option_allow_thp` in the same header.
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// Freed pages go back to the system at once, not after mimalloc 3's default delay of a second.
/// Under steady churn the delayed pages moved the resident set of a long `run` by up to 8% with the
/// heap flat: a figure that wanders is no use to an operator sizing memory limits. Costs 1-7% on
/// the steady-churn bench and 2-15% on a cold start (perf/README.md, "Soak").
pub fn return_freed_pages_at_once() {
    // SAFETY: sets one of mimalloc's options, which it reads atomically from any thread.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
}

/// No transparent huge pages for this process, whatever the machine's setting. mimalloc asks for
/// them on its arenas, and a huge page is resident whole however little of it is in use: in a
/// long `run` the resident set then moved in 2 MiB steps as the kernel collapsed and split them,
/// up to 14% between two points with the heap flat (perf/README.md, "Soak"). Without them the
/// default `simulate` peaks 13% lower and a 1M-pod `reconcile` 4-5% lower, with less system time
/// and no more wall time.
pub fn no_transparent_huge_pages() {
    // SAFETY: as above; mimalloc stops advising huge pages on the memory it maps from now on.
    unsafe { libmimalloc_sys::mi_option_set(ALLOW_THP, 0) }
    // The arena mapped before `main` keeps its advice; the process-wide switch overrides it.
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes no pointers; it sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// The least time between two collections of one thread's heap.
const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// For a thread that has run out of work: mimalloc hands back a block freed by another thread, and
/// the pages it empties, only when the thread that allocated it next allocates or collects. A
/// watch or engine thread that goes idle after a burst kept those pages resident until its next
/// burst, so the resident set of an idle `run` depended on which thread stopped last. At most ten
/// times a second per thread: a busy thread parks often, and a collection walks its whole heap.
pub fn collect_idle_thread() {
    thread_local! {
        static LAST: std::cell::Cell<Option<std::time::Instant>> =
            const { std::cell::Cell::new(None) };
    }
    let now = std::time::Instant::now();
    let due = LAST.with(|last| {
        let due = last
            .get()
            .is_none_or(|at| now.duration_since(at) >= COLLECT_EVERY);
        if due {
            last.set(Some(now));
        }
        due
    });
    if due {
        // SAFETY: collects the calling thread's own heap, which mimalloc allows at any time.
        unsafe { libmimalloc_sys::mi_collect(false) }
    }
}

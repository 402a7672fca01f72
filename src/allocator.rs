//! The settings of mimalloc, the allocator `sliced` ships with (the global allocator of the binary,
//! the benches and the memory tests).

/// `mi_option_purge_delay` in mimalloc 3's `mimalloc.h` (libmimalloc-sys names no constant for it).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed pages go back to the system at once, not after mimalloc 3's default delay of a second.
/// Under steady churn the delayed pages moved the resident set of a long `run` by up to 8% with the
/// heap flat: a figure that wanders is no use to an operator sizing memory limits. Costs 1-7% on
/// the steady-churn bench and 2-15% on a cold start (perf/README.md, "Soak").
pub fn return_freed_pages_at_once() {
    // SAFETY: sets one of mimalloc's options, which it reads atomically from any thread.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
}

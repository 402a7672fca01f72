//! The work queue: delaying-queue semantics, rate limits and retries in virtual time, and a threaded
//! check that no key is ever processed twice at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use sliced::queue::{
    Clock, QueueConfig, QueueStats, RetryDecision, SystemClock, VirtualClock, WorkQueue,
};

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn queue() -> (WorkQueue<&'static str>, VirtualClock) {
    queue_with(QueueConfig::default())
}

fn queue_with<K: Clone + Eq + std::hash::Hash + Send>(
    config: QueueConfig,
) -> (WorkQueue<K>, VirtualClock) {
    let clock = VirtualClock::new();
    (WorkQueue::new(config, clock.clone()), clock)
}

#[test]
fn add_deduplicates_ready_keys() {
    let (q, _) = queue();
    q.add("a");
    q.add("b");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!(q.pop_ready(10), ["a", "b"]);
    assert_eq!(q.stats().adds, 2);
    q.done(&"a");
    q.done(&"b");
    assert!(q.is_idle());
    assert_eq!(q.stats().tracked, 0);
}

#[test]
fn add_after_keeps_the_earliest_time() {
    let (q, clock) = queue();
    q.add_after("k", 10 * S);
    q.add_after("k", 20 * S); // later: does not postpone
    assert_eq!(q.next_ready_at(), Some(10 * S));
    q.add_after("k", 5 * S); // earlier: advances
    assert_eq!(q.next_ready_at(), Some(5 * S));
    assert_eq!(q.delayed_len(), 1);

    clock.set(5 * S - MS);
    assert!(q.pop_ready(10).is_empty());
    clock.set(5 * S);
    assert_eq!(q.pop_ready(10), ["k"]);
    q.done(&"k");
    // The superseded timers do not fire again.
    clock.set(30 * S);
    assert!(q.pop_ready(10).is_empty());
    assert_eq!(q.next_ready_at(), None);
    assert!(q.is_idle());
}

#[test]
fn batch_window_collapses_events_into_one_sync() {
    let (q, clock) = queue();
    for t in 0..10 {
        clock.set(t * 100 * MS);
        q.add_after("svc", S);
    }
    // One sync at first_event_time + delay.
    assert_eq!(q.next_ready_at(), Some(S));
    clock.set(S);
    assert_eq!(q.pop_ready(10), ["svc"]);
    q.done(&"svc");
    clock.set(10 * S);
    assert!(q.pop_ready(10).is_empty());
}

#[test]
fn add_after_zero_is_add_and_a_ready_key_still_gets_its_timer() {
    let (q, clock) = queue();
    q.add_after("a", Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.delayed_len(), 0);
    // Already ready: not queued twice, but its timer is kept and fires later (client-go's
    // waiting list does not look at the queue).
    q.add_after("a", S);
    assert_eq!(q.len(), 1);
    assert_eq!(q.next_ready_at(), Some(S));
    assert_eq!(q.pop_ready(10), ["a"]);
    q.done(&"a");
    clock.advance(S);
    assert_eq!(q.pop_ready(10), ["a"]);
    q.done(&"a");
    assert!(q.is_idle());
}

#[test]
fn add_does_not_cancel_a_pending_timer() {
    let (q, clock) = queue();
    q.add_after("a", 5 * S);
    q.add("a");
    assert_eq!((q.len(), q.delayed_len()), (1, 1));
    assert_eq!(q.next_ready_at(), Some(5 * S));
    assert_eq!(q.pop_ready(10), ["a"]);
    q.done(&"a");
    // The timer fires as set: a second sync, as upstream's delaying queue does.
    clock.advance(5 * S);
    assert_eq!(q.pop_ready(10), ["a"]);
    q.done(&"a");
    assert!(q.is_idle());
}

#[test]
fn add_while_processing_requeues_after_done() {
    let (q, _) = queue();
    q.add("k");
    assert_eq!(q.pop_ready(10), ["k"]);
    q.add("k");
    q.add("k");
    // Never handed out twice at once.
    assert!(q.pop_ready(10).is_empty());
    assert_eq!((q.len(), q.processing_len()), (0, 1));
    q.done(&"k");
    assert_eq!(q.pop_ready(10), ["k"]);
    q.done(&"k");
    assert!(q.is_idle());
    // done on a key not being processed is ignored.
    q.done(&"k");
    q.done(&"other");
    assert!(q.is_idle());
}

#[test]
fn add_after_while_processing_keeps_the_requested_time() {
    let (q, clock) = queue();
    q.add("k");
    assert_eq!(q.pop_ready(1), ["k"]);
    q.add_after("k", 5 * S);
    clock.set(S);
    q.done(&"k");
    // Back to waiting for its timer, not ready.
    assert!(q.pop_ready(10).is_empty());
    assert_eq!(q.next_ready_at(), Some(5 * S));
    clock.set(5 * S);
    assert_eq!(q.pop_ready(10), ["k"]);

    // The timer fires while the key is still processing: ready only after done.
    q.add_after("k", S);
    clock.set(10 * S);
    assert!(q.pop_ready(10).is_empty());
    assert_eq!(q.delayed_len(), 0);
    q.done(&"k");
    assert_eq!(q.pop_ready(10), ["k"]);

    // An add while processing queues it at done; a pending timer still fires later.
    q.add_after("k", 100 * S);
    q.add("k");
    q.done(&"k");
    assert_eq!(q.pop_ready(10), ["k"]);
    q.done(&"k");
    assert!(!q.is_idle());
    clock.set(110 * S);
    assert_eq!(q.pop_ready(10), ["k"]);
    q.done(&"k");
    assert!(q.is_idle());
}

#[test]
fn pop_ready_respects_max_and_fifo_order() {
    let (q, clock) = queue_with::<u32>(QueueConfig::default());
    for k in 0..10 {
        q.add(k);
    }
    assert_eq!(q.pop_ready(3), [0, 1, 2]);
    assert!(q.pop_ready(0).is_empty());
    assert_eq!(q.pop_ready(4), [3, 4, 5, 6]);
    assert_eq!(q.pop_ready(100), [7, 8, 9]);

    // Due timers join the back of the queue in time order, ties in scheduling order.
    q.add_after(20, 2 * S);
    q.add_after(21, S);
    q.add_after(22, S);
    q.add(23);
    q.done(&5); // not re-added: nothing happens
    q.add(4); // re-added while processing: ready at done
    clock.set(3 * S);
    q.done(&4);
    assert_eq!(q.pop_ready(100), [23, 21, 22, 20, 4]);
}

#[test]
fn next_ready_at_tracks_the_earliest_live_timer() {
    let (q, clock) = queue();
    assert_eq!(q.next_ready_at(), None);
    q.add_after("a", 5 * S);
    q.add_after("b", 3 * S);
    assert_eq!(q.next_ready_at(), Some(3 * S));
    q.add("b");
    // b is ready now and its timer still stands.
    assert_eq!(q.next_ready_at(), Some(3 * S));
    // The simulator's loop: sync what is ready, then jump to the next timer.
    let mut popped = Vec::new();
    loop {
        let keys = q.pop_ready(10);
        for k in &keys {
            q.done(k);
        }
        popped.extend(keys);
        match q.next_ready_at() {
            Some(at) => clock.set(at),
            None => break,
        }
    }
    assert_eq!(popped, ["b", "b", "a"]);
    assert_eq!(clock.now(), 5 * S);
}

#[test]
fn backoff_sequence_then_drop_after_max_retries() {
    let (q, clock) = queue();
    let mut delays = Vec::new();
    q.add("svc");
    loop {
        let got = q.pop_ready(10);
        assert_eq!(got, ["svc"], "at {:?}", clock.now());
        // The sync fails; handleErr runs while the key is still processing.
        let decision = q.retry_or_drop(&"svc");
        q.done(&"svc");
        match decision {
            RetryDecision::Retry { after } => {
                delays.push(after.as_secs());
                // Not a moment early.
                clock.advance(after - MS);
                assert!(q.pop_ready(10).is_empty());
                clock.advance(MS);
            }
            RetryDecision::Dropped => break,
        }
    }
    assert_eq!(
        delays,
        [
            1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000, 1000, 1000, 1000
        ]
    );
    assert_eq!(q.num_requeues(&"svc"), 0);
    assert!(q.is_idle());
    let stats = q.stats();
    assert_eq!((stats.retries, stats.drops, stats.adds), (15, 1, 16));
}

#[test]
fn forget_resets_the_backoff() {
    let (q, _) = queue();
    assert_eq!(q.add_rate_limited("k"), S);
    assert_eq!(q.add_rate_limited("k"), 2 * S);
    assert_eq!(q.add_rate_limited("k"), 4 * S);
    assert_eq!(q.num_requeues(&"k"), 3);
    q.forget(&"k");
    assert_eq!(q.num_requeues(&"k"), 0);
    assert_eq!(q.add_rate_limited("k"), S);
    // Forgetting an unknown key is harmless.
    q.forget(&"nope");
    assert_eq!(q.num_requeues(&"nope"), 0);
}

#[test]
fn token_bucket_burst_then_spacing() {
    // Without per-key backoff the bucket alone decides.
    let config = QueueConfig {
        base_delay: Duration::ZERO,
        ..QueueConfig::default()
    };
    let (q, clock) = queue_with::<u32>(config);
    for k in 0..100 {
        assert_eq!(q.add_rate_limited(k), Duration::ZERO);
    }
    assert_eq!(q.len(), 100);
    for k in 100..150u32 {
        assert_eq!(q.add_rate_limited(k), 100 * MS * (k - 99));
    }
    assert_eq!(q.next_ready_at(), Some(100 * MS));
    clock.set(S);
    assert_eq!(q.len(), 110);
}

#[test]
fn token_bucket_combines_with_backoff_as_max() {
    let (q, clock) = queue_with::<u32>(QueueConfig::default());
    // Distinct keys: per-key backoff 1 s, bucket 0 for 100 calls then 100 ms spacing.
    let delays: Vec<Duration> = (0..130).map(|k| q.add_rate_limited(k)).collect();
    assert!(delays[..110].iter().all(|d| *d == S));
    assert_eq!(delays[110], 1100 * MS);
    assert_eq!(delays[119], 2 * S);
    assert_eq!(delays[129], 3 * S);
    // One key again: the bucket (3.1 s) beats its 2 s backoff...
    assert_eq!(q.add_rate_limited(0), 3100 * MS);
    // ...until the backoff grows past it; the bucket still spends a token each time.
    assert_eq!(q.add_rate_limited(0), 4 * S);
    assert_eq!(q.add_rate_limited(0), 8 * S);
    clock.set(100 * S);
    assert_eq!(q.add_rate_limited(500), S);
}

#[test]
fn stats_count_adds_delays_and_depth() {
    let (q, clock) = queue();
    q.add("a");
    q.add("a");
    q.add_after("b", S);
    q.add_after("b", 2 * S);
    q.add_rate_limited("c");
    assert_eq!(
        q.stats(),
        QueueStats {
            depth: 1,
            delayed: 2,
            processing: 0,
            tracked: 3,
            adds: 1,
            add_afters: 3,
            retries: 1,
            drops: 0,
        }
    );
    clock.set(S);
    let _ = q.pop_ready(1);
    let stats = q.stats();
    assert_eq!(
        (stats.depth, stats.delayed, stats.processing, stats.adds),
        (2, 0, 1, 3)
    );
}

#[test]
fn shut_down_stops_adds_and_blocking_pops() {
    let (q, clock) = queue();
    q.add("a");
    q.add_after("b", S);
    q.shut_down();
    assert!(q.is_shut_down());
    q.add("c");
    q.add_after("d", S);
    // Ready keys drain; then pop_blocking returns at once, however long the timeout.
    assert_eq!(q.pop_blocking(10, Duration::from_secs(3600)), ["a"]);
    clock.advance(10 * S);
    assert!(q.pop_blocking(10, Duration::MAX).is_empty());
    assert!(q.pop_ready(10).is_empty());
}

#[test]
fn pop_blocking_with_virtual_clock_does_not_wait_for_timers() {
    let (q, clock) = queue();
    q.add_after("a", S);
    let start = Instant::now();
    assert!(q.pop_blocking(10, Duration::from_secs(3600)).is_empty());
    assert!(start.elapsed() < Duration::from_secs(60));
    clock.advance(S);
    assert_eq!(q.pop_blocking(10, Duration::from_secs(3600)), ["a"]);
    // Nothing at all: waits for the (short) timeout only.
    q.done(&"a");
    assert!(q.pop_blocking(10, MS).is_empty());
}

#[test]
fn pop_blocking_wakes_on_add_and_on_timers() {
    let q = Arc::new(WorkQueue::<u32>::new(
        QueueConfig::default(),
        SystemClock::new(),
    ));
    let waiter = {
        let q = Arc::clone(&q);
        thread::spawn(move || q.pop_blocking(10, Duration::from_secs(60)))
    };
    q.add(7);
    assert_eq!(waiter.join().ok(), Some(vec![7]));

    // A real timer: the waiter wakes when it is due, not at the timeout.
    let start = Instant::now();
    q.add_after(8, 5 * MS);
    assert_eq!(q.pop_blocking(10, Duration::from_secs(60)), [8]);
    assert!(start.elapsed() >= 5 * MS);
    assert!(start.elapsed() < Duration::from_secs(30));

    // Shutdown wakes a waiter blocked with no deadline.
    let waiter = {
        let q = Arc::clone(&q);
        thread::spawn(move || q.pop_blocking(10, Duration::MAX))
    };
    q.shut_down();
    assert_eq!(waiter.join().ok(), Some(vec![]));
}

#[test]
fn threads_never_process_one_key_concurrently() {
    const KEYS: usize = 64;
    const PRODUCERS: usize = 4;
    const CONSUMERS: usize = 6;
    const ADDS: usize = 20_000;

    let q = Arc::new(WorkQueue::<usize>::new(
        QueueConfig::default(),
        SystemClock::new(),
    ));
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    // A producer bumps a key's generation before adding it; a consumer records the generation it saw
    // after popping. Every add must be followed by a pop, so they end equal.
    let generation: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let producers_done = Arc::new(AtomicBool::new(false));

    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|c| {
            let (q, busy, generation, seen, producers_done) = (
                Arc::clone(&q),
                Arc::clone(&busy),
                Arc::clone(&generation),
                Arc::clone(&seen),
                Arc::clone(&producers_done),
            );
            thread::spawn(move || {
                let mut processed = 0u64;
                loop {
                    let batch = q.pop_blocking(1 + c % 4, 10 * MS);
                    if batch.is_empty() {
                        if producers_done.load(Ordering::Acquire) && q.is_idle() {
                            return processed;
                        }
                        continue;
                    }
                    for &k in &batch {
                        assert!(!busy[k].swap(true, Ordering::AcqRel), "key {k} twice");
                        seen[k].fetch_max(generation[k].load(Ordering::Acquire), Ordering::AcqRel);
                        processed += 1;
                        if processed.is_multiple_of(7) {
                            // Re-add while processing: must wait for done.
                            q.add(k);
                        }
                    }
                    for &k in &batch {
                        busy[k].store(false, Ordering::Release);
                        q.done(&k);
                    }
                }
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (q, generation) = (Arc::clone(&q), Arc::clone(&generation));
            thread::spawn(move || {
                for i in 0..ADDS {
                    let k = (i * 31 + p * 7) % KEYS;
                    generation[k].fetch_add(1, Ordering::AcqRel);
                    q.add(k);
                }
            })
        })
        .collect();
    for p in producers {
        assert!(p.join().is_ok());
    }
    producers_done.store(true, Ordering::Release);
    let mut processed = 0;
    for c in consumers {
        match c.join() {
            Ok(n) => processed += n,
            Err(e) => std::panic::resume_unwind(e),
        }
    }
    assert!(q.is_idle());
    assert!(processed >= KEYS as u64);
    for k in 0..KEYS {
        assert_eq!(
            seen[k].load(Ordering::Acquire),
            generation[k].load(Ordering::Acquire),
            "key {k} lost an add"
        );
    }
    let stats = q.stats();
    assert_eq!((stats.depth, stats.processing, stats.tracked), (0, 0, 0));
}

#[test]
fn many_keys_with_timers() {
    let (q, clock) = queue_with::<u32>(QueueConfig::default());
    let n = 200_000u32;
    for k in 0..n {
        q.add_after(k, S * (1 + k % 100));
        // Half the keys get an earlier time, leaving stale timers behind.
        if k.is_multiple_of(2) {
            q.add_after(k, MS * (1 + k % 1000));
        }
    }
    assert_eq!(q.delayed_len(), n as usize);
    let mut total = 0;
    let mut last = Duration::ZERO;
    while let Some(at) = q.next_ready_at() {
        assert!(at >= last);
        last = at;
        clock.set(at);
        let batch = q.pop_ready(usize::MAX);
        for k in &batch {
            q.done(k);
        }
        total += batch.len();
    }
    assert_eq!(total, n as usize);
    assert!(q.is_idle());
}

#[test]
fn metrics_time_waits_and_work_in_queue_clock() {
    let (q, clock) = queue();
    q.add("a");
    // Due at 2 s, promoted only at 5 s: it waited from 2 s.
    q.add_after("b", 2 * S);
    q.add_after("c", Duration::ZERO);
    clock.set(5 * S);
    assert_eq!(q.pop_ready(10), vec!["a", "c", "b"]);
    let m = q.metrics();
    assert_eq!(m.queue_wait.count(), 3);
    assert_eq!(m.queue_wait.sum, 5 * S + 3 * S + 5 * S);
    // 5 s is above the 1 s bound and within 10 s; 3 s as well.
    assert_eq!(m.queue_wait.counts[9], 3);
    // Every add_after counts as a retry, a zero delay too, as client-go counts AddAfter.
    assert_eq!(m.retries, 2);
    assert_eq!((m.depth, m.adds), (0, 3));

    // Added again while processed: pending, so in the depth, and it waits from now.
    q.add("a");
    clock.set(7 * S);
    let m = q.metrics();
    assert_eq!(m.depth, 1);
    assert_eq!(m.unfinished_work, 3 * 2 * S);
    assert_eq!(m.longest_running, 2 * S);
    q.done(&"a");
    q.done(&"b");
    let m = q.metrics();
    assert_eq!(m.work.count(), 2);
    assert_eq!(m.work.sum, 4 * S);
    assert_eq!(m.unfinished_work, 2 * S);
    clock.set(8 * S);
    q.done(&"c");
    assert_eq!(q.pop_ready(10), vec!["a"]);
    let m = q.metrics();
    assert_eq!(m.queue_wait.sum, 13 * S + 3 * S);
    assert_eq!(m.longest_running, Duration::ZERO);
    assert_eq!(m.depth, 0);
    q.add_rate_limited("d");
    assert_eq!(q.metrics().retries, 3);
}

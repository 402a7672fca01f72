//! The periodic resync (`--min-resync-period`): what others change without an event that queues a
//! sync is repaired within twice the period.

use std::time::{Duration, Instant};

use sliced::kube::run::RunOptions;

use super::{ready_count, slices_of, small_cluster};
use crate::run_harness::{assert_matches_reconcile, options, settle, start};

/// A fresh process has written none of the slices it finds, so upstream's tracker does not know
/// them: someone deleting one queues nothing. The resync puts it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untracked_slice_deleted_by_someone_else_is_back_after_a_resync() {
    let fake = small_cluster();
    let first = start(&fake, options());
    settle(&fake, &first).await;
    first.stop().await.unwrap();

    let period = Duration::from_millis(400);
    let running = start(
        &fake,
        RunOptions {
            min_resync_period: period,
            ..options()
        },
    );
    settle(&fake, &running).await;
    let slice = slices_of(&fake, "web").remove(0);
    let name = slice["metadata"]["name"].as_str().unwrap_or_default();
    fake.delete("endpointslices", "default", name).unwrap();
    let deleted = Instant::now();
    while ready_count(&slices_of(&fake, "web")) < 3 {
        assert!(
            deleted.elapsed() < 2 * period + Duration::from_secs(3),
            "the slice was not put back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle(&fake, &running).await;
    assert_matches_reconcile(&fake);
    running.stop().await.unwrap();
}

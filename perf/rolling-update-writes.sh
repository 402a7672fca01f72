#!/usr/bin/env bash
# Writes in parallel (issue 14, item 6): `sliced run` against the in-process fake API server,
# which answers every write 5 ms late, through a Deployment-style rolling update of one 5,000-pod
# service. One worker (one write at a time) against five, alternately, in one run; and both with
# no latency, for the floor the test's own pod changes set.
#   perf/rolling-update-writes.sh [PODS]      (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
SLICED_ROLLING_PODS=${1:-5000} cargo test --release --quiet --test adapter \
  rolling_update_of_a_large_service_serial_against_parallel -- --ignored --nocapture 2>&1 \
  | grep -E '^rolling update'

#!/usr/bin/env bash
# The soak: `sliced run` (every controller) against the fake API server through rolling updates
# and readiness flips of real-shaped pods, memory compared after the first and the last phase.
# CI runs 60 phases after a warm-up of 25, both ways; this runs PHASES (default 1,200: two
# million pod changes) one way: by default the `sliced` binary in a process of its own, its
# resident set (sliced's alone) read every ten phases; IN_PROCESS=1 runs it in the test's
# process, with the heap and the interned strings as well (the fake's memory then included).
set -euo pipefail
cd "$(dirname "$0")/.."
phases=${PHASES:-1200}
test=soak::the_sliced_binary_stays_flat_through_churn
if [ -n "${IN_PROCESS:-}" ]; then test=soak::memory_stays_flat_through_churn; fi
SLICED_SOAK_PHASES=$phases cargo test --release --locked --test memory "$test" -- --exact \
  --nocapture 2>&1 | grep --line-buffered -E "after phase|at phase|soak:|test result|panicked|grew|WARN|ERROR"

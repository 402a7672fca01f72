#!/usr/bin/env bash
# The soak: `sliced run` (every controller) against the fake API server through rolling updates
# and readiness flips of real-shaped pods, with heap, resident set and interned strings compared
# after the first and the last phase. CI runs 60 phases after a warm-up of 25; this runs PHASES (default 1,200: two million pod changes).
set -euo pipefail
cd "$(dirname "$0")/.."
phases=${PHASES:-1200}
SLICED_SOAK_PHASES=$phases cargo test --release --locked --test memory run::memory_stays_flat \
  -- --nocapture 2>&1 | grep -E "after phase|at phase|soak:|test result|panicked"

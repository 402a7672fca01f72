#!/usr/bin/env bash
# Runs `sliced simulate` under injected faults for every trace kind and several seeds, and sums
# what was injected and what came out: the figures of the fault harness in perf/README.md.
#   perf/faults.sh [SEEDS] [PODS] [STEPS] [PROFILE]      (defaults: 5 20000 20000 chaos)
# Every run checks the invariant after every sync, and ends only when every service holds what a
# full reconcile gives; a run that does not exits 1 and is counted as failed. Needs python3.
set -euo pipefail
seeds=${1:-5}
pods=${2:-20000}
steps=${3:-20000}
profile=${4:-chaos}
cd "$(dirname "$0")/.."
cargo build --release --quiet
out=$(mktemp -d)
failed=0
for kind in mixed rolling-update scale node-loss readiness-flap label-move; do
  for seed in $(seq 1 "$seeds"); do
    if ! ./target/release/sliced simulate --pods "$pods" --services $((pods / 100)) --steps "$steps" \
        --trace "$kind" --seed "$seed" --faults "$profile" --check-invariants -o json \
        >"$out/$kind-$seed.json" 2>"$out/$kind-$seed.err"; then
      failed=$((failed + 1))
      echo "FAILED: $kind seed $seed (see $out/$kind-$seed.err)" >&2
    fi
  done
done
python3 - "$out" "$failed" <<'PY'
import json, pathlib, sys
runs = [json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")) if p.stat().st_size]
injected, totals = {}, {"syncs": 0, "sync_errors": 0, "stale": 0, "checks": 0, "violations": 0,
                        "unsettled": 0, "unmanaged_writes": 0, "not_matching_fresh_reconcile": 0}
for r in runs:
    for k, v in r["faults"]["injected"].items():
        injected[k] = injected.get(k, 0) + v
    totals["syncs"] += r["syncs"]; totals["sync_errors"] += r["sync_errors"]; totals["stale"] += r["stale"]
    totals["checks"] += r["invariant"]["checks"]; totals["violations"] += r["invariant"]["violations"]
    totals["unsettled"] += len(r["invariant"]["unsettled"] or [])
    totals["unmanaged_writes"] += len(r["faults"]["unmanaged_writes"])
    totals["not_matching_fresh_reconcile"] += 0 if r["matches_fresh_reconcile"] else 1
print(f"runs: {len(runs)} ({sys.argv[2]} failed), profile {runs[0]['faults']['profile'] if runs else '-'}")
print(f"pods per run: {runs[0]['pods'] if runs else 0}; steps per run: {runs[0]['steps'] if runs else 0}")
print("injected: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in injected.items() if v))
print(f"injected in all: {sum(injected.values())}")
print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in totals.items()))
PY

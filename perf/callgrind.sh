#!/usr/bin/env bash
# Instructions executed, counted by valgrind's callgrind: a figure that machine noise does not move
# (the same build gave the same count to within 0.03% here), for A/B comparisons on a busy machine and
# changes too small for the wall clock. The workload is `sliced simulate` on one worker thread: a
# generated cluster (fixed seed), its cold start and a churn trace, replayed in virtual time.
#
#   perf/callgrind.sh [SIMULATE-ARGS...]
#   perf/callgrind.sh                                     # --pods 10000 --services 200 --steps 10000
#   perf/callgrind.sh --pods 2000 --services 40 --steps 2000 --controllers endpointslice
#   RUNS=2 perf/callgrind.sh                              # twice, to see the spread
#   SLICED=/tmp/sliced-old perf/callgrind.sh              # another build (not built here)
#
# Prints, for each run, the total instructions (Ir) and wall time under valgrind (~25 s for the
# default, ~50x native), then the 25 functions with the most instructions of their own (inlined
# code counted in the function it was inlined into) from the last run, and where its profile is
# (kcachegrind or `callgrind_annotate --tree=caller FILE` to browse it). Instructions are not time:
# a cache miss costs none, so check a change that moves memory traffic with the benches too.
# Needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -eq 0 ]; then
  set -- --pods 10000 --services 200 --steps 10000
fi
runs=${RUNS:-1}
bin=${SLICED:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --bin sliced
  bin=target/release/sliced
fi
dir=${TMPDIR:-/tmp}/sliced-callgrind
mkdir -p "$dir"

echo "== valgrind --tool=callgrind $bin simulate $* --workers 1"
: >"$dir/runs"
for run in $(seq 1 "$runs"); do
  out=$dir/callgrind.out.$run
  start=$(date +%s.%N)
  valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$bin" simulate "$@" --workers 1 >"$dir/simulate.$run.txt" 2>"$dir/valgrind.$run.txt" ||
    { cat "$dir/valgrind.$run.txt" >&2; exit 1; }
  echo "$run $(sed -n 's/^summary: //p' "$out") $start $(date +%s.%N)" | tee -a "$dir/runs" | python3 -c '
r, ir, start, end = input().split()
print(f"run {r}: {int(ir):,} instructions (Ir), {float(end) - float(start):.1f} s under valgrind")'
done
python3 - "$dir/runs" <<'PY'
import sys
ir = [int(line.split()[1]) for line in open(sys.argv[1])]
print(f"Ir {ir[-1]:,}" + (f"; spread over {len(ir)} runs: {max(ir) - min(ir):,} instructions, "
      f"{100 * (max(ir) - min(ir)) / min(ir):.4f}% of the least" if len(ir) > 1 else ""))
PY
grep -E '^(syncs|writes|slices)' "$dir/simulate.$runs.txt" | sed 's/^/  simulate: /' || true

echo "== the most instructions of their own (callgrind_annotate, by function)"
callgrind_annotate --threshold=100 --auto=no "$out" 2>/dev/null | python3 -c '
import re, sys
total, by_fn = None, {}
for line in sys.stdin:
    m = re.match(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
    if not m:
        continue
    ir, what = int(m.group(1).replace(",", "")), m.group(2)
    if what.strip() == "PROGRAM TOTALS":
        total = ir
        continue
    what = re.sub(r" \[[^\]]*\]$", "", what)  # the object file
    fn = what.split(":", 1)[1] if ":" in what else what  # file:function; paths hold no colon
    by_fn[fn] = by_fn.get(fn, 0) + ir
for fn, ir in sorted(by_fn.items(), key=lambda kv: -kv[1])[:25]:
    print(f"{ir:>15,} {100 * ir / total:6.2f}%  {fn[:150]}")'
echo "profile: $out"

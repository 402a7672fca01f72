#!/usr/bin/env bash
# A flame graph of one criterion bench case: builds the bench, runs CASE for 5 s under
# `perf record --call-graph dwarf`, folds the stacks and draws them as an SVG.
#
#   perf/flamegraph.sh BENCH CASE [OUT.svg]
#   perf/flamegraph.sh lookup 'pod_to_services/services_for_pod/10000'
#   perf/flamegraph.sh dns 'dns/records of 100k pods' /tmp/dns.svg
#
# CASE is criterion's filter (a regex over the case ids `cargo bench --bench BENCH -- --list`
# prints); give one case, as every case it matches runs for 5 s. The bench's setup (building its
# inputs) is recorded too: it shows as a tower beside the case's own.
#
# Prints the hottest functions by self time (`perf report`), then where the SVG is (default
# target/perf/flamegraph-BENCH.svg; open it in a browser: click a frame to zoom, Ctrl-F to search).
# The SVG is drawn by inferno (the Rust port of Brendan Gregg's FlameGraph scripts). It is not a
# system package: on first use it is installed with cargo, pinned, into target/tools (about a
# minute; needs crates.io). If that fails, the report above is all this prints.
#
# Needs linux-perf (Debian: apt-get install linux-perf) and perf_event_paranoid <= 2 (user-space
# samples of one's own processes; the default).
set -euo pipefail
bench=${1:?bench name, e.g. lookup}
case=${2:?bench case, e.g. pod_to_services/services_for_pod/10000}
cd "$(dirname "$0")/.."
out=${3:-target/perf/flamegraph-$bench.svg}
inferno_version=${INFERNO_VERSION:-0.12.8}
tools=target/tools
# Samples a second. DWARF unwinding copies 16 KiB of stack a sample: at perf's default 4 kHz a
# 5 s run writes ~300 MB for `perf script` to unwind; 499 Hz gives ~2,500 samples (~50 MB),
# enough for a case that runs the whole 5 s.
freq=${FLAMEGRAPH_FREQ:-499}

# The bench executable, as cargo reports it (a bench built before under another hash is not taken).
bin=$(cargo bench --bench "$bench" --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["executable"])
' | tail -n 1 || true)
if [ -z "$bin" ]; then
  echo "cargo bench --bench $bench --no-run did not build; its errors:" >&2
  cargo bench --bench "$bench" --no-run >&2
  exit 1
fi

dir=${TMPDIR:-/tmp}/sliced-flamegraph
mkdir -p "$dir" "$(dirname "$out")"
data=$dir/$bench.perf
echo "== perf record -F $freq --call-graph dwarf: $bin --bench --profile-time 5 '$case'"
perf record -q -F "$freq" --call-graph dwarf,16384 -o "$data" \
  "$bin" --bench --profile-time 5 "$case" >"$dir/$bench.out" 2>&1 ||
  { cat "$dir/$bench.out" >&2; exit 1; }
grep -q . "$dir/$bench.out" && grep -v '^$' "$dir/$bench.out" | sed 's/^/  /' | tail -n 5

perf report -i "$data" --no-children -g none --percent-limit 1.5 --stdio 2>/dev/null >"$dir/$bench.report"
echo "== hottest functions, self time (perf report --no-children;$(sed -n 's/^# Samples://p' "$dir/$bench.report"))"
grep -E '^ +[0-9]' "$dir/$bench.report" | head -n 25

# inferno, from crates.io, pinned, on first use.
[ "$inferno_version" = 0.12.8 ] || tools=target/tools/inferno-$inferno_version
collapse=$tools/bin/inferno-collapse-perf
flamegraph=$tools/bin/inferno-flamegraph
if [ ! -x "$collapse" ] || [ ! -x "$flamegraph" ]; then
  echo "== installing inferno $inferno_version into $tools (first use)"
  if ! cargo install inferno --version "$inferno_version" --locked --root "$tools" --quiet; then
    echo "could not install inferno (no crates.io?): no SVG; the report above is the profile" >&2
    exit 0
  fi
fi

# --no-inline: perf 6.1 otherwise calls addr2line for every inlined frame, minutes on a bench.
perf script -i "$data" --no-inline 2>/dev/null | "$collapse" >"$dir/$bench.folded"
"$flamegraph" --title "$bench: $case" --subtitle "$(git rev-parse --short HEAD 2>/dev/null || true), $(date +%F)" \
  <"$dir/$bench.folded" >"$out"
echo "== $(wc -l <"$dir/$bench.folded") distinct stacks folded"
echo "flame graph: $out"

#!/usr/bin/env bash
# Profiles one criterion bench case with perf and prints the hottest functions.
#   perf/profile.sh reconcile 'reconcile/fresh/50000'
# Needs linux-perf (Debian: apt-get install linux-perf).
set -euo pipefail
bench=${1:?bench name, e.g. reconcile}
case=${2:?bench case, e.g. reconcile/unchanged/10000}
cd "$(dirname "$0")/.."
cargo bench --bench "$bench" --no-run >/dev/null 2>&1
bin=$(ls -t target/release/deps/"$bench"-* | grep -v '\.d$' | head -n 1)
out=${TMPDIR:-/tmp}/sliced-$bench.perf
perf record -o "$out" "$bin" --bench --profile-time 5 "$case" >/dev/null 2>&1
perf report -i "$out" --no-children --percent-limit 1 --stdio 2>/dev/null | grep -E '^ +[0-9]'

#!/usr/bin/env bash
# The whole `sliced reconcile` process on a generated cluster dump, as a user meets it: wall time,
# CPU and peak memory from /usr/bin/time, fresh (no EndpointSlices or Endpoints yet: every one is
# created) and steady (the dump already holds what the controllers write: zero writes).
#
#   perf/reconcile-whole.sh [PODS] [BASELINE_BINARY]
#
# PODS is 100000 (1,000 services of 100 pods, 10 namespaces, 500 nodes) or 1000000 (10,000
# services of 100 pods, 100 namespaces, 5,000 nodes; about 640 MB of JSON, generated in ~10 s).
# With a second binary (an older build), both are timed alternately on the same input.
set -euo pipefail
cd "$(dirname "$0")/.."

pods=${1:-100000}
baseline=${2:-}
case "$pods" in
  100000) shape=(--services 1000 --pods-per-service 100 --namespaces 10 --nodes 500) ;;
  1000000) shape=(--services 10000 --pods-per-service 100 --namespaces 100 --nodes 5000) ;;
  *) echo "PODS is 100000 or 1000000" >&2; exit 2 ;;
esac

cargo build --release --quiet --bin sliced --example cluster_dump
dir=${TMPDIR:-/tmp}/sliced-reconcile-whole
mkdir -p "$dir"
fresh=$dir/fresh-$pods.json
steady=$dir/steady-$pods.json
[ -s "$fresh" ] || target/release/examples/cluster_dump "${shape[@]}" > "$fresh"
[ -s "$steady" ] || target/release/examples/cluster_dump "${shape[@]}" --synced > "$steady"
ls -l "$fresh" "$steady" | awk '{printf "%s: %.0f MB\n", $NF, $5 / 1e6}'

run() {
  local label=$1 binary=$2 input=$3 format=$4
  /usr/bin/time -f "$label: wall %e s, CPU %U s user + %S s system, max RSS %M KB" \
    "$binary" reconcile -f "$input" -o "$format" > "$dir/out.$format"
  if [ "$format" = json ]; then
    echo "  writes: $(grep -c '"verb":' "$dir/out.json" || true)"
  fi
}

for round in 1 2 3; do
  echo "== round $round"
  for input in fresh steady; do
    for format in yaml json; do
      run "sliced $input -o $format" target/release/sliced "$dir/$input-$pods.json" "$format"
      if [ -n "$baseline" ]; then
        run "baseline $input -o $format" "$baseline" "$dir/$input-$pods.json" "$format"
      fi
    done
  done
done

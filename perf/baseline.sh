#!/usr/bin/env bash
# A committed baseline of criterion figures, and a check of a run against it.
#
#   perf/baseline.sh save [BENCH ...]      # run the benches, write perf/baseline/criterion.json
#   perf/baseline.sh compare [BENCH ...]   # run them again, compare with perf/baseline/criterion.json
#   perf/baseline.sh compare --no-run      # compare the last compare's run again (no benches run)
#   perf/baseline.sh show                  # print the baseline
#
# BENCH are `cargo bench --bench` names. The default set is the quick one, a few minutes in all on
# two cores: lookup (pod -> services, 6 cases, ~1 min), dns (the DNS view of 100k pods, 3 cases,
# ~1 min) and load_balancer (node sync over 10,000 LoadBalancer Services and the address pools,
# 6 cases, ~3 min). `compare` without BENCH runs the benches the baseline holds.
#
# Each case's figure is criterion's mean time per iteration and its 95% confidence interval, in
# ns, as criterion writes them to <dir>/<group>/<case>/new/estimates.json (the case's id is read
# from benchmark.json beside it: criterion replaces / \ : * ? " < > | ^ in directory names).
# The runs write to a criterion directory of their own (target/perf-baseline), so criterion's own
# "change" lines, and `target/criterion` of other runs, are left alone. The baseline also records
# the date, the git commit (and whether the tree had changes), rustc and `nproc`.
#
# `compare` prints a table: case | baseline | now (means, with the half width of their confidence
# interval in % of the mean) | change % (of the means) and flags REGRESSION
# for a case more than 10% slower whose confidence interval does not overlap the baseline's
# (now's lower bound above the baseline's upper bound); it exits 1 if any case is flagged.
# "faster" marks the same more than 10% the other way. Figures from another machine, or another
# `nproc`, are not comparable: it says so. The run it compared is left in target/perf-baseline/now.json.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:?save, compare or show}
shift
baseline=perf/baseline/criterion.json
work=target/perf-baseline
default_benches=(lookup dns load_balancer)

python=$(cat <<'PY'
import datetime, json, os, subprocess, sys

def collect(home, bench):
    """Every case criterion wrote under `home` in this run: id, mean and its interval (ns)."""
    cases = []
    for dirpath, dirnames, filenames in os.walk(home):
        if os.path.basename(dirpath) == "new" and "estimates.json" in filenames:
            meta = json.load(open(os.path.join(dirpath, "benchmark.json")))
            est = json.load(open(os.path.join(dirpath, "estimates.json")))["mean"]
            ci = est["confidence_interval"]
            cases.append({"bench": bench, "id": meta["full_id"],
                          "mean_ns": est["point_estimate"],
                          "lower_ns": ci["lower_bound"], "upper_ns": ci["upper_bound"],
                          "confidence": ci["confidence_level"]})
    return sorted(cases, key=lambda c: c["id"])

def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""

def fmt(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}" if ns / scale < 1000 else f"{ns / scale:.0f} {unit}"
    return f"{ns:.3g} ns"

def record(work, out, benches):
    cases = []
    for bench in benches:
        found = collect(os.path.join(work, "criterion", bench), bench)
        if not found:
            sys.exit(f"perf/baseline.sh: no criterion estimates for bench {bench}")
        cases += found
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git("rev-parse", "HEAD"),
        "tree_changed": bool(git("status", "--porcelain", "--untracked-files=no")),
        "rustc": subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip(),
        "nproc": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                     if l.startswith("model name")), ""),
        "benches": benches,
        "statistic": "criterion mean time per iteration, ns, with its confidence interval",
        "cases": cases,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(cases)} cases of {', '.join(benches)} -> {out}")
    return doc

def show(path):
    doc = json.load(open(path))
    print(f"baseline {path}: {doc['date']}, commit {doc['commit'][:12]}"
          f"{' (tree changed)' if doc.get('tree_changed') else ''}, nproc {doc['nproc']}, {doc['rustc']}")
    for c in doc["cases"]:
        print(f"  {c['id']:<60} {fmt(c['mean_ns']):>10}  [{fmt(c['lower_ns'])}, {fmt(c['upper_ns'])}]")

def compare(base_path, now_path, threshold=0.10):
    base, now = json.load(open(base_path)), json.load(open(now_path))
    print(f"baseline: {base['date']}, commit {base['commit'][:12]}"
          f"{' (tree changed)' if base.get('tree_changed') else ''}, nproc {base['nproc']}")
    print(f"now:      {now['date']}, commit {now['commit'][:12]}"
          f"{' (tree changed)' if now.get('tree_changed') else ''}, nproc {now['nproc']}")
    if (base["nproc"], base.get("cpu")) != (now["nproc"], now.get("cpu")):
        print(f"warning: another machine ({base.get('cpu')}, {base['nproc']} cpus against "
              f"{now.get('cpu')}, {now['nproc']}): the figures are not comparable")
    before = {(c["bench"], c["id"]): c for c in base["cases"]}
    after = {(c["bench"], c["id"]): c for c in now["cases"]}
    width = max(len(k[1]) for k in list(before) + list(after))
    def cell(c):
        if not c:
            return ""
        half = (c["upper_ns"] - c["lower_ns"]) / 2 / c["mean_ns"]
        return f"{fmt(c['mean_ns'])} ±{100 * half:.0f}%" if half >= 0.005 else fmt(c["mean_ns"])
    print(f"{'case':<{width}} | {'baseline':>16} | {'now':>16} | {'change':>8} | flag")
    print(f"{'-' * width}-|-{'-' * 16}-|-{'-' * 16}-|-{'-' * 8}-|-{'-' * 10}")
    regressions = 0
    benches = [b for b in now["benches"]]
    for key in sorted(set(before) | set(after), key=lambda k: (benches.index(k[0]) if k[0] in benches else 99, k[1])):
        b, n = before.get(key), after.get(key)
        if b and n:
            change = n["mean_ns"] / b["mean_ns"] - 1
            apart = n["lower_ns"] > b["upper_ns"] or n["upper_ns"] < b["lower_ns"]
            flag = ""
            if change > threshold and apart:
                flag, regressions = "REGRESSION", regressions + 1
            elif change < -threshold and apart:
                flag = "faster"
            elif abs(change) > threshold:
                flag = "(overlaps)"
            print(f"{key[1]:<{width}} | {cell(b):>16} | {cell(n):>16} | {100 * change:>+7.1f}% | {flag}")
        elif n and n["bench"] in base["benches"]:
            print(f"{key[1]:<{width}} | {'':>16} | {cell(n):>16} | {'':>8} | new case")
        elif n:
            print(f"{key[1]:<{width}} | {'':>16} | {cell(n):>16} | {'':>8} | bench not in the baseline")
        elif b["bench"] in now["benches"]:
            print(f"{key[1]:<{width}} | {cell(b):>16} | {'':>16} | {'':>8} | gone")
    if regressions:
        print(f"{regressions} case(s) more than {threshold:.0%} slower, confidence intervals apart")
        sys.exit(1)
    print(f"no case more than {threshold:.0%} slower with its confidence interval apart from the baseline's")

cmd = sys.argv[1]
if cmd == "record":
    record(sys.argv[2], sys.argv[3], sys.argv[4:])
elif cmd == "show":
    show(sys.argv[2])
elif cmd == "compare":
    compare(sys.argv[2], sys.argv[3])
elif cmd == "benches":
    print(" ".join(json.load(open(sys.argv[2]))["benches"]))
PY
)

run_benches() {
  rm -rf "$work/criterion"
  mkdir -p "$work/criterion"
  for bench in "$@"; do
    echo "== cargo bench --bench $bench" >&2
    local start=$SECONDS
    CRITERION_HOME=$PWD/$work/criterion/$bench cargo bench --quiet --bench "$bench" -- --noplot \
      >"$work/$bench.txt" 2>&1 || { tail -n 30 "$work/$bench.txt" >&2; exit 1; }
    echo "   $(( SECONDS - start )) s (output in $work/$bench.txt)" >&2
  done
}

mkdir -p "$work"
case "$mode" in
  save)
    benches=("$@")
    [ ${#benches[@]} -gt 0 ] || benches=("${default_benches[@]}")
    run_benches "${benches[@]}"
    mkdir -p "$(dirname "$baseline")"
    python3 -c "$python" record "$work" "$baseline" "${benches[@]}"
    python3 -c "$python" show "$baseline"
    ;;
  compare)
    [ -f "$baseline" ] || { echo "no $baseline: run perf/baseline.sh save first" >&2; exit 2; }
    if [ "${1:-}" = --no-run ]; then
      [ -f "$work/now.json" ] || { echo "no $work/now.json: run perf/baseline.sh compare first" >&2; exit 2; }
      python3 -c "$python" compare "$baseline" "$work/now.json"
      exit
    fi
    benches=("$@")
    [ ${#benches[@]} -gt 0 ] || read -r -a benches <<<"$(python3 -c "$python" benches "$baseline")"
    run_benches "${benches[@]}"
    python3 -c "$python" record "$work" "$work/now.json" "${benches[@]}"
    python3 -c "$python" compare "$baseline" "$work/now.json"
    ;;
  show)
    python3 -c "$python" show "$baseline"
    ;;
  *)
    echo "usage: perf/baseline.sh save|compare|show [BENCH ...]" >&2
    exit 2
    ;;
esac

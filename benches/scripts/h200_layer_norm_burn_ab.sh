#!/usr/bin/env bash
# Issue 18: LayerNorm through Burn (the benchmark group layer_norm_burn, and the step-by-step
# breakdown at 1024x1024) with this build against the build before a change, alternating in one
# device call, so that the comparison does not straddle machines. .device/ holds
# gpu_suite_before.xz (the earlier build), gpu_suite.xz (this build) and optionally the caches
# of an earlier call (caches-ruda.tar.xz).
#
#   bash benches/scripts/h200_layer_norm_burn_ab.sh OUT [ROUNDS]   (4 by default)
#
# Writes $OUT/ab.txt (every run's output and a summary: per-call medians of each build's
# back-to-back cases), $OUT/ab-benchmarks.csv (every run's CSV, with its build and round in the
# first two columns) and $OUT/caches-ruda.tar.xz.
set -u
out=${1:?output directory}
rounds=${2:-4}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
log=$out/ab.txt
{ date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$log"
for t in .device/caches-ruda.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
dir=/tmp/suite-ruda
mkdir -p $dir /tmp/cc
printf '[autotune]\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >$dir/cubecl.toml
csv=$out/ab-benchmarks.csv
echo "build,round,group,case,backend,backend_type,device,median_us,throughput,unit,warmup,iters" >"$csv"

for round in $(seq "$rounds"); do
  # Odd rounds run the earlier build first, even rounds this one: a warming machine favours
  # neither.
  order="before after"
  [ $((round % 2)) = 0 ] && order="after before"
  for build in $order; do
    bin=$top/.device/gpu_suite
    [ $build = before ] && bin=${bin}_before
    echo "== round $round, $build ($(date +%T))" >>"$log"
    (cd $dir && RUDA_BENCH_BACKENDS=ruda-cuda timeout 120 "$bin" --benchmarks \
        --groups layer_norm_burn --csv /tmp/ab.csv 2>&1) >>"$log"
    tail -n +2 /tmp/ab.csv | sed "s/^/$build,$round,/" >>"$csv"
    (cd $dir && timeout 40 "$bin" --breakdown --quick 2>&1) | grep -E "autodiff:" >>"$log"
  done
done

python3 - "$csv" "$log" <<'PY' | tee -a "$log"
import csv, re, statistics, sys
per_call = {}
for r in csv.DictReader(open(sys.argv[1])):
    calls = 20 if r["case"].endswith("-x20") else 1
    per_call.setdefault((r["case"], r["build"]), []).append(float(r["median_us"]) / calls)
steps = {}
build = None
for line in open(sys.argv[2]):
    m = re.match(r"== round \d+, (\w+)", line)
    if m:
        build = m.group(1)
    f = line.rstrip("\n").split("\t")
    if len(f) == 6 and f[2].startswith("autodiff:") and build:
        steps.setdefault((f[2], build), []).append(float(f[5]))
print("\n## Per call, median of the rounds (us); after / before")
print("case\tbefore\tafter\tratio\tbefore runs\tafter runs")
for case in dict.fromkeys(c for c, _ in per_call):
    b, a = per_call.get((case, "before"), []), per_call.get((case, "after"), [])
    if b and a:
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{case}\t{mb:.1f}\t{ma:.1f}\t{ma / mb:.3f}\t{' '.join(f'{x:.1f}' for x in b)}\t{' '.join(f'{x:.1f}' for x in a)}")
print("\n## Breakdown at 1024x1024, back to back (throughput_us), median of the rounds")
for step in dict.fromkeys(s for s, _ in steps):
    b, a = steps.get((step, "before"), []), steps.get((step, "after"), [])
    if b and a:
        print(f"{step}\t{statistics.median(b):.1f}\t{statistics.median(a):.1f}")
PY
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
echo "== done ($(date +%T))" | tee -a "$log"

#!/usr/bin/env bash
# Issue 17: a host-side change of the training step against the build before it, in one device
# call. .device/ holds learner_overhead_before.xz (the earlier build), learner_overhead.xz and
# gpu_suite.xz and transformer.xz (this build) and the caches of an earlier call
# (caches-ruda.tar.xz, caches-burn.tar.xz, optional).
#
#   bash benches/scripts/h200_host_ab.sh OUT ROUNDS STEPS [burn]
#
# 1. ROUNDS rounds of: the earlier build's learner_overhead, then this build's (pieces `bare` and
#    `learner`, STEPS timed steps each), each its own process, alternating;
# 2. this build's bare step over 1000 steps, by blocks of 100 (does a long run drift?), and the
#    GPU suite's bare step in f32 and bf16;
# 3. the transformer example through burn-train's Learner, twice (learner.sh, 100 steps);
# 4. with `burn`: Burn's Autodiff<Cuda> bare step in f32 and bf16 (gpu_suite), for the ratios.
# Caches come back as $OUT/caches-{ruda,burn}.tar.xz.
set -u
out=${1:?output directory}
rounds=${2:-3}
steps=${3:-150}
burn=${4:-}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
log=$out/ab.txt
{ date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$log"
for t in .device/caches-*.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
dir=/tmp/suite-ruda
mkdir -p $dir /tmp/suite-burn
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >$dir/cubecl.toml
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/ccb" }\n[compilation]\ncache = { file = "/tmp/ccb/ptx" }\n' >/tmp/suite-burn/cubecl.toml
text=$top/examples/transformer/data/shakespeare/plays.txt.gz

for round in $(seq "$rounds"); do
  for build in before after; do
    bin=$top/.device/learner_overhead
    [ $build = before ] && bin=${bin}_before
    echo "== round $round, $build ($(date +%T))" >>"$log"
    (cd $dir && timeout 120 "$bin" --device cuda --text "$text" --pieces bare,learner \
        --steps "$steps" 2>&1) >>"$log"
  done
done
python3 - "$log" <<'EOF' | tee -a "$log"
import re, statistics, sys
rows = {}
build = None
for line in open(sys.argv[1]):
    m = re.match(r"== round \d+, (\w+)", line)
    if m:
        build = m.group(1)
    m = re.match(r"(bare|learner)\s+([\d.]+)\s", line)
    if m and build:
        rows.setdefault((build, m.group(1)), []).append(float(m.group(2)))
print("build   piece    runs  medians (ms/step)                 median")
for (b, p), v in sorted(rows.items()):
    print(f"{b:<7} {p:<8} {len(v):>4}  {' '.join(f'{x:.2f}' for x in v):<32}  {statistics.median(v):.2f}")
EOF

echo "== drift: this build's bare step, 1000 steps in blocks of 100 ($(date +%T))" | tee -a "$log"
(cd $dir && timeout 120 "$top/.device/learner_overhead" --device cuda --text "$text" --pieces bare \
    --steps 1000 --blocks 100 2>&1) >>"$log"
grep -E "medians of|^bare" "$log" | tail -2

echo "== bare step, gpu_suite f32 and bf16 ($(date +%T))" | tee -a "$log"
(cd $dir && RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 timeout 150 "$top/.device/gpu_suite" \
    --benchmarks --groups transformer_step 2>&1) >>"$log"
grep -E "^transformer_step" "$log"

LEARNER_LOGS=1 bash benches/scripts/learner.sh "$out/learner" 100 ruda ruda >>"$log" 2>&1
grep -E "== learner|time per training step|training thread" "$log" | tail -6

if [ -n "$burn" ]; then
  echo "== Autodiff<Cuda> bare step, f32 and bf16 ($(date +%T))" | tee -a "$log"
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=burn-cuda,burn-cuda-bf16,ruda-cuda,ruda-cuda-bf16 \
      timeout 330 "$top/.device/gpu_suite" --benchmarks --groups transformer_step 2>&1) >>"$log"
  grep -E "^transformer_step" "$log" | tail -4
fi
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
[ -d /tmp/ccb ] && tar -C /tmp -cJf "$out/caches-burn.tar.xz" ccb
rm -rf "$out/learner"
echo "== done ($(date +%T))" | tee -a "$log"

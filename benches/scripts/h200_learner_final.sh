#!/usr/bin/env bash
# Issue 17's figures in one device call: the bare step of ruda and Burn's Autodiff<Cuda> in f32
# and bf16 (one gpu_suite process, side by side), the transformer example through burn-train's
# Learner for both backends, alternating (learner.sh, 100 steps each), and ruda's bare step again
# from learner_overhead. Binaries and caches as h200_host_ab.sh (.device/*.xz,
# .device/caches-{ruda,burn}.tar.xz); caches come back in $OUT.
#
#   bash benches/scripts/h200_learner_final.sh OUT
set -u
out=${1:?output directory}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
log=$out/final.txt
{ date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$log"
for t in .device/caches-*.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
mkdir -p /tmp/suite-burn /tmp/lo
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/ccb" }\n[compilation]\ncache = { file = "/tmp/ccb/ptx" }\n' >/tmp/suite-burn/cubecl.toml
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/lo/cubecl.toml

echo "== bare steps, one gpu_suite process ($(date +%T))" | tee -a "$log"
(cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=ruda-cuda,burn-cuda,ruda-cuda-bf16,burn-cuda-bf16 \
    timeout 240 "$top/.device/gpu_suite" --benchmarks --groups transformer_step 2>&1) >>"$log"
grep -E "^transformer_step" "$log"

for run in ruda burn-cuda ruda burn-cuda ruda; do
  bash benches/scripts/learner.sh "$out/l" 100 "$run" >>"$log" 2>&1
done
grep -E "== learner|time per training step|training thread" "$log"

echo "== learner_overhead bare ($(date +%T))" | tee -a "$log"
(cd /tmp/lo && timeout 120 "$top/.device/learner_overhead" --device cuda \
    --text "$top/examples/transformer/data/shakespeare/plays.txt.gz" --pieces bare,bare,bare \
    --steps 100 2>&1) >>"$log"
grep -E "^bare " "$log"
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
tar -C /tmp -cJf "$out/caches-burn.tar.xz" ccb
rm -rf "$out/l"
echo "== done ($(date +%T))" | tee -a "$log"

#!/usr/bin/env bash
# Issue 17: the transformer example through burn-train's Learner takes ~3.5 ms a step more than
# the bare step and than burn-train's Learner methods run in learner_overhead (H200 call 2,
# benches/results/2026-12-02-h200-host-profile.md). burn-train's metrics thread computes the
# metrics on burn-flex, whose rayon pool has a thread per core; this call runs the example and
# learner_overhead's `training` piece alternately with rayon's default pool and with
# RAYON_NUM_THREADS=1, one process each, caches carried in (.device/caches-ruda.tar.xz).
#
#   bash benches/scripts/h200_learner_rayon.sh OUT
set -u
out=${1:?output directory}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
for t in .device/caches-*.tar.xz; do tar -C /tmp -xJf "$t"; done
log=$out/learner.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
for round in 1 2; do
  for env in default rayon1; do
    echo "#### example, $env, round $round" >>"$log"
    if [ $env = rayon1 ]; then export RAYON_NUM_THREADS=1; else unset RAYON_NUM_THREADS; fi
    bash benches/scripts/learner.sh "$out/l" 100 ruda >>"$log" 2>&1
  done
done
unset RAYON_NUM_THREADS
grep -E "####|time per training step|training thread" "$log"
mkdir -p /tmp/lo
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/lo/cubecl.toml
for env in default rayon1; do
  if [ $env = rayon1 ]; then export RAYON_NUM_THREADS=1; else unset RAYON_NUM_THREADS; fi
  echo "#### learner_overhead pieces, $env" | tee -a "$out/pieces.txt"
  (cd /tmp/lo && timeout 200 "$top/.device/learner_overhead" --device cuda \
      --text "$top/examples/transformer/data/shakespeare/plays.txt.gz" \
      --pieces bare,training,bare,training --steps 100 2>&1) >>"$out/pieces.txt"
  grep -E "^(bare|training) " "$out/pieces.txt" | tail -4
done
rm -rf "$out/l"

#!/usr/bin/env bash
# Issue 17: where the host time of the transformer's training step goes on the H200, which has no
# perf. One device call: the learner_overhead example (unstripped, xz-compressed in .device/, so
# that cuda-gdb names functions) times the bare step and the Learner with each thread's CPU time,
# then runs each long enough for benches/scripts/pmp.py to sample every thread's stack; the GPU
# suite times the bare step in f32 and bf16. Caches (/tmp/cc) are carried in from
# .device/caches-ruda.tar.xz when present and come back as $OUT/caches-ruda.tar.xz.
#
#   bash benches/scripts/h200_host_profile.sh OUT [SAMPLES] [PIECES_FLAGS]
set -u
out=${1:?output directory}
samples=${2:-40}
extra=${3:-}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
log=$out/host.txt
{ date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; nproc; } | tee "$log"
for t in .device/caches-ruda.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
dir=/tmp/suite-ruda
mkdir -p $dir
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >$dir/cubecl.toml
text=$top/examples/transformer/data/shakespeare/plays.txt.gz
lo() { (cd $dir && exec timeout "$1" "$top/.device/learner_overhead" --device cuda --text "$text" $extra "${@:2}"); }

echo "== pieces with thread CPU ($(date +%T))" | tee -a "$log"
lo 240 --pieces bare,learner,bare,learner --steps 100 >>"$log" 2>&1
echo "   exit $?" >>"$log"
grep -E "^(piece|bare|learner) |thread\(s\)" "$log" | tail -20

for piece in bare learner; do
  echo "== stack samples, $piece ($(date +%T))" | tee -a "$log"
  lo 200 --pieces $piece --steps 20000 --warmup 10 >"$out/run-$piece.txt" 2>&1 &
  sleep 25
  pid=$(pgrep -f "^$top/.device/learner_overhead" | head -1)
  timeout 150 python3 benches/scripts/pmp.py "$pid" "$samples" 0.2 "/tmp/pmp-$piece-raw.txt" >"$out/pmp-$piece.txt" 2>&1
  kill "$pid" 2>/dev/null; wait
  head -c 6000 "$out/pmp-$piece.txt"
done
xz -T4 -c /tmp/pmp-bare-raw.txt /tmp/pmp-learner-raw.txt >"$out/pmp-raw.txt.xz" 2>/dev/null

echo "== bare step, gpu_suite f32 and bf16 ($(date +%T))" | tee -a "$log"
(cd $dir && RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 timeout 150 "$top/.device/gpu_suite" \
    --benchmarks --groups transformer_step 2>&1) >>"$log"
grep -E "^transformer_step|FAILED|panicked" "$log"
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
echo "== done ($(date +%T))" | tee -a "$log"

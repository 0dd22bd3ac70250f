#!/usr/bin/env bash
# Issue 18's H200 call: ruda's LayerNorm kernels checked against the f64 reference on CUDA, every
# variant timed, the published kernel and through-Burn tables (synchronized and back to back),
# PyTorch's LayerNorm in the same call, and optionally Nsight Compute over the backward kernels.
# Binaries as h200_products.sh: .device/gpu_suite.xz, and .device/torch_layernorm.py (a copy of
# ../shared/bench/torch_layernorm.py, which the GPU machine does not see).
#
#   bash benches/scripts/h200_layer_norm.sh OUT [ncu|ncu-only]
#
# The tuning and compilation caches live in /tmp/cc and come back as $OUT/caches-ruda.tar.xz;
# a .device/caches-ruda.tar.xz is carried in when present (FRESH_TUNING=1: its kernels only). The Nsight Compute run tunes in its own
# root, whose choices (made under the profiler) are not kept.
set -u
out=${1:?output directory}
mode=${2:-}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
{ date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$out/env.txt"
for t in .device/caches-ruda.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
# FRESH_TUNING=1 keeps the carried compiled kernels but tunes again (the choices of another build).
[ "${FRESH_TUNING:-0}" = 1 ] && rm -rf /tmp/cc/autotune

shapes="16384x256 16384x512 16384x768 16384x1024 16384x2048 16384x4096 16384x8192 4096x768 4096x8192"
mkdir -p /tmp/suite-ruda /tmp/cc
printf '[autotune]\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/suite-ruda/cubecl.toml
suite() { (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda "$@" 2>&1); }

if [ "$mode" != ncu-only ]; then
echo "== checks and every variant ($(date +%T))" | tee -a "$out/suite.txt"
suite timeout 240 "$top/.device/gpu_suite" --no-burn --no-differential >>"$out/suite.txt"
echo "   exit $?"; grep -E "^(PASS|FAIL)|check\(s\) failed" "$out/suite.txt"

echo "== benchmarks ($(date +%T))" | tee -a "$out/suite.txt"
suite timeout 200 "$top/.device/gpu_suite" --benchmarks --groups layer_norm_kernel,layer_norm_burn \
  --csv "$out/benchmarks.csv" >>"$out/suite.txt"
echo "   exit $?"

echo "== PyTorch ($(date +%T))"
timeout 150 python3 .device/torch_layernorm.py float32 bfloat16 float16 $shapes >"$out/torch.tsv" 2>&1
echo "   exit $?"
fi

if [ "$mode" = ncu ] || [ "$mode" = ncu-only ]; then
  echo "== Nsight Compute, backward kernels ($(date +%T))"
  mkdir -p /tmp/suite-ncu
  printf '[autotune]\ncache = { file = "/tmp/ncu-cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/suite-ncu/cubecl.toml
  # Durations, bytes and registers only: with ncu_layer_norm.py's whole list every launch is
  # replayed several times, and 240 s covered 270 launches (the first shape).
  metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  metrics=$metrics,launch__registers_per_thread,sm__maximum_warps_per_active_cycle_pct
  (cd /tmp/suite-ncu && RUDA_BENCH_BACKENDS=ruda-cuda timeout 200 ncu --clock-control none \
      -k 'regex:[Bb]ackward|[Rr]educe_?[Pp]artials' --launch-count 1500 --metrics "$metrics" \
      --csv --print-units base "$top/.device/gpu_suite" --benchmarks --groups layer_norm_kernel) \
      >/tmp/ncu.csv 2>/tmp/ncu.err
  echo "   exit $?"
  python3 benches/scripts/ncu_layer_norm.py /tmp/ncu.csv >"$out/ncu.txt" 2>&1
  tail -3 /tmp/ncu.err >>"$out/ncu.txt"
fi
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
echo "== done ($(date +%T))"

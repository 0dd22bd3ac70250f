#!/usr/bin/env bash
# Issue 18's H200 call: ruda's LayerNorm kernels checked against the f64 reference on CUDA, every
# variant timed, the published kernel and through-Burn tables (synchronized and back to back),
# PyTorch's LayerNorm in the same call, and optionally Nsight Compute over the backward kernels.
# Binaries as h200_products.sh: .device/gpu_suite.xz (and .device/layer_norm_host.xz for the host
# step), and .device/torch_layernorm.py (a copy of ../shared/bench/torch_layernorm.py, which the
# GPU machine does not see).
#
#   [STEPS='checks benchmarks torch host'] bash benches/scripts/h200_layer_norm.sh OUT [ncu|ncu-only]
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

# STEPS picks the parts of one call (checks, benchmarks and torch by default; a cold start may
# need two calls); host is asked for by name.
steps=${STEPS:-checks benchmarks torch}
step() { [ "$mode" != ncu-only ] && [[ " $steps " == *" $1 "* ]]; }

if step checks; then
echo "== checks, the default rule's table on both clocks, every variant ($(date +%T))" | tee -a "$out/suite.txt"
suite timeout 330 "$top/.device/gpu_suite" --no-burn --no-differential >>"$out/suite.txt"
echo "   exit $?"; grep -E "^(PASS|FAIL)|check\(s\) failed" "$out/suite.txt"
fi

if step benchmarks; then
echo "== benchmarks ($(date +%T))" | tee -a "$out/suite.txt"
suite timeout 200 "$top/.device/gpu_suite" --benchmarks --groups layer_norm_kernel,layer_norm_burn \
  --csv "$out/benchmarks.csv" >>"$out/suite.txt"
echo "   exit $?"
fi

if step torch; then
echo "== PyTorch ($(date +%T))"
timeout 150 python3 .device/torch_layernorm.py float32 bfloat16 float16 $shapes >"$out/torch.tsv" 2>&1
echo "   exit $?"
# Back to back (20 calls, one synchronize), beside gpu_suite's @back-to-back rows.
timeout 150 python3 benches/scripts/torch_layernorm_b2b.py float32 bfloat16 float16 $shapes >>"$out/torch.tsv" 2>&1
echo "   exit $?"
# The least any implementation's call can cost under this method: PyTorch moving the same bytes
# with nothing to compute (f32; the shapes of the issue's bandwidth targets).
timeout 90 python3 benches/scripts/torch_memory_floor.py float32 16384x1024 16384x2048 16384x4096 \
  16384x8192 4096x8192 >>"$out/torch.tsv" 2>&1
echo "   exit $?"
# PyTorch's fixed cost of a synchronized call, beside gpu_suite's "a call that launches nothing":
# a synchronize alone, and a one-element add then a synchronize (10 warm-up, median of 50).
timeout 60 python3 - >>"$out/torch.tsv" 2>&1 <<'PY'
import time, torch
def median_us(fn):
    for _ in range(10): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(50):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e6)
    return sorted(ts)[25]
x = torch.zeros(1, device="cuda")
print(f"# torch: synchronize alone {median_us(lambda: None):.1f} us, one-element add + synchronize {median_us(lambda: x.add_(1)):.1f} us")
PY
fi

if step host; then
# The host work of a call (benches/examples/layer_norm_host.rs, .device/layer_norm_host.xz): the
# caller's own time (batches of 4 calls, whose tasks fit in CubeCL's device-thread queue) and
# back to back (batches of 100), forward, forward+backward, and the forward's allocations alone.
echo "== host work ($(date +%T))" | tee -a "$out/host.txt"
for args in "" "--backward" "--alloc-only" "--alloc-together"; do
  for every in 4 100; do
    suite timeout 60 "$top/.device/layer_norm_host" --cuda --calls 20000 --every $every $args >>"$out/host.txt"
  done
done
echo "   exit $?"; grep -v XDG "$out/host.txt"
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

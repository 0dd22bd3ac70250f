#!/usr/bin/env bash
# The H200 calls of the native-matmul change (issues 15 and 17), one phase per device call.
# Runs from the repository root on the GPU machine with .device/ holding the release binaries
# gpu_suite and transformer, xz-compressed (gpu_suite.xz, transformer.xz), and, for phases that
# start on a fresh machine with caches, the cache tarballs of an earlier phase in .device/.
#
#   bash benches/scripts/h200_products.sh cold    OUT  # fresh machine: cold start breakdown,
#                                                     # Learner runs, caches out
#   bash benches/scripts/h200_products.sh carried OUT  # fresh machine, caches carried in: warm
#                                                     # start, Learner, bare steps, PyTorch
#   bash benches/scripts/h200_products.sh suite   OUT  # right after: checks, kernels by
#                                                     # family, products, bf16 steps
#
# Cache roots as in startup.sh: /tmp/cc (ruda), /tmp/ccb (Burn's Autodiff<Cuda>).
set -u
phase=${1:?cold|suite|carried}
out=${2:?output directory}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
{
  date
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
  echo "cublas: ${cublas:-not found}"
} | tee -a "$out/env.txt"

# suite DIR ROOT [cubecl.toml lines]: a cwd whose cubecl.toml points at ROOT.
suite_dir() {
  local dir=$1 root=$2
  shift 2
  mkdir -p "$dir"
  {
    echo '[autotune]'
    echo 'level = "minimal"'
    echo "cache = { file = \"$root\" }"
    for line in "$@"; do echo "$line"; done
  } >"$dir/cubecl.toml"
}
suite=$top/.device/gpu_suite
command -v ncu >/dev/null || PATH=$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | head -1)

case $phase in
cold)
  # First a smoke check of the native products (own cache root), so that a broken build stops
  # before the long cold runs.
  suite_dir /tmp/smoke /tmp/smoke-cache
  (cd /tmp/smoke && timeout 120 "$suite" --differential-only --only "matmul layouts" 2>&1) >"$out/smoke.txt"
  grep -E "^(PASS|FAIL)|check\(s\) failed|native matrix|panicked|warn" "$out/smoke.txt" | head -20
  grep -q "^0 check(s) failed" "$out/smoke.txt" && grep -q "native matrix products run so far: [1-9]" "$out/smoke.txt" ||
    { echo "smoke check failed"; tail -40 "$out/smoke.txt"; exit 1; }
  bash benches/scripts/startup.sh cold "$out"
  rm -f "$out/startup-ruda-cache-listing.txt" # eight files come back
  bash benches/scripts/learner.sh "$out" 100 ruda burn-cuda
  ;;
carried)
  # A fresh machine with the caches of a `cold` call on another one: time to the first step,
  # the Learner, the bare steps, PyTorch.
  for t in .device/caches-*.tar.xz; do tar -C /tmp -xJf "$t"; done
  bash benches/scripts/startup.sh warm "$out"
  bash benches/scripts/learner.sh "$out" 100 ruda burn-cuda
  suite_dir /tmp/suite-ruda /tmp/cc
  suite_dir /tmp/suite-burn /tmp/ccb '[compilation]' 'cache = { file = "/tmp/ccb/ptx" }'
  echo "== bare steps ($(date +%T))"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 timeout 200 "$suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-ruda.csv" 2>&1) | tee "$out/steps.txt" | grep -E "transformer|FAILED"
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=burn-cuda timeout 150 "$suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-burn.csv" 2>&1) | tee -a "$out/steps.txt" | grep -E "transformer|FAILED"
  echo "== PyTorch ($(date +%T))"
  PYTHONUNBUFFERED=1 timeout 120 python3 benches/scripts/torch_step_profile.py f32 tf32 bf16 2>&1 | tee "$out/torch.txt" | grep -E "^torch-|kernel time"
  ;;
suite)
  # After `carried` (on its machine, or a fresh one with the same caches): the checks, the step's
  # kernels by family, the products alone, Autodiff<Cuda<bf16>>'s step beside ruda's, and the
  # Learner again with CubeCL's compilation and autotune loggers on.
  [ -d /tmp/cc ] || for t in .device/caches-*.tar.xz; do tar -C /tmp -xJf "$t"; done
  suite_dir /tmp/suite-ruda /tmp/cc
  suite_dir /tmp/suite-burn /tmp/ccb '[compilation]' 'cache = { file = "/tmp/ccb/ptx" }'
  LEARNER_LOGS=1 bash benches/scripts/learner.sh "$out" 100 ruda burn-cuda
  echo "== differential checks ($(date +%T))"
  (cd /tmp/suite-ruda && timeout 200 "$suite" --differential-only 2>&1) >"$out/differential.txt"
  grep -E "^(FAIL)|check\(s\) failed|native matrix" "$out/differential.txt"
  echo "== Nsight Compute: kernel time per step by family ($(date +%T))"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda timeout 150 python3 "$top/benches/scripts/ncu_step.py" \
      ruda-cuda 4000 1500 -- "$suite" --benchmarks --groups transformer_step 2>&1) | tee "$out/ncu.txt" | head -16
  echo "== products ($(date +%T))"
  (cd /tmp/suite-ruda && timeout 100 "$suite" --matmul 2>&1) | tee "$out/products.txt" | grep -v "^$"
  echo "== bf16 steps ($(date +%T))"
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=burn-cuda-bf16 timeout 280 "$suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-burn-bf16.csv" 2>&1) | tee "$out/steps-bf16.txt" | grep -E "transformer|FAILED"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda-bf16 timeout 60 "$suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-ruda-bf16.csv" 2>&1) | tee -a "$out/steps-bf16.txt" | grep -E "transformer|FAILED"
  ;;
checks)
  # The products' family and the models' gradients on a fresh machine, then the Learner twice:
  # the first run compiles what the cached short runs never met, the second is the steady one.
  [ -d /tmp/cc ] || for t in .device/caches-*.tar.xz; do tar -C /tmp -xJf "$t"; done
  suite_dir /tmp/suite-ruda /tmp/cc
  for check in "matmul layouts" "linear forward" "chained products" "f16 and bf16 products" \
      "gradients of linear layers" "gradients of an MLP" "gradients of a TransformerEncoder"; do
    (cd /tmp/suite-ruda && timeout 60 "$suite" --differential-only --only "$check" 2>&1) >>"$out/checks.txt"
  done
  grep -E "^(PASS|FAIL)|^	|check\(s\) failed|native matrix" "$out/checks.txt" | cut -c1-300
  LEARNER_LOGS=1 bash benches/scripts/learner.sh "$out/first" 100 ruda burn-cuda
  LEARNER_LOGS=1 bash benches/scripts/learner.sh "$out" 100 ruda burn-cuda
  ;;
esac
echo "== done ($(date +%T))"

#!/usr/bin/env bash
# The differential checks that run ruda's cuBLAS products on CUDA, one gpu_suite process per
# group (`--differential-only --only NAME`), against NdArray: after a change to
# ruda-runtime/src/matmul/. Caches from .device/caches-ruda.tar.xz when present.
#
#   bash benches/scripts/h200_products_checks.sh OUT
set -u
out=${1:?output directory}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
for t in .device/caches-ruda.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
mkdir -p /tmp/checks
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/checks/cubecl.toml
for name in "matmul" "linear" "products" "attention" "gradients of an MLP" "TransformerEncoder"; do
  echo "== --only '$name' ($(date +%T))" | tee -a "$out/checks.txt"
  (cd /tmp/checks && timeout 150 "$top/.device/gpu_suite" --differential-only --only "$name" 2>&1) >>"$out/checks.txt"
  echo "   exit $?" | tee -a "$out/checks.txt"
done
grep -E "PASS|FAIL|native products|exit|panicked" "$out/checks.txt"

#!/usr/bin/env bash
# Issue 18: every kernel that chosen benchmark cases launch, in order, under Nsight Compute: what
# LayerNorm through Burn runs per call beside the kernels alone (ncu_sequence.py).
# Binaries and caches as h200_layer_norm.sh (.device/gpu_suite.xz, .device/caches-ruda.tar.xz);
# the carried tuning is used (a copy), so the profiled kernels are the tuned choices.
#
#   bash benches/scripts/h200_ncu_cases.sh OUT GROUP CASES [SKIP] [COUNT]
#
# GROUP and CASES as gpu_suite's --groups and --cases (one case is best); SKIP launches are left
# out first (warm-up), then COUNT are profiled. Appends to $OUT/ncu-cases.txt.
set -u
out=${1:?output directory}
group=${2:?benchmark group}
cases=${3:?benchmark cases}
skip=${4:-200}
count=${5:-200}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
for t in .device/caches-ruda.tar.xz; do [ -f "$t" ] && [ ! -d /tmp/cc ] && tar -C /tmp -xJf "$t"; done
mkdir -p /tmp/suite-ncu /tmp/ncu-cc
[ -d /tmp/cc/autotune ] && cp -r /tmp/cc/autotune /tmp/ncu-cc/
printf '[autotune]\ncache = { file = "/tmp/ncu-cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/suite-ncu/cubecl.toml
echo "== $group $cases: launches $skip.. +$count ($(date +%T))" | tee -a "$out/ncu-cases.txt"
(cd /tmp/suite-ncu && RUDA_BENCH_BACKENDS=ruda-cuda timeout "${NCU_TIMEOUT:-200}" ncu --clock-control none \
    --launch-skip "$skip" --launch-count "$count" --metrics gpu__time_duration.sum,dram__bytes.sum \
    --csv --print-units base "$top/.device/gpu_suite" --benchmarks --groups "$group" --cases "$cases") \
    >/tmp/ncu-cases.csv 2>/tmp/ncu-cases.err
echo "   exit $?" | tee -a "$out/ncu-cases.txt"
python3 benches/scripts/ncu_sequence.py /tmp/ncu-cases.csv "${NCU_SHOWN:-30}" >>"$out/ncu-cases.txt" 2>&1
tail -3 /tmp/ncu-cases.err >>"$out/ncu-cases.txt"

#!/usr/bin/env bash
# Issue 18: Nsight Compute over ruda's LayerNorm kernels, a few launches of every launch
# configuration (kernel, grid, block) instead of the first N launches, so that the long rows at
# the end of the shape list are reached in one call; every metric of ncu_layer_norm.py.
#
#   [NCU_TUNED=1] [NCU_GROUPS=A,B] [NCU_KERNELS=REGEX] bash benches/scripts/h200_ncu_configs.sh OUT [LAUNCHES_PER_CONFIG]
#
# Binaries and caches as h200_layer_norm.sh (.device/gpu_suite.xz, .device/caches-ruda.tar.xz).
# The tuner tunes in its own root under the profiler; those choices are not kept. NCU_TUNED=1
# takes the carried tuning instead (a copy), so that only the tuned choices are profiled, not
# every candidate the tuner tries. NCU_GROUPS: the benchmark groups (layer_norm_kernel);
# NCU_KERNELS: the kernels profiled (ruda's LayerNorm kernels; '.' for every kernel, e.g. the
# seed gradient and the other kernels of layer_norm_burn).
set -u
out=${1:?output directory}
per_config=${2:-2}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
for t in .device/caches-ruda.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
metrics=$(python3 -c "import sys; sys.path.insert(0, 'benches/scripts'); import ncu_layer_norm as n; print(','.join(m for m, _, _ in n.METRICS))")
mkdir -p /tmp/suite-ncu
rm -rf /tmp/ncu-cc
[ "${NCU_TUNED:-0}" = 1 ] && [ -d /tmp/cc/autotune ] && mkdir -p /tmp/ncu-cc && cp -r /tmp/cc/autotune /tmp/ncu-cc/
printf '[autotune]\ncache = { file = "/tmp/ncu-cc" }\n[compilation]\ncache = { file = "/tmp/cc/ptx" }\n' >/tmp/suite-ncu/cubecl.toml
kernels=${NCU_KERNELS:-'regex:[Ff]orward_(registers|looped)|[Bb]ackward_(registers|looped)|[Rr]educe_?[Pp]artials'}
[ "$kernels" != . ] && kernels_arg=(-k "$kernels") || kernels_arg=()
echo "== Nsight Compute, $per_config launches a configuration ($(date +%T))"
(cd /tmp/suite-ncu && RUDA_BENCH_BACKENDS=ruda-cuda timeout "${NCU_TIMEOUT:-400}" ncu --clock-control none \
    "${kernels_arg[@]}" \
    --filter-mode per-launch-config --launch-count "$per_config" --metrics "$metrics" \
    --csv --print-units base "$top/.device/gpu_suite" --benchmarks --groups "${NCU_GROUPS:-layer_norm_kernel}") \
    >/tmp/ncu.csv 2>/tmp/ncu.err
echo "   exit $?"
python3 benches/scripts/ncu_layer_norm.py /tmp/ncu.csv >"$out/ncu.txt" 2>&1
tail -3 /tmp/ncu.err >>"$out/ncu.txt"
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
echo "== done ($(date +%T))"

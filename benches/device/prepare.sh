#!/usr/bin/env bash
# On the build machine: fills .device/ (git-ignored) with what benches/device/run.sh needs on the
# GPU machine, which has no Rust toolchain. One device call carries at most 64 MiB of working
# tree, so the release binaries travel xz-compressed; run.sh unpacks them there.
#
#   bash benches/device/prepare.sh [--before] [--caches DIR] [BINARY...]
#
# BINARY (all four by default):
#   gpu_suite         cargo build --release -p ruda-benches --bin gpu_suite --features gpu-suite
#   layer_norm_host   cargo build --release -p ruda-benches --example layer_norm_host --features gpu-suite
#   transformer       cargo build --release -p transformer --example transformer --features burn-backends
#   learner_overhead  cargo build --release -p transformer --example learner_overhead --features burn-backends
# Each is stripped, except learner_overhead (host-profile's stack samples need its symbols to
# name the frames), and written as .device/NAME.xz (xz -9).
#   cupti_trace       benches/device/cupti_trace.c, the GPU timeline recorder of run.sh's
#                     gpu-timeline step, built against CUPTI 13.0's headers (downloaded from PyPI
#                     into target/cupti) as .device/cupti/libcupti_trace.so, with that
#                     libcupti.so.13 beside it (not built by default)
#   --before      write .device/NAME_before.xz instead: the build before a change, for the A/B
#                 steps (layer-norm-burn-ab and step-equal's STEP_BEFORE_AB: gpu_suite; host-ab:
#                 learner_overhead). Run it on a
#                 checkout of the earlier commit, then this script without --before on the new one.
#   --caches DIR  copy DIR/caches-ruda.tar.xz and DIR/caches-burn.tar.xz (the cache roots an
#                 earlier run.sh wrote to its OUT_DIR) into .device/, so the next run starts warm
#                 on another machine with the same GPU and driver.
# CARGO (default cargo) and CARGO_TARGET_DIR (default target/) are honoured.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$top/target}
suffix=
caches=
names=()
while [ $# -gt 0 ]; do
  case $1 in
  --before) suffix=_before ;;
  --caches) caches=${2:?--caches needs a directory}; shift ;;
  -h | --help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  gpu_suite | layer_norm_host | transformer | learner_overhead | cupti_trace) names+=("$1") ;;
  *) echo "prepare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ ${#names[@]} -gt 0 ] || [ -n "$caches" ] || names=(gpu_suite layer_norm_host transformer learner_overhead)

# cupti_trace: the headers and library of CUPTI 13.0 (the GPU machine's driver is CUDA 13.0)
# from NVIDIA's wheels, then one C file.
build_cupti_trace() {
  local wheels=$target/cupti w
  mkdir -p "$wheels" .device/cupti
  for w in nvidia-cuda-cupti nvidia-cuda-runtime nvidia-cuda-crt; do
    ls "$wheels"/"${w//-/_}"-13.0.*.whl >/dev/null 2>&1 ||
      python3 -m pip download --quiet --no-deps --dest "$wheels" "$w==13.0.*"
  done
  for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$wheels/x"; done
  local cu=$wheels/x/nvidia/cu13
  gcc -O2 -Wall -Wextra -Werror -shared -fPIC -I"$cu/include" benches/device/cupti_trace.c \
    -o .device/cupti/libcupti_trace.so -L"$cu/lib" -l:libcupti.so.13 -Wl,-rpath,'$ORIGIN'
  cp "$cu/lib/libcupti.so.13" .device/cupti/
  echo "prepare: .device/cupti/libcupti_trace.so, .device/cupti/libcupti.so.13"
}

mkdir -p .device
for name in "${names[@]}"; do
  [ "$name" = cupti_trace ] && { build_cupti_trace; continue; }
  case $name in
  gpu_suite)
    "$cargo" build --release -p ruda-benches --bin gpu_suite --features gpu-suite
    bin=$target/release/gpu_suite ;;
  layer_norm_host)
    "$cargo" build --release -p ruda-benches --example layer_norm_host --features gpu-suite
    bin=$target/release/examples/layer_norm_host ;;
  transformer)
    "$cargo" build --release -p transformer --example transformer --features burn-backends
    bin=$target/release/examples/transformer ;;
  learner_overhead)
    "$cargo" build --release -p transformer --example learner_overhead --features burn-backends
    bin=$target/release/examples/learner_overhead ;;
  esac
  tmp=$(mktemp)
  cp "$bin" "$tmp"
  [ "$name" = learner_overhead ] || strip "$tmp" 2>/dev/null || true
  xz -9 -T0 -c "$tmp" >".device/$name$suffix.xz"
  rm -f "$tmp" ".device/$name$suffix" # run.sh unpacks a fresh copy
  echo "prepare: .device/$name$suffix.xz"
done
if [ -n "$caches" ]; then
  for t in caches-ruda.tar.xz caches-burn.tar.xz; do
    [ -f "$caches/$t" ] && cp "$caches/$t" ".device/$t" && echo "prepare: .device/$t"
  done
fi
du -ch .device/*.xz .device/cupti 2>/dev/null | tail -1
echo "prepare: a device call carries at most 64 MiB; leave out what the steps you run do not need"

#!/usr/bin/env bash
# Time to the first training step of the transformer example (DESIGN.md's size) under each cache
# state, and where a cold start's time goes. Runs on the GPU machine from the repository root,
# with the release binary in .device/ (`cargo build --release -p transformer --example transformer
# --features burn-backends`, then `../shared/tools/device-prep target/release/examples/transformer`).
#
#   bash benches/scripts/startup.sh cold   OUTDIR   # fresh machine: the breakdown runs, then burn-cuda cold
#   bash benches/scripts/startup.sh warm   OUTDIR   # caches carried from another machine into /tmp/cc*
#   bash benches/scripts/startup.sh damaged OUTDIR  # ruda on a copy of /tmp/cc whose PTX cache
#                                                   # lost the end of its last entry (a crash)
#
# Every process gets its own empty CUDA driver JIT cache (CUDA_CACHE_PATH) unless said otherwise,
# as on a new machine. Cache roots: /tmp/cc (ruda: autotune + compiled kernels, keyed by the
# fingerprint), /tmp/ccb (burn-cuda: CubeCL's autotune cache and PTX cache, as Burn users set them).
# The breakdown of a cold start (all with an empty driver JIT cache):
#   T_cold       nothing cached
#   T_ptx        compiled kernels cached, autotune results not: T_cold - T_ptx = NVRTC compilation
#   T_warm       both cached:                                    T_ptx - T_warm = tuning benchmarks
#   T_warm_jit   both cached and the driver's JIT cache warm:    T_warm - T_warm_jit = driver JIT
# CubeCL's loggers count what was compiled ([Compiling kernel] lines) and tuned ("Fastest result").
set -u
mode=${1:?cold|warm}
out=${2:?output directory}
mkdir -p "$out"
bin=$PWD/.device/transformer
data=$PWD/examples/transformer/data/shakespeare/plays.txt.gz
args=(--text "$data" --d-model 512 --heads 8 --layers 6 --seq-len 256 --batch-size 32
      --epochs 1 --items 64 --valid-items 32 --sample 0 --device cuda)
summary=$out/startup-summary.tsv
[ -f "$summary" ] || printf 'run\tbackend\tcaches\tfirst_step_s\tkernels_compiled\tkeys_tuned\truda_ln_tuning\n' >"$summary"

# run NAME BACKEND CACHE_ROOT JIT_DIR TIMEOUT [cubecl.toml lines...]
run() {
  local name=$1 backend=$2 root=$3 jit=$4 limit=$5
  shift 5
  local dir=/tmp/run-$name
  rm -rf "$dir" && mkdir -p "$dir" "$jit"
  {
    echo '[autotune]'
    echo 'level = "minimal"'
    echo "cache = { file = \"$root\" }"
    echo '[autotune.logger]'
    echo 'level = "minimal"'
    echo "file = \"$dir/autotune.log\""
    echo '[compilation.logger]'
    echo 'level = "basic"'
    echo "file = \"$dir/compilation.log\""
    for line in "$@"; do echo "$line"; done
  } >"$dir/cubecl.toml"
  echo "== $name: --backend $backend, cache root $root, driver JIT cache $jit ($(date +%T))"
  (cd "$dir" && CUDA_CACHE_PATH=$jit timeout "$limit" "$bin" "${args[@]}" --backend "$backend" \
      --artifact-dir "$dir/artifacts" >"$dir/stdout" 2>&1)
  echo "   exit $?"
  grep -E "first training step|LayerNorm autotuning|error|panicked" "$dir/stdout" | head -5
  local first compiled tuned ln
  first=$(sed -n 's/^first training step done \([0-9.]*\) s after the start.*/\1/p' "$dir/stdout")
  compiled=$(grep -c '^\[Compiling kernel\]' "$dir/compilation.log" 2>/dev/null)
  tuned=$(grep -c 'Fastest result' "$dir/autotune.log" 2>/dev/null)
  ln=$(sed -n "s/^ruda's LayerNorm autotuning in this process: \(.*\)/\1/p" "$dir/stdout")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$backend" "$root" "${first:-none}" \
    "${compiled:-0}" "${tuned:-0}" "${ln:--}" >>"$summary"
  # What was compiled, by kernel family (the name up to its first '<' or space).
  if [ -f "$dir/compilation.log" ]; then
    sed -n 's/^\[Compiling kernel\] *//p' "$dir/compilation.log" | sed 's/[< ].*//' | sort | uniq -c |
      sort -rn | sed "s/^/$name\t/" >>"$out/startup-kernels.txt"
  fi
  cat "$dir/stdout" >>"$out/startup-stdout.txt"
}

case $mode in
cold)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/startup-gpu.txt"
  rm -rf /tmp/cc /tmp/ccb /tmp/jit*
  run ruda-cold ruda /tmp/cc /tmp/jit-cold 300
  ls -laR /tmp/cc/compilation >"$out/startup-ruda-cache-listing.txt" 2>&1
  # Compiled kernels kept, autotune results dropped.
  rm -rf /tmp/cc-ptx && cp -a /tmp/cc /tmp/cc-ptx && rm -rf /tmp/cc-ptx/autotune
  run ruda-ptx-only ruda /tmp/cc-ptx /tmp/jit-ptx 200
  run ruda-warm ruda /tmp/cc /tmp/jit-warm 100
  run ruda-warm-jit ruda /tmp/cc /tmp/jit-cold 100
  tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
  run burn-cuda-cold burn-cuda /tmp/ccb /tmp/jit-burn-cold 300 '[compilation]' 'cache = { file = "/tmp/ccb/ptx" }'
  tar -C /tmp -cJf "$out/caches-burn.tar.xz" ccb
  ;;
warm)
  # The driver's JIT cache inside each root, where `keep_driver_jit_cache` puts it: a root
  # carried from a machine that ran this mode holds it too.
  run ruda-carried ruda /tmp/cc /tmp/cc/compilation/cuda-driver 100
  run burn-cuda-carried burn-cuda /tmp/ccb /tmp/ccb/compilation/cuda-driver 100 '[compilation]' 'cache = { file = "/tmp/ccb/ptx" }'
  ;;
damaged)
  rm -rf /tmp/cc-damaged && cp -a /tmp/cc /tmp/cc-damaged
  chunk=$(ls /tmp/cc-damaged/compilation/ruda-fp*/cuda/*/ptx/chunk0.cbor | head -1)
  size=$(stat -c %s "$chunk")
  truncate -s $((size - 300)) "$chunk"
  rm -f "$chunk.checked"
  echo "== damaged $chunk: $size -> $((size - 300)) bytes"
  run ruda-damaged-ptx ruda /tmp/cc-damaged /tmp/cc-damaged/compilation/cuda-driver 100
  grep -i "compilation cache" /tmp/run-ruda-damaged-ptx/stdout | head -3
  ;;
esac
cat "$summary"

#!/usr/bin/env bash
# The GPU machine's runner: every measurement of docs/perf/ as a named step of one script.
#
#   bash benches/device/run.sh OUT_DIR STEP...   # the steps in the order given, output in OUT_DIR
#   bash benches/device/run.sh --list            # every step, one line each
#
# Runs on the GPU machine, from a clean checkout of this repository plus `.device/`, which
# benches/device/prepare.sh fills on the build machine (the GPU machine has no Rust toolchain):
#   .device/gpu_suite.xz          the GPU suite (checks, benchmarks, breakdown, products, embedding)
#   .device/layer_norm_host.xz    benches/examples/layer_norm_host.rs (step layer-norm-host)
#   .device/transformer.xz        the transformer example with `burn-backends` (startup, learner)
#   .device/learner_overhead.xz   the transformer crate's learner_overhead example, unstripped
#   .device/*_before.xz           the same binaries built before a change (the `-ab` steps,
#                                 step-equal with STEP_BEFORE_AB=1)
#   .device/caches-{ruda,burn}.tar.xz   optional: the cache roots an earlier run wrote to OUT_DIR
# Before the first step the runner unpacks the binaries next to their .xz, puts cuBLAS on the
# library path (the CUDA toolkit's, else PyTorch's nvidia-cublas wheel), and writes
# OUT_DIR/env.txt (date, GPU, driver, clocks, cuBLAS, cores). Steps that use caches untar the
# carried ones into /tmp once per machine (/tmp/cc: ruda's cache root, /tmp/ccb: Burn's
# Autodiff<Cuda>); after the last step the roots present come back as OUT_DIR/caches-*.tar.xz
# (SAVE_CACHES=0: not). Steps take their parameters from environment variables (see --list);
# FRESH_TUNING=1 keeps the carried compiled kernels but drops the carried tuning results;
# FRESH_TUNING=NAME drops only the tuner NAME's (a glob, e.g. 'softmax-*': ruda's softmax tuners).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
dev=$top/.device
text=$top/examples/transformer/data/shakespeare/plays.txt.gz
shapes="16384x256 16384x512 16384x768 16384x1024 16384x2048 16384x4096 16384x8192 4096x768 4096x8192"

# name | what it does (and its parameters)
STEPS=(
  "layer-norm-checks|LayerNorm checks against the f64 reference on CUDA, every variant timed, the default rule's table on both clocks (gpu_suite --no-burn --no-differential)"
  "layer-norm-benchmarks|LayerNorm kernels alone and through Burn, synchronized and back to back (LN_BACKENDS=ruda-cuda, LN_GROUPS=layer_norm_kernel,layer_norm_burn; benchmarks.csv)"
  "layer-norm-torch|PyTorch references in torch.tsv: LayerNorm synchronized and back to back (f32, bf16, f16), the memory floor, the fixed cost of a synchronized call"
  "layer-norm-host|the host work of a small LayerNorm call: caller's time, batch, back to back, allocations (layer_norm_host; host.txt)"
  "layer-norm-ncu|Nsight Compute over the LayerNorm backward kernels: time, DRAM bytes, registers, occupancy (ncu.txt)"
  "layer-norm-burn-ab|LayerNorm through Burn and the 1024x1024 breakdown, this build against .device/gpu_suite_before in turns (LN_AB_ROUNDS=4; ab.txt, ab-benchmarks.csv)"
  "ncu-cases|every kernel that chosen benchmark cases launch, in order, under Nsight Compute (NCU_CASES='GROUP:CASE[:SKIP[:COUNT]] ...', skip 200 and count 200 by default; ncu-cases.txt)"
  "ncu-configs|Nsight Compute over LayerNorm kernels, NCU_PER_CONFIG=2 launches of every launch configuration (NCU_TUNED=1, NCU_GROUPS, NCU_KERNELS; ncu.txt)"
  "breakdown|LayerNorm through Burn step by step at 1024x1024: synchronized, caller's enqueue time, back to back (gpu_suite --breakdown --quick; breakdown.txt)"
  "differential|the differential suite on CUDA against NdArray, every op family and the models' gradients (DIFF_ONLY=NAME: the checks whose name contains NAME; differential.txt)"
  "benchmarks|the published comparison: gpu_suite --benchmarks on every backend present (RUDA_BENCH_BACKENDS narrows), torch_layernorm.py at the 9 shapes (benchmarks.csv, torch.tsv)"
  "transformer-step|the transformer's bare training step, one gpu_suite process (STEP_BACKENDS=ruda-cuda,burn-cuda,ruda-cuda-bf16,burn-cuda-bf16; steps.csv)"
  "torch-step|the PyTorch transformer step (dropout 0, no final LayerNorm: NOT equal work) in f32, TF32 and bf16 with its kernel time by family (torch.txt)"
  "adam-checks|the native Adam update's checks against the f64 reference on CUDA (gpu_suite --adam; adam.txt)"
  "gelu-checks|the native GELU kernels' checks against the f64 reference on CUDA (gpu_suite --gelu; gelu.txt)"
  "softmax|softmax and log-softmax: the checks on CUDA against the f64 reference, the kernels against a copy of the same bytes back to back (gpu_suite --softmax; SOFTMAX_ARGS=--no-checks: the kernels only; SOFTMAX_AB=1: then the kernels of .device/gpu_suite_before and this build in turns, SOFTMAX_AB_BINS='gpu_suite_before gpu_suite', SOFTMAX_AB_ROUNDS=2, SOFTMAX_AB_ENV='RUDA_AUTOTUNE=off': every build on the default rule's variants), PyTorch's softmaxes and copy (benches/torch/softmax.py) (softmax.txt)"
  "step-equal|the equal-work comparison in one call: ruda's bare step (STEP_BACKENDS=ruda-cuda,ruda-cuda-bf16; STEP_DROPOUTS=0,0.1) with kernels, products and host CPU per step, the same with RUDA_SOFTMAX=burn (STEP_SOFTMAX_AB=1), with RUDA_MATMUL_NESTED=on and off again (STEP_NESTED_AB=1), with attention's product outputs in each order of STEP_OUTPUT_AB_ORDERS in turns (STEP_OUTPUT_AB=1: RUDA_MATMUL_OUTPUT_ORDER, default 'off on'; STEP_OUTPUT_AB_ROUNDS=1), with GELU composed by Burn and native in turns (STEP_GELU_AB=1: RUDA_GELU; STEP_GELU_AB_ROUNDS=1), with each set of burn-fusion's fusers in turns (STEP_FUSERS_AB=1: RUDA_FUSERS, STEP_FUSERS_AB_SETS='burn default elementwise', STEP_FUSERS_AB_ROUNDS=1), with the linear backward as one operation, as Burn's three, as one (STEP_LINEAR_AB=1), with Adam's updates as one operation a parameter, then one a step again (STEP_ADAM_AB=1: RUDA_BENCH_ADAM=ruda-each), .device/gpu_suite_before then this build again (STEP_BEFORE_AB=1; STEP_BEFORE_ENV: settings for the build before only), then benches/torch/transformer_step.py --all (TORCH_BUDGET_S=240; 0: not run) (step-equal.txt)"
  "host-sample|where the transformer step's service threads spend their time: gpu_suite --step --sample-threads over 50 steps synced and 50 back to back (STEP_BACKENDS=ruda-cuda,ruda-cuda-bf16; STEP_DROPOUTS=0.1), no launch log; raw samples samples-*.txt for benches/device/symbolize_samples.py with the unstripped build (host-sample.txt)"
  "gpu-timeline|what the GPU does between kernels in the transformer step: per backend (TIMELINE_BACKENDS='ruda-cuda-bf16 ruda-cuda') and Adam (TIMELINE_ADAMS='ruda burn': RUDA_BENCH_ADAM), gpu_suite --step untraced (STEP_DROPOUTS=0.1), then at TIMELINE_DROPOUT=0.1 traced by CUPTI (.device/cupti/, prepare.sh cupti_trace) and read by gpu_timeline.py over the 10 synced and the 30 back-to-back steps, with each step's tail after its last product; TIMELINE_TORCH=1: and the equal-work PyTorch step untraced at dropout 0.1 and 0, then traced, once per ';'-separated set of TIMELINE_TORCH_ARGS (default '--dtype bf16;--dtype f32'); gpu-timeline.txt, traces.tar.xz)"
  "reliability|the soak run: a small transformer for SOAK_STEPS=10000 steps, memory and cache sampled (gpu_suite --soak, SOAK_TIMEOUT=480; SOAK_STEPS=0: none), then an injected cuBLAS failure is an error at the next read (RUDA_FAULT_INJECT=ruda_matmul) and f64 LayerNorm and softmax match NdArray (gpu_suite --faults, FAULTS_TIMEOUT=120; reliability.txt)"
  "launch-costs|the host's cost per call on CUDA: a CubeCL launch, a cuBLAS product, an allocation back to back on tiny tensors (ruda_runtime and Burn's Ruda), a product's fence and cuBLAS call alone on the device thread (gpu_suite --launch-costs; launch-costs.txt)"
  "torch-step-equal|the equal-work PyTorch transformer step, benches/torch/transformer_step.py (dropout 0.1, final LayerNorm; TORCH_STEP_ARGS passes its flags; torch-equal.txt)"
  "matmul|the matrix products alone: ruda's cuBLAS against burn-cubecl's, f32 and bf16 (gpu_suite --matmul; products.txt)"
  "embedding|the embedding table's gradient alone: ruda's kernel against Burn's at four table sizes (gpu_suite --embedding; embedding.txt)"
  "products-cold|fresh machine: smoke check of the products, the cold-start breakdown (startup-cold), the Learner on ruda and burn-cuda"
  "products-carried|fresh machine with carried caches: warm start, the Learner, the bare steps (f32, bf16; Burn f32), PyTorch's step"
  "products-suite|after products-carried: the Learner with CubeCL's loggers, every differential check, kernel time per step by family (Nsight Compute), the products alone, bf16 steps"
  "products-checks|the products' differential checks one process each, then the Learner twice (the second run is the steady one)"
  "products-differential|the differential checks that go through the cuBLAS products, one gpu_suite process per group (PRODUCTS_ONLY='matmul;linear;...' narrows; checks.txt)"
  "startup-cold|fresh machine, empty caches: time to the first transformer step cold, compiled only, warm, warm with the driver's JIT cache; burn-cuda cold (startup-*.txt)"
  "startup-warm|time to the first step with the carried cache roots (ruda and burn-cuda), the driver's JIT cache kept inside each root"
  "startup-damaged|ruda on a copy of /tmp/cc whose PTX cache lost the end of its last entry, as after a crash"
  "step-kernels|GPU kernel time per transformer step by family, f32 (TF32 products) and bf16, from Nsight Compute (ncu_step.py over gpu_suite's transformer_step benchmark, dropout 0.1; KERNELS_BACKENDS='ruda-cuda ruda-cuda-bf16', KERNELS_ADAMS='ruda' or 'burn ruda': RUDA_BENCH_ADAM; kernels.txt)"
  "learner|the transformer example through burn-train's Learner (LEARNER_STEPS=100, LEARNER_RUNS='ruda burn-cuda': BACKEND[:lazy|:step|:wN|:burnlog], bare, pieces[:BACKEND]; LEARNER_LOGS=1; LEARNER_TIMEOUT=240 s a run, more for burn-cuda's cold start)"
  "learner-final|the bare step of ruda and Autodiff<Cuda> in f32 and bf16 in one process, the Learner for both alternately, learner_overhead's bare step (final.txt)"
  "learner-rayon|the Learner and learner_overhead's training piece with rayon's default pool and with RAYON_NUM_THREADS=1, alternately (learner.txt, pieces.txt)"
  "fusion-ops|burn-fusion's operations a step by kind and its plan events (segments from stored plans, explorations, new blocks), from its trace of two step runs (BURN_FUSION_LOG=full; FUSION_OPS_BACKENDS=ruda-cuda-bf16, STEP_DROPOUTS=0.1, FUSION_OPS_ENV='RUDA_GELU=burn' etc.; fusion-ops.txt)"
  "host-profile|which thread paces the step: learner_overhead's thread CPU times, stack samples of every thread (cuda-gdb, HOST_SAMPLES=40), the bare step f32/bf16 (host.txt, pmp-*.txt)"
  "host-ab|a host-side change against .device/learner_overhead_before in turns (HOST_AB_ROUNDS=3, HOST_AB_STEPS=150), a 1000-step drift run, bare steps, the Learner (HOST_AB_BURN=1: and burn-cuda; ab.txt)"
  "multi-gpu|data-parallel training of the transformer on 1 and 2 GPUs, ruda and burn-cuda, global batch 64 (BIN=.device/transformer; loss-*.csv, one log a run)"
)

list() {
  local entry
  for entry in "${STEPS[@]}"; do printf '%-22s %s\n' "${entry%%|*}" "${entry#*|}"; done
}

case "${1:-}" in
--list) list; exit 0 ;;
"" | -h | --help)
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  echo
  list
  exit 2
  ;;
esac

out=$1
shift
[ $# -gt 0 ] || { echo "run.sh: no step given (--list shows them)" >&2; exit 2; }
for s in "$@"; do
  known=0
  for entry in "${STEPS[@]}"; do [ "${entry%%|*}" = "$s" ] && known=1; done
  [ $known = 1 ] || { echo "run.sh: unknown step '$s' (--list shows them)" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$top" || exit 1

# --- shared by the steps --------------------------------------------------------------------

# The binaries: .device/NAME.xz unpacked to .device/NAME (one device call carries at most
# 64 MiB, so they travel compressed), and cuBLAS on the library path; sets $cublas.
unpack() {
  local f
  for f in "$dev"/*.xz; do
    [ -f "$f" ] || continue
    case $f in *.tar.xz) continue ;; esac
    [ "${f%.xz}" -nt "$f" ] || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$f" "${f%.xz}"
    chmod +x "${f%.xz}"
  done
  cublas=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /opt /usr/lib -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -1)
  [ -n "$cublas" ] && export LD_LIBRARY_PATH=$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  command -v ncu >/dev/null || PATH=$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | head -1)
}

# need NAME...: the step's binaries are in .device/, or the step stops with a message.
need() {
  local name
  for name in "$@"; do
    [ -x "$dev/$name" ] && continue
    echo "run.sh: .device/$name is missing: run benches/device/prepare.sh on the build machine" >&2
    return 1
  done
}

# header FILE [MORE]: the date and the GPU (name, driver, clocks) at the top of a step's log;
# MORE=cores adds the number of CPU cores.
header() {
  { date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
    [ "${2:-}" = cores ] && nproc; } >>"$1"
}

# The cache roots an earlier run wrote (.device/caches-*.tar.xz), untarred into /tmp once per
# machine; FRESH_TUNING then drops carried tuning results (the compiled kernels stay).
carry_caches() {
  local t
  [ -e /tmp/.run-sh-caches ] && return
  for t in "$dev"/caches-*.tar.xz; do [ -f "$t" ] && tar -C /tmp -xJf "$t"; done
  case ${FRESH_TUNING:-0} in
  0) ;;
  1) rm -rf /tmp/cc/autotune ;;
  # shellcheck disable=SC2086
  *) rm -f /tmp/cc/autotune/*/*/$FRESH_TUNING.json.log ;;
  esac
  touch /tmp/.run-sh-caches
}

# toml DIR ROOT [minimal] [PTX_ROOT]: a working directory whose cubecl.toml puts CubeCL's
# tuning cache under ROOT (at `level = "minimal"` when asked) and its compilation cache under
# PTX_ROOT (when given).
toml() {
  local dir=$1 root=$2 level=${3:-} ptx=${4:-}
  mkdir -p "$dir"
  {
    echo '[autotune]'
    [ "$level" = minimal ] && echo 'level = "minimal"'
    echo "cache = { file = \"$root\" }"
    [ -n "$ptx" ] && printf '[compilation]\ncache = { file = "%s" }\n' "$ptx"
  } >"$dir/cubecl.toml"
}

# suite COMMAND...: in /tmp/suite-ruda (the LayerNorm steps' root: /tmp/cc, tuned at CubeCL's
# default level), on ruda-cuda alone.
suite() {
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda "$@" 2>&1)
}

# learner_runs OUT STEPS LOGS RUN...: the transformer example through burn-train's Learner at
# the benchmark model's size (6 pre-norm layers, d_model 512, 8 heads, seq 256, batch 32, Adam,
# f32), one process per RUN, with the cache roots /tmp/cc (ruda) and /tmp/ccb (Burn's
# backends), so a run after startup-cold compiles nothing. RUN: BACKEND[:lazy][:step][:wN][:burnlog]
# (lazy: --read-at metrics-thread; step: --read-at step-end; wN: --workers N; burnlog:
# --app-log burn, burn-train's own application logger). LOGS=1 also
# counts what CubeCL compiles and tunes during the run. Prints each run's time to the first step
# and its time per training step (the example's own figure: the last epoch after its first
# tenth). The text has 3305 windows of 257 characters: at most 103 full steps of 32; more steps
# would end on a partial batch, whose new shapes compile new kernels inside the timed window.
learner_runs() {
  local lout=$1 steps=$2 logs=$3 run backend root option dir
  shift 3
  mkdir -p "$lout"
  need transformer || return 1
  for run in "$@"; do
    backend=${run%%:*}
    local flags=() extra=()
    for option in $(echo "${run#"$backend"}" | tr ':' ' '); do
      case $option in
      lazy) flags+=(--read-at metrics-thread) ;;
      step) flags+=(--read-at step-end) ;;
      w[0-9]*) flags+=(--workers "${option#w}") ;;
      burnlog) flags+=(--app-log burn) ;;
      *) echo "unknown run option $option" >&2; return 2 ;;
      esac
    done
    case $backend in
    ruda) root=/tmp/cc ;;
    *) root=/tmp/ccb; extra=('[compilation]' 'cache = { file = "/tmp/ccb/ptx" }') ;;
    esac
    dir=/tmp/learner-${run//:/-}
    rm -rf "$dir" && mkdir -p "$dir"
    {
      echo '[autotune]'
      echo 'level = "minimal"'
      echo "cache = { file = \"$root\" }"
      for line in "${extra[@]}"; do echo "$line"; done
      if [ "$logs" = 1 ]; then
        printf '[autotune.logger]\nlevel = "minimal"\nfile = "%s"\n' "$dir/autotune.log"
        printf '[compilation.logger]\nlevel = "basic"\nfile = "%s"\n' "$dir/compilation.log"
      fi
    } >"$dir/cubecl.toml"
    echo "== learner $run: $steps steps ($(date +%T))"
    (cd "$dir" && CUDA_CACHE_PATH=$root/compilation/cuda-driver timeout "${LEARNER_TIMEOUT:-240}" "$dev/transformer" \
        --text "$text" --d-model 512 --heads 8 --layers 6 --seq-len 256 --batch-size 32 \
        --epochs 1 --items $((steps * 32)) --valid-items 256 --sample 0 --device cuda \
        --backend "$backend" "${flags[@]}" --artifact-dir "$dir/artifacts" >"$dir/stdout" 2>&1)
    echo "   exit $?"
    grep -E "first training step|time per training step|training thread per step|error|panicked" "$dir/stdout" | head -5
    if [ "$logs" = 1 ]; then
      echo "   kernels compiled: $(grep -c '^\[Compiling kernel\]' "$dir/compilation.log" 2>/dev/null)," \
        "keys tuned: $(grep -c 'Fastest result' "$dir/autotune.log" 2>/dev/null)"
      grep -E "^epoch 1/1 train" "$dir/stdout" | tr '\n' ' ' | sed 's/epoch 1\/1 train *//g'; echo
    fi
    cat "$dir/stdout" >>"$lout/learner-stdout.txt"
  done
}

# startup_run NAME BACKEND CACHE_ROOT JIT_DIR TIMEOUT [cubecl.toml lines...]: one process of the
# transformer example to its first training step (64 items), with CubeCL's compilation and
# autotune loggers; appends a row to startup-summary.tsv, the kernels compiled by family to
# startup-kernels.txt and the process's output to startup-stdout.txt.
startup_run() {
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
  (cd "$dir" && CUDA_CACHE_PATH=$jit timeout "$limit" "$dev/transformer" --text "$text" \
      --d-model 512 --heads 8 --layers 6 --seq-len 256 --batch-size 32 --epochs 1 --items 64 \
      --valid-items 32 --sample 0 --device cuda --backend "$backend" \
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
  if [ -f "$dir/compilation.log" ]; then
    sed -n 's/^\[Compiling kernel\] *//p' "$dir/compilation.log" | sed 's/[< ].*//' | sort | uniq -c |
      sort -rn | sed "s/^/$name\t/" >>"$out/startup-kernels.txt"
  fi
  cat "$dir/stdout" >>"$out/startup-stdout.txt"
}

startup_summary() {
  summary=$out/startup-summary.tsv
  [ -f "$summary" ] ||
    printf 'run\tbackend\tcaches\tfirst_step_s\tkernels_compiled\tkeys_tuned\truda_ln_tuning\n' >"$summary"
}

# --- the steps ------------------------------------------------------------------------------

step_layer_norm_checks() {
  need gpu_suite || return 1
  carry_caches
  echo "== checks, the default rule's table on both clocks, every variant ($(date +%T))" | tee -a "$out/suite.txt"
  suite timeout 330 "$dev/gpu_suite" --no-burn --no-differential >>"$out/suite.txt"
  echo "   exit $?"; grep -E "^(PASS|FAIL)|check\(s\) failed" "$out/suite.txt"
  return 0
}

step_layer_norm_benchmarks() {
  need gpu_suite || return 1
  carry_caches
  # LN_BACKENDS (ruda-cuda) and LN_GROUPS (both groups) pick other contenders, e.g.
  # LN_BACKENDS=burn-cuda LN_GROUPS=layer_norm_burn for Burn's Autodiff<Cuda>.
  local backends=${LN_BACKENDS:-ruda-cuda} csv=$out/benchmarks.csv
  local limit=200 # Burn's composed LayerNorm compiles and tunes far more: 310 s once
  [ "$backends" = ruda-cuda ] || { csv=$out/benchmarks-${backends//,/_}.csv; limit=400; }
  echo "== benchmarks $backends ($(date +%T))" | tee -a "$out/suite.txt"
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=$backends timeout $limit "$dev/gpu_suite" --benchmarks \
      --groups "${LN_GROUPS:-layer_norm_kernel,layer_norm_burn}" --csv "$csv" 2>&1) >>"$out/suite.txt"
  echo "   exit $?"
  return 0
}

step_layer_norm_torch() {
  echo "== PyTorch ($(date +%T))"
  # shellcheck disable=SC2086
  timeout 150 python3 benches/device/torch_layernorm.py float32 bfloat16 float16 $shapes >>"$out/torch.tsv" 2>&1
  echo "   exit $?"
  # Back to back (20 calls, one synchronize), beside gpu_suite's @back-to-back rows.
  # shellcheck disable=SC2086
  timeout 150 python3 benches/device/torch_layernorm_b2b.py float32 bfloat16 float16 $shapes >>"$out/torch.tsv" 2>&1
  echo "   exit $?"
  # The least any implementation's call can cost under this method: PyTorch moving the same
  # bytes with nothing to compute (f32; the shapes of the bandwidth targets).
  timeout 90 python3 benches/device/torch_memory_floor.py float32 16384x1024 16384x2048 16384x4096 \
    16384x8192 4096x8192 >>"$out/torch.tsv" 2>&1
  echo "   exit $?"
  # PyTorch's fixed cost of a synchronized call, beside gpu_suite's "a call that launches
  # nothing": a synchronize alone, and a one-element add then a synchronize (10 warm-up, median
  # of 50).
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
  return 0
}

step_layer_norm_host() {
  need layer_norm_host || return 1
  carry_caches
  # The caller's own time (batches of 4 calls, whose tasks fit in CubeCL's device-thread queue)
  # and back to back (batches of 100): forward, forward+backward, the forward's allocations.
  echo "== host work ($(date +%T))" | tee -a "$out/host.txt"
  local args every
  for args in "" "--backward" "--alloc-only" "--alloc-together"; do
    for every in 4 100; do
      # shellcheck disable=SC2086
      suite timeout 60 "$dev/layer_norm_host" --cuda --calls 20000 --every $every $args >>"$out/host.txt"
    done
  done
  echo "   exit $?"; grep -v XDG "$out/host.txt"
  return 0
}

step_layer_norm_ncu() {
  need gpu_suite || return 1
  carry_caches
  # The tuner tunes in its own root under the profiler; those choices are not kept.
  echo "== Nsight Compute, backward kernels ($(date +%T))"
  toml /tmp/suite-ncu /tmp/ncu-cc "" /tmp/cc/ptx
  # Durations, bytes and registers only: with ncu_layer_norm.py's whole list every launch is
  # replayed several times, and 240 s covered 270 launches (the first shape).
  local metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  metrics=$metrics,launch__registers_per_thread,sm__maximum_warps_per_active_cycle_pct
  (cd /tmp/suite-ncu && RUDA_BENCH_BACKENDS=ruda-cuda timeout 200 ncu --clock-control none \
      -k 'regex:[Bb]ackward|[Rr]educe_?[Pp]artials' --launch-count 1500 --metrics "$metrics" \
      --csv --print-units base "$dev/gpu_suite" --benchmarks --groups layer_norm_kernel) \
      >/tmp/ncu.csv 2>/tmp/ncu.err
  echo "   exit $?"
  python3 benches/device/ncu_layer_norm.py /tmp/ncu.csv >>"$out/ncu.txt" 2>&1
  tail -3 /tmp/ncu.err >>"$out/ncu.txt"
  return 0
}

step_layer_norm_burn_ab() {
  need gpu_suite gpu_suite_before || return 1
  carry_caches
  local rounds=${LN_AB_ROUNDS:-4} log=$out/ab.txt csv=$out/ab-benchmarks.csv round order build bin
  header "$log"
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  echo "build,round,group,case,backend,backend_type,device,median_us,throughput,unit,warmup,iters" >"$csv"
  for round in $(seq "$rounds"); do
    # Odd rounds run the earlier build first, even rounds this one: a warming machine favours
    # neither.
    order="before after"
    [ $((round % 2)) = 0 ] && order="after before"
    for build in $order; do
      bin=$dev/gpu_suite
      [ "$build" = before ] && bin=${bin}_before
      echo "== round $round, $build ($(date +%T))" >>"$log"
      (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda timeout 120 "$bin" --benchmarks \
          --groups layer_norm_burn --csv /tmp/ab.csv 2>&1) >>"$log"
      tail -n +2 /tmp/ab.csv | sed "s/^/$build,$round,/" >>"$csv"
      (cd /tmp/suite-ruda && timeout 40 "$bin" --breakdown --quick 2>&1) | grep -E "autodiff:" >>"$log"
    done
  done
  python3 - "$csv" "$log" <<'PY' | tee -a "$log"
import csv, re, statistics, sys
per_call = {}
for r in csv.DictReader(open(sys.argv[1])):
    calls = 20 if r["case"].endswith("-x20") else 1
    per_call.setdefault((r["case"], r["build"]), []).append(float(r["median_us"]) / calls)
steps = {}
build = None
for line in open(sys.argv[2]):
    m = re.match(r"== round \d+, (\w+)", line)
    if m:
        build = m.group(1)
    f = line.rstrip("\n").split("\t")
    if len(f) == 6 and f[2].startswith("autodiff:") and build:
        steps.setdefault((f[2], build), []).append(float(f[5]))
print("\n## Per call, median of the rounds (us); after / before")
print("case\tbefore\tafter\tratio\tbefore runs\tafter runs")
for case in dict.fromkeys(c for c, _ in per_call):
    b, a = per_call.get((case, "before"), []), per_call.get((case, "after"), [])
    if b and a:
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{case}\t{mb:.1f}\t{ma:.1f}\t{ma / mb:.3f}\t{' '.join(f'{x:.1f}' for x in b)}\t{' '.join(f'{x:.1f}' for x in a)}")
print("\n## Breakdown at 1024x1024, back to back (throughput_us), median of the rounds")
for step in dict.fromkeys(s for s, _ in steps):
    b, a = steps.get((step, "before"), []), steps.get((step, "after"), [])
    if b and a:
        print(f"{step}\t{statistics.median(b):.1f}\t{statistics.median(a):.1f}")
PY
  return 0
}

step_ncu_cases() {
  need gpu_suite || return 1
  [ -n "${NCU_CASES:-}" ] || { echo "ncu-cases: set NCU_CASES='GROUP:CASE[:SKIP[:COUNT]] ...'" >&2; return 2; }
  carry_caches
  # The carried tuning is used (a copy), so the profiled kernels are the tuned choices.
  mkdir -p /tmp/ncu-cc
  [ -d /tmp/cc/autotune ] && cp -r /tmp/cc/autotune /tmp/ncu-cc/
  toml /tmp/suite-ncu /tmp/ncu-cc "" /tmp/cc/ptx
  local spec group cases skip count
  for spec in $NCU_CASES; do
    IFS=: read -r group cases skip count <<<"$spec"
    skip=${skip:-200}
    count=${count:-200}
    echo "== $group $cases: launches $skip.. +$count ($(date +%T))" | tee -a "$out/ncu-cases.txt"
    (cd /tmp/suite-ncu && RUDA_BENCH_BACKENDS=ruda-cuda timeout "${NCU_TIMEOUT:-200}" ncu --clock-control none \
        --launch-skip "$skip" --launch-count "$count" --metrics gpu__time_duration.sum,dram__bytes.sum \
        --csv --print-units base "$dev/gpu_suite" --benchmarks --groups "$group" --cases "$cases") \
        >/tmp/ncu-cases.csv 2>/tmp/ncu-cases.err
    echo "   exit $?" | tee -a "$out/ncu-cases.txt"
    python3 benches/device/ncu_sequence.py /tmp/ncu-cases.csv "${NCU_SHOWN:-30}" >>"$out/ncu-cases.txt" 2>&1
    tail -3 /tmp/ncu-cases.err >>"$out/ncu-cases.txt"
  done
  return 0
}

step_ncu_configs() {
  need gpu_suite || return 1
  carry_caches
  # The tuner tunes in its own root under the profiler; those choices are not kept. NCU_TUNED=1
  # takes the carried tuning instead (a copy), so that only the tuned choices are profiled.
  # NCU_GROUPS: the benchmark groups (layer_norm_kernel); NCU_KERNELS: the kernels profiled
  # (ruda's LayerNorm kernels; '.' for every kernel, e.g. the seed gradient through Burn).
  local metrics kernels per_config=${NCU_PER_CONFIG:-2}
  metrics=$(python3 -c "import sys; sys.path.insert(0, 'benches/device'); import ncu_layer_norm as n; print(','.join(m for m, _, _ in n.METRICS))")
  rm -rf /tmp/ncu-cc
  [ "${NCU_TUNED:-0}" = 1 ] && [ -d /tmp/cc/autotune ] && mkdir -p /tmp/ncu-cc && cp -r /tmp/cc/autotune /tmp/ncu-cc/
  toml /tmp/suite-ncu /tmp/ncu-cc "" /tmp/cc/ptx
  kernels=${NCU_KERNELS:-'regex:[Ff]orward_(registers|looped)|[Bb]ackward_(registers|looped)|[Rr]educe_?[Pp]artials'}
  local kernels_arg=()
  [ "$kernels" != . ] && kernels_arg=(-k "$kernels")
  echo "== Nsight Compute, $per_config launches a configuration ($(date +%T))"
  (cd /tmp/suite-ncu && RUDA_BENCH_BACKENDS=ruda-cuda timeout "${NCU_TIMEOUT:-400}" ncu --clock-control none \
      "${kernels_arg[@]}" \
      --filter-mode per-launch-config --launch-count "$per_config" --metrics "$metrics" \
      --csv --print-units base "$dev/gpu_suite" --benchmarks --groups "${NCU_GROUPS:-layer_norm_kernel}") \
      >/tmp/ncu.csv 2>/tmp/ncu.err
  echo "   exit $?"
  python3 benches/device/ncu_layer_norm.py /tmp/ncu.csv >>"$out/ncu.txt" 2>&1
  tail -3 /tmp/ncu.err >>"$out/ncu.txt"
  return 0
}

step_breakdown() {
  need gpu_suite || return 1
  carry_caches
  echo "== gpu_suite --breakdown --quick ($(date +%T))" | tee -a "$out/breakdown.txt"
  suite timeout 120 "$dev/gpu_suite" --breakdown --quick >>"$out/breakdown.txt"
  echo "   exit $?"; grep -E "^(impl|ruda|burn)" "$out/breakdown.txt" | tail -20
  return 0
}

step_differential() {
  need gpu_suite || return 1
  carry_caches
  local only=()
  [ -n "${DIFF_ONLY:-}" ] && only=(--only "$DIFF_ONLY")
  echo "== differential checks ${DIFF_ONLY:-} ($(date +%T))" | tee -a "$out/differential.txt"
  toml /tmp/suite-ruda /tmp/cc minimal
  (cd /tmp/suite-ruda && timeout 300 "$dev/gpu_suite" --differential-only "${only[@]}" 2>&1) >>"$out/differential.txt"
  echo "   exit $?"; grep -E "^(PASS|FAIL)|check\(s\) failed|native matrix" "$out/differential.txt"
  return 0
}

step_benchmarks() {
  need gpu_suite || return 1
  carry_caches
  echo "== benchmarks, every backend present ${RUDA_BENCH_BACKENDS:-} ($(date +%T))" | tee -a "$out/suite.txt"
  toml /tmp/suite-ruda /tmp/cc minimal /tmp/cc/ptx
  (cd /tmp/suite-ruda && timeout 540 "$dev/gpu_suite" --benchmarks --csv "$out/benchmarks.csv" 2>&1) >>"$out/suite.txt"
  echo "   exit $?"
  # shellcheck disable=SC2086
  timeout 150 python3 benches/device/torch_layernorm.py float32 $shapes >>"$out/torch.tsv" 2>&1
  echo "   exit $?"
  return 0
}

step_transformer_step() {
  need gpu_suite || return 1
  carry_caches
  local backends=${STEP_BACKENDS:-ruda-cuda,burn-cuda,ruda-cuda-bf16,burn-cuda-bf16}
  echo "== bare steps, one gpu_suite process: $backends ($(date +%T))" | tee -a "$out/steps.txt"
  toml /tmp/suite-burn /tmp/ccb minimal /tmp/ccb/ptx
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=$backends timeout $limit "$dev/gpu_suite" --benchmarks \
      --groups transformer_step --csv "$out/steps.csv" 2>&1) >>"$out/steps.txt"
  echo "   exit $?"; grep -E "^transformer_step|FAILED|panicked" "$out/steps.txt"
  return 0
}

step_torch_step() {
  echo "== PyTorch's transformer step ($(date +%T))"
  PYTHONUNBUFFERED=1 timeout 120 python3 benches/device/torch_step_profile.py f32 tf32 bf16 2>&1 |
    tee -a "$out/torch.txt" | grep -E "^torch-|kernel time"
  return 0
}

step_softmax() {
  need gpu_suite || return 1
  carry_caches
  echo "== softmax: checks and kernels against a copy ($(date +%T))" | tee -a "$out/softmax.txt"
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  (cd /tmp/suite-ruda && timeout "${SOFTMAX_TIMEOUT:-300}" "$dev/gpu_suite" --softmax ${SOFTMAX_ARGS:-} 2>&1) >>"$out/softmax.txt"
  echo "   exit $?"; grep -E "^(PASS|FAIL|softmax|log_softmax)" "$out/softmax.txt"
  if [ "${SOFTMAX_AB:-0}" = 1 ]; then
    # The kernels only, the build before a change (prepare.sh --before) and this build in turns
    # (SOFTMAX_AB_BINS: other builds in .device/ too); each reads the tuning results above.
    local round bin bins=${SOFTMAX_AB_BINS:-gpu_suite_before gpu_suite}
    # shellcheck disable=SC2086
    need $bins || return 1
    for round in $(seq "${SOFTMAX_AB_ROUNDS:-2}"); do
      for bin in $bins; do
        echo "== softmax kernels, $bin, round $round ($(date +%T))" | tee -a "$out/softmax.txt"
        # shellcheck disable=SC2086
        (cd /tmp/suite-ruda && env ${SOFTMAX_AB_ENV:-} timeout 120 "$dev/$bin" --softmax --no-checks 2>&1) >>"$out/softmax.txt"
        echo "   exit $?"; tail -9 "$out/softmax.txt" | grep -E "^(softmax|log_softmax)"
      done
    done
  fi
  echo "== PyTorch's softmax and copy ($(date +%T))" | tee -a "$out/softmax.txt"
  PYTHONUNBUFFERED=1 timeout 120 python3 benches/torch/softmax.py 2>&1 | tee -a "$out/softmax.txt" | grep -E "^torch"
  return 0
}

# native_checks NAME FLAG FILE: one operation's checks against the f64 reference on CUDA
# (gpu_suite FLAG), into FILE.
native_checks() {
  need gpu_suite || return 1
  carry_caches
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  echo "== $1: checks against the f64 reference ($(date +%T))" | tee -a "$out/$3"
  (cd /tmp/suite-ruda && timeout 120 "$dev/gpu_suite" "$2" 2>&1) >>"$out/$3"
  echo "   exit $?"; grep -E "^(PASS|FAIL)|not supported" "$out/$3"
  return 0
}

step_adam_checks() { native_checks Adam --adam adam.txt; }
step_gelu_checks() { native_checks GELU --gelu gelu.txt; }

# step_run LABEL ENV...: one gpu_suite --step process (in /tmp/step-ruda: ruda's cache root,
# CubeCL's profiling log at level "minimal" for the launch counts), its rows into step-equal.txt.
step_run() {
  local label=$1
  shift
  local dir=/tmp/step-ruda
  toml "$dir" /tmp/cc "" /tmp/cc/ptx
  printf '[profiling.logger]\nlevel = "minimal"\nfile = "%s"\n' "$dir/launches.log" >>"$dir/cubecl.toml"
  rm -f "$dir/launches.log"
  echo "== step: $label ($(date +%T))" | tee -a "$out/step-equal.txt"
  (cd "$dir" && env "$@" RUDA_BENCH_BACKENDS="${STEP_BACKENDS:-ruda-cuda,ruda-cuda-bf16}" \
      timeout "${STEP_TIMEOUT:-300}" "${STEP_BIN:-$dev/gpu_suite}" --step --dropouts "${STEP_DROPOUTS:-0,0.1}" \
      --launch-log "$dir/launches.log" 2>&1) >>"$out/step-equal.txt"
  echo "   exit $?"
}

step_step_equal() {
  need gpu_suite || return 1
  carry_caches
  step_run "native softmax" RUDA_SOFTMAX=native
  [ "${STEP_SOFTMAX_AB:-0}" = 1 ] && step_run "Burn's composed softmax" RUDA_SOFTMAX=burn
  if [ "${STEP_LINEAR_AB:-0}" = 1 ]; then
    # A linear layer's backward as one operation (the default, as in the run above), then as
    # Burn's three; a drift of the machine shows as a gap between the two default runs.
    step_run "linear backward as one operation (RUDA_LINEAR=native)" RUDA_SOFTMAX=native RUDA_LINEAR=native
    step_run "linear backward as Burn's three operations (RUDA_LINEAR=burn)" RUDA_SOFTMAX=native RUDA_LINEAR=burn
    step_run "linear backward as one operation, again (RUDA_LINEAR=native)" RUDA_SOFTMAX=native RUDA_LINEAR=native
  fi
  if [ "${STEP_BEFORE_AB:-0}" = 1 ]; then
    # This build (the run above) against the build before a change (prepare.sh --before), then
    # this build again: a drift of the machine shows as a gap between the two runs of this build.
    # STEP_BEFORE_ENV: settings for the build before only (e.g. RUDA_GELU=burn, when that build
    # predates a default that this one has).
    need gpu_suite_before || return 1
    # shellcheck disable=SC2086
    STEP_BIN=$dev/gpu_suite_before step_run "the build before (.device/gpu_suite_before) ${STEP_BEFORE_ENV:-}" \
      RUDA_SOFTMAX=native ${STEP_BEFORE_ENV:-}
    step_run "this build, again" RUDA_SOFTMAX=native
  fi
  if [ "${STEP_ADAM_AB:-0}" = 1 ]; then
    # Adam's updates as one operation a step (the default, as in the run above), then one a
    # parameter, then one a step again; a drift of the machine shows as a gap between the two
    # one-a-step runs.
    step_run "Adam one operation a parameter (RUDA_BENCH_ADAM=ruda-each)" RUDA_SOFTMAX=native RUDA_BENCH_ADAM=ruda-each
    step_run "Adam one operation a step, again (RUDA_BENCH_ADAM=ruda)" RUDA_SOFTMAX=native RUDA_BENCH_ADAM=ruda
  fi
  if [ "${STEP_OUTPUT_AB:-0}" = 1 ]; then
    # Attention's product outputs in each order of STEP_OUTPUT_AB_ORDERS in turns (default
    # 'off on': row-major, a copy per reshape, then in either operand's order, the default;
    # 'rhs': the right-hand side's order only), for STEP_OUTPUT_AB_ROUNDS rounds; a drift of
    # the machine shows as a gap between the runs of one order.
    local round order
    for round in $(seq "${STEP_OUTPUT_AB_ROUNDS:-1}"); do
      for order in ${STEP_OUTPUT_AB_ORDERS:-off on}; do
        step_run "round $round: product outputs, RUDA_MATMUL_OUTPUT_ORDER=$order" RUDA_SOFTMAX=native RUDA_MATMUL_OUTPUT_ORDER="$order"
      done
    done
  fi
  if [ "${STEP_GELU_AB:-0}" = 1 ]; then
    # GELU and its backward as Burn's composed operations (the default), then as one native
    # operation each, in turns for STEP_GELU_AB_ROUNDS rounds; a drift of the machine shows as a
    # gap between the runs of one kind.
    local gelu_round
    for gelu_round in $(seq "${STEP_GELU_AB_ROUNDS:-1}"); do
      step_run "round $gelu_round: GELU composed by Burn (RUDA_GELU=burn)" RUDA_SOFTMAX=native RUDA_GELU=burn
      step_run "round $gelu_round: GELU native (RUDA_GELU=native)" RUDA_SOFTMAX=native RUDA_GELU=native
    done
  fi
  if [ "${STEP_FUSERS_AB:-0}" = 1 ]; then
    # burn-fusion's fusers: each set of STEP_FUSERS_AB_SETS (RUDA_FUSERS values; 'default' for
    # ruda's choice: Burn's four without the matmul fuser where products are native) in turns,
    # for STEP_FUSERS_AB_ROUNDS rounds; a drift of the machine shows as a gap between the runs
    # of one set.
    local fusers_round fusers_set
    for fusers_round in $(seq "${STEP_FUSERS_AB_ROUNDS:-1}"); do
      for fusers_set in ${STEP_FUSERS_AB_SETS:-burn default elementwise}; do
        if [ "$fusers_set" = default ]; then
          step_run "round $fusers_round: fusers ruda's default (RUDA_FUSERS unset)" RUDA_SOFTMAX=native
        else
          step_run "round $fusers_round: fusers $fusers_set (RUDA_FUSERS=$fusers_set)" RUDA_SOFTMAX=native RUDA_FUSERS="$fusers_set"
        fi
      done
    done
  fi
  if [ "${STEP_NESTED_AB:-0}" = 1 ]; then
    # Attention's operands read in place by the products (the default, as in the run above),
    # then copied first (the layout before nested batches); a drift of the machine shows as a
    # gap between the two in-place runs.
    step_run "nested batches read in place (RUDA_MATMUL_NESTED=on)" RUDA_SOFTMAX=native RUDA_MATMUL_NESTED=on
    step_run "operands copied (RUDA_MATMUL_NESTED=off)" RUDA_SOFTMAX=native RUDA_MATMUL_NESTED=off
  fi
  grep -E "^(ruda|burn)-|^# launches" "$out/step-equal.txt"
  [ "${TORCH_BUDGET_S:-240}" = 0 ] && return 0
  echo "== PyTorch, equal work ($(date +%T))" | tee -a "$out/step-equal.txt"
  PYTHONUNBUFFERED=1 timeout "${TORCH_STEP_TIMEOUT:-300}" python3 benches/torch/transformer_step.py \
    --all --budget-s "${TORCH_BUDGET_S:-240}" 2>&1 | tee -a "$out/step-equal.txt" | grep -E "^torch-step" | cut -c1-220
  return 0
}

# burn-fusion's operations a step by kind: two runs of the step with burn-fusion's trace on
# (BURN_FUSION_LOG=full), --steps 1 and 3, counted by fusion_ops.py; per FUSION_OPS_BACKENDS
# (default ruda-cuda-bf16), at STEP_DROPOUTS (default 0.1), with the environment FUSION_OPS_ENV.
step_fusion_ops() {
  need gpu_suite || return 1
  carry_caches
  local dir=/tmp/step-ruda backend steps
  toml "$dir" /tmp/cc "" /tmp/cc/ptx
  for backend in ${FUSION_OPS_BACKENDS:-ruda-cuda-bf16}; do
    echo "== $backend, dropout ${STEP_DROPOUTS:-0.1}, ${FUSION_OPS_ENV:-default} ($(date +%T))" | tee -a "$out/fusion-ops.txt"
    for steps in 1 3; do
      # shellcheck disable=SC2086
      (cd "$dir" && env ${FUSION_OPS_ENV:-} BURN_FUSION_LOG=full RUDA_BENCH_BACKENDS="$backend" \
          timeout "${STEP_TIMEOUT:-300}" "$dev/gpu_suite" --step --steps "$steps" --warmup 1 \
          --dropouts "${STEP_DROPOUTS:-0.1}" 2>"$dir/fusion-$steps.log") >>"$out/fusion-ops.txt"
      echo "   --steps $steps: exit $?" | tee -a "$out/fusion-ops.txt"
    done
    python3 "$top/benches/device/fusion_ops.py" "$dir/fusion-1.log" "$dir/fusion-3.log" --steps 2 \
      | tee -a "$out/fusion-ops.txt" | grep -E "all"
  done
  return 0
}

step_host_sample() {
  need gpu_suite || return 1
  carry_caches
  local dir=/tmp/step-ruda
  toml "$dir" /tmp/cc "" /tmp/cc/ptx
  header "$out/host-sample.txt"
  echo "== step with thread samples ($(date +%T))" | tee -a "$out/host-sample.txt"
  (cd "$dir" && RUDA_BENCH_BACKENDS="${STEP_BACKENDS:-ruda-cuda,ruda-cuda-bf16}" \
      timeout "${STEP_TIMEOUT:-300}" "${STEP_BIN:-$dev/gpu_suite}" --step --dropouts "${STEP_DROPOUTS:-0.1}" \
      --sample-threads "$out/samples" 2>&1) >>"$out/host-sample.txt"
  echo "   exit $?"
  grep -E "^(ruda|burn)-|^--sample-threads" "$out/host-sample.txt"
  return 0
}

# One process per backend: the step untraced (the reference: tracing costs host time per driver
# call), then traced; the trace's last two bursts of GPU work are gpu_suite's 10 synced steps
# and its 3 windows of 10 steps back to back.
step_gpu_timeline() {
  need gpu_suite || return 1
  local lib=$dev/cupti/libcupti_trace.so log=$out/gpu-timeline.txt b adam label
  [ -f "$lib" ] || { echo "run.sh: $lib is missing: run benches/device/prepare.sh cupti_trace" >&2; return 1; }
  carry_caches
  toml /tmp/step-ruda /tmp/cc "" /tmp/cc/ptx
  header "$log"
  for b in ${TIMELINE_BACKENDS:-ruda-cuda-bf16 ruda-cuda}; do
    for adam in ${TIMELINE_ADAMS:-ruda burn}; do
      label=$b-adam-$adam
      timeline_step "$log" "$label" "$b" "$adam" "${STEP_DROPOUTS:-0.1}"
      timeline_step "$log" "$label" "$b" "$adam" "${TIMELINE_DROPOUT:-0.1}" /tmp/trace-$label.tsv
      timeline "$log" /tmp/trace-$label.tsv "$label" 10 30 select_kernel
    done
  done
  if [ "${TIMELINE_TORCH:-0}" = 1 ]; then
    local sets args n=0 median rc
    IFS=';' read -ra sets <<<"${TIMELINE_TORCH_ARGS:---dtype bf16;--dtype f32}"
    for args in "${sets[@]}"; do
      n=$((n + 1))
      echo "== PyTorch $args untraced, dropout 0.1 and 0 ($(date +%T))" | tee -a "$log"
      for p in 0.1 0.0; do
        # shellcheck disable=SC2086
        timeout "${TORCH_TIMEOUT:-150}" python3 "$top/benches/torch/transformer_step.py" $args \
          --dropout $p --steps 30 >>"$log" 2>&1
        echo "   exit $?"; grep "^torch-step" "$log" | tail -1 | grep -o "dtype=[^ ]*\|dropout=[^ ]*\|step_ms_median=[^ ]*" | tr '\n' ' '; echo
      done
      echo "== PyTorch $args traced ($(date +%T))" | tee -a "$log"
      # shellcheck disable=SC2086
      CUDA_INJECTION64_PATH=$lib CUPTI_TRACE_OUT=/tmp/trace-torch-$n.tsv timeout "${TORCH_TIMEOUT:-150}" \
        python3 "$top/benches/torch/transformer_step.py" $args --steps 30 >>"$log" 2>&1
      rc=$?
      echo "   exit $rc"
      [ $rc = 0 ] || continue
      # The script syncs after each step but does not pause between its phases: read the
      # last 20 of its 30 timed steps, 20 times its median step long.
      median=$(grep -o 'step_ms_median=[0-9.]*' "$log" | tail -1 | cut -d= -f2)
      [ -n "$median" ] || continue
      echo "-- torch-$n ($args): the last 20 timed steps, median $median ms" >>"$log"
      python3 "$here/gpu_timeline.py" /tmp/trace-torch-$n.tsv --window-ms "$(awk "BEGIN{print 20 * $median}")" \
        --steps 20 --step-start vectorized_gather_kernel >>"$log" 2>&1
      keep_trace /tmp/trace-torch-$n.tsv torch-$n
      grep -A4 "^-- torch-$n" "$log" | grep -E "^--|busy|idle  "
    done
  fi
  # One file for every trace: a call brings back 8 files at most.
  tar -C /tmp/traces -cf - . | xz -T0 >"$out/traces.tar.xz"
  return 0
}

# keep_trace TRACE NAME: the trace's last 300,000 records (the last steps), into the traces
# archive, which must stay under 16 MiB to come back.
keep_trace() {
  mkdir -p /tmp/traces
  tail -n 300000 "$1" >"/tmp/traces/trace-$2.tsv"
}

# timeline_step LOG LABEL BACKEND ADAM DROPOUTS [TRACE]: gpu_suite --step on BACKEND with
# RUDA_BENCH_ADAM=ADAM, untraced, or traced by CUPTI into TRACE.
timeline_step() {
  local log=$1 label=$2 backend=$3 adam=$4 dropouts=$5 trace=${6:-}
  local vars=(RUDA_BENCH_BACKENDS="$backend" RUDA_BENCH_ADAM="$adam")
  [ -n "$trace" ] && vars+=(CUDA_INJECTION64_PATH="$dev/cupti/libcupti_trace.so" CUPTI_TRACE_OUT="$trace")
  echo "== $label, dropouts $dropouts, ${trace:+traced}${trace:-untraced} ($(date +%T))" | tee -a "$log"
  (cd /tmp/step-ruda && env "${vars[@]}" timeout "${STEP_TIMEOUT:-300}" "$dev/gpu_suite" --step \
    --dropouts "$dropouts" --steps 20 2>&1) >>"$log"
  echo "   exit $?"; grep -E "^(ruda|burn)-" "$log" | tail -2
}

# timeline LOG TRACE NAME SYNCED PIPELINED STEP_START: gpu_timeline.py over the trace's last two
# bursts (the synced steps, then the steps back to back), steps opening at STEP_START.
timeline() {
  local log=$1 trace=$2 name=$3
  echo "-- $name: synced steps" >>"$log"
  python3 "$here/gpu_timeline.py" "$trace" --burst -2 --steps "$4" --step-start "$6" >>"$log" 2>&1
  echo "-- $name: steps back to back" >>"$log"
  python3 "$here/gpu_timeline.py" "$trace" --burst -1 --steps "$5" --step-start "$6" >>"$log" 2>&1
  keep_trace "$trace" "$name"
  grep -A4 "^-- $name" "$log" | grep -E "^--|busy|idle  "
  grep -A3 "^## Each step's tail" "$log" | tail -2
}

step_reliability() {
  need gpu_suite || return 1
  carry_caches
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  header "$out/reliability.txt"
  # The soak run first: the long one, and the one a short call must not lose.
  if [ "${SOAK_STEPS:-10000}" != 0 ]; then
    echo "== soak: ${SOAK_STEPS:-10000} steps ($(date +%T))" | tee -a "$out/reliability.txt"
    (cd /tmp/suite-ruda && timeout "${SOAK_TIMEOUT:-480}" "$dev/gpu_suite" --soak "${SOAK_STEPS:-10000}" 2>&1) >>"$out/reliability.txt"
    echo "   exit $?"; grep -E "^# " "$out/reliability.txt" | tail -3; tail -3 "$out/reliability.txt"
  fi
  echo "== faults and f64 ($(date +%T))" | tee -a "$out/reliability.txt"
  (cd /tmp/suite-ruda && RUDA_FAULT_INJECT=ruda_matmul timeout "${FAULTS_TIMEOUT:-120}" "$dev/gpu_suite" --faults 2>&1) >>"$out/reliability.txt"
  echo "   exit $?"; grep -E "^(PASS|FAIL)" "$out/reliability.txt"
  return 0
}

step_launch_costs() {
  need gpu_suite || return 1
  carry_caches
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  header "$out/launch-costs.txt" cores
  echo "== launch costs ($(date +%T))"
  (cd /tmp/suite-ruda && timeout 180 "$dev/gpu_suite" --launch-costs 2>&1) | tee -a "$out/launch-costs.txt" | grep -v "^$"
  return 0
}

step_torch_step_equal() {
  [ -f benches/torch/transformer_step.py ] || { echo "torch-step-equal: benches/torch/transformer_step.py is missing" >&2; return 1; }
  echo "== PyTorch's transformer step, equal work ${TORCH_STEP_ARGS:-} ($(date +%T))" | tee -a "$out/torch-equal.txt"
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout "${TORCH_STEP_TIMEOUT:-540}" python3 benches/torch/transformer_step.py \
    ${TORCH_STEP_ARGS:-} 2>&1 | tee -a "$out/torch-equal.txt" | tail -20
  return 0
}

step_matmul() {
  need gpu_suite || return 1
  carry_caches
  echo "== products ($(date +%T))"
  toml /tmp/suite-ruda /tmp/cc minimal
  (cd /tmp/suite-ruda && timeout 100 "$dev/gpu_suite" --matmul 2>&1) | tee -a "$out/products.txt" | grep -v "^$"
  return 0
}

step_embedding() {
  need gpu_suite || return 1
  carry_caches
  echo "== embedding gradient ($(date +%T))"
  toml /tmp/suite-ruda /tmp/cc minimal
  (cd /tmp/suite-ruda && timeout 200 "$dev/gpu_suite" --embedding 2>&1) | tee -a "$out/embedding.txt" | grep -v "^$"
  return 0
}

step_products_cold() {
  need gpu_suite transformer || return 1
  # First a smoke check of the native products (own cache root), so that a broken build stops
  # before the long cold runs.
  toml /tmp/smoke /tmp/smoke-cache minimal
  (cd /tmp/smoke && timeout 120 "$dev/gpu_suite" --differential-only --only "matmul layouts" 2>&1) >"$out/smoke.txt"
  grep -E "^(PASS|FAIL)|check\(s\) failed|native matrix|panicked|warn" "$out/smoke.txt" | head -20
  grep -q "^0 check(s) failed" "$out/smoke.txt" && grep -q "native matrix products run so far: [1-9]" "$out/smoke.txt" ||
    { echo "smoke check failed"; tail -40 "$out/smoke.txt"; return 1; }
  step_startup_cold
  rm -f "$out/startup-ruda-cache-listing.txt"
  learner_runs "$out" 100 0 ruda burn-cuda
  return 0
}

step_products_carried() {
  need gpu_suite transformer || return 1
  # A fresh machine with the caches of a products-cold run on another one: time to the first
  # step, the Learner, the bare steps, PyTorch.
  carry_caches
  step_startup_warm
  learner_runs "$out" 100 0 ruda burn-cuda
  toml /tmp/suite-ruda /tmp/cc minimal
  toml /tmp/suite-burn /tmp/ccb minimal /tmp/ccb/ptx
  echo "== bare steps ($(date +%T))"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 timeout 200 "$dev/gpu_suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-ruda.csv" 2>&1) | tee "$out/steps.txt" | grep -E "transformer|FAILED"
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=burn-cuda timeout 150 "$dev/gpu_suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-burn.csv" 2>&1) | tee -a "$out/steps.txt" | grep -E "transformer|FAILED"
  step_torch_step
  return 0
}

step_products_suite() {
  need gpu_suite transformer || return 1
  # After products-carried (on its machine, or a fresh one with the same caches).
  carry_caches
  toml /tmp/suite-ruda /tmp/cc minimal
  toml /tmp/suite-burn /tmp/ccb minimal /tmp/ccb/ptx
  learner_runs "$out" 100 1 ruda burn-cuda
  echo "== differential checks ($(date +%T))"
  (cd /tmp/suite-ruda && timeout 200 "$dev/gpu_suite" --differential-only 2>&1) >"$out/differential.txt"
  grep -E "^(FAIL)|check\(s\) failed|native matrix" "$out/differential.txt"
  echo "== Nsight Compute: kernel time per step by family ($(date +%T))"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda timeout 150 python3 "$top/benches/device/ncu_step.py" \
      ruda-cuda 4000 1500 -- "$dev/gpu_suite" --benchmarks --groups transformer_step 2>&1) | tee "$out/ncu.txt" | head -16
  echo "== products ($(date +%T))"
  (cd /tmp/suite-ruda && timeout 100 "$dev/gpu_suite" --matmul 2>&1) | tee "$out/products.txt" | grep -v "^$"
  echo "== bf16 steps ($(date +%T))"
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=burn-cuda-bf16 timeout 280 "$dev/gpu_suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-burn-bf16.csv" 2>&1) | tee "$out/steps-bf16.txt" | grep -E "transformer|FAILED"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda-bf16 timeout 60 "$dev/gpu_suite" \
      --benchmarks --groups transformer_step --csv "$out/steps-ruda-bf16.csv" 2>&1) | tee -a "$out/steps-bf16.txt" | grep -E "transformer|FAILED"
  return 0
}

step_products_checks() {
  need gpu_suite transformer || return 1
  # The products' family and the models' gradients on a fresh machine, then the Learner twice:
  # the first run compiles what the cached short runs never met, the second is the steady one.
  carry_caches
  toml /tmp/suite-ruda /tmp/cc minimal
  local check
  for check in "matmul layouts" "linear forward" "chained products" "f16 and bf16 products" \
      "gradients of linear layers" "gradients of an MLP" "gradients of a TransformerEncoder"; do
    (cd /tmp/suite-ruda && timeout 60 "$dev/gpu_suite" --differential-only --only "$check" 2>&1) >>"$out/checks.txt"
  done
  grep -E "^(PASS|FAIL)|^	|check\(s\) failed|native matrix" "$out/checks.txt" | cut -c1-300
  learner_runs "$out/first" 100 1 ruda burn-cuda
  learner_runs "$out" 100 1 ruda burn-cuda
  return 0
}

step_products_differential() {
  need gpu_suite || return 1
  # After a change to ruda-runtime/src/matmul/: every differential check that runs ruda's cuBLAS
  # products on CUDA, one gpu_suite process per group, against NdArray.
  carry_caches
  toml /tmp/checks /tmp/cc minimal /tmp/cc/ptx
  local name names
  IFS=';' read -r -a names <<<"${PRODUCTS_ONLY:-matmul;linear;products;attention;gradients of an MLP;TransformerEncoder}"
  for name in "${names[@]}"; do
    echo "== --only '$name' ($(date +%T))" | tee -a "$out/checks.txt"
    (cd /tmp/checks && timeout 150 "$dev/gpu_suite" --differential-only --only "$name" 2>&1) >>"$out/checks.txt"
    echo "   exit $?" | tee -a "$out/checks.txt"
  done
  grep -E "PASS|FAIL|native products|exit|panicked" "$out/checks.txt"
  return 0
}

# Time to the first training step under each cache state. Every process gets its own empty CUDA
# driver JIT cache (CUDA_CACHE_PATH) unless said otherwise, as on a new machine. Cache roots:
# /tmp/cc (ruda: tuning results and compiled kernels, keyed by the fingerprint), /tmp/ccb
# (burn-cuda: CubeCL's tuning and PTX caches, as Burn users set them). A cold start splits as
#   T_cold       nothing cached
#   T_ptx        compiled kernels cached, tuning results not: T_cold - T_ptx = NVRTC compilation
#   T_warm       both cached:                                 T_ptx - T_warm = tuning benchmarks
#   T_warm_jit   both cached and the driver's JIT cache warm: T_warm - T_warm_jit = driver JIT
step_startup_cold() {
  need transformer || return 1
  startup_summary
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/startup-gpu.txt"
  rm -rf /tmp/cc /tmp/ccb /tmp/jit*
  touch /tmp/.run-sh-caches # the caches from here on are this run's own
  startup_run ruda-cold ruda /tmp/cc /tmp/jit-cold 300
  ls -laR /tmp/cc/compilation >"$out/startup-ruda-cache-listing.txt" 2>&1
  # Compiled kernels kept, tuning results dropped.
  rm -rf /tmp/cc-ptx && cp -a /tmp/cc /tmp/cc-ptx && rm -rf /tmp/cc-ptx/autotune
  startup_run ruda-ptx-only ruda /tmp/cc-ptx /tmp/jit-ptx 200
  startup_run ruda-warm ruda /tmp/cc /tmp/jit-warm 100
  startup_run ruda-warm-jit ruda /tmp/cc /tmp/jit-cold 100
  startup_run burn-cuda-cold burn-cuda /tmp/ccb /tmp/jit-burn-cold 300 '[compilation]' 'cache = { file = "/tmp/ccb/ptx" }'
  cat "$summary"
  return 0
}

step_startup_warm() {
  need transformer || return 1
  carry_caches
  startup_summary
  # The driver's JIT cache inside each root, where `keep_driver_jit_cache` puts it: a root
  # carried from a machine that ran this step holds it too.
  startup_run ruda-carried ruda /tmp/cc /tmp/cc/compilation/cuda-driver 100
  startup_run burn-cuda-carried burn-cuda /tmp/ccb /tmp/ccb/compilation/cuda-driver 100 '[compilation]' 'cache = { file = "/tmp/ccb/ptx" }'
  cat "$summary"
  return 0
}

step_startup_damaged() {
  need transformer || return 1
  carry_caches
  startup_summary
  rm -rf /tmp/cc-damaged && cp -a /tmp/cc /tmp/cc-damaged
  local chunk size
  chunk=$(ls /tmp/cc-damaged/compilation/ruda-fp*/cuda/*/ptx/chunk0.cbor | head -1)
  size=$(stat -c %s "$chunk")
  truncate -s $((size - 300)) "$chunk"
  rm -f "$chunk.checked"
  echo "== damaged $chunk: $size -> $((size - 300)) bytes"
  startup_run ruda-damaged-ptx ruda /tmp/cc-damaged /tmp/cc-damaged/compilation/cuda-driver 100
  grep -i "compilation cache" /tmp/run-ruda-damaged-ptx/stdout | head -3
  cat "$summary"
  return 0
}

# RUN: `bare` (ruda's bare step, gpu_suite), `pieces[:BACKEND]` (the learner_overhead example:
# the bare step with each piece of burn-train's loop added, LEARNER_STEPS timed steps each;
# PIECES_FLAGS adds its flags), or a Learner run of learner_runs (ruda, burn-cuda:lazy, ...).
step_step_kernels() {
  need gpu_suite || return 1
  carry_caches
  toml /tmp/suite-ruda /tmp/cc "" /tmp/cc/ptx
  local backend adam
  for backend in ${KERNELS_BACKENDS:-ruda-cuda ruda-cuda-bf16}; do
    for adam in ${KERNELS_ADAMS:-ruda}; do
      echo "== Nsight Compute: kernel time per step by family, $backend, $adam's Adam ($(date +%T))" | tee -a "$out/kernels.txt"
      (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=$backend RUDA_BENCH_ADAM=$adam timeout "${KERNELS_TIMEOUT:-150}" \
          python3 "$top/benches/device/ncu_step.py" "$backend-adam-$adam" 4000 1500 -- "$dev/gpu_suite" \
          --benchmarks --groups transformer_step 2>&1) | tee -a "$out/kernels.txt" | head -16
    done
  done
  return 0
}

step_learner() {
  carry_caches
  local steps=${LEARNER_STEPS:-100} run backend root
  toml /tmp/suite-ruda /tmp/cc minimal
  for run in ${LEARNER_RUNS:-ruda burn-cuda}; do
    if [ "$run" = bare ]; then
      need gpu_suite || return 1
      echo "== bare step ($(date +%T))"
      (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda timeout 90 "$dev/gpu_suite" \
          --benchmarks --groups transformer_step 2>&1) >>"$out/steps.txt"
      grep -E "^transformer_step|FAILED|panicked" "$out/steps.txt"
    elif [ "${run%%:*}" = pieces ]; then
      need learner_overhead || return 1
      backend=ruda; root=/tmp/suite-ruda
      if [ "$run" != pieces ]; then
        backend=${run#pieces:}; root=/tmp/suite-burn
        toml $root /tmp/ccb minimal /tmp/ccb/ptx
      fi
      echo "== learner pieces on $backend ${PIECES_FLAGS:-} ($(date +%T))" | tee -a "$out/pieces.txt"
      # shellcheck disable=SC2086
      (cd $root && timeout 300 "$dev/learner_overhead" --device cuda --backend "$backend" \
          --text "$text" --steps "$steps" ${PIECES_FLAGS:-} 2>&1) >>"$out/pieces.txt"
      echo "   exit $?"; grep -E "^(piece|bare|clone|read|loader|learner|training) " "$out/pieces.txt" | tail -12
    else
      learner_runs "$out" "$steps" "${LEARNER_LOGS:-1}" "$run"
    fi
  done
  return 0
}

step_learner_final() {
  need gpu_suite transformer learner_overhead || return 1
  carry_caches
  local log=$out/final.txt run
  header "$log"
  toml /tmp/suite-burn /tmp/ccb minimal /tmp/ccb/ptx
  toml /tmp/lo /tmp/cc minimal /tmp/cc/ptx
  echo "== bare steps, one gpu_suite process ($(date +%T))" | tee -a "$log"
  (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=ruda-cuda,burn-cuda,ruda-cuda-bf16,burn-cuda-bf16 \
      timeout 240 "$dev/gpu_suite" --benchmarks --groups transformer_step 2>&1) >>"$log"
  grep -E "^transformer_step" "$log"
  for run in ruda burn-cuda ruda burn-cuda ruda; do
    learner_runs "$out/l" 100 0 "$run" >>"$log" 2>&1
  done
  grep -E "== learner|time per training step|training thread" "$log"
  echo "== learner_overhead bare ($(date +%T))" | tee -a "$log"
  (cd /tmp/lo && timeout 120 "$dev/learner_overhead" --device cuda --text "$text" \
      --pieces bare,bare,bare --steps 100 2>&1) >>"$log"
  grep -E "^bare " "$log"
  rm -rf "$out/l"
  return 0
}

# burn-train's metrics thread computes the metrics on burn-flex, whose rayon pool has a thread
# per core: the example and learner_overhead's `training` piece with that pool and with one
# thread, alternately.
step_learner_rayon() {
  need transformer learner_overhead || return 1
  carry_caches
  local log=$out/learner.txt round env
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
  for round in 1 2; do
    for env in default rayon1; do
      echo "#### example, $env, round $round" >>"$log"
      if [ $env = rayon1 ]; then export RAYON_NUM_THREADS=1; else unset RAYON_NUM_THREADS; fi
      learner_runs "$out/l" 100 0 ruda >>"$log" 2>&1
    done
  done
  unset RAYON_NUM_THREADS
  grep -E "####|time per training step|training thread" "$log"
  toml /tmp/lo /tmp/cc minimal /tmp/cc/ptx
  for env in default rayon1; do
    if [ $env = rayon1 ]; then export RAYON_NUM_THREADS=1; else unset RAYON_NUM_THREADS; fi
    echo "#### learner_overhead pieces, $env" | tee -a "$out/pieces.txt"
    (cd /tmp/lo && timeout 200 "$dev/learner_overhead" --device cuda --text "$text" \
        --pieces bare,training,bare,training --steps 100 2>&1) >>"$out/pieces.txt"
    grep -E "^(bare|training) " "$out/pieces.txt" | tail -4
  done
  unset RAYON_NUM_THREADS
  rm -rf "$out/l"
  return 0
}

# Where the host time of the transformer's step goes on a machine without perf: the
# learner_overhead example (unstripped, so that cuda-gdb names functions) times the bare step
# and the Learner with each thread's CPU time, then runs each long enough for stack_samples.py to
# sample every thread's stack; the GPU suite times the bare step in f32 and bf16.
step_host_profile() {
  need gpu_suite learner_overhead || return 1
  carry_caches
  local samples=${HOST_SAMPLES:-40} log=$out/host.txt piece pid
  header "$log" cores
  toml /tmp/suite-ruda /tmp/cc minimal /tmp/cc/ptx
  # shellcheck disable=SC2086
  lo() { (cd /tmp/suite-ruda && exec timeout "$1" "$dev/learner_overhead" --device cuda --text "$text" ${PIECES_FLAGS:-} "${@:2}"); }
  echo "== pieces with thread CPU ($(date +%T))" | tee -a "$log"
  lo 240 --pieces bare,learner,bare,learner --steps 100 >>"$log" 2>&1
  echo "   exit $?" >>"$log"
  grep -E "^(piece|bare|learner) |thread\(s\)" "$log" | tail -20
  for piece in bare learner; do
    echo "== stack samples, $piece ($(date +%T))" | tee -a "$log"
    lo 200 --pieces $piece --steps 20000 --warmup 10 >"$out/run-$piece.txt" 2>&1 &
    sleep 25
    pid=$(pgrep -f "^$dev/learner_overhead" | head -1)
    timeout 150 python3 benches/device/stack_samples.py "$pid" "$samples" 0.2 "/tmp/pmp-$piece-raw.txt" >"$out/pmp-$piece.txt" 2>&1
    kill "$pid" 2>/dev/null; wait
    head -c 6000 "$out/pmp-$piece.txt"
  done
  xz -T4 -c /tmp/pmp-bare-raw.txt /tmp/pmp-learner-raw.txt >"$out/pmp-raw.txt.xz" 2>/dev/null
  echo "== bare step, gpu_suite f32 and bf16 ($(date +%T))" | tee -a "$log"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 timeout 150 "$dev/gpu_suite" \
      --benchmarks --groups transformer_step 2>&1) >>"$log"
  grep -E "^transformer_step|FAILED|panicked" "$log"
  return 0
}

# A host-side change of the training step against the build before it, in one device call:
# HOST_AB_ROUNDS rounds of the earlier build's learner_overhead then this build's (pieces bare
# and learner, HOST_AB_STEPS timed steps each, one process each); this build's bare step over
# 1000 steps in blocks of 100 (does a long run drift?); gpu_suite's bare step in f32 and bf16;
# the Learner twice; with HOST_AB_BURN=1 Burn's Autodiff<Cuda> bare step too, for the ratios.
step_host_ab() {
  need gpu_suite transformer learner_overhead learner_overhead_before || return 1
  carry_caches
  local rounds=${HOST_AB_ROUNDS:-3} steps=${HOST_AB_STEPS:-150} log=$out/ab.txt round build bin
  header "$log"
  toml /tmp/suite-ruda /tmp/cc minimal /tmp/cc/ptx
  toml /tmp/suite-burn /tmp/ccb minimal /tmp/ccb/ptx
  for round in $(seq "$rounds"); do
    for build in before after; do
      bin=$dev/learner_overhead
      [ $build = before ] && bin=${bin}_before
      echo "== round $round, $build ($(date +%T))" >>"$log"
      (cd /tmp/suite-ruda && timeout 120 "$bin" --device cuda --text "$text" --pieces bare,learner \
          --steps "$steps" 2>&1) >>"$log"
    done
  done
  python3 - "$log" <<'PY' | tee -a "$log"
import re, statistics, sys
rows = {}
build = None
for line in open(sys.argv[1]):
    m = re.match(r"== round \d+, (\w+)", line)
    if m:
        build = m.group(1)
    m = re.match(r"(bare|learner)\s+([\d.]+)\s", line)
    if m and build:
        rows.setdefault((build, m.group(1)), []).append(float(m.group(2)))
print("build   piece    runs  medians (ms/step)                 median")
for (b, p), v in sorted(rows.items()):
    print(f"{b:<7} {p:<8} {len(v):>4}  {' '.join(f'{x:.2f}' for x in v):<32}  {statistics.median(v):.2f}")
PY
  echo "== drift: this build's bare step, 1000 steps in blocks of 100 ($(date +%T))" | tee -a "$log"
  (cd /tmp/suite-ruda && timeout 120 "$dev/learner_overhead" --device cuda --text "$text" --pieces bare \
      --steps 1000 --blocks 100 2>&1) >>"$log"
  grep -E "medians of|^bare" "$log" | tail -2
  echo "== bare step, gpu_suite f32 and bf16 ($(date +%T))" | tee -a "$log"
  (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 timeout 150 "$dev/gpu_suite" \
      --benchmarks --groups transformer_step 2>&1) >>"$log"
  grep -E "^transformer_step" "$log"
  learner_runs "$out/learner" 100 1 ruda ruda >>"$log" 2>&1
  grep -E "== learner|time per training step|training thread" "$log" | tail -6
  if [ -n "${HOST_AB_BURN:-}" ]; then
    echo "== Autodiff<Cuda> bare step, f32 and bf16 ($(date +%T))" | tee -a "$log"
    (cd /tmp/suite-burn && RUDA_BENCH_BACKENDS=burn-cuda,burn-cuda-bf16,ruda-cuda,ruda-cuda-bf16 \
        timeout 330 "$dev/gpu_suite" --benchmarks --groups transformer_step 2>&1) >>"$log"
    grep -E "^transformer_step" "$log" | tail -4
  fi
  rm -rf "$out/learner"
  return 0
}

# Data-parallel training on 1 and 2 CUDA GPUs, for a machine with two: the transformer example at
# the benchmark model's size (6 layers, d_model 512, 8 heads, context 256), one global batch of
# 64 windows, under ruda and Burn's Autodiff<Cuda>, each on 1 GPU and with burn-train's
# multi-device strategy on 2. BIN: the example built with `burn-backends`.
step_multi_gpu() {
  local bin=${BIN:-$dev/transformer} backend gpus lib
  [ -x "$bin" ] || bin=$top/target/release/examples/transformer
  [ -x "$bin" ] || { echo "multi-gpu: no transformer binary (BIN, .device/transformer)" >&2; return 1; }
  # Moving tensors between GPUs and all-reduce go through NCCL, which cudarc loads as
  # libnccl.so; pip's nvidia-nccl wheel ships only libnccl.so.2.
  if ! ldconfig -p | grep 'libnccl\.so ' >/dev/null; then
    lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' 2>/dev/null)
    if [ -n "$lib" ] && [ -e "$lib/libnccl.so.2" ]; then
      mkdir -p /tmp/nccl-link && ln -sf "$lib/libnccl.so.2" /tmp/nccl-link/libnccl.so
      export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
    else
      echo "multi-gpu: no libnccl.so found; transfers between GPUs will fail" >&2
    fi
  fi
  export NCCL_NVLS_ENABLE=0
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpus.txt"
  local flags=(--device cuda --batch-size 64 --epochs 1 --items 19200 --valid-items 256 --sample 0
    --layers 6 --d-model 512 --heads 8 --d-ff 2048 --seq-len 256 --dropout 0 --workers 4)
  for backend in ruda burn-cuda; do
    for gpus in 1 2; do
      "$bin" --backend "$backend" --devices "$gpus" "${flags[@]}" --text "$text" \
        --loss-csv "$out/loss-$backend-$gpus.csv" --artifact-dir "/tmp/multi-$backend-$gpus" \
        2>&1 | tee "$out/$backend-$gpus.txt"
      echo "rc=${PIPESTATUS[0]}" | tee -a "$out/$backend-$gpus.txt"
    done
  done
  grep -H "tokens/s" "$out"/*.txt
  return 0
}

# --- run ------------------------------------------------------------------------------------

unpack
{
  date
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
  echo "cublas: ${cublas:-not found}"
  echo "cores: $(nproc)"
  echo "steps: $*"
} | tee -a "$out/env.txt"

failed=()
for s in "$@"; do
  echo "#### step $s ($(date +%T))" | tee -a "$out/steps-run.txt"
  "step_${s//-/_}"
  rc=$?
  echo "#### step $s: exit $rc ($(date +%T))" | tee -a "$out/steps-run.txt"
  [ $rc = 0 ] || failed+=("$s")
done

if [ "${SAVE_CACHES:-1}" != 0 ]; then
  [ -d /tmp/cc ] && tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
  [ -d /tmp/ccb ] && tar -C /tmp -cJf "$out/caches-burn.tar.xz" ccb
fi
echo "== done ($(date +%T))${failed[*]:+; failed: ${failed[*]}}"
[ ${#failed[@]} = 0 ]

#!/usr/bin/env bash
# The transformer example through burn-train's Learner at DESIGN.md's size (6 pre-norm layers,
# d_model 512, 8 heads, seq 256, batch 32, Adam, f32), one process per backend, with the cache
# roots of startup.sh (/tmp/cc for ruda, /tmp/ccb for Burn's backends) so that a run after
# `startup.sh cold` compiles nothing. Prints each run's time to the first step and its time per
# training step (the example's own figure: the last epoch after its first tenth).
#
#   bash benches/scripts/learner.sh OUTDIR STEPS BACKEND...   # e.g. 100 ruda burn-cuda
#   bash benches/scripts/learner.sh OUTDIR STEPS ruda:lazy    # --read-at metrics-thread (outputs
#                                                             # read on burn-train's metrics thread)
#   bash benches/scripts/learner.sh OUTDIR STEPS ruda:step    # --read-at step-end (read where the
#                                                             # step ends; default: next batch)
#   bash benches/scripts/learner.sh OUTDIR STEPS ruda:w0      # with --workers 0 (batches made on
#                                                             # the training thread)
# The text has 3305 windows of 257 characters: at most 103 full steps of 32; more steps would
# end on a partial batch, whose new shapes compile new kernels inside the timed window.
#   LEARNER_LOGS=1 bash benches/scripts/learner.sh ...        # and count what CubeCL compiles
#                                                             # and tunes during the run
set -u
out=${1:?output directory}
steps=${2:?training steps}
shift 2
mkdir -p "$out"
bin=$PWD/.device/transformer
data=$PWD/examples/transformer/data/shakespeare/plays.txt.gz
for run in "$@"; do
  backend=${run%%:*}
  flags=()
  for option in $(echo "${run#"$backend"}" | tr ':' ' '); do
    case $option in
    lazy) flags+=(--read-at metrics-thread) ;;
    step) flags+=(--read-at step-end) ;;
    w[0-9]*) flags+=(--workers "${option#w}") ;;
    *) echo "unknown run option $option" >&2; exit 2 ;;
    esac
  done
  case $backend in
  ruda) root=/tmp/cc; extra=() ;;
  *) root=/tmp/ccb; extra=('[compilation]' 'cache = { file = "/tmp/ccb/ptx" }') ;;
  esac
  dir=/tmp/learner-${run//:/-}
  rm -rf "$dir" && mkdir -p "$dir"
  {
    echo '[autotune]'
    echo 'level = "minimal"'
    echo "cache = { file = \"$root\" }"
    for line in "${extra[@]}"; do echo "$line"; done
    if [ -n "${LEARNER_LOGS:-}" ]; then
      printf '[autotune.logger]\nlevel = "minimal"\nfile = "%s"\n' "$dir/autotune.log"
      printf '[compilation.logger]\nlevel = "basic"\nfile = "%s"\n' "$dir/compilation.log"
    fi
  } >"$dir/cubecl.toml"
  echo "== learner $run: $steps steps ($(date +%T))"
  (cd "$dir" && CUDA_CACHE_PATH=$root/compilation/cuda-driver timeout 240 "$bin" \
      --text "$data" --d-model 512 --heads 8 --layers 6 --seq-len 256 --batch-size 32 \
      --epochs 1 --items $((steps * 32)) --valid-items 256 --sample 0 --device cuda \
      --backend "$backend" "${flags[@]}" --artifact-dir "$dir/artifacts" >"$dir/stdout" 2>&1)
  echo "   exit $?"
  grep -E "first training step|time per training step|training thread per step|error|panicked" "$dir/stdout" | head -5
  if [ -n "${LEARNER_LOGS:-}" ]; then
    echo "   kernels compiled: $(grep -c '^\[Compiling kernel\]' "$dir/compilation.log" 2>/dev/null)," \
      "keys tuned: $(grep -c 'Fastest result' "$dir/autotune.log" 2>/dev/null)"
    grep -E "^epoch 1/1 train" "$dir/stdout" | tr '\n' ' ' | sed 's/epoch 1\/1 train *//g'; echo
  fi
  cat "$dir/stdout" >>"$out/learner-stdout.txt"
done

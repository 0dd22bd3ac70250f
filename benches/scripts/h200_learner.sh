#!/usr/bin/env bash
# The H200 calls of the read-point changes (issue 17): burn-train's Learner with each step's
# output read back on the training thread (at the next batch, the examples' default, or where the
# step ends: example_common::read_ahead) or on burn-train's metrics thread (--read-at
# metrics-thread, as burn-train's own output types do), for ruda and Burn's Autodiff<Cuda>, beside
# ruda's bare step; one call on a fresh machine with the caches of an earlier call carried in
# (.device/caches-*.tar.xz), binaries as h200_products.sh.
#
#   bash benches/scripts/h200_learner.sh OUT STEPS RUN...  # RUN: `bare` (ruda's bare step),
#                                                        # `pieces[:BACKEND]` (the learner_overhead
#                                                        # example: the bare step with each piece
#                                                        # of burn-train's loop added, STEPS timed
#                                                        # steps each), or a learner.sh run (ruda,
#                                                        # burn-cuda:lazy)
# The cache roots (/tmp/cc, /tmp/ccb) come back as $OUT/caches-*.tar.xz for the next call.
#   call 1: ... 300 ruda bare burn-cuda ruda:lazy burn-cuda:lazy
#   call 2: ... 100 ruda ruda:w0 burn-cuda ruda:lazy
#   call 3: ... 100 ruda ruda:step bare burn-cuda burn-cuda:step  (reads at the next batch,
#           the default since then, against reads where the step ends)
#   call 4: ... 90 pieces pieces:burn-cuda ruda bare  (what each piece of the Learner adds;
#           PIECES_FLAGS="--workers 0" adds learner_overhead flags)
set -u
out=${1:?output directory}
steps=${2:?training steps per run}
shift 2
mkdir -p "$out"
cd "$(dirname "$0")/../.."
top=$PWD
. benches/scripts/device_binaries.sh
{ date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$out/env.txt"
for t in .device/caches-*.tar.xz; do tar -C /tmp -xJf "$t"; done

mkdir -p /tmp/suite-ruda
printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/cc" }\n' >/tmp/suite-ruda/cubecl.toml
for run in "$@"; do
  if [ "$run" = bare ]; then
    echo "== bare step ($(date +%T))"
    (cd /tmp/suite-ruda && RUDA_BENCH_BACKENDS=ruda-cuda timeout 90 "$top/.device/gpu_suite" \
        --benchmarks --groups transformer_step 2>&1) >>"$out/steps.txt"
    grep -E "^transformer_step|FAILED|panicked" "$out/steps.txt"
  elif [ "${run%%:*}" = pieces ]; then
    backend=ruda; root=/tmp/suite-ruda
    if [ "$run" != pieces ]; then
      backend=${run#pieces:}; root=/tmp/suite-burn; mkdir -p $root
      printf '[autotune]\nlevel = "minimal"\ncache = { file = "/tmp/ccb" }\n[compilation]\ncache = { file = "/tmp/ccb/ptx" }\n' >$root/cubecl.toml
    fi
    echo "== learner pieces on $backend ${PIECES_FLAGS:-} ($(date +%T))" | tee -a "$out/pieces.txt"
    (cd $root && timeout 300 "$top/.device/learner_overhead" --device cuda --backend "$backend" \
        --text "$top/examples/transformer/data/shakespeare/plays.txt.gz" --steps "$steps" ${PIECES_FLAGS:-} 2>&1) >>"$out/pieces.txt"
    echo "   exit $?"; grep -E "^(piece|bare|clone|read|loader|learner|training) " "$out/pieces.txt" | tail -12
  else
    LEARNER_LOGS=1 bash benches/scripts/learner.sh "$out" "$steps" "$run"
  fi
done
tar -C /tmp -cJf "$out/caches-ruda.tar.xz" cc
tar -C /tmp -cJf "$out/caches-burn.tar.xz" ccb
echo "== done ($(date +%T))"

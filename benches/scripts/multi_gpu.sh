#!/usr/bin/env bash
# Data-parallel training on 1 and 2 CUDA GPUs (issue 8), for a machine with two GPUs
# (the device tool's nvidia-h200-x2): the transformer example at DESIGN.md's size (6 layers,
# d_model 512, 8 heads, context 256) and one global batch of 64 windows, under ruda
# (`burn_ruda::Autodiff<Ruda<RudaCuda>>`) and Burn's `Autodiff<Cuda>`, each on 1 GPU and with
# burn-train's multi-device strategy on 2. Writes each run's log and per-step loss curve
# (loss-<backend>-<gpus>.csv) to $OUT and prints the tokens/s lines.
#
#   cargo build --release -p transformer --example transformer --features burn-backends
#   BIN=target/release/examples/transformer OUT=/tmp/multi bash benches/scripts/multi_gpu.sh
set -u
BIN=${BIN:-target/release/examples/transformer}
OUT=${OUT:-/tmp/burn-ruda-multi-gpu}
mkdir -p "$OUT"

# Moving tensors between GPUs and all-reduce go through NCCL, which cudarc loads as
# libnccl.so; pip's nvidia-nccl wheel ships only libnccl.so.2.
if ! ldconfig -p | grep 'libnccl\.so ' >/dev/null; then
  lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' 2>/dev/null)
  if [ -n "$lib" ] && [ -e "$lib/libnccl.so.2" ]; then
    mkdir -p /tmp/nccl-link && ln -sf "$lib/libnccl.so.2" /tmp/nccl-link/libnccl.so
    export LD_LIBRARY_PATH=/tmp/nccl-link:${LD_LIBRARY_PATH:-}
  else
    echo "multi_gpu: no libnccl.so found; transfers between GPUs will fail" >&2
  fi
fi
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"

flags=(--device cuda --batch-size 64 --epochs 1 --items 19200 --valid-items 256 --sample 0
  --layers 6 --d-model 512 --heads 8 --d-ff 2048 --seq-len 256 --dropout 0 --workers 4)
for backend in ruda burn-cuda; do
  for gpus in 1 2; do
    "$BIN" --backend "$backend" --devices "$gpus" "${flags[@]}" \
      --loss-csv "$OUT/loss-$backend-$gpus.csv" --artifact-dir "/tmp/multi-$backend-$gpus" \
      2>&1 | tee "$OUT/$backend-$gpus.txt"
    echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/$backend-$gpus.txt"
  done
done
grep -H "tokens/s" "$OUT"/*.txt

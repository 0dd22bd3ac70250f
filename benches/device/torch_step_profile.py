"""PyTorch reference for the transformer training step, timed and broken down by kernel family.

The model: token + position embeddings, 6 pre-norm encoder layers, d_model 512, 8 heads,
d_ff 2048, GELU, causal mask, linear head over 80 symbols; batch 32, sequence 256,
cross-entropy, Adam. NOT the same work as the project's transformer (the example and the
benchmarks' `transformer_step`): this model has dropout 0.0 and no final LayerNorm, where the
project's has dropout 0.1 and a final LayerNorm, so its step times are not an equal-work
comparison (docs/perf/training-step.md). Kept as it is because it produced the PyTorch figures
recorded so far.

For each numerics mode (f32: plain f32 matmuls; tf32: f32 with TF32 matmuls, what Burn's CubeCL
matmul does on Hopper; bf16: autocast to bf16):
- step time: wall clock around forward + backward + Adam + reading the loss, with a synchronize;
  5 warm-up steps, median of 20;
- breakdown: torch.profiler over 5 steps, CUDA kernel time per family per step, and the part of
  the step when the GPU runs no kernel (host overhead and launch gaps).

  python3 benches/device/torch_step_profile.py [f32 tf32 bf16]
"""
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

V, S, D, L, B = 80, 256, 512, 6, 32

# Kernel families, first match wins (lower-cased CUDA kernel names).
FAMILIES = [
    ("matmul", ("gemm", "cutlass", "xmma", "sm90_", "cublas", "gemv", "matmul")),
    ("attention softmax/mask", ("softmax", "masked_fill", "triu", "flash", "fmha", "attention")),
    ("layer norm", ("layer_norm", "layernorm")),
    ("adam", ("adam", "multi_tensor", "foreach")),
    ("embedding", ("embedding", "index_select", "indexing_backward", "gather", "scatter")),
    ("cross-entropy", ("nll", "log_softmax", "cross_entropy")),
    ("reduction", ("reduce",)),
    ("copy/cast", ("copy", "cast", "memcpy", "memset", "fill")),
    ("elementwise (GELU, add, dropout, ...)", ("elementwise", "vectorized", "gelu", "unrolled")),
]


class Lm(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(S, D)
        layer = nn.TransformerEncoderLayer(D, 8, 4 * D, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.out = nn.Linear(D, V)

    def forward(self, x):
        t = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(t, device=x.device))[None]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=x.device)
        return self.out(self.enc(h, mask=mask, is_causal=True))


def family(name):
    low = name.lower()
    for fam, keys in FAMILIES:
        if any(k in low for k in keys):
            return fam
    return "other"


def run(mode):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    torch.manual_seed(0)
    model = Lm().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        x = torch.randint(0, V, (B, S), device="cuda")
        y = torch.randint(0, V, (B * S,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = loss_fn(model(x).reshape(B * S, V).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    times = []
    for it in range(25):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if it >= 5:
            times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    median = times[len(times) // 2]
    print(f"torch-{mode}\tstep_ms_median={median:.2f}\tmin={times[0]:.2f}\tmax={times[-1]:.2f}")

    steps = 5
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per_family = {}
    kernels = 0
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            us = evt.device_time_total if hasattr(evt, "device_time_total") else evt.cuda_time_total
            fam = family(evt.name)
            per_family[fam] = per_family.get(fam, 0.0) + us
            kernels += 1
    busy = sum(per_family.values()) / steps / 1e3
    print(f"# torch-{mode}: kernel time per step {busy:.2f} ms of a {median:.2f} ms step, "
          f"{kernels / steps:.0f} kernels per step")
    print("family\tms_per_step\tshare_of_step")
    for fam, us in sorted(per_family.items(), key=lambda kv: -kv[1]):
        ms = us / steps / 1e3
        print(f"{fam}\t{ms:.2f}\t{100 * ms / median:.1f}%")
    idle = max(median - busy, 0.0)
    print(f"no kernel running (host, launch gaps)\t{idle:.2f}\t{100 * idle / median:.1f}%")
    print()


if __name__ == "__main__":
    for m in sys.argv[1:] or ["f32", "tf32", "bf16"]:
        run(m)

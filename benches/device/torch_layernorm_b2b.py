"""PyTorch's LayerNorm back to back, beside gpu_suite's `@back-to-back` rows
(docs/perf/layer-norm.md).

The calls of torch_layernorm.py, beside this file (fwd: F.layer_norm without grad; fwdbwd:
forward, y.backward(ones), the input's gradient ready; gradients set to None first, so no
accumulation kernel runs), but 20 calls and one synchronize per
sample, divided by 20: what a loop that keeps the GPU busy sees. 10 warm-up samples, median of
50, as there. Also the host work of a call: the same at 64x768, where the kernels take a few
microseconds.

  python3 benches/device/torch_layernorm_b2b.py float32 bfloat16 16384x1024 4096x768
Output, one tab-separated row per case, in torch_layernorm.py's format:
  impl dtype shape fwd_us fwd_GBps fwdbwd_us fwdbwd_GBps
"""
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CALLS = 20


def per_call_us(fn, warmup=10, iters=50, calls=CALLS):
    """Median over `iters` samples (after `warmup`) of `calls` calls and one synchronize, per
    call; `calls=1` is torch_layernorm.py's synchronized median."""

    def sample():
        for _ in range(calls):
            fn()

    for _ in range(warmup):
        sample()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sample()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e6 / calls)
    times.sort()
    return times[len(times) // 2]


def main():
    args = sys.argv[1:]
    dtypes = [a for a in args if a in DTYPES] or list(DTYPES)
    shapes = [tuple(int(v) for v in a.split("x")) for a in args if "x" in a]
    torch.manual_seed(0)
    for name in dtypes:
        dtype = DTYPES[name]
        for rows, d in [(64, 768)] + shapes:
            x = torch.randn(rows, d, device="cuda", dtype=dtype)
            w = torch.randn(d, device="cuda", dtype=dtype, requires_grad=True)
            b = torch.randn(d, device="cuda", dtype=dtype, requires_grad=True)
            n, es = rows * d, x.element_size()
            with torch.no_grad():
                fwd = per_call_us(lambda: F.layer_norm(x, (d,), w, b, 1e-5))
            xg = x.clone().requires_grad_(True)
            dy = torch.ones_like(x)

            def step():
                # As a training loop's zero_grad(set_to_none=True): no accumulation kernels
                # (torch_layernorm.py accumulates into .grad from its second call on).
                xg.grad = w.grad = b.grad = None
                y = F.layer_norm(xg, (d,), w, b, 1e-5)
                y.backward(dy)

            fb = per_call_us(step)
            print(
                f"torch@back-to-back\t{name}\t{rows}x{d}\t{fwd:.1f}\t{2 * es * n / fwd / 1e3:.0f}"
                f"\t{fb:.1f}\t{5 * es * n / fb / 1e3:.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

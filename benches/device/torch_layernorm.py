"""PyTorch reference for LayerNorm speed on the GPU machine (python3 there has torch).

Timing method, to match a Burn-side benchmark: wall clock around one call plus a device
synchronize, 10 warm-up iterations, median of 50. fwd = F.layer_norm on a no-grad input;
fwdbwd = forward, then y.backward(ones), then the input's gradient is ready.
Effective bandwidth: fwd moves 2*N elements (read x, write y); fwdbwd counts 5*N
(read x, write y, read x and dy, write dx).

  python3 benches/device/torch_layernorm.py                 # all dtypes and shapes below
  python3 benches/device/torch_layernorm.py float32 16384x1024
Output: one tab-separated row per case:
  impl dtype shape fwd_us fwd_GBps fwdbwd_us fwdbwd_GBps
"""
import sys, time
import torch
import torch.nn.functional as F

SHAPES = [(64, 128), (4096, 768), (16384, 768), (16384, 1024), (16384, 4096), (4096, 8192)]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def median_us(fn, warmup=10, iters=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e6)
    times.sort()
    return times[len(times) // 2]


def main():
    args = sys.argv[1:]
    dtypes = [a for a in args if a in DTYPES] or list(DTYPES)
    shapes = [tuple(int(v) for v in a.split("x")) for a in args if "x" in a] or SHAPES
    torch.manual_seed(0)
    for name in dtypes:
        dtype = DTYPES[name]
        for rows, d in shapes:
            x = torch.randn(rows, d, device="cuda", dtype=dtype)
            w = torch.randn(d, device="cuda", dtype=dtype, requires_grad=True)
            b = torch.randn(d, device="cuda", dtype=dtype, requires_grad=True)
            n, es = rows * d, x.element_size()
            with torch.no_grad():
                fwd = median_us(lambda: F.layer_norm(x, (d,), w, b, 1e-5))
            xg = x.clone().requires_grad_(True)
            dy = torch.ones_like(x)

            def step():
                y = F.layer_norm(xg, (d,), w, b, 1e-5)
                y.backward(dy)

            fb = median_us(step)
            print(f"torch\t{name}\t{rows}x{d}\t{fwd:.1f}\t{2 * es * n / fwd / 1e3:.0f}\t{fb:.1f}\t{5 * es * n / fb / 1e3:.0f}", flush=True)
    a = torch.empty(1 << 29, device="cuda")
    c = torch.empty_like(a)
    t = median_us(lambda: c.copy_(a), 3, 20)
    print(f"copy\tfloat32\t{a.numel()}\t{t:.1f}\t{2 * 4 * a.numel() / t / 1e3:.0f}\t-\t-", flush=True)


if __name__ == "__main__":
    main()

"""The least a LayerNorm call can cost on this GPU under the method of docs/perf/layer-norm.md
(warm-up, median, wall clock with a device synchronize): PyTorch moving the same bytes with nothing to compute.

- fwd: `y.copy_(x)`, one launch that reads x and writes y (2N elements, as a forward).
- fwdbwd: that copy, then `torch.add(x, dy, out=dx)`, which reads two tensors and writes one:
  5N elements in two launches, as a forward and a backward (ruda's backward also writes
  dgamma/dbeta, which this leaves out, so the floor is lower than any LayerNorm's).

A forward or forward+backward cannot beat these, whoever writes the kernel: where the floor's
effective bandwidth is below a bandwidth target, the target cannot be met on this machine with
this method. Timed synchronized (10 warm-up, median of 50, as torch_layernorm.py) and back to
back (20 calls and one synchronize a sample, as torch_layernorm_b2b.py).

  python3 benches/device/torch_memory_floor.py float32 16384x1024 4096x8192
Output, one tab-separated row per case, in torch_layernorm.py's format (impl `floor` and
`floor@back-to-back`):
  impl dtype shape fwd_us fwd_GBps fwdbwd_us fwdbwd_GBps
"""
import sys

import torch

from torch_layernorm_b2b import CALLS, DTYPES, per_call_us


def main():
    args = sys.argv[1:]
    dtypes = [a for a in args if a in DTYPES] or ["float32"]
    shapes = [tuple(int(v) for v in a.split("x")) for a in args if "x" in a]
    if not shapes:
        sys.exit("usage: torch_memory_floor.py [DTYPE...] ROWSxD...")
    for name in dtypes:
        dtype = DTYPES[name]
        for rows, d in shapes:
            x = torch.randn(rows, d, device="cuda", dtype=dtype)
            dy = torch.randn_like(x)
            y, dx = torch.empty_like(x), torch.empty_like(x)
            n, es = rows * d, x.element_size()

            def fwd():
                y.copy_(x)

            def fwdbwd():
                y.copy_(x)
                torch.add(x, dy, out=dx)

            for impl, calls in (("floor", 1), ("floor@back-to-back", CALLS)):
                f = per_call_us(fwd, calls=calls)
                fb = per_call_us(fwdbwd, calls=calls)
                print(
                    f"{impl}\t{name}\t{rows}x{d}\t{f:.1f}\t{2 * es * n / f / 1e3:.0f}"
                    f"\t{fb:.1f}\t{5 * es * n / fb / 1e3:.0f}",
                    flush=True,
                )
            del x, dy, y, dx
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

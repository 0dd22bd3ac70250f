"""PyTorch's softmax and log-softmax, forward and backward, and a copy of the same bytes, back to
back on one GPU: the reference for ruda's softmax kernels (`gpu_suite --softmax`), run in the same
device call.

Shapes: the attention scores of the benchmarked transformer step, [32, 8, 256, 256], and a
vocabulary-sized log-softmax, [8192, 50304], over the last dimension; f32 and bf16.

Timing: `calls` calls queued back to back, one torch.cuda.synchronize(), the time divided by
`calls`; the median of `rounds` rounds after two warm-up calls. The forward is
torch.softmax / torch.log_softmax; the backward is the op autograd runs for it
(torch._softmax_backward_data / torch._log_softmax_backward_data) on the forward's output; the copy
is `dst.copy_(src)` (a device-to-device copy). Effective bytes: forward 2N elements, backward 3N,
copy 2N (read and write).

  python3 benches/torch/softmax.py [--calls 20] [--rounds 7] [--quick]

Output: one tab-separated line per (kind, shape, dtype), the columns of gpu_suite's softmax
table, prefixed `torch`.
"""
import argparse
import time

import torch

SHAPES = [(32, 8, 256, 256), (8192, 50304)]
QUICK_SHAPES = [(2, 4, 64, 64), (64, 3000)]


def back_to_back_us(call, calls, rounds):
    for _ in range(2):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e6 / calls)
    times.sort()
    return times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    print("torch\tkind\tshape\tdtype\tforward_us\tbackward_us\tcopy_us\tforward_GB_s\t"
          "backward_GB_s\tfwdbwd_GB_s\tcopy_GB_s\tfwdbwd_share_of_copy")
    for dtype in (torch.float32, torch.bfloat16):
        for shape in shapes:
            n = 1
            for d in shape:
                n *= d
            size = torch.tensor([], dtype=dtype).element_size()
            x = (torch.rand(shape, device="cuda", dtype=torch.float32) * 10 - 5).to(dtype)
            dy = torch.randn(shape, device="cuda", dtype=dtype)
            dst = torch.empty_like(x)
            copy_us = back_to_back_us(lambda: dst.copy_(x), args.calls, args.rounds)
            for kind in ("softmax", "log_softmax"):
                if kind == "softmax":
                    forward = lambda: torch.softmax(x, -1)  # noqa: E731
                    y = torch.softmax(x, -1)
                    backward = lambda: torch._softmax_backward_data(dy, y, -1, dtype)  # noqa: E731
                else:
                    forward = lambda: torch.log_softmax(x, -1)  # noqa: E731
                    y = torch.log_softmax(x, -1)
                    backward = lambda: torch._log_softmax_backward_data(dy, y, -1, dtype)  # noqa: E731
                fwd_us = back_to_back_us(forward, args.calls, args.rounds)
                bwd_us = back_to_back_us(backward, args.calls, args.rounds)
                gb = lambda elems, us: elems * n * size / us / 1e3  # noqa: E731
                fwdbwd = gb(5, fwd_us + bwd_us)
                copy = gb(2, copy_us)
                name = "x".join(str(d) for d in shape)
                dname = "F32" if dtype == torch.float32 else "BF16"
                print(f"torch\t{kind}\t{name}\t{dname}\t{fwd_us:.2f}\t{bwd_us:.2f}\t{copy_us:.2f}\t"
                      f"{gb(2, fwd_us):.0f}\t{gb(3, bwd_us):.0f}\t{fwdbwd:.0f}\t{copy:.0f}\t"
                      f"{100 * fwdbwd / copy:.1f}%", flush=True)
            del x, dy, dst, y
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

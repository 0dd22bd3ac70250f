"""Per-family kernel time of a training step, from CubeCL's profiling log.

With `[profiling.logger] level = "basic"` and a `file` in cubecl.toml, CubeCL writes one line per
kernel it runs, `| <duration> | <kernel name>`. This sums them by kernel family and divides by the
number of training steps the log covers, the same families as benches/device/torch_step_profile.py.

  python3 benches/device/cubecl_profile_families.py LOG STEPS STEP_MS [LABEL]
"""
import re
import sys
from collections import defaultdict

# Lower-cased CubeCL kernel names; first match wins.
FAMILIES = [
    ("softmax", ("softmax",)),
    ("layer norm", ("layernorm", "layer_norm", "forwardregisters", "backwardregisters",
                    "forwardlooped", "backwardlooped", "reducepartials", "planeperrow",
                    "unitperrow", "cubeperrow")),
    ("matmul", ("matmul", "gemm", "mma", "cmma", "tile")),
    ("attention mask", ("mask",)),
    ("reduction", ("reduce", "sum", "mean", "argmax", "max")),
    ("adam", ("adam",)),
    ("embedding", ("embedding", "gather", "select", "scatter")),
    ("copy/cast", ("copy", "cast", "into_contiguous", "layout", "memcpy", "fill")),
    ("elementwise / fused", ("elemwise", "fuse", "unary", "binary", "gelu", "erf", "launch")),
]

UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
LINE = re.compile(r"^\|\s*([0-9.]+)\s*(ns|µs|us|ms|s)\s*\|\s*(.+?)\s*$")


def family(name):
    low = name.lower()
    for fam, keys in FAMILIES:
        if any(k in low for k in keys):
            return fam
    return "other"


def main():
    path, steps, step_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    label = sys.argv[4] if len(sys.argv) > 4 else path
    per_family = defaultdict(float)
    per_kernel = defaultdict(lambda: [0.0, 0])
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            ms = float(m.group(1)) * UNITS[m.group(2)]
            name = m.group(3)
            per_family[family(name)] += ms
            per_kernel[name][0] += ms
            per_kernel[name][1] += 1
    busy = sum(per_family.values()) / steps
    print(f"# {label}: kernel time per step {busy:.2f} ms of a {step_ms:.2f} ms step "
          f"({sum(c for _, c in per_kernel.values()) / steps:.0f} kernels per step)")
    print("family\tms_per_step\tshare_of_step")
    for fam, ms in sorted(per_family.items(), key=lambda kv: -kv[1]):
        print(f"{fam}\t{ms / steps:.2f}\t{100 * ms / steps / step_ms:.1f}%")
    idle = max(step_ms - busy, 0.0)
    print(f"no kernel running (host, launch gaps)\t{idle:.2f}\t{100 * idle / step_ms:.1f}%")
    print("# top kernels: ms_per_step, launches_per_step, name")
    for name, (ms, count) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"#  {ms / steps:8.3f}  {count / steps:6.1f}  {name[:150]}")


if __name__ == "__main__":
    main()

"""Per-family kernel time of one training step, from Nsight Compute: every kernel of the
process (CubeCL's and the libraries' alike, e.g. cuBLAS), which CubeCL's own profiler cannot see.

Runs COMMAND under `ncu --clock-control none` with one metric (gpu__time_duration.sum) over a
window of launches after the warm-up, finds the step's period in the window's sequence of kernel
names (the smallest shift under which the sequence repeats), and prints the kernel time per step by
family (the families of cubecl_profile_families.py, cuBLAS's kernels counted as matmul).

  python3 benches/device/ncu_step.py LABEL SKIP COUNT -- COMMAND...
"""
import csv
import io
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cubecl_profile_families import FAMILIES  # noqa: E402

LIBRARY_MATMUL = ("cutlass", "sm90_", "xmma", "cublas", "gemv", "splitk")


def family(name):
    low = name.lower()
    if any(k in low for k in LIBRARY_MATMUL):
        return "matmul"
    for fam, keys in FAMILIES:
        if any(k in low for k in keys):
            return fam
    return "other"


def period(names):
    """Smallest shift p under which at least 95% of the window repeats."""
    n = len(names)
    for p in range(20, n // 2 + 1):
        same = sum(1 for i in range(n - p) if names[i] == names[i + p])
        if same >= 0.95 * (n - p):
            return p
    return None


def main():
    label, skip, count = sys.argv[1], sys.argv[2], sys.argv[3]
    command = sys.argv[sys.argv.index("--") + 1:]
    ncu = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           "--print-units", "base", "--launch-skip", skip, "--launch-count", count]
    run = subprocess.run(ncu + command, capture_output=True, text=True)
    rows = [r for r in csv.reader(io.StringIO(run.stdout)) if len(r) > 10]
    if not rows:
        print(f"# {label}: no ncu rows (exit {run.returncode})\n{run.stderr[-2000:]}")
        return
    header, rows = rows[0], rows[1:]
    name_col, value_col = header.index("Kernel Name"), header.index("Metric Value")
    kernels = [(r[name_col], float(r[value_col].replace(",", "")) / 1e6) for r in rows]
    names = [k for k, _ in kernels]
    p = period(names)
    if p is None:
        print(f"# {label}: no repeating step found in {len(names)} kernels")
        p = len(names)
    steps = len(names) / p
    per_family = defaultdict(float)
    per_kernel = defaultdict(lambda: [0.0, 0])
    for name, ms in kernels:
        per_family[family(name)] += ms
        per_kernel[name][0] += ms
        per_kernel[name][1] += 1
    busy = sum(per_family.values()) / steps
    print(f"# {label}: {p} kernels per step, kernel time per step {busy:.2f} ms "
          f"({len(names)} kernels profiled, {steps:.2f} steps)")
    print("family\tms_per_step\tshare_of_kernel_time")
    for fam, ms in sorted(per_family.items(), key=lambda kv: -kv[1]):
        print(f"{fam}\t{ms / steps:.2f}\t{100 * ms / steps / busy:.1f}%")
    print("# top kernels: ms_per_step, launches_per_step, name")
    for name, (ms, n) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"#  {ms / steps:8.3f}  {n / steps:6.1f}  {name[:140]}")


if __name__ == "__main__":
    main()

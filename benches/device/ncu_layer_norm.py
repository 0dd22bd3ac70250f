"""Per-launch-configuration summary of ruda's LayerNorm kernels from Nsight Compute CSV output
(docs/perf/layer-norm.md): for each kernel, block, grid and amount of data read, the median duration, DRAM
throughput, L2 hit rate, achieved and theoretical occupancy, registers, the occupancy limits and
the waves per SM. The data read (DRAM plus L2 hits is the tensor size) tells the shapes apart.

  ncu --clock-control none -k 'regex:[Ff]orward|[Bb]ackward|[Rr]educe_?[Pp]artials' \
      --metrics <the list in METRICS> --csv --print-units base \
      gpu_suite --benchmarks --groups layer_norm_kernel > ncu.csv
  python3 benches/device/ncu_layer_norm.py ncu.csv...
"""
import collections
import csv
import statistics
import sys

METRICS = [
    ("gpu__time_duration.sum", "us", 1e-3),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%", 1),
    ("dram__bytes_read.sum", "MB rd", 1e-6),
    ("dram__bytes_write.sum", "MB wr", 1e-6),
    ("lts__t_sector_hit_rate.pct", "L2 hit%", 1),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%", 1),
    ("sm__maximum_warps_per_active_cycle_pct", "theo%", 1),
    ("launch__registers_per_thread", "regs", 1),
    ("launch__occupancy_limit_registers", "lim regs", 1),
    ("launch__occupancy_limit_warps", "lim warps", 1),
    ("launch__occupancy_limit_shared_mem", "lim smem", 1),
    ("launch__waves_per_multiprocessor", "waves", 1),
]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def launches(path):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    header, rows = rows[0], rows[1:]
    col = {name: header.index(name) for name in
           ("ID", "Kernel Name", "Metric Name", "Metric Value", "Block Size", "Grid Size")}
    out = collections.OrderedDict()
    for r in rows:
        launch = out.setdefault(int(r[col["ID"]]), {
            "kernel": r[col["Kernel Name"]].split("(")[0].replace("_f_", "_"),
            "block": r[col["Block Size"]].replace(" ", ""),
            "grid": r[col["Grid Size"]].replace(" ", ""),
        })
        launch[r[col["Metric Name"]]] = number(r[col["Metric Value"]])
    return out


def main():
    for path in sys.argv[1:]:
        groups = collections.OrderedDict()
        found = launches(path)
        for launch in found.values():
            # The tensor size in MB (DRAM read + L2 hits) tells the shapes apart.
            hit = launch.get("lts__t_sector_hit_rate.pct", 0.0)
            size = launch.get("dram__bytes_read.sum", 0.0) / 1e6
            key = (launch["kernel"], launch["block"], launch["grid"], round(size, -0 if size < 10 else -1))
            groups.setdefault(key, []).append(launch)
        print(f"# {path}: {len(found)} launches")
        print("| kernel | block | grid | launches | " + " | ".join(m[1] for m in METRICS) + " |")
        print("| --- | --- | --- | ---: | " + " | ".join("---:" for _ in METRICS) + " |")
        for (kernel, block, grid, _), group in groups.items():
            values = [statistics.median(l.get(m, float("nan")) for l in group) * scale
                      for m, _, scale in METRICS]
            print(f"| {kernel} | {block} | {grid} | {len(group)} | "
                  + " | ".join(f"{v:.1f}" for v in values) + " |")
        print()


if __name__ == "__main__":
    main()

"""The kernels one benchmark case launches, in order, from Nsight Compute CSV output
(docs/perf/layer-norm.md):
what a call of LayerNorm through Burn runs beside what the kernels alone run, and how long each
kernel takes on its own (Nsight Compute serializes launches, so gaps between kernels are not
measured). Uses ncu_layer_norm.py's reader.

  ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum --csv \
      --print-units base gpu_suite --benchmarks --groups G --cases C > ncu.csv
  python3 benches/device/ncu_sequence.py ncu.csv [LAUNCHES_SHOWN]

Prints the first LAUNCHES_SHOWN launches (name, grid, block, us, MB moved), then per kernel,
grid and block: launches, median us and MB.
"""
import statistics
import sys

from ncu_layer_norm import launches


def main():
    path = sys.argv[1]
    shown = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    found = list(launches(path).values())
    print(f"# {len(found)} launches")
    print("kernel\tgrid\tblock\tus\tMB")
    for launch in found[:shown]:
        print(f"{launch['kernel']}\t{launch['grid']}\t{launch['block']}"
              f"\t{launch.get('gpu__time_duration.sum', float('nan')) / 1e3:.1f}"
              f"\t{launch.get('dram__bytes.sum', float('nan')) / 1e6:.1f}")
    groups = {}
    for launch in found:
        key = (launch["kernel"], launch["grid"], launch["block"])
        groups.setdefault(key, []).append(launch)
    print("\nkernel\tgrid\tblock\tlaunches\tmedian us\tmedian MB")
    for (kernel, grid, block), group in groups.items():
        us = statistics.median(g.get("gpu__time_duration.sum", float("nan")) for g in group) / 1e3
        mb = statistics.median(g.get("dram__bytes.sum", float("nan")) for g in group) / 1e6
        print(f"{kernel}\t{grid}\t{block}\t{len(group)}\t{us:.1f}\t{mb:.1f}")


if __name__ == "__main__":
    main()

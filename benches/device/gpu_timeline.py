#!/usr/bin/env python3
"""What the GPU does, and does not do, in a window of a CUPTI trace (benches/device/cupti_trace.c).

    python3 gpu_timeline.py TRACE (--burst K | --window-ms W [--skip-end-ms S]) [--steps N]
                            [--step-start REGEX [--products REGEX]]

The window is either a burst, the K-th from the end (-1 the last) of the stretches of GPU
activity that pauses of at least --pause-ms (default 100) separate (gpu_suite --step sleeps
300 ms between its phases: the last burst is its 30 steps back to back, the one before its
10 synced steps), or the W ms of GPU activity that end S ms before the trace's last GPU record.
With --steps N the totals are also given per step.

It reports: the GPU's busy time (union over streams) split into kernels, copies and memsets;
its idle time split by cause, from the API call (driver, or runtime for programs that
launch through cudart) that issued the activity after each gap:
  host late   the call returned after the GPU went idle: the GPU had nothing queued
  queued      the call had returned before the gap began: the work was queued and started
              late (a cross-stream event wait, a dependency, launch latency)
with the gaps' sizes; the API calls in the window (count and host time by name, by thread; a
runtime call's time includes the driver calls it makes);
the synchronizations; the streams; the largest kernels.

With --step-start, each step begins at a kernel whose name matches REGEX (the first of a run of
matches, e.g. the embedding lookups' `select_kernel`), and the report splits every step at the
end of its last matrix product (kernel names matching --products, cuBLAS's by default): the
step's tail after it is the backward's last element-wise work and the optimizer's update, where
the GPU has little to do and the host issues many small operations.
"""
import argparse
import bisect
import collections
import re
import sys

SYNC_TYPES = {1: "event synchronize", 2: "stream wait event", 3: "stream synchronize",
              4: "context synchronize"}
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}


def read(path):
    gpu, api, syncs, dropped = [], [], [], 0
    with open(path, errors="replace") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            t = p[0]
            try:
                if t == "K":
                    gpu.append(("kernel", int(p[1]), int(p[2]), int(p[3]), int(p[4]), p[7]))
                elif t == "C":
                    kind = COPY_KINDS.get(int(p[6]), p[6])
                    gpu.append(("copy " + kind, int(p[1]), int(p[2]), int(p[3]), int(p[4]),
                                int(p[5])))
                elif t == "S":
                    gpu.append(("memset", int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5])))
                elif t in ("A", "R"):
                    # A driver call, or a runtime call (which makes driver calls of its own
                    # with other correlation ids): either issued the activity it correlates to.
                    api.append((int(p[1]), int(p[2]), int(p[3]), int(p[4]), p[5]))
                elif t == "Y":
                    syncs.append((int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5])))
                elif t == "D":
                    dropped += int(p[1])
            except (IndexError, ValueError):
                continue  # a line cut by a stopped run
    return gpu, api, syncs, dropped


# cuBLAS's kernels: its GEMM families (nvjet, cutlass, xmma), gemv, dot and their reductions.
PRODUCTS = r"nvjet|cutlass|xmma|gemm|gemv|splitKreduce|dot_kernel|reduce_1Block"


def step_tails(inside, start_re, product_re):
    """Per step (kernels matching start_re open one, the first of a run of them): its length,
    and the length, kernels and GPU busy time after the end of its last product."""
    starts, previous_matched = [], False
    for r in inside:
        if r[0] != "kernel":
            continue
        matched = bool(start_re.search(r[5]))
        if matched and not previous_matched:
            starts.append(r[1])
        previous_matched = matched
    rows = []
    for a, b in zip(starts, starts[1:]):
        step = [r for r in inside if a <= r[1] < b]
        products = [r[2] for r in step if r[0] == "kernel" and product_re.search(r[5])]
        if not products:
            continue
        last = max(products)
        tail = [r for r in step if r[1] >= last]
        rows.append(((b - a) / 1e6, (b - last) / 1e6,
                     sum(1 for r in tail if r[0] == "kernel"),
                     sum(r[2] - r[1] for r in tail) / 1e6))
    return rows


def short(name, width=90):
    name = re.sub(r"\s+", " ", name)
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--burst", type=int, default=None)
    ap.add_argument("--pause-ms", type=float, default=100.0)
    ap.add_argument("--window-ms", type=float, default=None)
    ap.add_argument("--skip-end-ms", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=0, help="steps in the window: per-step figures")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--step-start", default=None, metavar="REGEX",
                    help="kernel names that open a step: per-step split at the last product")
    ap.add_argument("--products", default=PRODUCTS, metavar="REGEX",
                    help="kernel names of the matrix products (default: cuBLAS's)")
    a = ap.parse_args()
    if a.burst is None and a.window_ms is None:
        ap.error("give --burst K or --window-ms W")

    gpu, api, syncs, dropped = read(a.trace)
    if not gpu:
        sys.exit(f"{a.trace}: no GPU records")
    if a.burst is not None:
        bursts, start, end = [], None, None
        for r in sorted(gpu, key=lambda r: r[1]):
            if end is not None and r[1] - end >= a.pause_ms * 1e6:
                bursts.append((start, end))
                start = None
            start = r[1] if start is None else start
            end = r[2] if end is None else max(end, r[2])
        bursts.append((start, end))
        try:
            w0, w1 = bursts[a.burst]
        except IndexError:
            sys.exit(f"{len(bursts)} bursts in the trace: no burst {a.burst}")
        where = f"burst {a.burst} of {len(bursts)}"
    else:
        last = max(r[2] for r in gpu)
        w1 = last - int(a.skip_end_ms * 1e6)
        w0 = w1 - int(a.window_ms * 1e6)
        where = f"ending {a.skip_end_ms:g} ms before the last GPU record"
    inside = sorted((r for r in gpu if r[1] >= w0 and r[2] <= w1), key=lambda r: r[1])
    if not inside:
        sys.exit("no GPU records in the window")
    w0 = inside[0][1]  # the window starts at its first activity
    wall = (w1 - w0) / 1e6
    per = a.steps or 0
    ms = lambda ns: ns / 1e6

    def line(label, ns, count=None):
        cols = f"{label:<34}{ms(ns):>9.3f} ms {100 * ns / (w1 - w0):>6.1f}%"
        if per:
            cols += f" {ms(ns) / per:>8.3f} ms/step"
        if count is not None:
            cols += f" {count:>8} ({count / per:.1f}/step)" if per else f" {count:>8}"
        return cols

    print(f"# {a.trace}: window {wall:.1f} ms, {where}; {len(inside)} GPU records" + (f"; {per} steps" if per else "")
          + (f"; CUPTI dropped {dropped} records" if dropped else ""))

    # Busy time: the union of every activity's interval, over all streams.
    busy, cur0, cur1 = 0, None, None
    gaps = []  # (gap_start, gap_end, next record)
    for r in inside:
        if cur1 is None or r[1] > cur1:
            if cur1 is not None:
                busy += cur1 - cur0
                gaps.append((cur1, r[1], r))
            cur0, cur1 = r[1], r[2]
        else:
            cur1 = max(cur1, r[2])
    busy += cur1 - cur0
    by_type = collections.defaultdict(lambda: [0, 0])
    for r in inside:
        by_type[r[0]][0] += r[2] - r[1]
        by_type[r[0]][1] += 1
    print("\n## GPU time (sums per kind overlap where streams run at once)")
    print(line("busy (union over streams)", busy))
    for kind, (ns, n) in sorted(by_type.items(), key=lambda kv: -kv[1][0]):
        print(line("  " + kind, ns, n))
    print(line("idle", (w1 - w0) - busy, len(gaps)))

    # Each gap's cause, from the API call that issued the activity after it.
    call_end = {c: e for (s, e, tid, c, name) in api}
    call_name = {c: name for (s, e, tid, c, name) in api}
    causes = collections.defaultdict(lambda: [0, 0])
    sizes = collections.Counter()
    transitions = collections.defaultdict(lambda: [0, 0])
    starts = [r[1] for r in inside]
    for g0, g1, nxt in gaps:
        length = g1 - g0
        end = call_end.get(nxt[4])
        cause = "host late" if end is None or end > g0 else "queued"
        if end is None:
            cause = "no API call"
        causes[cause][0] += length
        causes[cause][1] += 1
        us = length / 1e3
        bucket = ("<2 us" if us < 2 else "2-5 us" if us < 5 else "5-10 us" if us < 10
                  else "10-50 us" if us < 50 else "50-500 us" if us < 500 else ">=500 us")
        sizes[bucket] += length
        i = bisect.bisect_left(starts, g0) - 1
        before = inside[i][0] if i >= 0 else "-"
        key = f"{cause}: {before.split()[0]} -> {nxt[0].split()[0]} ({call_name.get(nxt[4], '?')})"
        transitions[key][0] += length
        transitions[key][1] += 1
    print("\n## Idle time by cause (the API call that issued the next activity)")
    for cause, (ns, n) in sorted(causes.items(), key=lambda kv: -kv[1][0]):
        print(line("  " + cause, ns, n))
    print("   by size:")
    for bucket in ["<2 us", "2-5 us", "5-10 us", "10-50 us", "50-500 us", ">=500 us"]:
        if sizes[bucket]:
            print(line("    " + bucket, sizes[bucket]))
    print("   by what ran before and after:")
    for key, (ns, n) in sorted(transitions.items(), key=lambda kv: -kv[1][0])[: a.top]:
        print(line("", ns, n) + "  " + key)

    # Streams.
    streams = collections.defaultdict(lambda: [0, 0])
    for r in inside:
        streams[r[3]][0] += r[2] - r[1]
        streams[r[3]][1] += 1
    print("\n## Streams")
    for s, (ns, n) in sorted(streams.items(), key=lambda kv: -kv[1][0]):
        print(line(f"  stream {s}", ns, n))

    # Driver calls made while the window ran.
    calls = collections.defaultdict(lambda: [0, 0])
    threads = collections.defaultdict(lambda: [0, 0])
    for s, e, tid, c, name in api:
        if s >= w0 and e <= w1:
            calls[name][0] += e - s
            calls[name][1] += 1
            threads[tid][0] += e - s
            threads[tid][1] += 1
    print("\n## API calls in the window (host time inside the call)")
    for name, (ns, n) in sorted(calls.items(), key=lambda kv: -kv[1][0])[: a.top]:
        print(line("  " + name[:32], ns, n) + f"  {ns / n / 1e3:.2f} us each")
    for tid, (ns, n) in sorted(threads.items(), key=lambda kv: -kv[1][0]):
        print(line(f"  thread {tid}", ns, n))

    sy = collections.defaultdict(lambda: [0, 0])
    for s, e, stream, c, typ in syncs:
        if s >= w0 and e <= w1:
            sy[SYNC_TYPES.get(typ, str(typ))][0] += e - s
            sy[SYNC_TYPES.get(typ, str(typ))][1] += 1
    print("\n## Synchronizations (host time blocked, or for stream waits the record's span)")
    for name, (ns, n) in sorted(sy.items(), key=lambda kv: -kv[1][0]):
        print(line("  " + name, ns, n))

    kern = collections.defaultdict(lambda: [0, 0])
    for r in inside:
        if r[0] == "kernel":
            kern[r[5]][0] += r[2] - r[1]
            kern[r[5]][1] += 1
    print(f"\n## The {a.top} largest kernels")
    for name, (ns, n) in sorted(kern.items(), key=lambda kv: -kv[1][0])[: a.top]:
        print(line(f"  {n / max(per, 1):.0f}x/step" if per else f"  {n}x", ns, n) + "  " + short(name))

    if a.step_start:
        rows = step_tails(inside, re.compile(a.step_start), re.compile(a.products))
        print(f"\n## Each step's tail after its last product ({len(rows)} whole steps; "
              f"steps open at /{a.step_start}/)")
        if rows:
            med = lambda i: sorted(r[i] for r in rows)[len(rows) // 2]
            mean = lambda i: sum(r[i] for r in rows) / len(rows)
            print(f"  {'':<32}{'median':>10}{'mean':>10}")
            for i, label in enumerate(["step (ms)", "tail after the last product (ms)",
                                       "kernels in the tail", "GPU busy in the tail (ms)"]):
                print(f"  {label:<32}{med(i):>10.2f}{mean(i):>10.2f}")


if __name__ == "__main__":
    main()

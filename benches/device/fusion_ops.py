#!/usr/bin/env python3
"""Counts the operations burn-fusion handled per training step, by kind, from its trace.

burn-fusion (`BURN_FUSION_LOG=full`, on stderr) prints a table for every execution plan it
runs: one row per operation (`Float::Matmul`, `NumericFloat::Add`, `Custom`, `Drop`, ...) and
the block it ran in (a fused kernel, or unfused). Every operation a program queues through
burn-fusion appears once, whichever thread then pays for it. Two runs that differ only by their
number of steps give the operations of a step: (long - short) / (steps_long - steps_short).

    BURN_FUSION_LOG=full PROGRAM --steps 1 ... 2> short.log
    BURN_FUSION_LOG=full PROGRAM --steps 3 ... 2> long.log
    python3 benches/device/fusion_ops.py short.log long.log --steps 2

prints a table: operation kind, operations a step, and the blocks a step (fused kernels by
fuser, unfused runs); then burn-fusion's plan events a step: segments run from a stored plan
(cache hits), explorations (the fusers offered the operations anew), new search blocks (each
starts with a fresh copy of every fuser) and operations a block accepted. In a steady training
loop every segment should come from a stored plan: explorations a step mean the stream differs
from step to step, and each one costs the fusion thread the fusers' copies and offers. With one
log it prints that log's totals.
"""

import argparse
import collections
import re
import sys

ROW = re.compile(r"^(\d+)\s{2,}(.*)$")
BLOCK = re.compile(r"^▸ (fused \w+|un-fused)[^)]*\)\s+(\S+)")
# burn-fusion's plan and search events (its `log_fusion` lines at level full), by what they mean.
EVENTS = [
    ("segments run from a stored plan", "[plan] cache hit"),
    ("explorations completed", "[plan] exploration completed"),
    ("new search blocks (every fuser copied)", "→ new block"),
    ("operations accepted by an open block", "→ accepted in"),
]


def parse(path):
    """(operations by kind, blocks by kind, plan events) over every trace table of the log."""
    ops = collections.Counter()
    blocks = collections.Counter()
    events = collections.Counter()
    in_table = False
    with open(path, errors="replace") as log:
        for line in log:
            for name, marker in EVENTS:
                if marker in line:
                    events[name] += 1
            if line.startswith("fusion trace"):
                in_table = True
                continue
            if not in_table or line.startswith(("idx", "---")):
                continue
            row = ROW.match(line.rstrip("\n"))
            if not row:
                in_table = False
                continue
            rest = row.group(2)
            block = BLOCK.match(rest)
            if block:
                blocks[block.group(1)] += 1
                ops[block.group(2)] += 1
            else:
                ops[rest.split()[0]] += 1
    return ops, blocks, events


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+", help="one log, or a short and a long run's")
    parser.add_argument("--steps", type=float, default=1.0,
                        help="steps the long run has more than the short one")
    args = parser.parse_args()
    if len(args.logs) > 2:
        sys.exit("one or two logs")
    ops, blocks, events = parse(args.logs[-1])
    if len(args.logs) == 2:
        short_ops, short_blocks, short_events = parse(args.logs[0])
        ops.subtract(short_ops)
        blocks.subtract(short_blocks)
        events.subtract(short_events)
    per = args.steps if len(args.logs) == 2 else 1.0
    unit = "a step" if len(args.logs) == 2 else "in all"
    print(f"| operation | operations {unit} |\n| --- | --- |")
    for kind, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])):
        if n:
            print(f"| {kind} | {n / per:g} |")
    print(f"| **all** | **{sum(ops.values()) / per:g}** |\n")
    print(f"| block | blocks {unit} |\n| --- | --- |")
    for kind, n in sorted(blocks.items(), key=lambda kv: (-kv[1], kv[0])):
        if n:
            print(f"| {kind} | {n / per:g} |")
    print(f"| **all** | **{sum(blocks.values()) / per:g}** |\n")
    print(f"| burn-fusion's plan events | {unit} |\n| --- | --- |")
    for name, _ in EVENTS:
        print(f"| {name} | {events[name] / per:g} |")


if __name__ == "__main__":
    main()

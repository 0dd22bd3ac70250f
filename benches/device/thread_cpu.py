"""CPU use of each thread of a running process over a window: which threads of a training run
are busy (host-bound work) and which wait. For the GPU machine, which has no perf or gdb.

  python3 benches/device/thread_cpu.py PID SECONDS
Output: one line per thread with CPU time in the window, % of one core, the thread's name.
"""
import os
import sys
import time


def snapshot(pid):
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        # utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def main():
    pid, seconds = int(sys.argv[1]), float(sys.argv[2])
    tick = os.sysconf("SC_CLK_TCK")
    before = snapshot(pid)
    t0 = time.time()
    time.sleep(seconds)
    after = snapshot(pid)
    window = time.time() - t0
    rows = []
    for tid, (name, ticks) in after.items():
        used = (ticks - before.get(tid, (name, ticks))[1]) / tick
        rows.append((used, tid, name))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print(f"# {len(rows)} threads, {total:.2f} CPU-s in {window:.2f} s ({100 * total / window:.0f}% of one core)")
    for used, tid, name in rows[:12]:
        print(f"{used:7.2f} s  {100 * used / window:5.0f}%  {tid:>8}  {name}")


if __name__ == "__main__":
    main()

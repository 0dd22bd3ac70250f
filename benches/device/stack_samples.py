"""A sampling profiler of a running process's threads for the GPU machine, which has no perf:
cuda-gdb attaches, prints every thread's stack, detaches; repeated SAMPLES times. The stacks tell
which stage of a host-bound training step works and which waits (a thread spinning in
cubecl-common's channel, or sleeping, is waiting; one in burn-fusion or CubeCL code is working).

  python3 benches/device/stack_samples.py PID SAMPLES INTERVAL_S RAW_OUT > summary.txt

RAW_OUT gets every stack; stdout, per thread name: samples by state (working / waiting and where),
then the functions seen on working stacks, counted once per sample (inclusive), the leaves apart.
Symbols need an unstripped binary (function names come from its symbol table; stacks unwind
through .eh_frame, which release Rust builds keep).
"""
import collections
import os
import re
import subprocess
import sys
import time

THREAD = re.compile(r'^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP (\d+)\) "([^"]*)"\)')
FRAME = re.compile(r'^#(\d+)\s+(?:0x[0-9a-f]+ in )?(.+?) \(')

# A stack whose innermost frames are one of these waits for another thread or for the device.
WAITS = [
    ("spin: queue full (producer)", "custom_channel::DeviceClient::enqueue"),
    ("spin: queue full (producer)", "GlobalFusionClient<R>::register"),
    ("spin: queue full (producer)", "ChannelDeviceHandle<S>::submit_inner"),
    ("idle: device-service runner", "custom_channel::Server::start"),
    ("idle: parked", "thread::functions::park"),
    ("blocked: oneshot/recv", "oneshot::"),
    ("blocked: futex/condvar", "futex"),
    ("blocked: futex/condvar", "pthread_cond"),
    ("sleep", "nanosleep"),
    ("yield", "sched_yield"),
    ("blocked: poll/epoll", "poll"),
    ("blocked: read", "__libc_read"),
    ("device sync", "cuStreamSynchronize"),
    ("device sync", "cuEventSynchronize"),
]


def short(func):
    """Drops generic arguments and the hash suffix, keeping the path."""
    func = re.sub(r"::h[0-9a-f]{16}$", "", func)
    depth, out = 0, []
    for ch in func:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<..>")
            continue
        if ch == ">":
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out).replace("<..><..>", "<..>")


def sample(pid):
    cmd = [
        os.environ.get("PMP_GDB", "cuda-gdb"), "-q", "-batch", "-nx", "-p", str(pid),
        "-ex", "set pagination off",
        "-ex", "set print frame-arguments none",
        "-ex", "thread apply all bt 48",
        "-ex", "detach",
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except subprocess.TimeoutExpired:
        return None
    threads, name = [], None
    for line in out.splitlines():
        m = THREAD.match(line)
        if m:
            name = m.group(2)
            threads.append((name, []))
            continue
        m = FRAME.match(line)
        if m and threads:
            threads[-1][1].append(m.group(2))
    return out, threads


def state_of(frames):
    inner = " ".join(frames[:6])
    for label, needle in WAITS:
        if needle in inner:
            return label
    return "working"


def main():
    pid, samples, interval, raw_path = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    states = collections.defaultdict(collections.Counter)
    inclusive = collections.defaultdict(collections.Counter)
    leaves = collections.defaultdict(collections.Counter)
    taken = 0
    with open(raw_path, "w") as raw:
        for i in range(samples):
            got = sample(pid)
            if got is None:
                print(f"# sample {i}: cuda-gdb timed out", file=sys.stderr)
                continue
            out, threads = got
            if not threads:
                print(f"# sample {i}: no threads (process gone?)", file=sys.stderr)
                break
            taken += 1
            raw.write(f"=== sample {i} {time.time():.3f}\n{out}\n")
            for name, frames in threads:
                group = re.sub(r"\d+$", "N", name)
                frames = [short(f) for f in frames]
                st = state_of(frames)
                states[group][st] += 1
                if st == "working" and frames:
                    leaves[group][frames[0]] += 1
                    for f in set(frames):
                        inclusive[group][f] += 1
            time.sleep(interval)
    print(f"# {taken} samples of pid {pid}")
    for group in sorted(states, key=lambda g: -sum(states[g].values())):
        total = sum(states[group].values())
        print(f"\n## thread {group}: {total} thread-samples")
        for st, n in states[group].most_common():
            print(f"  {n * 100.0 / total:5.1f}%  {st}")
        working = states[group]["working"]
        if working:
            print("  working, inclusive (share of working samples):")
            for f, n in inclusive[group].most_common(40):
                print(f"    {n * 100.0 / working:5.1f}%  {f[:160]}")
            print("  working, leaf:")
            for f, n in leaves[group].most_common(12):
                print(f"    {n * 100.0 / working:5.1f}%  {f[:160]}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Resolves the thread sampler's raw files (gpu_suite --step --sample-threads PREFIX, the
`example_common::thread_sampler` module) against the same executable before `strip`, and prints
per thread role: how many samples, the share of each state (working, blocked on the GPU, waiting
for room in a full queue, waiting for a reply, idle), and where the working samples go.

    python3 benches/device/symbolize_samples.py BINARY RAW... [--top N]

BINARY is the unstripped build that was stripped into .device/ (prepare.sh strips a copy; the
code addresses are the same). Needs `nm` and `readelf` (binutils).

Two views per role:
- self: the function holding the interrupted address; an address in a shared library (the CUDA
  driver, libc) is named after the library and the first return-address candidate in the
  executable ("libcuda.so.1 <- cubecl_cuda::...::launch_checked").
- timeline (--timeline N): each thread's first N samples in the order taken (the sampler signals
  every thread once per tick, so a column is one tick, about 0.5-0.6 ms): `#` working, `G` blocked
  on the GPU (a CUDA event or fence sync), `q` waiting for room in a full device-service queue,
  `w` waiting for a reply (a blocking call, a sync), `.` idle (a runner with an empty queue).
- inclusive (approximate): every distinct function among the interrupted address and its
  return-address candidates, once per sample. The candidates come from a scan of the stack, so a
  stale word can add a function that is not on the stack: read it as a hint.
"""
import argparse
import bisect
import collections
import os
import re
import subprocess
import sys

# Where a thread waits rather than works: cubecl-common's channel (a full queue on the client,
# an empty one on the server), the sleep, yield and park calls of a waiting thread, a blocking
# call's reply.
WAIT_PATTERNS = [
    r"ChannelDeviceHandle<.*>::submit_inner",
    r"custom_channel::DeviceClient::enqueue",
    r"custom_channel::Server::start",
    r"ruda_runtime::sync::wait_for",
    r"std::thread::(functions::)?(sleep|yield_now|park)",
    r"Condvar>::wait",
    r"oneshot::receiver::Receiver<.*>::recv",
]


def load_symbols(binary):
    out = subprocess.run(
        ["nm", "-C", "-n", "--defined-only", binary], check=True, capture_output=True, text=True
    ).stdout
    addrs, names = [], []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[1] not in "tTwW":
            continue
        addrs.append(int(parts[0], 16))
        names.append(parts[2])
    return addrs, names


def load_segments(binary):
    """(file offset, vaddr, file size) of each LOAD segment."""
    out = subprocess.run(["readelf", "-lW", binary], check=True, capture_output=True, text=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    return segs


def shorten(name, width=150):
    """Keeps the first level of generic arguments, elides deeper ones, cuts at `width`."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            out.append("<" if depth == 1 else (".." if depth == 2 else ""))
        elif ch == ">":
            out.append(">" if depth == 1 else "")
            depth -= 1
        elif depth <= 1:
            out.append(ch)
    s = "".join(out)
    return s if len(s) <= width else s[: width - 3] + "..."


class Resolver:
    def __init__(self, binary, maps, lib_dir=None):
        # Shared libraries copied from the GPU machine (--lib-dir), by file name: their dynamic
        # symbols, by file offset (their code is mapped at offset = address in these libraries).
        self.libs = {}
        for lib in os.listdir(lib_dir) if lib_dir else []:
            try:
                out = subprocess.run(["nm", "-D", "-n", "--defined-only", os.path.join(lib_dir, lib)],
                                     check=True, capture_output=True, text=True).stdout
            except subprocess.CalledProcessError:
                continue
            rows = [(int(l.split()[0], 16), l.split()[2]) for l in out.splitlines()
                    if len(l.split()) == 3 and l.split()[1] in "tTwWiI"]
            self.libs[lib] = ([a for a, _ in rows], [n for _, n in rows])
        self.addrs, self.names = load_symbols(binary)
        self.segs = load_segments(binary)
        self.exe_base = os.path.basename(binary)
        self.maps = maps  # (start, end, offset, path)

    def mapping(self, pc):
        for start, end, offset, path in self.maps:
            if start <= pc < end:
                return start, offset, path
        return None

    def in_exe(self, pc, exe_path):
        m = self.mapping(pc)
        return m is not None and m[2] == exe_path

    def name(self, pc):
        m = self.mapping(pc)
        if m is None:
            return "[unknown]"
        start, offset, path = m
        if path != self.exe_path:
            lib = os.path.basename(path or "anon")
            table = self.libs.get(lib)
            if table:
                i = bisect.bisect_right(table[0], pc - start + offset) - 1
                if i >= 0:
                    return f"[{lib}] {table[1][i]}"
            return "[" + lib + "]"
        file_off = pc - start + offset
        vaddr = None
        for seg_off, seg_vaddr, seg_size in self.segs:
            if seg_off <= file_off < seg_off + seg_size:
                vaddr = file_off - seg_off + seg_vaddr
                break
        if vaddr is None:
            return "[exe ?]"
        i = bisect.bisect_right(self.addrs, vaddr) - 1
        return self.names[i] if i >= 0 else "[exe ?]"


def parse(path):
    maps, threads, samples, dropped = [], {}, [], 0
    with open(path) as f:
        for line in f:
            if line.startswith("# map "):
                f2 = line[6:].split()
                lo, hi = (int(x, 16) for x in f2[0].split("-"))
                maps.append((lo, hi, int(f2[2], 16), f2[5] if len(f2) > 5 else ""))
            elif line.startswith("# thread "):
                _, _, tid, role, name = line.rstrip("\n").split(" ", 4)
                threads[int(tid)] = (role, name)
            elif line.startswith("# dropped "):
                dropped = int(line.split()[2])
            elif line.startswith("#") or not line.strip():
                continue
            else:
                f2 = line.split()
                samples.append((int(f2[0]), int(f2[1], 16), [int(x, 16) for x in f2[2:]]))
    return maps, threads, samples, dropped


def state(own, chain, waits):
    """One timeline character for a sample (see the module's docs)."""
    near = " ".join([own] + chain[:5])
    if "event::synchronize" in near or "Fence>::sync" in near or "Command::sync" in near:
        return "G"
    if "submit_inner" in own or (chain and "submit_inner" in chain[0]):
        return "q"
    if "sync::wait_for" in near or "park" in own or (chain and "park" in chain[0]):
        return "w"
    if any(w.search(own) for w in waits) or (
        own.startswith("[") and chain and any(w.search(chain[0]) for w in waits)
    ):
        return "."
    return "#"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("raw", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--timeline", type=int, default=0, metavar="N",
                    help="print each thread's first N samples as a line of states")
    ap.add_argument("--lib-dir", help="copies of the GPU machine's shared libraries (libc.so.6, ...) to name addresses in them")
    ap.add_argument("--exe", help="the executable's file name on the GPU machine (default: BINARY's, or a prefix of it)")
    args = ap.parse_args()
    waits = [re.compile(p) for p in WAIT_PATTERNS]
    for raw in args.raw:
        maps, threads, samples, dropped = parse(raw)
        exe_paths = collections.Counter(p for *_, p in maps)
        # The executable is the mapping whose base name matches the binary's, else the largest.
        base = os.path.basename(args.binary)
        names = {p: os.path.basename(p) for p in exe_paths}
        exe_path = next((p for p, n in names.items() if n == base), None) or next(
            (p for p, n in names.items() if n and base.startswith(n)), None
        )
        if args.exe:
            exe_path = next((p for p, n in names.items() if n == args.exe), None)
        if exe_path is None:
            sys.exit(f"{raw}: no code mapping named like {base}; name it with --exe")
        r = Resolver(args.binary, maps, args.lib_dir)
        r.exe_path = exe_path
        print(f"# {raw}: {len(samples)} samples, {dropped} dropped; executable {exe_path}")
        by_role = collections.defaultdict(list)
        for tid, pc, callers in samples:
            role, name = threads.get(tid, ("other", "?"))
            # Two threads of one role (CubeCL starts a device thread per runtime type) are
            # reported apart.
            same_role = [t for t in threads if threads[t][0] == role]
            key = role if len(same_role) == 1 else f"{role} {tid}"
            by_role[key].append((pc, callers))
        if args.timeline:
            lines = collections.defaultdict(list)
            for tid, pc, callers in samples:
                lines[tid].append(state(r.name(pc), [r.name(c) for c in callers], waits))
            print("\ntimeline: # working, G blocked on the GPU, q queue full, w waiting for a reply, . idle")
            for tid, states in lines.items():
                role, name = threads.get(tid, ("other", "?"))
                text = "".join(states[: args.timeline])
                for i in range(0, len(text), 100):
                    print(f"  {role[:8]:8} {tid:>7}  {text[i:i + 100]}")
        for role in sorted(by_role, key=lambda k: -len(by_role[k])):
            rows = by_role[role]
            names = sorted(
                {threads[t][1] for t in threads if threads[t][0] == role.split()[0]}
            )
            n = len(rows)
            selfc, incl, waitc = collections.Counter(), collections.Counter(), collections.Counter()
            states = collections.Counter()
            for pc, callers in rows:
                own = r.name(pc)
                chain = [r.name(c) for c in callers]
                st = state(own, chain, waits)
                states[st] += 1
                if st != "#":
                    where = own if not own.startswith("[") or not chain else f"{own} <- {chain[0]}"
                    waitc[f"{st} {shorten(where, 110)}"] += 1
                    continue
                label = own
                if own.startswith("[") and chain:
                    label = f"{own} <- {chain[0]}"
                selfc[label] += 1
                for fn in {own, *chain}:
                    incl[fn] += 1
            work = states["#"]
            shares = ", ".join(f"{k} {100 * states[k] / max(n, 1):.1f}%" for k in "#Gqw." if states[k])
            print(f"\n## {role} ({', '.join(names)}): {n} samples; {shares}")
            if waitc:
                print(f"\n  not working (state, where), % of the role's samples")
                for label, c in waitc.most_common(6):
                    print(f"  {100*c/max(n,1):6.1f}  {label}")
            print(f"\n  self, % of the role's working samples")
            for label, c in selfc.most_common(args.top):
                print(f"  {100*c/max(work,1):6.1f}  {shorten(label)}")
            print(f"\n  inclusive (approximate), % of the role's working samples")
            for label, c in incl.most_common(args.top):
                print(f"  {100*c/max(work,1):6.1f}  {shorten(label)}")
        print()


if __name__ == "__main__":
    sys.exit(main())

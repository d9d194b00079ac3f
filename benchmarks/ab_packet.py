"""A/B speed of two builds of the packet engine's extension on the same all-to-all (or ring).

    cp netcore/_packet*.so /tmp/before.so      # build A (e.g. before a change)
    ... change, rebuild ...
    cp netcore/_packet*.so /tmp/after.so       # build B
    python benchmarks/ab_packet.py /tmp/before.so /tmp/after.so --bytes 65536 --rounds 4
    python benchmarks/ab_packet.py /tmp/before.so /tmp/after.so --ring --rounds 3  # all-reduce

Each round runs every build in a fresh process (in turn, so that the shared machine's load
drifts over all of them alike) and reports packet hops per second of engine wall time, best of
`--reps` runs in that process; then the best and median over rounds per build. It also checks
that the builds agree on the results (sum of end times, bit for bit). Nothing is asserted.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

_CHILD = r"""
import importlib.util, sys
so, nbytes, reps, ring = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
spec = importlib.util.spec_from_file_location("netcore._packet", so)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
sys.modules["netcore._packet"] = mod
import numpy as np
from netcore.packet import run
from netcore.schedule import Schedule
from topo.builders import fat_tree
from topo.faults import LinkFaults
from topo.routing import Routing
t = fat_tree(8, link_gbps=400, latency_us=0.5)
h = t.n_hosts
if ring:  # bench_packet.py ring: ring all-reduce of nbytes
    import collectives
    s = collectives.build("all_reduce", "ring", np.arange(h), nbytes)
else:
    src, dst = np.meshgrid(np.arange(h), np.arange(h), indexing="ij")
    m = src != dst
    s = Schedule.from_transfers(src[m], dst[m], np.full(int(m.sum()), nbytes))
r = Routing(t, "ecmp", seed=1)
best = None
for _ in range(reps):
    res = run(t, s, r, LinkFaults.none(), seed=1, transport="tcp", mtu=9000)
    best = res.wall_s if best is None else min(best, res.wall_s)
hops = res.info["events_by_kind"]["arrive"]
print(hops / best, float(np.nansum(res.end)).hex())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds", nargs="+", help="paths of netcore._packet extension files")
    ap.add_argument("--bytes", type=int, default=None,
                    help="bytes per all-to-all pair (default 65536) or all-reduce (128 MiB)")
    ap.add_argument("--ring", action="store_true",
                    help="the ring all-reduce of bench_packet.py ring instead of the all-to-all")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    nbytes = args.bytes if args.bytes is not None else (128 << 20 if args.ring else 65536)
    rates = {b: [] for b in args.builds}
    checks = {}
    for _ in range(args.rounds):
        for b in args.builds:
            out = subprocess.run([sys.executable, "-c", _CHILD, b, str(nbytes), str(args.reps),
                                  "1" if args.ring else "0"],
                                 check=True, capture_output=True, text=True)
            rate, check = out.stdout.split()
            rates[b].append(float(rate))
            checks.setdefault(b, check)
    for b in args.builds:
        v = rates[b]
        print(f"{b}: packet hops per second of engine wall: best {max(v) / 1e6:.2f} M, median "
              f"{statistics.median(v) / 1e6:.2f} M, all {sorted(round(x / 1e6, 2) for x in v)}")
    same = len(set(checks.values())) == 1
    print("results identical across builds" if same else f"results DIFFER: {checks}")


if __name__ == "__main__":
    main()

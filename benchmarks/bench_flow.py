"""Speed and memory of the flow engine on the three reference workloads (figures go in
docs/flow_engine.md; nothing is asserted).

    python benchmarks/bench_flow.py                 # all cases, k=16, each in a fresh process
    python benchmarks/bench_flow.py --case a2a --k 8

Cases: ``ring`` (ring all-reduce of --bytes over all hosts), ``a2a`` (all-to-all, --pair-bytes
per ordered pair, all at once), ``incast`` (--incast flows into host 0). Each case prints
build time, routing+setup, engine loop, Numba compile/cache-load time, events, peak RSS.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def ring_all_reduce(n: int, nbytes: int):
    """2(n-1) steps; at step s rank i sends one chunk to i+1 after receiving step s-1's chunk."""
    try:
        from collectives import ring_all_reduce as lib_ring  # when the collectives land

        return lib_ring(np.arange(n), nbytes)
    except ImportError:
        pass
    from netcore.schedule import ScheduleBuilder

    b = ScheduleBuilder()
    ranks = np.arange(n)
    chunk = nbytes // n
    prev = None
    for s in range(2 * (n - 1)):
        parents = None if prev is None else prev[(ranks - 1) % n]
        prev = b.add_transfers(ranks, (ranks + 1) % n, chunk, parents=parents, tag=s)
    return b.build()


def all_to_all(n: int, pair_bytes: int):
    from netcore.schedule import Schedule

    src = np.repeat(np.arange(n), n)
    dst = np.tile(np.arange(n), n)
    keep = src != dst
    return Schedule.from_transfers(src[keep], dst[keep], np.full(int(keep.sum()), pair_bytes))


def incast(m: int, pair_bytes: int):
    from netcore.schedule import Schedule

    return Schedule.from_transfers(np.arange(1, m + 1), np.zeros(m, dtype=np.int64),
                                   np.full(m, pair_bytes))


def one_case(args) -> dict:
    from netcore import simulate
    from netcore.flow import engine
    from topo.builders import fat_tree

    t0 = time.perf_counter()
    compile_s = engine.warm()
    topo = fat_tree(args.k, link_gbps=args.gbps, latency_us=args.latency_us)
    n = topo.n_hosts
    if args.case == "ring":
        sched = ring_all_reduce(n, args.bytes)
    elif args.case == "a2a":
        sched = all_to_all(n, args.pair_bytes)
    else:
        if args.incast >= n:
            topo = fat_tree(max(args.k, 16), link_gbps=args.gbps, latency_us=args.latency_us)
        sched = incast(args.incast, args.pair_bytes)
    build_s = time.perf_counter() - t0 - compile_s
    t1 = time.perf_counter()
    res = simulate(topo, sched, args.routing, engine="flow")
    total_s = time.perf_counter() - t1
    info = res.info
    return {
        "case": args.case, "k": args.k, "hosts": n, "routing": args.routing,
        "transfers": sched.n_transfers, "compile_or_cache_load_s": round(compile_s, 3),
        "build_schedule_s": round(build_s, 3), "simulate_s": round(total_s, 3),
        "setup_routing_s": round(info["setup_s"], 3), "loop_s": round(info["loop_s"], 3),
        "events": info["events"], "time_steps": info["time_steps"],
        "recomputes": info["recomputes"], "events_per_s": round(info["events_per_s"]),
        "makespan_s": res.makespan, "stranded": res.n_stranded,
        "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=["ring", "a2a", "incast", "all"], default="all")
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--gbps", type=float, default=400.0)
    ap.add_argument("--latency-us", type=float, default=0.5)
    ap.add_argument("--routing", default="ecmp")
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--pair-bytes", type=int, default=1 << 20)
    ap.add_argument("--incast", type=int, default=1000)
    args = ap.parse_args(argv)
    if args.case != "all":
        print(json.dumps(one_case(args)), flush=True)
        return
    for case in ("incast", "ring", "a2a"):
        cmd = [sys.executable, __file__, "--case", case, "--k", str(args.k), "--gbps",
               str(args.gbps), "--latency-us", str(args.latency_us), "--routing", args.routing,
               "--bytes", str(args.bytes), "--pair-bytes", str(args.pair_bytes),
               "--incast", str(args.incast)]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()

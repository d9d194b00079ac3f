"""Speed and memory of the flow engine on the three reference workloads (figures go in
docs/flow_engine.md; nothing is asserted).

    python benchmarks/bench_flow.py                 # all cases, k=16, each in a fresh process
    python benchmarks/bench_flow.py --case a2a --k 8

Cases: ``ring`` (ring all-reduce of --bytes over all hosts), ``a2a`` (all-to-all, --pair-bytes
per ordered pair, all at once), ``incast`` (--incast flows into host 0); not part of ``all``:
``a2av`` (all-to-all with a different size per ordered pair, uniform in 64 KiB .. 2 MiB,
seed 1: the engine's known slow point, docs/flow_engine.md "Local repair"; try --k 8). Each case prints
build time, routing+setup, engine loop, Numba compile/cache-load time, events, peak RSS.
``--transport tcp`` runs them with the tcp start-up model.

``session`` (not part of ``all``): the ring all-reduce driven through ``netcore.session.Session``
(each send issued from its last parent's on_done) against the same DAG in batch mode, on
``--engine`` flow or packet; prints the session overhead per transfer (send + completion).

    python benchmarks/bench_flow.py --case session --k 8 --bytes 268435456
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


def all_to_all_v(n: int, seed: int = 1):
    """Every ordered pair, sizes uniform in [64 KiB, 2 MiB): drains never tie."""
    from netcore.schedule import Schedule

    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    size = np.random.default_rng(seed).integers(1 << 16, 1 << 21, len(src))
    return Schedule.from_transfers(src, dst, size)


def incast(m: int, pair_bytes: int):
    from netcore.schedule import Schedule

    return Schedule.from_transfers(np.arange(1, m + 1), np.zeros(m, dtype=np.int64),
                                   np.full(m, pair_bytes))


def session_case(args) -> dict:
    """Ring all-reduce: batch ``simulate`` vs the same DAG issued call by call via Session."""
    from netcore import simulate
    from netcore.flow import engine
    from netcore.session import Session
    from topo.builders import fat_tree

    engine.warm()
    topo = fat_tree(args.k, link_gbps=args.gbps, latency_us=args.latency_us)
    sched = ring_all_reduce(topo.n_hosts, args.bytes)
    opts = {} if args.transport is None else {"transport": args.transport}
    simulate(topo, sched.subset(np.arange(sched.n) < min(64, sched.n)), args.routing,
             engine=args.engine, **opts)  # warm the engine's own caches
    t0 = time.perf_counter()
    batch = simulate(topo, sched, args.routing, engine=args.engine, **opts)
    batch_s = time.perf_counter() - t0

    cptr, cidx = sched.children()
    left = np.diff(sched.dep_ptr).copy()
    src, dst, size = sched.src.tolist(), sched.dst.tolist(), sched.size.tolist()
    t0 = time.perf_counter()
    sess = Session(topo, engine=args.engine, routing=args.routing, **opts)
    node_of = []

    def issue(i):
        sess.send(src[i], dst[i], size[i], on_done=done)
        node_of.append(i)

    def done(tid):
        i = node_of[tid]
        for c in cidx[cptr[i]:cptr[i + 1]].tolist():
            left[c] -= 1
            if left[c] == 0:
                issue(c)

    for i in np.flatnonzero(left == 0).tolist():
        issue(i)
    sess.run()
    res = sess.result()
    sess_s = time.perf_counter() - t0
    n = sched.n_transfers
    return {"case": "session", "engine": args.engine, "transport": args.transport,
            "k": args.k, "transfers": n, "batch_simulate_s": round(batch_s, 3),
            "session_s": round(sess_s, 3),
            "overhead_us_per_transfer": round((sess_s - batch_s) / n * 1e6, 2),
            "session_us_per_transfer": round(sess_s / n * 1e6, 2),
            "advance_calls": sess.calls["advance"],
            "same_makespan": bool(res.makespan == batch.makespan),
            "makespan_s": batch.makespan}


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
    elif args.case == "a2av":
        sched = all_to_all_v(n)
    else:
        if args.incast >= n:
            topo = fat_tree(max(args.k, 16), link_gbps=args.gbps, latency_us=args.latency_us)
        sched = incast(args.incast, args.pair_bytes)
    build_s = time.perf_counter() - t0 - compile_s
    t1 = time.perf_counter()
    opts = {} if args.transport is None else {"transport": args.transport}
    res = simulate(topo, sched, args.routing, engine="flow", **opts)
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
    ap.add_argument("--case", choices=["ring", "a2a", "a2av", "incast", "session", "all"],
                    default="all")
    ap.add_argument("--transport", default=None, help="flow engine transport: fluid | tcp")
    ap.add_argument("--engine", default="flow", help="session case: flow | packet")
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--gbps", type=float, default=400.0)
    ap.add_argument("--latency-us", type=float, default=0.5)
    ap.add_argument("--routing", default="ecmp")
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--pair-bytes", type=int, default=1 << 20)
    ap.add_argument("--incast", type=int, default=1000)
    args = ap.parse_args(argv)
    if args.case == "session":
        print(json.dumps(session_case(args)), flush=True)
        return
    if args.case != "all":
        print(json.dumps(one_case(args)), flush=True)
        return
    for case in ("incast", "ring", "a2a"):
        cmd = [sys.executable, __file__, "--case", case, "--k", str(args.k), "--gbps",
               str(args.gbps), "--latency-us", str(args.latency_us), "--routing", args.routing,
               "--bytes", str(args.bytes), "--pair-bytes", str(args.pair_bytes),
               "--incast", str(args.incast)] + \
            ([] if args.transport is None else ["--transport", args.transport])
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()

"""Cost per transfer of a long ``netcore.session.Session`` (figures go in docs/session.md;
nothing is asserted): does it stay flat as the number of transfers already finished grows?

    python benchmarks/bench_session_long.py                       # both engines, N = 2k 8k 32k
    python benchmarks/bench_session_long.py --engine flow --n 2000 8000 --chains 4

``--chains`` chains of transfers on fat_tree(--k): in each chain, transfer j + 1 is sent from
transfer j's on_done (hosts walk the fabric, every transfer --bytes), and ``pending()`` is
called after every completion, as a system simulator polling its backend would. Each N runs
twice per engine: without faults, then with one switch-to-switch link (on the first transfer's
path) going down at a third of the fault-free makespan and back up at two thirds. Prints, per
run, wall seconds, microseconds per transfer (send + completion + pending()), and the share
of that spent in the engine's ``add_transfers``, ``advance`` and ``pending`` per call (CPU
seconds too: the shared machine's load moves wall time); a cost that grows with N is a per-call
cost linear in the transfers already finished.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def chains(sess, n: int, n_chains: int, nbytes: int, hosts: int):
    """Send ``n`` transfers as ``n_chains`` chains (each sent from its predecessor's on_done),
    calling ``pending()`` after every completion; returns the session's run() time."""
    sent = [0]
    per_chain = -(-n // n_chains)

    def send(c: int, j: int):
        # chain c, step j: hosts spread over the pods, never src == dst
        src = (c * 5 + j * 3) % hosts
        dst = (src + 1 + (j * 7 + c) % (hosts - 1)) % hosts
        sent[0] += 1
        sess.send(src, dst, nbytes, on_done=lambda _tid: done(c, j))

    def done(c: int, j: int):
        sess.pending()
        if j + 1 < per_chain and sent[0] < n:
            send(c, j + 1)

    for c in range(min(n_chains, n)):
        send(c, 0)
    return sess.run()


def timed(obj, name: str, acc: dict):
    """Wrap obj.name to add its CPU time and calls to acc[name]."""
    fn = getattr(obj, name)
    acc[name] = [0.0, 0]

    def wrapper(*a, **k):
        t0 = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            acc[name][0] += time.process_time() - t0
            acc[name][1] += 1
    setattr(obj, name, wrapper)


def one_run(engine: str, n: int, args, faults=None) -> dict:
    from netcore.session import Session
    from topo.builders import fat_tree

    topo = fat_tree(args.k, link_gbps=args.gbps, latency_us=args.latency_us)
    opts = {} if args.transport is None else {"transport": args.transport}
    t0, c0 = time.perf_counter(), time.process_time()
    sess = Session(topo, engine=engine, routing=args.routing, faults=faults, **opts)
    eng = {}
    for name in ("add_transfers", "advance", "pending"):
        timed(sess._eng, name, eng)
    chains(sess, n, args.chains, args.bytes, topo.n_hosts)
    res = sess.result()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"engine": engine, "faults": faults is not None, "n": n, "wall_s": round(wall, 3),
           "us_per_transfer": round(wall / n * 1e6, 1),
           "cpu_us_per_transfer": round(cpu / n * 1e6, 1)}
    for name, (s, calls) in eng.items():  # the engine driver's share, CPU us per call
        out[f"{name}_us"] = round(s / max(calls, 1) * 1e6, 2)
    out.update({"advance_calls": sess.calls["advance"], "makespan_s": float(res.makespan),
                "stranded": int(res.n_stranded), "end_checksum": float(np.nansum(res.end))})
    return out


def fault_for(args, makespan: float):
    """A switch-to-switch hop of the first transfer's path: down at makespan / 3, up at 2/3."""
    from topo.builders import fat_tree
    from topo.faults import LinkFaults
    from topo.routing import Routing

    topo = fat_tree(args.k, link_gbps=args.gbps, latency_us=args.latency_us)
    p = Routing(topo, args.routing).paths(np.array([0]), np.array([1 + 7 % (topo.n_hosts - 1)]),
                                          flow_id=np.array([0]))
    hop = int(np.asarray(p.link)[int(p.ptr[0]) + 1])
    u, v = int(topo.dlink_src[hop]), int(topo.dlink_dst[hop])
    return LinkFaults.from_records(topo, [
        {"link": [u, v], "kind": "down", "at_us": makespan / 3 * 1e6},
        {"link": [u, v], "kind": "up", "at_us": makespan * 2 / 3 * 1e6}])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", nargs="+", default=["flow", "packet"])
    ap.add_argument("--n", type=int, nargs="+", default=[2000, 8000, 32000])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--gbps", type=float, default=100.0)
    ap.add_argument("--latency-us", type=float, default=1.0)
    ap.add_argument("--routing", default="ecmp")
    ap.add_argument("--bytes", type=int, default=1 << 16)
    ap.add_argument("--transport", default=None, help="engine transport (default: its own)")
    ap.add_argument("--no-faults", action="store_true", help="skip the runs with a fault")
    args = ap.parse_args(argv)
    for engine in args.engine:
        one_run(engine, 64, args)  # compile / load caches outside the figures
        for n in args.n:
            plain = one_run(engine, n, args)
            print(json.dumps(plain), flush=True)
            if not args.no_faults:
                print(json.dumps(one_run(engine, n, args, fault_for(args, plain["makespan_s"]))),
                      flush=True)


if __name__ == "__main__":
    main()

"""Side-by-side instrumentation of one scenario: ns-3 vs the packet engine (and the flow engine).

    python -m validation.ns3.compare SCENARIO.toml [--flows N] [--links N] [--cwnd NODE ...]

Prints per-transfer start/end on each side and their difference (largest first), per directed
link the bytes sent, busy time and deepest queue on each side (largest differences first), and
optionally ns-3's congestion-window trace of chosen transfers. This is how each mechanism in
docs/ns3.md ("What the suite found") was located; nothing here feeds the results table.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def run_both(path, trace_links=None, trace_cwnd=None, packet_overrides=None):
    from netcore.api import simulate
    from netcosim.commands.ns3 import scenario_engine_options
    from netcosim.scenario import load_scenario
    from validation.ns3 import run_ns3
    from validation.ns3.support import check_options
    from validation.ns3_suite import _engine_options

    sc = load_scenario(path)
    prep = sc.with_full_detail().prepare(check_engine=False)
    opts = check_options(scenario_engine_options(sc))
    ns3 = run_ns3(prep.topology, prep.schedule, prep.routing, prep.faults, seed=sc.seed,
                  trace_links=trace_links, trace_cwnd=trace_cwnd, **opts)
    popts = {**_engine_options(sc, "packet"), **(packet_overrides or {})}
    pk = simulate(prep.topology, prep.schedule, prep.routing, prep.faults, engine="packet",
                  seed=sc.seed, **popts)
    return sc, prep, ns3, pk


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.ns3.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario")
    ap.add_argument("--flows", type=int, default=20, help="transfers to list")
    ap.add_argument("--links", type=int, default=12, help="directed links to list")
    ap.add_argument("--cwnd", type=int, nargs="*", default=None, help="trace these transfers")
    args = ap.parse_args(argv)
    sc, prep, a, b = run_both(args.scenario, trace_cwnd=args.cwnd)
    s, t = prep.schedule, prep.topology
    print(f"{sc.name}: makespan ns-3 {a.makespan * 1e6:.3f} us, packet {b.makespan * 1e6:.3f} us "
          f"({(b.makespan - a.makespan) / a.makespan:+.2%})")
    d = b.end - a.end
    order = np.argsort(-np.abs(np.nan_to_num(d)))[:args.flows]
    print("node kind src dst bytes | ns-3 start end | packet start end | end diff (us)")
    for i in order:
        print(f"{i:5d} {int(s.kind[i])} {int(s.src[i]):3d} {int(s.dst[i]):3d} {int(s.size[i]):9d} | "
              f"{a.start[i] * 1e6:9.3f} {a.end[i] * 1e6:9.3f} | {b.start[i] * 1e6:9.3f} "
              f"{b.end[i] * 1e6:9.3f} | {d[i] * 1e6:+8.3f}")
    qa = a.link_extra["queue_max_packets"]
    qb = b.link_extra.get("queue_max_packets", np.zeros_like(qa))
    score = np.abs(a.link_busy - b.link_busy) + 1e-9 * np.abs(qa - qb)
    print("dlink u->v | ns-3 bytes busy_us qmax | packet bytes busy_us qmax")
    for l in np.argsort(-score)[:args.links]:
        print(f"{l:4d} {int(t.dlink_src[l]):3d}->{int(t.dlink_dst[l]):3d}"
              f" | {a.link_bytes[l]:12.0f} {a.link_busy[l] * 1e6:9.3f} {int(qa[l]):5d}"
              f" | {b.link_bytes[l]:12.0f} {b.link_busy[l] * 1e6:9.3f} {int(qb[l]):5d}")
    if args.cwnd:
        tc = a.info["trace_cwnd"]
        for i in args.cwnd:
            m = tc["node"] == i
            print(f"ns-3 cwnd of node {i}: {m.sum()} changes; last {tc['cwnd'][m][-5:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

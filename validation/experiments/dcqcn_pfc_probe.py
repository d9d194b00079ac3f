"""Where dcqcn loses its time on small all-to-alls (issue 17, the fat_tree k=8 64 KiB miss):
`python -m validation.experiments.dcqcn_pfc_probe [--cases ...] [--no-chain]`.

1. For development cases (held-out ones are refused), one packet run each under the harness's
   dcqcn options: flow-completion quantiles against the fluid model's, and per link class
   (host up / down, switch-to-switch per layer and direction) the fraction of the run paused
   by PFC, ECN marks, busy fraction and mean queue.
2. The *chain* representative against the star: n leaves of one host each on one spine (every
   link of a path carries the same flows: switch stages without fan-out) and n hosts on one
   switch, 0.5 us links, direct all-to-all; efficiency = fluid / packet makespan. Neither is
   a case of validation/alltoall_cases.py. (docs/flow_engine.md "The contention model",
   third round.)
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from validation.alltoall_cases import CASES, FABRICS, PACKET_OPTIONS

DEFAULT = ("ft8_direct_64K", "ft4_direct_64K", "ls1_direct_64K")


def link_classes(topo):
    H = topo.n_hosts
    out = {}
    for i in range(topo.n_dlinks):
        if topo.dlink_src[i] < H:
            k = "host up"
        elif topo.dlink_dst[i] < H:
            k = "host down"
        else:
            k = f"switch layer {topo.link_layer[i // 2]} {'up' if i % 2 == 0 else 'down'}"
        out.setdefault(k, []).append(i)
    return {k: np.array(v) for k, v in sorted(out.items())}


def diagnose(name: str) -> None:
    from netcosim.scenario import Scenario
    from validation.alltoall_engines import run_one

    c = CASES[name]
    pk, _ = run_one(c, "packet", PACKET_OPTIONS["dcqcn"])
    fl, _ = run_one(c, "flow", {"transport": "fluid"})
    topo = Scenario.from_dict({"topology": FABRICS[c.fabric].topology}).build_topology()
    span = pk.makespan
    q = (0.1, 0.5, 0.9, 0.99, 1.0)
    print(f"{name}: packet {pk.makespan * 1e6:,.1f} us, fluid {fl.makespan * 1e6:,.1f} us, "
          f"ECN marks {int(pk.link_extra['ecn_marks'].sum()):,}")
    e = pk.end[np.isfinite(pk.end)]
    print("  completion quantiles (us) packet", [round(float(np.quantile(e, x)) * 1e6, 1)
                                                 for x in q],
          "fluid", [round(float(np.quantile(fl.end, x)) * 1e6, 1) for x in q])
    for k, ix in link_classes(topo).items():
        print(f"  {k:22s} links {len(ix):4d}: paused {pk.link_extra['pause_s'][ix].mean() / span:.3f}"
              f" (max {pk.link_extra['pause_s'][ix].max() / span:.3f}), ECN marks "
              f"{int(pk.link_extra['ecn_marks'][ix].sum()):,}, busy "
              f"{pk.link_busy[ix].mean() / span:.3f}, mean queue "
              f"{pk.link_extra['queue_mean_bytes'][ix].mean():,.0f} B")


def chain(gbps=(100.0, 400.0), hosts=(16, 32, 128), sizes=(64 << 10, 256 << 10, 1 << 20)):
    from validation.contention_table import LAT_US, PACKET, _all_to_all

    print("chain vs star (dcqcn), efficiency = fluid / packet makespan")
    for g in gbps:
        for n in hosts:
            for s in sizes:
                out = []
                for what, topo in (
                        ("star", {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": n,
                                  "spines": 1, "link_gbps": g, "latency_us": LAT_US}),
                        ("chain", {"kind": "leaf_spine", "leaves": n, "hosts_per_leaf": 1,
                                   "spines": 1, "oversubscription": 1.0, "link_gbps": g,
                                   "latency_us": LAT_US})):
                    f = _all_to_all(topo, n, s, "flow", {}, what)
                    p = _all_to_all(topo, n, s, "packet", PACKET["dcqcn"], what)
                    out.append(f"{what} {f / p:.3f}")
                print(f"  {g:g} Gb/s, {n - 1} flows, {s >> 10} KiB: " + ", ".join(out),
                      flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*", default=list(DEFAULT))
    ap.add_argument("--no-chain", action="store_true")
    args = ap.parse_args(argv)
    bad = [n for n in args.cases if CASES[n].held_out]
    if bad:
        raise SystemExit(f"held-out cases refused: {bad}")
    from netcore.flow import engine as flow_engine

    flow_engine.warm()
    for n in args.cases:
        diagnose(n)
    if not args.no_chain:
        chain()
    return 0


if __name__ == "__main__":
    sys.exit(main())

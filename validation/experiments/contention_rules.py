"""Rule variants of the contention model on the development set (issue 17):
`python -m validation.experiments.contention_rules [--cases ...] [--variants ...]`.

A variant switches the module's ``*_RULE`` flags of netcore/flow/contention.py, or names one
of the rejected alternatives in ``PATCHES`` below (rules that are not in the module: they
replace one of its functions for the run), e.g. ``--variants base DCQCN_INCAST_RULE=0
incast_full``.
Packet makespans come from validation/results/alltoall_engines.csv where the case is there and
from validation/experiments/contention_rules_packet.json otherwise (measured here once with the
harness's packet options, run_case's guard). Only development cases are accepted: the held-out
cases of validation/alltoall_cases.py are refused, so no variant is chosen on them.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from validation.alltoall_cases import CASES, PACKET_OPTIONS
from validation.alltoall_engines import GUARD, run_one

HERE = Path(__file__).resolve().parent
CACHE = HERE / "contention_rules_packet.json"
CSV = HERE.parent / "results" / "alltoall_engines.csv"


def _incast_weight(weight):
    """A replacement of contention.incast_efficiency with another weight a(q, flows) of the
    incast representative against the star's."""
    def patch(C):
        def incast_efficiency(transport, flows, gbps, nbytes, q):
            star = C.efficiency(transport, flows, gbps, nbytes)
            tab = C.incast_table(transport)
            flows = np.asarray(flows, dtype=np.float64)
            inc = np.minimum(C._interp3(tab, np.log(np.maximum(flows, 1.0)),
                                        np.log(np.asarray(gbps, dtype=np.float64)),
                                        np.log(np.maximum(np.asarray(nbytes, np.float64), 1.0))),
                             1.0)
            a = np.clip(weight(np.maximum(q, 1.0), np.maximum(flows, 2.0)), 0.0, 1.0)
            return np.where(flows <= 1.0, 1.0, star + a * (inc - star))
        C.incast_efficiency = incast_efficiency
    return patch


def _incast_seeds(seeds):
    """The incast representative measured with other packet seeds (its table rebuilt here)."""
    def patch(C):
        from validation import contention_table as T

        key = tuple(seeds)
        if key not in _CACHE:
            old = T.INCAST_SEEDS
            T.INCAST_SEEDS = key
            try:
                d = T.build_incast(log=lambda s: None)
            finally:
                T.INCAST_SEEDS = old
            _CACHE[key] = (np.log(np.array(d["flows"], dtype=np.float64)),
                           np.log(np.array(d["gbps"], dtype=np.float64)),
                           np.log(np.array(d["bytes"], dtype=np.float64)),
                           np.array(d["eff"]["dcqcn"], dtype=np.float64))
        C.incast_table = lambda transport: _CACHE[key] if transport == "dcqcn" else None
    return patch


def _tcp_two_tier(C):
    """tcp: a host link's efficiency moves from the star's toward the two-tier
    representative's (contention_table.two_tier at rho = 1: 4 leaves x 8 hosts, 8 spines,
    one speed, 1 us) by the share of its transfers whose path crosses a switch-to-switch
    link; the ratio two-tier / star (32 hosts) is measured here at 100 and 400 Gb/s and
    64 KiB / 256 KiB / 1 MiB and interpolated in log gbps, log bytes (clamped)."""
    from netcore.flow import _kernels as K
    from validation import contention_table as T

    if "tt" not in _CACHE:
        gb, sz = (100.0, 400.0), (64 << 10, 256 << 10, 1 << 20)
        r = np.array([[(T.two_tier(1, g, s, "flow", {})
                        / T.two_tier(1, g, s, "packet", T.PACKET["tcp"]))
                       / (T.star(32, g, s, "flow", {}) / T.star(32, g, s, "packet",
                                                                 T.PACKET["tcp"]))
                       for s in sz] for g in gb])
        _CACHE["tt"] = (np.log(gb), np.log(sz), r)
        print("  two-tier / star (tcp):", np.round(r, 3).tolist(), flush=True)
    lg, lb, r = _CACHE["tt"]
    real = C.link_efficiency

    def link_efficiency(st, topology, transport):
        eff = real(st, topology, transport)
        if transport != "tcp":
            return eff
        m = st.n_ent
        link = st.EI[:m, K.ELINK]
        flow = st.EI[:m, K.EFLOW]
        w = np.maximum(st.ew[:m], 1.0)
        ln = st.NI[flow, K.PLEN]
        L = len(eff)
        share = np.bincount(link, weights=w * (ln > 2), minlength=L) / np.maximum(
            np.bincount(link, weights=w, minlength=L), 1e-300)
        per = np.bincount(link, weights=st.ew[:m] * st.payload[flow], minlength=L) / \
            np.maximum(np.bincount(link, weights=w, minlength=L), 1.0)
        host = (topology.dlink_src < topology.n_hosts) & (eff < 1.0)
        i, a = C._axis(lg, np.log(st.bw[host] * 8e-9))
        j, b = C._axis(lb, np.log(np.maximum(per[host], 1.0)))
        i1, j1 = np.minimum(i + 1, len(lg) - 1), np.minimum(j + 1, len(lb) - 1)
        rr = ((1 - a) * (1 - b) * r[i, j] + a * (1 - b) * r[i1, j] + (1 - a) * b * r[i, j1]
              + a * b * r[i1, j1])
        e = eff[host]
        eff[host] = np.minimum(1.0, e + share[host] * (e * rr - e))
        return eff
    C.link_efficiency = link_efficiency


def _dcqcn_tier2(restricted: bool):
    """dcqcn: the second round's rejected two-tier representative (commit 51b3ab1 of the
    a2a-rules branch), rebuilt here: the star's all-to-all on a non-blocking leaf-spine of
    n / 8 leaves x 8 hosts and 8 spines (0.5 us), n = 16-128, 100 / 400 / 900 Gb/s. A shared
    link's star factor becomes (1 - s) star + s two_tier, s = the share of its transfers
    whose path crosses a switch-to-switch link (``restricted``: one of a layer whose load
    ratio is <= 1), on top of the adopted rules."""
    def patch(C):
        from validation import contention_table as T

        if "tier2" not in _CACHE:
            hosts, gb = (16, 32, 64, 128), (100.0, 400.0, 900.0)
            eff = np.ones((len(hosts), len(gb), len(T.SIZES)))
            for i, n in enumerate(hosts):
                for j, g in enumerate(gb):
                    last = None
                    for k, sz in enumerate(T.SIZES):
                        if n * (n - 1) * sz > T.BUDGET:
                            eff[i, j, k] = last
                            continue
                        topo = {"kind": "leaf_spine", "leaves": n // 8, "hosts_per_leaf": 8,
                                "spines": 8, "oversubscription": 1.0, "link_gbps": g,
                                "latency_us": T.LAT_US}
                        last = min(1.0, T._all_to_all(topo, n, sz, "flow", {}, "t2")
                                   / T._all_to_all(topo, n, sz, "packet", T.PACKET["dcqcn"],
                                                   "t2"))
                        eff[i, j, k] = last
            _CACHE["tier2"] = (np.log([n - 1.0 for n in hosts]), np.log(gb),
                               np.log(np.array(T.SIZES, dtype=np.float64)), eff)
            print("  two-tier (dcqcn) 400 Gb/s, 64 KiB:", np.round(eff[:, 1, 0], 3).tolist(),
                  flush=True)
        tab = _CACHE["tier2"]
        real = C.link_efficiency

        def link_efficiency(st, topology, transport):
            eff = real(st, topology, transport)
            if transport != "dcqcn" or st.n_ent == 0:
                return eff
            ls = C.link_stats(st, topology)
            link, flow = ls.link, ls.flow
            wt, flows, tot, per, gbps = ls.wt, ls.flows, ls.tot, ls.per, ls.gbps
            L = len(eff)
            sw = ls.switch_link
            if restricted:
                ratio = C.layer_load_ratio(topology, st, ls)
                sw = sw & (ratio <= 1.0)
            crosses = np.bincount(flow, weights=sw[link], minlength=st.n) > 0
            q = np.bincount(link, weights=wt * crosses[flow], minlength=L) / np.maximum(
                tot, 1.0)
            use = (flows > 1) & (eff < 1.0)
            star = C.efficiency("dcqcn", flows[use], gbps[use], per[use])
            t2 = np.minimum(1.0, C._interp3(tab, np.log(np.maximum(flows[use], 1.0)),
                                            np.log(gbps[use]),
                                            np.log(np.maximum(per[use], 1.0))))
            eff[use] = np.minimum(1.0, eff[use] * ((1 - q[use]) + q[use] * t2 / star))
            return eff
        C.link_efficiency = link_efficiency
    return patch


_CACHE = {}
# rejected alternatives of the adopted rules (docs/flow_engine.md "The contention model")
PATCHES = {
    # the blend linear in log q between the star (q = 1) and the incast (q = flows)
    "incast_logq": _incast_weight(lambda q, f: np.log(q) / np.log(f)),
    # the incast representative's value on every receiver link with q > 1 (no blend)
    "incast_full": _incast_weight(lambda q, f: np.ones_like(q)),
    # the blend linear in q instead of log q: a = (q - 1) / (flows - 1)
    "incast_linear": _incast_weight(lambda q, f: (q - 1.0) / (f - 1.0)),
    # weight 1 - 1/q, blended in efficiency rather than in time
    "incast_share": _incast_weight(lambda q, f: 1.0 - 1.0 / q),
    # the incast table from one packet run (seed 1) instead of the mean of three
    "incast_seed1": _incast_seeds((1,)),
    # tcp: host links of transfers that cross the core take the two-tier representative
    "tcp_two_tier": _tcp_two_tier,
    # dcqcn: the second round's two-tier representative, on top of the adopted rules
    "dcqcn_tier2": _dcqcn_tier2(False),
    "dcqcn_tier2_restricted": _dcqcn_tier2(True),
}


def packet_makespans(names, transports):
    got = {}
    if CSV.exists():
        for r in csv.DictReader(open(CSV)):
            if r["packet_makespan_us"]:
                got[(r["case"], r["transport"])] = float(r["packet_makespan_us"])
            else:
                got[(r["case"], r["transport"])] = None
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    for k, v in cache.items():
        c, tr = k.split("|")
        got.setdefault((c, tr), v)
    dirty = False
    for n in names:
        for tr in transports:
            if (n, tr) in got:
                continue
            fl, _ = run_one(CASES[n], "flow", {"transport": "fluid"})
            res, _ = run_one(CASES[n], "packet",
                             {**PACKET_OPTIONS[tr], "max_time_s": GUARD * fl.makespan})
            v = None if res.stranded.any() else float(res.makespan) * 1e6
            print(f"  packet {n} {tr}: {v}", flush=True)
            got[(n, tr)] = v
            cache[f"{n}|{tr}"] = v
            dirty = True
    if dirty:
        CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*", default=None)
    ap.add_argument("--transport", default="tcp")
    ap.add_argument("--variants", nargs="*", default=["base"])
    args = ap.parse_args(argv)
    names = args.cases or [n for n, c in CASES.items() if not c.held_out]
    bad = [n for n in names if CASES[n].held_out]
    if bad:
        raise SystemExit(f"held-out cases refused: {bad}")
    from netcore.flow import contention as C

    pk = packet_makespans(names, [args.transport])
    res = {}
    defaults = {k: getattr(C, k) for k in dir(C) if k.endswith("_RULE")}
    funcs = {k: getattr(C, k) for k in ("incast_efficiency", "incast_table",
                                          "link_efficiency")}
    for v in args.variants:
        # a variant: "base" (the module as committed) or a comma list of NAME=0|1 over the
        # module's *_RULE switches (each from the committed defaults) and PATCHES names
        for k, val in {**defaults, **funcs}.items():
            setattr(C, k, val)
        if v != "base":
            for item in v.split(","):
                if item in PATCHES:
                    PATCHES[item](C)
                    continue
                key, _, val = item.partition("=")
                if key not in defaults:
                    raise SystemExit(f"unknown switch {key} (known: {', '.join(defaults)}; "
                                     f"patches: {', '.join(PATCHES)})")
                setattr(C, key, val not in ("0", "false", "False", ""))
        errs = []
        for n in names:
            r, _ = run_one(CASES[n], "flow", {"transport": "fluid", "contention": args.transport})
            p = pk.get((n, args.transport))
            e = None if p is None else (float(r.makespan) * 1e6 - p) / p
            res.setdefault(n, {})[v] = e
            if e is not None:
                errs.append(e)
        print(f"{v}: median {statistics.median(errs):+.1%} worst {max(errs, key=abs):+.1%} "
              f"within10 {sum(abs(e) <= .1 for e in errs)}/{len(errs)}", flush=True)
    print("case | " + " | ".join(args.variants))
    for n in names:
        print(n + " | " + " | ".join("n/a" if res[n][v] is None else f"{res[n][v]:+.1%}"
                                     for v in args.variants))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The many-to-many efficiency table of the flow engine's ``contention`` model (issue 17):
`python -m validation.contention_table [--out FILE]`.

A *reduced representative* of many-to-many contention, measured once per packet transport by
the packet engine: ``n`` hosts on one switch (a leaf_spine with one leaf; 0.5 us links of
``gbps``) run a direct all-to-all of ``size`` bytes per pair, so every host link carries
``n - 1`` flows, in each direction. The efficiency is the fluid makespan of that star divided
by the packet engine's (1.0: the transport keeps the host links as busy as max-min; the fluid
star makespan is its host-link bound). It is a property of the transport (its windows, FIFO
NIC queue, rate cuts and timers) at a given link speed, fan and flow size, not of any fabric:
no all-to-all case of validation/alltoall_cases.py is run or looked at here.

Grid: flows per link ``n - 1`` for n in 2..128, link speeds 100 / 400 / 900 / 7200 Gb/s
(the speeds of the fabrics in docs/scenarios.md's examples), per-pair sizes 64 KiB to 4 MiB;
points whose star would move more than 16 GB are not run and take the value of the largest
size measured at that fan and speed (the efficiency has flattened by then). Packet options
are the harness's (validation/alltoall_cases.py): ``tcp`` MTU 9000 with buffers that never
drop, ``dcqcn`` MTU 9000 with its defaults. Writes netcore/flow/contention_table.json (read by
netcore/flow/contention.py). Takes about 13 seconds on the shared 2-core machine.

A second representative (dcqcn only) measures what a link faster than the receiver links
behind it loses: see ``build_mismatch``. A third (tcp only) measures what a structurally
oversubscribed core link keeps: see ``build_oversub`` (an 8 + 8-host dumbbell). A fourth
(dcqcn only) measures a receiver link fed by otherwise idle senders: see ``build_incast``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "netcore" / "flow" / "contention_table.json"
HOSTS = (2, 4, 8, 16, 32, 64, 128)
GBPS = (100.0, 400.0, 900.0, 7200.0)
SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20)
BUDGET = 16e9  # bytes moved by one star run at most
PACKET = {"tcp": {"transport": "tcp", "mtu": 9000, "buffer_packets": 10_000_000},
          "dcqcn": {"transport": "dcqcn", "mtu": 9000}}
LAT_US = 0.5


def _all_to_all(topology: dict, n_hosts: int, size: int, engine: str, opts: dict,
                what: str) -> float:
    """Makespan (s) of a direct all-to-all of ``size`` bytes per pair on a fabric."""
    d = {"name": "representative", "seed": 1, "topology": topology,
         "routing": {"policy": "ecmp"}, "engine": {"kind": engine, **opts},
         "workload": {"kind": "collective", "op": "all_to_all", "algorithm": "direct",
                      "protocol": "simple", "step_latency_us": 0, "bytes": size * n_hosts}}
    return _makespan(d, engine, f"{what} {size} B")


def _makespan(d: dict, engine: str, what: str, seed: int = 1) -> float:
    """Makespan (s) of scenario table ``d`` on ``engine``, as `netcosim run` would run it."""
    from netcore.api import simulate
    from netcosim.scenario import Scenario

    p = Scenario.from_dict(d, default_name=d["name"]).prepare()
    res = simulate(p.topology, p.schedule, p.routing, p.faults, engine=engine, seed=seed,
                   validate=False, **p.engine_options)
    if res.stranded.any():
        raise RuntimeError(f"{what} on {engine}: unfinished")
    return float(res.makespan)


def star(n: int, gbps: float, size: int, engine: str, opts: dict) -> float:
    """Makespan (s) of the star all-to-all on ``engine``."""
    return _all_to_all({"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": n, "spines": 1,
                        "link_gbps": gbps, "latency_us": LAT_US}, n, size, engine, opts,
                       f"star n={n} {gbps} Gb/s")


# second representative (dcqcn only): a non-blocking leaf-spine of 4 leaves x 8 hosts with
# 8 / RHO spines, so that its leaf-spine links are RHO times as fast as the host links; the
# efficiency relative to RHO = 1 (8 spines, one link speed) is what a fast link feeding slower
# receiver links loses (PFC pauses a fat link for every receiver behind it; the star has one
# link speed and cannot show it)
RHO = (1, 2, 4, 8)
MISMATCH_GBPS = (100.0, 400.0)
MISMATCH_LAT_US = 1.0


def two_tier(rho: int, gbps: float, size: int, engine: str, opts: dict) -> float:
    """Makespan (s) of the speed-mismatch representative's all-to-all on ``engine``."""
    return _all_to_all({"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8,
                        "spines": 8 // rho, "oversubscription": 1.0, "link_gbps": gbps,
                        "latency_us": MISMATCH_LAT_US}, 32, size, engine, opts,
                       f"rho={rho} {gbps} Gb/s")


def build_mismatch(sizes=SIZES, log=print) -> dict:
    out = {"rho": list(RHO), "gbps": list(MISMATCH_GBPS), "bytes": list(sizes),
           "latency_us": MISMATCH_LAT_US, "eff": {}}
    for tr in ("dcqcn",):
        m = [[[1.0] * len(sizes) for _ in MISMATCH_GBPS] for _ in RHO]
        for j, g in enumerate(MISMATCH_GBPS):
            for k, s in enumerate(sizes):
                base = None
                for i, rho in enumerate(RHO):
                    e = two_tier(rho, g, s, "flow", {}) / two_tier(rho, g, s, "packet",
                                                                   PACKET[tr])
                    base = e if base is None else base
                    m[i][j][k] = round(min(1.0, e / base), 4)
                    log(f"{tr} rho={rho} {g:g} Gb/s {s >> 10} KiB: efficiency {e:.3f}, "
                        f"relative to rho=1 {m[i][j][k]:.3f}")
        out["eff"][tr] = m
    return out


# third representative (tcp): an oversubscribed core. A dumbbell: two leaves of DUMBBELL_N
# hosts joined through one spine (1 us links), every host sending ``size`` bytes to every
# host of the other leaf (and nothing to its own leaf), so each core link carries N^2
# transfers and each host link N; the leaf-spine links run at N x gbps / OVER, so the core
# link is OVER times as loaded (in bytes per bandwidth) as the host links: the fluid
# makespan is the core's. The efficiency fluid / packet at OVER > 1 is what a core link that
# sets the time keeps under the transport (start-up and tail of many flows through one FIFO
# port, not a NIC queue). At OVER = 1 the host links bind as much as the core, and the loss
# there is the host links' (the star's): the table holds 1.0 there by construction.
OVER = (1.0, 1.25, 1.5, 2.0, 4.0, 8.0)
OVER_GBPS = (100.0, 400.0)
DUMBBELL_N = 8
OVER_LAT_US = 1.0


def dumbbell(over: float, gbps: float, size: int, engine: str, opts: dict,
             n: int = DUMBBELL_N) -> float:
    """Makespan (s) of the oversubscribed dumbbell's cross traffic on ``engine``."""
    flows = [{"src": i, "dst": n + j, "bytes": size} for i in range(n) for j in range(n)]
    flows += [{"src": n + j, "dst": i, "bytes": size} for i in range(n) for j in range(n)]
    d = {"name": "dumbbell", "seed": 1, "routing": {"policy": "ecmp"},
         "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": n, "spines": 1,
                      "oversubscription": over, "link_gbps": gbps,
                      "latency_us": OVER_LAT_US},
         "engine": {"kind": engine, **opts}, "workload": {"kind": "flows", "flows": flows}}
    return _makespan(d, engine, f"dumbbell over={over} {gbps} Gb/s {size} B")


def build_oversub(sizes=SIZES, transports=("tcp",), log=print) -> dict:
    out = {"over": list(OVER), "gbps": list(OVER_GBPS), "bytes": list(sizes),
           "hosts_per_side": DUMBBELL_N, "latency_us": OVER_LAT_US, "eff": {},
           "measured_eff": {}}
    for tr in transports:
        m = [[[1.0] * len(sizes) for _ in OVER_GBPS] for _ in OVER]
        raw = [[[1.0] * len(sizes) for _ in OVER_GBPS] for _ in OVER]
        for i, over in enumerate(OVER):
            for j, g in enumerate(OVER_GBPS):
                for k, s in enumerate(sizes):
                    e = dumbbell(over, g, s, "flow", {}) / dumbbell(over, g, s, "packet",
                                                                    PACKET[tr])
                    raw[i][j][k] = round(min(1.0, e), 4)
                    m[i][j][k] = 1.0 if over <= 1.0 else raw[i][j][k]
                    log(f"{tr} over={over:g} {g:g} Gb/s {s >> 10} KiB: efficiency {e:.3f}")
        out["eff"][tr] = m
        out["measured_eff"][tr] = raw
    return out


# fourth representative (dcqcn): an incast. ``flows`` senders on one switch (0.5 us links, as
# the star) each send ``size`` bytes to one receiver and nothing else, so the receiver's link
# carries ``flows`` transfers whose senders are otherwise idle: every flow starts at line rate,
# the receiver's port marks and PFC-pauses, the rate cuts leave the link idle once the queue has
# drained and the recovery is timer-paced (rate_timer_us, rate_ai_gbps). In the star's
# all-to-all every sender's NIC is shared by ``flows`` receivers, so no flow can outrun its
# share: that is the other end of the same axis (docs/flow_engine.md "The contention model",
# the incast rule). Efficiency = fluid / packet makespan, the mean over INCAST_SEEDS packet
# runs (the ECN marks are random and one run's value jumps by up to 0.2 between sizes).
# Grid: the star's fans, speeds and sizes, and 16 MiB (a hot receiver's flows are large).
INCAST_SEEDS = (1, 2, 3)
INCAST_SIZES = SIZES + (16 << 20,)


def incast(flows: int, gbps: float, size: int, engine: str, opts: dict, seed: int = 1) -> float:
    """Makespan (s) of ``flows`` senders into one receiver on a star, on ``engine``."""
    d = {"name": "incast", "seed": seed, "routing": {"policy": "ecmp"},
         "topology": {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": flows + 1,
                      "spines": 1, "link_gbps": gbps, "latency_us": LAT_US},
         "engine": {"kind": engine, **opts},
         "workload": {"kind": "flows",
                      "flows": [{"src": i, "dst": 0, "bytes": size}
                                for i in range(1, flows + 1)]}}
    return _makespan(d, engine, f"incast {flows} flows {gbps} Gb/s {size} B", seed=seed)


def build_incast(hosts=HOSTS, gbps=GBPS, sizes=INCAST_SIZES, transports=("dcqcn",),
                 log=print) -> dict:
    fans = [n - 1 for n in hosts]
    out = {"flows": fans, "gbps": list(gbps), "bytes": list(sizes), "latency_us": LAT_US,
           "seeds": list(INCAST_SEEDS), "eff": {}}
    for tr in transports:
        m = [[[1.0] * len(sizes) for _ in gbps] for _ in fans]
        for i, f in enumerate(fans):
            for j, g in enumerate(gbps):
                for k, s in enumerate(sizes):
                    fl = incast(f, g, s, "flow", {})
                    e = sum(fl / incast(f, g, s, "packet", PACKET[tr], seed=sd)
                            for sd in INCAST_SEEDS) / len(INCAST_SEEDS)
                    m[i][j][k] = round(min(1.0, e), 4)
                    log(f"{tr} incast {f} flows {g:g} Gb/s {s >> 10} KiB: efficiency {e:.3f}")
        out["eff"][tr] = m
    return out


def build(hosts=HOSTS, gbps=GBPS, sizes=SIZES, log=print) -> dict:
    table = {"flows": [n - 1 for n in hosts], "gbps": list(gbps), "bytes": list(sizes),
             "latency_us": LAT_US, "packet_options": PACKET, "eff": {}, "measured": {}}
    for tr, opts in PACKET.items():
        eff = [[[None] * len(sizes) for _ in gbps] for _ in hosts]
        meas = [[[False] * len(sizes) for _ in gbps] for _ in hosts]
        for i, n in enumerate(hosts):
            for j, g in enumerate(gbps):
                last = None
                for k, s in enumerate(sizes):
                    if n * (n - 1) * s > BUDGET:
                        eff[i][j][k] = last
                        continue
                    t0 = time.perf_counter()
                    f = star(n, g, s, "flow", {})
                    p = star(n, g, s, "packet", opts)
                    last = round(min(1.0, f / p), 4)
                    eff[i][j][k] = last
                    meas[i][j][k] = True
                    log(f"{tr} n={n} {g:g} Gb/s {s >> 10} KiB: fluid {f * 1e6:,.1f} us, packet "
                        f"{p * 1e6:,.1f} us, efficiency {last:.3f} [{time.perf_counter() - t0:.1f} s]")
        table["eff"][tr] = eff
        table["measured"][tr] = meas
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.contention_table", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    from netcore.flow import engine as flow_engine

    flow_engine.warm()
    t0 = time.perf_counter()
    table = build(log=lambda s: print(s, flush=True))
    table["mismatch"] = build_mismatch(log=lambda s: print(s, flush=True))
    table["oversub"] = build_oversub(log=lambda s: print(s, flush=True))
    table["incast"] = build_incast(log=lambda s: print(s, flush=True))
    table["generated_by"] = "python -m validation.contention_table"
    Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {args.out} [{time.perf_counter() - t0:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

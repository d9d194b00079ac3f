"""Tie-order experiment: jitter every link latency, then run ns-3 and the packet engine on the
same jittered fabric (docs/ns3.md, mechanism 4).

    PYTHONPATH=. python validation/experiments/tie_jitter.py SCENARIO [--jitter 0.001]
        [--seeds 1 2 3] [--save DIR] [--no-ns3]

On the suite's symmetric fabrics many events fall on the same picosecond, and the order in
which a simulator handles them decides which frame waits. Multiplying each link's latency by
(1 + U(-j, j)) removes those exact ties; if ns-3 and the packet engine then agree, what they
disagreed on before was tie order, not a model mechanism.

Jitter is drawn **per physical link (cable)**: both directions of a cable keep one latency,
because ``Topology.link_lat`` is per cable and both ns-3 (``driver.cc BuildFabric``: one
channel ``Delay`` per cable) and the packet engine (``Topology.dlink_lat`` = each cable's
latency repeated for its two directions) read that array. The factors come from
``numpy.random.default_rng(seed).uniform(-j, j, n_links)``; the jittered latencies are rounded
to whole picoseconds, so both simulators hold exactly the same delays (ns-3 at PS resolution
rounds ``Seconds(x)`` to the nearest picosecond, the packet engine ``np.rint(x * 1e12)``; the
script checks ns-3's conversion for every link).

For each seed it runs ns-3, the packet engine with the scenario's options (defaults) and with
``ns3_ties = true``, all on the same jittered topology, routing and schedule, and prints the
makespans, the relative errors against ns-3 and the wall times (ns-3: ``Simulator::Run``;
engines: ``Result.wall_s``). ``--save DIR`` writes per-node start/end and per-link figures of
every run to ``DIR/<scenario>_j<jitter>_s<seed>.npz`` for a per-transfer comparison.
No product code is changed: the topology is rebuilt with ``dataclasses.replace`` and the
routing with ``Scenario.build_routing`` on it (paths are checked to be the same as on the
unjittered fabric, so the schedule built for it stays valid).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE.parent / "scenarios"
PS = 1e12


def jittered_topology(topology, jitter: float, seed: int):
    """A copy of ``topology`` whose cable latencies are multiplied by 1 + U(-jitter, jitter)
    (numpy default_rng(seed), one factor per cable), rounded to whole picoseconds."""
    rng = np.random.default_rng(seed)
    f = 1.0 + rng.uniform(-jitter, jitter, topology.n_links)
    lat_ps = np.rint(topology.link_lat * f * PS)
    return dataclasses.replace(topology, link_lat=lat_ps / PS), lat_ps.astype(np.int64)


def _same_paths(r0, r1, schedule) -> bool:
    from netcore.schedule import TRANSFER

    tidx = np.flatnonzero(schedule.kind == TRANSFER)
    keys = schedule.routing_keys(tidx)
    a = r0.paths(schedule.src[tidx], schedule.dst[tidx], flow_id=keys)
    b = r1.paths(schedule.src[tidx], schedule.dst[tidx], flow_id=keys)
    return np.array_equal(a.ptr, b.ptr) and np.array_equal(a.link, b.link)


def _check_ns3_delays(lat_ps) -> None:
    """ns-3 turns each latency (seconds, double) into a Time at PS resolution: check it is
    the same integer the packet engine uses."""
    from validation.ns3 import binding

    ns, _ = binding.load()
    secs = lat_ps / PS
    got = np.array([int(ns.Seconds(float(x)).GetPicoSeconds()) for x in np.unique(secs)])
    want = np.rint(np.unique(secs) * PS).astype(np.int64)
    if not np.array_equal(got, want):
        bad = int(np.flatnonzero(got != want)[0])
        raise SystemExit(f"ns-3 delay {got[bad]} ps != packet engine {want[bad]} ps")


def run_one(scenario_path: Path, jitter: float, seed: int, with_ns3: bool = True,
            save: Path | None = None) -> dict:
    from netcore.api import simulate
    from netcosim.commands.ns3 import scenario_engine_options
    from netcosim.scenario import load_scenario
    from validation.ns3 import run_ns3
    from validation.ns3.support import check_options
    from validation.ns3_suite import _engine_options

    sc = load_scenario(scenario_path)
    prep = sc.with_full_detail().prepare(check_engine=False)
    if jitter > 0:
        topo, lat_ps = jittered_topology(prep.topology, jitter, seed)
        routing = sc.build_routing(topo)
        if not _same_paths(prep.routing, routing, prep.schedule):
            raise SystemExit("jitter changed the routing paths: the schedule would not match")
    else:
        topo, routing = prep.topology, prep.routing
        lat_ps = np.rint(topo.link_lat * PS).astype(np.int64)
    sched, faults = prep.schedule, prep.faults
    row = {"scenario": sc.name, "jitter": jitter, "seed": seed,
           "lat_ps_min": int(lat_ps.min()), "lat_ps_max": int(lat_ps.max()),
           "lat_distinct": int(np.unique(lat_ps).size), "links": int(topo.n_links)}
    runs = {}
    if with_ns3:
        _check_ns3_delays(lat_ps)
        opts = check_options(scenario_engine_options(sc))
        t0 = time.perf_counter()
        r = run_ns3(topo, sched, routing, faults, seed=sc.seed, **opts)
        row["ns3_total_s"] = time.perf_counter() - t0
        row["ns3_unfinished"] = r.info["unfinished"]
        row["ns3_drops"] = r.info["drops"]
        runs["ns3"] = r
    # "packet": eager ports, the default when results/tie_jitter.md was made (session 11)
    for name, extra in (("packet", {"ns3_ties": False}), ("ns3ties", {"ns3_ties": True})):
        popts = _engine_options(sc, "packet", extra)
        runs[name] = simulate(topo, sched, routing, faults, engine="packet", seed=sc.seed,
                              **popts)
    ref = runs["ns3"].makespan if "ns3" in runs else None
    for name, r in runs.items():
        row[f"{name}_us"] = r.makespan * 1e6
        row[f"{name}_wall_s"] = r.wall_s
        if ref is not None and name != "ns3":
            row[f"{name}_err"] = (r.makespan - ref) / ref
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        arrs = {"lat_ps": lat_ps, "kind": sched.kind, "src": sched.src, "dst": sched.dst,
                "size": sched.size}
        for name, r in runs.items():
            arrs[f"{name}_start"] = r.start
            arrs[f"{name}_end"] = r.end
            arrs[f"{name}_link_bytes"] = r.link_bytes
            arrs[f"{name}_link_busy"] = r.link_busy
            q = (r.link_extra or {}).get("queue_max_packets")
            if q is not None:
                arrs[f"{name}_qmax"] = np.asarray(q)
            if name == "ns3":
                arrs["ns3_connected"] = r.info["connected"]
        np.savez_compressed(save / f"{sc.name}_j{jitter:g}_s{seed}.npz", **arrs)
    return row


def _line(row: dict) -> str:
    s = (f"{row['scenario']} jitter={row['jitter']:g} seed={row['seed']} "
         f"(latency {row['lat_ps_min']}..{row['lat_ps_max']} ps, {row['lat_distinct']} distinct "
         f"of {row['links']} cables):")
    if "ns3_us" in row:
        s += (f" ns-3 {row['ns3_us']:.3f} us (run {row['ns3_wall_s']:.1f} s, total "
              f"{row['ns3_total_s']:.1f} s, drops {row['ns3_drops']}, unfinished "
              f"{row['ns3_unfinished']});")
    for name in ("packet", "ns3ties"):
        s += f" {name} {row[f'{name}_us']:.3f} us"
        if f"{name}_err" in row:
            s += f" ({row[f'{name}_err']:+.4%})"
        s += f" [{row[f'{name}_wall_s']:.2f} s];"
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", help="name in validation/scenarios/ or a path to a .toml")
    ap.add_argument("--jitter", type=float, default=0.001,
                    help="latency factor 1 + U(-j, j) per cable (default 0.001; 0: none)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--save", type=Path, default=None, help="write per-run arrays here (npz)")
    ap.add_argument("--no-ns3", action="store_true", help="packet engine only")
    args = ap.parse_args(argv)
    p = Path(args.scenario)
    if not p.exists():
        p = SCENARIOS / f"{args.scenario}.toml"
    for seed in args.seeds:
        row = run_one(p, args.jitter, seed, with_ns3=not args.no_ns3, save=args.save)
        print(_line(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

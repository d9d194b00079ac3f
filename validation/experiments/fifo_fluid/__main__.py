"""Compare the FIFO model with ns-3, the flow engine and the packet engine on the ns-3 suite.

    python -m validation.experiments.fifo_fluid [SCENARIO ...]

Reads ns-3's makespans from validation/results/ns3.csv (no ns-3 run needed) and prints, per
scenario, each model's makespan error against ns-3 and its wall time (simulation loop only,
best of --reps runs in this process).
"""
from __future__ import annotations

import argparse
import csv
import tomllib
from pathlib import Path

from netcore.api import simulate
from netcosim.runner import prepare
from netcosim.scenario import Scenario
from validation.experiments.fifo_fluid.model import simulate as fifo_simulate

ROOT = Path(__file__).resolve().parents[3]


def _best(fn, reps):
    best = None
    for _ in range(reps):
        r = fn()
        if best is None or r.wall_s < best.wall_s:
            best = r
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rows = list(csv.DictReader(open(ROOT / "validation" / "results" / "ns3.csv")))
    ns3 = {r["scenario"]: (float(r["ns3_makespan_us"]), float(r["ns3_wall_s"])) for r in rows}
    print("| scenario | ns-3 us | ns-3 wall s | flow tcp err | FIFO model err | FIFO wall s | "
          "packet err | packet wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.scenarios or list(ns3):
        ref, ref_wall = ns3[name]
        d = tomllib.load(open(ROOT / "validation" / "scenarios" / f"{name}.toml", "rb"))
        mtu = d["engine"].get("mtu", 9000)
        P = prepare(Scenario.from_dict(d, default_name=name), True)
        args_ = (P.topology, P.schedule, P.routing, P.faults)
        flow = simulate(*args_, engine="flow", transport="tcp", mtu=mtu)
        fifo = _best(lambda: fifo_simulate(*args_, mtu=mtu), args.reps)
        pkt = _best(lambda: simulate(*args_, engine="packet", seed=1, **P.engine_options),
                    args.reps)

        def err(r):
            return f"{(r.makespan * 1e6 - ref) / ref:+.1%}"

        print(f"| {name} | {ref:,.1f} | {ref_wall:.3g} | {err(flow)} | {err(fifo)} | "
              f"{fifo.wall_s:.3g} | {err(pkt)} | {pkt.wall_s:.3g} |", flush=True)


if __name__ == "__main__":
    main()

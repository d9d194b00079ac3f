"""ns-3 cross-validation suite: `python -m validation.ns3_suite [--only NAME ...]`.

Runs every scenario in validation/scenarios/ in ns-3 and in both netcosim engines (flow and
packet, tcp transport), and writes validation/results/ns3.md and ns3.csv: makespan from each,
the relative error of each engine against ns-3, the wall time of each and the speed-up over
ns-3. Targets (issue 6): packet engine within 5% on every scenario; flow engine within 10% on
scenarios whose transfers are all >= 1 MiB. A miss is reported as a miss; an engine missing
from this build is reported as "n/a".
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
RESULTS = HERE / "results"
PACKET_TARGET = 0.05
FLOW_TARGET = 0.10
FLOW_MIN_BYTES = 1 << 20

COLUMNS = ["scenario", "transfers", "min_bytes", "ns3_makespan_us", "ns3_wall_s", "ns3_drops",
           "packet_makespan_us", "packet_err", "packet_wall_s", "packet_speedup", "packet_ok",
           "flow_makespan_us", "flow_err", "flow_wall_s", "flow_speedup", "flow_ok", "note"]


def scenario_files(only=None) -> list[Path]:
    files = sorted(SCENARIOS.glob("*.toml"))
    if only:
        want = set(only)
        files = [f for f in files if f.stem in want]
        missing = want - {f.stem for f in files}
        if missing:
            raise SystemExit(f"unknown scenario(s): {', '.join(sorted(missing))}")
    return files


def _engine_options(scenario, engine: str) -> dict:
    """Options for ``engine``: the scenario's [engine] table when it names that engine,
    otherwise that engine's defaults (the transport stays tcp)."""
    from netcosim.scenario import engine_options_module

    mod = engine_options_module(engine)
    if scenario.engine_kind == engine:
        return mod.check_options({k: v for k, v in scenario.engine.items() if k != "kind"})
    return mod.check_options({})


def run_engine(prepared, scenario, engine: str):
    """(Result, None) or (None, reason) when the engine is not part of this build."""
    from netcore.api import EngineUnavailable, simulate
    from netcosim.scenario import EngineMissing

    try:
        opts = _engine_options(scenario, engine)
        res = simulate(prepared.topology, prepared.schedule, prepared.routing, prepared.faults,
                       engine=engine, seed=scenario.seed, **opts)
        return res, None
    except (EngineUnavailable, EngineMissing) as e:
        return None, f"{engine} engine not available ({e})"


def run_scenario(path: Path) -> dict:
    from netcore.schedule import TRANSFER
    from netcosim.commands.ns3 import scenario_engine_options
    from netcosim.scenario import load_scenario
    from validation.ns3 import run_ns3
    from validation.ns3.support import check_options

    scenario = load_scenario(path)
    prepared = scenario.prepare(check_engine=False)
    sched = prepared.schedule
    t = sched.kind == TRANSFER
    row = {"scenario": scenario.name, "transfers": int(t.sum()),
           "min_bytes": int(sched.size[t].min()) if t.any() else 0}
    opts = check_options(scenario_engine_options(scenario))
    ns3 = run_ns3(prepared.topology, sched, prepared.routing, prepared.faults,
                  seed=scenario.seed, **opts)
    ref = ns3.makespan
    row.update(ns3_makespan_us=ref * 1e6, ns3_wall_s=ns3.wall_s, ns3_drops=ns3.info["drops"])
    notes = []
    if ns3.info["unfinished"]:
        notes.append(f"ns-3: {ns3.info['unfinished']} unfinished")
    for engine, target in (("packet", PACKET_TARGET), ("flow", FLOW_TARGET)):
        res, why = run_engine(prepared, scenario, engine)
        if res is None:
            row.update({f"{engine}_{k}": None for k in ("makespan_us", "err", "wall_s",
                                                         "speedup", "ok")})
            notes.append(why)
            continue
        err = (res.makespan - ref) / ref if ref > 0 else math.nan
        in_scope = engine == "packet" or row["min_bytes"] >= FLOW_MIN_BYTES
        ok = (abs(err) <= target) if in_scope else None
        row.update({f"{engine}_makespan_us": res.makespan * 1e6, f"{engine}_err": err,
                    f"{engine}_wall_s": res.wall_s,
                    f"{engine}_speedup": ns3.wall_s / res.wall_s if res.wall_s > 0 else math.inf,
                    f"{engine}_ok": ok})
    row["note"] = "; ".join(notes)
    return row


def _fmt(v, kind: str) -> str:
    if v is None:
        return "n/a"
    if kind == "pct":
        return f"{v * 100:+.2f}%"
    if kind == "ok":
        return "yes" if v else "**MISS**"
    if kind == "x":
        return f"{v:,.0f}x" if v >= 10 else f"{v:.1f}x"
    if kind == "s":
        return f"{v:.3g}"
    if kind == "us":
        return f"{v:,.1f}"
    return str(v)


def write_results(rows: list[dict], out: Path = RESULTS) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "ns3.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    lines = [
        "# ns-3 cross-validation",
        "",
        "Generated by `python -m validation.ns3_suite` (ns-3.44 from the `ns3` PyPI package; "
        "setup in docs/ns3.md). Makespan in microseconds; error = (engine - ns-3) / ns-3; "
        "wall = simulation time only (ns-3: `Simulator::Run`; engines: `Result.wall_s`); "
        "speed-up = ns-3 wall / engine wall. Targets: packet engine within "
        f"{PACKET_TARGET:.0%} everywhere; flow engine within {FLOW_TARGET:.0%} where every "
        "transfer is >= 1 MiB (`n/a` below that). A miss is marked **MISS**.",
        "",
        "| scenario | transfers | ns-3 makespan | ns-3 wall s | ns-3 drops | packet makespan "
        "| packet err | packet wall s | packet speed-up | packet ok | flow makespan | flow err "
        "| flow wall s | flow speed-up | flow ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        flow_ok = r.get("flow_ok")
        flow_ok_s = ("n/a (< 1 MiB)" if r.get("flow_err") is not None and flow_ok is None
                     else _fmt(flow_ok, "ok"))
        lines.append(
            f"| {r['scenario']} | {r['transfers']} | {_fmt(r['ns3_makespan_us'], 'us')} "
            f"| {_fmt(r['ns3_wall_s'], 's')} | {r['ns3_drops']} "
            f"| {_fmt(r.get('packet_makespan_us'), 'us')} | {_fmt(r.get('packet_err'), 'pct')} "
            f"| {_fmt(r.get('packet_wall_s'), 's')} | {_fmt(r.get('packet_speedup'), 'x')} "
            f"| {_fmt(r.get('packet_ok'), 'ok')} "
            f"| {_fmt(r.get('flow_makespan_us'), 'us')} | {_fmt(r.get('flow_err'), 'pct')} "
            f"| {_fmt(r.get('flow_wall_s'), 's')} | {_fmt(r.get('flow_speedup'), 'x')} "
            f"| {flow_ok_s} |")
    notes = [f"- {r['scenario']}: {r['note']}" for r in rows if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + notes
    (out / "ns3.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.ns3_suite", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", metavar="NAME", help="run only these scenarios")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    args = ap.parse_args(argv)
    rows = []
    for f in scenario_files(args.only):
        t0 = time.perf_counter()
        row = run_scenario(f)
        rows.append(row)
        print(f"{row['scenario']}: ns-3 {row['ns3_makespan_us']:.1f} us "
              f"(run {row['ns3_wall_s']:.2f} s, drops {row['ns3_drops']}); packet "
              f"{_fmt(row.get('packet_err'), 'pct')}, flow {_fmt(row.get('flow_err'), 'pct')} "
              f"[{time.perf_counter() - t0:.1f} s]", flush=True)
    write_results(rows, Path(args.out))
    print(f"wrote {Path(args.out) / 'ns3.md'} and ns3.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())

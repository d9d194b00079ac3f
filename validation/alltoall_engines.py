"""All-to-all, flow engine vs packet engine (issue 17):
`python -m validation.alltoall_engines [--quick] [--only NAME ...]`.

Runs every case of validation/alltoall_cases.py (fabric, routing, per-pair size, algorithm)
on the flow engine (the fluid max-min model, and its TCP start-up model ``transport = "tcp"``)
and on the packet engine (``tcp`` with buffers deep enough that nothing drops, and ``dcqcn``),
and writes validation/results/alltoall_engines.md and .csv: one row per case and packet
transport with the makespan of each engine, the error of the flow engine against the packet
engine, error = (flow - packet) / packet, and the wall time of each (``Result.wall_s``: the
event loop, no compilation or set-up). The packet engine is the reference here; nothing is
tuned. The flow engine also runs its many-to-many contention model (``contention = "tcp"``
and ``"dcqcn"``, netcore/flow/contention.py), each compared with its own packet transport. Each case's flow runs are made once and shared by its two rows.

The default run is every case (about 5 minutes here, 2.5 of them fat_tree k=8 at 16 MiB per
pair); ``--quick`` keeps the 64 KiB and 1 MiB cases off the 128-host fat-tree (seconds). The development / held-out split is in
validation/alltoall_cases.py (and docs/flow_engine.md).
"""
from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from validation.alltoall_cases import (CASES, FLOW_RUNS, MIB, PACKET_OPTIONS, TRANSPORTS, Case,
                                       scenario)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
STEM = "alltoall_engines"

# flow columns compared with each packet transport: the fluid model against both; the flow
# engine's tcp model only against the packet engine's tcp (it models TCP start-up)
FLOW_FOR = {"tcp": ("fluid", "flowtcp", "contention_tcp"), "dcqcn": ("fluid", "contention_dcqcn")}
# the markdown table shows the contention model of the row's transport in one set of columns
SHOWN = ("fluid", "flowtcp", "contention")
GUARD = 20  # packet runs stop at this multiple of the fluid makespan (see run_case)
_FLOW_KEYS = ("makespan_us", "err", "wall_s", "speedup")
COLUMNS = (["case", "set", "fabric", "routing", "op", "algorithm", "per_pair_bytes", "transfers",
            "transport", "packet_makespan_us", "packet_wall_s", "packet_stranded"]
           + [f"{f}_{k}" for f, _ in FLOW_RUNS for k in _FLOW_KEYS] + ["note"])


def rel_err(flow: float, packet: float) -> float:
    """(flow - packet) / packet: negative when the flow engine is optimistic."""
    return (flow - packet) / packet if packet > 0 else math.nan


def select(only=None, quick: bool = False) -> list[Case]:
    if only:
        missing = set(only) - set(CASES)
        if missing:
            raise SystemExit(f"unknown case(s): {', '.join(sorted(missing))} "
                             f"(known: {', '.join(CASES)})")
        return [CASES[n] for n in only]
    cases = list(CASES.values())
    if quick:
        cases = [c for c in cases if c.per_pair <= MIB and c.fabric != "ft8"]
    return cases


def run_one(case: Case, engine: str, options: dict, extra: dict | None = None):
    """Build the case as a user's scenario, then simulate it: (Result, prepared)."""
    from netcore.api import simulate
    from netcosim.scenario import Scenario

    sc = Scenario.from_dict(scenario(case, engine, options), default_name=case.name)
    prep = sc.prepare()
    res = simulate(prep.topology, prep.schedule, prep.routing, prep.faults, engine=engine,
                   seed=sc.seed, validate=False, **{**prep.engine_options, **(extra or {})})
    return res, prep


def _makespan_us(res) -> float:
    return float(res.makespan) * 1e6


def run_case(case: Case, transports=TRANSPORTS, log=print) -> list[dict]:
    """The rows of one case: one per packet transport."""
    from netcore.schedule import TRANSFER

    flow = {}
    transfers = None
    notes = []
    for name, opts in FLOW_RUNS:
        res, prep = run_one(case, "flow", opts)
        flow[name] = res
        transfers = int((prep.schedule.kind == TRANSFER).sum())
        if res.stranded.any():
            notes.append(f"{name}: {int(res.stranded.sum())} stranded")
        log(f"  {case.name} flow {name}: {_makespan_us(res):,.1f} us, wall {res.wall_s:.3g} s")
    rows = []
    # A lossless (PFC) fabric with cyclic buffer dependencies can deadlock (dcqcn on the torus
    # ring under dor); the packet engine detects the freeze and stops there (deadlock_at_s).
    # The guard stays for anything else that would not end: it stops the clock far beyond any
    # makespan seen here (at most 2.2x the fluid one).
    guard_s = GUARD * flow["fluid"].makespan
    for tr in transports:
        res, _ = run_one(case, "packet", {**PACKET_OPTIONS[tr], "max_time_s": guard_s})
        stranded = int(res.stranded.sum())
        # a run that did not finish has no makespan to compare with
        pk = _makespan_us(res) if not stranded else None
        log(f"  {case.name} packet {tr}: {_fmt(pk, 'us')} us, wall {res.wall_s:.3g} s"
            + (f", {stranded} unfinished" if stranded else ""))
        row = {"case": case.name, "set": "held-out" if case.held_out else "dev",
               "fabric": case.fabric, "routing": scenario(case, "flow", {})["routing"]["policy"],
               "op": case.op, "algorithm": case.algorithm, "per_pair_bytes": case.per_pair,
               "transfers": transfers, "transport": tr, "packet_makespan_us": pk,
               "packet_wall_s": res.wall_s, "packet_stranded": stranded}
        rnotes = list(notes)
        if stranded:
            last = float(np.nanmax(res.end)) * 1e6
            dl = res.info.get("deadlock_at_s")
            if dl is not None:
                rnotes.append(f"packet {tr}: {stranded} of {transfers} transfers unfinished: "
                              f"a PFC deadlock at {dl * 1e6:,.1f} us "
                              f"({res.info['deadlocked_ports']} ports paused for good; the "
                              f"last completion at {last:,.1f} us), no makespan")
            else:
                rnotes.append(f"packet {tr}: {stranded} of {transfers} transfers unfinished at "
                              f"{guard_s * 1e6:,.0f} us ({GUARD}x the fluid makespan; the "
                              f"last completion at {last:,.1f} us), no makespan")
        drops = int(res.info.get("drops", 0) or 0)
        if drops:
            rnotes.append(f"packet {tr}: {drops} drops" + (" (the buffers are meant to be deep "
                                                           "enough that nothing drops)"
                                                           if tr == "tcp" else ""))
        retx = int(res.info.get("retransmissions", 0) or 0)
        if retx:  # without drops: reordering (spray) triggers fast retransmits
            rnotes.append(f"packet {tr}: {retx} retransmissions")
        for name, _ in FLOW_RUNS:
            fr = flow[name]
            if name not in FLOW_FOR[tr]:
                row.update({f"{name}_{k}": None for k in _FLOW_KEYS})
                continue
            fm = _makespan_us(fr)
            row.update({f"{name}_makespan_us": fm,
                        f"{name}_err": rel_err(fm, pk) if pk is not None else None,
                        f"{name}_wall_s": fr.wall_s,
                        f"{name}_speedup": (res.wall_s / fr.wall_s if fr.wall_s > 0 else math.inf)
                        if pk is not None else None})
        row["note"] = "; ".join(rnotes)
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """Worst (largest |error|) and median error of each flow run against each transport,
    over all rows and over the development and held-out sets."""
    out = {}
    for tr in TRANSPORTS:
        for name in FLOW_FOR[tr]:
            for part in ("all", "dev", "held-out"):
                errs = [r[f"{name}_err"] for r in rows if r["transport"] == tr
                        and r.get(f"{name}_err") is not None and not math.isnan(r[f"{name}_err"])
                        and (part == "all" or r["set"] == part)]
                if errs:
                    out[(name, tr, part)] = {"worst": max(errs, key=abs),
                                             "median": statistics.median(errs), "n": len(errs),
                                             "within10": sum(abs(e) <= 0.10 for e in errs)}
    return out


def _fmt(v, kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if kind == "pct":
        return f"{v * 100:+.1f}%"
    if kind == "x":
        return f"{v:,.0f}x" if v >= 10 else f"{v:.2g}x"
    if kind == "s":
        return f"{v:.3g}"
    if kind == "us":
        return f"{v:,.1f}"
    return str(v)


def _size(b: int) -> str:
    return f"{b / MIB:g} MiB" if b >= MIB else f"{b / 1024:g} KiB"


def write_results(rows: list[dict], out: Path = RESULTS, command: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{STEM}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    lines = [
        "# All-to-all: flow engine vs packet engine",
        "",
        f"Generated by `{command or 'python -m validation.alltoall_engines'}` (issue 17; cases "
        "and the development / held-out split in validation/alltoall_cases.py, findings in "
        "docs/flow_engine.md \"All-to-all: where the fluid model loses time\"). Makespan in "
        "microseconds. The packet engine is the reference: error = (flow - packet) / packet "
        "(negative: the flow engine is optimistic). `fluid`: the flow engine's max-min model "
        "(its default); `flowtcp`: its `transport = \"tcp\"` model (TCP start-up), compared "
        "with the packet engine's tcp only. Packet `tcp`: MTU 9000, 100,000-packet buffers "
        "(nothing drops); `dcqcn`: MTU 9000, defaults (lossless PFC). Workload: "
        "`protocol = \"simple\"`, `step_latency_us = 0`, seed 1. `contention`: the flow "
        "engine's many-to-many contention model (`[engine] contention`, docs/flow_engine.md "
        "\"The contention model\") with the row's transport, i.e. `contention = \"tcp\"` on "
        "the tcp rows and `\"dcqcn\"` on the dcqcn rows; its efficiencies come from "
        "`python -m validation.contention_table` (reduced representatives, no case of this "
        "table), nothing is fitted to the **held-out** rows. Wall = `Result.wall_s` (event "
        "loop only) on a shared 2-core machine, so walls and speed-ups (packet wall / flow "
        "wall) are indicative.",
        "",
        "| case | set | op / algorithm | per pair | transport | packet makespan | packet wall s "
        "| fluid makespan | fluid err | fluid wall s | fluid speed-up | flowtcp makespan "
        "| flowtcp err | flowtcp wall s | flowtcp speed-up | contention makespan "
        "| contention err | contention wall s | contention speed-up |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        algo = r["algorithm"] if r["op"] == "all_to_all" else f"{r['op']} {r['algorithm']}"
        cells = [r["case"], "**held-out**" if r["set"] == "held-out" else r["set"], algo, _size(r["per_pair_bytes"]), r["transport"],
                 _fmt(r["packet_makespan_us"], "us"), _fmt(r["packet_wall_s"], "s")]
        for name in SHOWN:
            if name == "contention":
                name = "contention_" + r["transport"]
            cells += [_fmt(r.get(f"{name}_makespan_us"), "us"), _fmt(r.get(f"{name}_err"), "pct"),
                      _fmt(r.get(f"{name}_wall_s"), "s"), _fmt(r.get(f"{name}_speedup"), "x")]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Summary (worst = largest |error|):", "",
              "| flow run | vs packet | set | cases | worst | median | within 10% |",
              "|---|---|---|---:|---:|---:|---:|"]
    for (name, tr, part), s in summary(rows).items():
        lines.append(f"| {name} | {tr} | {part} | {s['n']} | {_fmt(s['worst'], 'pct')} "
                     f"| {_fmt(s['median'], 'pct')} | {s['within10']} |")
    for label, key in (("the fluid model", lambda r: "fluid_speedup"),
                       ("the contention model", lambda r: "contention_" + r["transport"] + "_speedup")):
        slow = [r for r in rows if r.get(key(r)) is not None]
        if slow:
            lo = min(slow, key=lambda r: r[key(r)])
            n100 = sum(r[key(r)] >= 100 for r in slow)
            lines += ["", f"Smallest speed-up of {label} over the packet engine: "
                          f"{_fmt(lo[key(lo)], 'x')} ({lo['case']}, {lo['transport']}); "
                          f">= 100x on {n100} of {len(slow)} rows."]
    notes = [f"- {r['case']} ({r['transport']}): {r['note']}" for r in rows if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + notes
    (out / f"{STEM}.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.alltoall_engines",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", metavar="NAME", help="run only these cases")
    ap.add_argument("--quick", action="store_true",
                    help="only the 64 KiB and 1 MiB cases, without fat_tree k=8")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    args = ap.parse_args(argv)
    from netcore.flow import engine as flow_engine

    flow_engine.warm()  # compile or load the kernels once, outside every Result.wall_s
    rows = []
    t_all = time.perf_counter()
    for case in select(args.only, args.quick):
        t0 = time.perf_counter()
        print(f"{case.name} ({'held-out' if case.held_out else 'dev'})", flush=True)
        new = run_case(case, log=lambda s: print(s, flush=True))
        rows += new
        print("  " + ", ".join(f"{r['transport']}: fluid {_fmt(r['fluid_err'], 'pct')}"
                               + " contention " + _fmt(r["contention_" + r["transport"] + "_err"], "pct")
                               + (f" flowtcp {_fmt(r['flowtcp_err'], 'pct')}"
                                  if r.get("flowtcp_err") is not None else "") for r in new)
              + f" [{time.perf_counter() - t0:.1f} s]", flush=True)
    command = "python -m validation.alltoall_engines" + (" --quick" if args.quick else "") + (" --only " + " ".join(args.only) if args.only else "")
    write_results(rows, Path(args.out), command)
    print(f"wrote {Path(args.out) / (STEM + '.md')} and .csv [{time.perf_counter() - t_all:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

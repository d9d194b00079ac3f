"""`netcosim train SCENARIO`: simulate one training step and print step time, tokens/s, MFU and
exposed communication by kind; optionally write summary.json and a Chrome/Perfetto trace."""
from __future__ import annotations

import json
import time
from pathlib import Path

from netcosim.cli import add_scenario_arguments, load_from_args
from topo.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("train", help="simulate one training step of a [workload] kind = "
                                     "\"training\" scenario",
                       description="Simulate one training step and report step time, tokens/s, "
                                   "MFU and exposed communication by kind.")
    add_scenario_arguments(p)
    p.add_argument("--engine", choices=("flow", "packet", "ideal"), default=None,
                   help="network engine (default: the scenario's engine.kind); 'ideal' ignores "
                        "contention (every transfer at its path's bottleneck bandwidth)")
    p.add_argument("--trace", metavar="FILE", default=None,
                   help="write a Chrome/Perfetto trace-event JSON timeline to FILE")
    p.add_argument("--out", metavar="DIR", default=None, help="also write DIR/summary.json")
    p.set_defaults(func=run)


def _ideal(prepared):
    """Contention-free run: each transfer at its ``critical_path.transfer_bounds`` (the
    bandwidth of its slower end's fastest links, scale-up links only inside a scale-up domain,
    and its end links' latencies), which no engine beats. Every transfer used to run at the
    fabric's slowest host link with twice the largest link latency: NVLink transfers at NIC
    speed, so the contention-free step could be longer than the flow engine's (TRAIN_BASE of
    the tests with network TP: 852.7 us against 784.9 us)."""
    import numpy as np

    from compute.critical_path import evaluate, transfer_bounds
    from netcore.result import Result

    topo = prepared.topology
    t0 = time.perf_counter()
    bw, lat = transfer_bounds(prepared.schedule, topo)
    start, end = evaluate(prepared.schedule, bw, lat)
    z = np.zeros(topo.n_dlinks)
    return Result("ideal", start, end, np.zeros(len(end), bool), z, z.copy(),
                  wall_s=time.perf_counter() - t0)


def run(args) -> int:
    from compute.report import chrome_trace, format_summary, summarize
    from netcore.api import simulate

    from netcosim import outpaths

    engine = None if args.engine == "ideal" else args.engine
    scenario = load_from_args(args, engine=engine)
    if (scenario.workload or {}).get("kind") != "training":
        raise InputError("workload.kind: netcosim train needs kind = \"training\"")
    # every destination checked before the (possibly long) run
    if args.trace:
        outpaths.check_file(args.trace, f"--trace {args.trace!r}", inputs=(args.scenario,))
    if args.out:
        outpaths.check_dir(args.out, f"--out {args.out!r}", ("summary.json",), (args.scenario,))
    prepared = scenario.prepare(check_engine=args.engine != "ideal")
    if args.engine == "ideal":
        result = _ideal(prepared)
    else:
        result = simulate(prepared.topology, prepared.schedule, prepared.routing, prepared.faults,
                          engine=prepared.engine, seed=scenario.seed,
                          **dict(prepared.engine_options or {}))
    s = summarize(prepared.schedule, result.start, result.end)
    s["memory"] = prepared.schedule.meta.get("memory")
    s["engine"] = result.engine
    s["wall_s"] = result.wall_s
    print(f"{scenario.name}: {prepared.schedule.describe()}")
    print(format_summary(s))
    if s.get("memory"):
        mem = s["memory"]
        print(f"memory/GPU     {mem['total_GB']} GB of {mem['capacity_GB']} GB")
    print(f"engine         {result.engine} ({result.wall_s:.3g} s)")
    if args.trace:
        outpaths.write_file(args.trace, f"--trace {args.trace!r}",
                            lambda tmp: chrome_trace(prepared.schedule, result.start, result.end,
                                                     tmp))
        print(f"trace          {args.trace}")
    if args.out:
        out = Path(args.out)
        label = f"--out {args.out!r}"
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise outpaths.OutputError(f"{label}: cannot create it ({e.strerror})") from None
        outpaths.write_text(out / "summary.json", label,
                            json.dumps(s, indent=2, default=float) + "\n")
    return 0

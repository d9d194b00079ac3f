"""`netcosim ns3 SCENARIO --out DIR`: run a scenario in ns-3 (cross-validation).

Builds the same fabric, routes and TCP transfers in ns-3 (validation/ns3, docs/ns3.md) and
writes the same summary.json / flows.csv / links.csv as `netcosim run`. Needs the optional
extra: ``pip install -e ".[ns3]"``. Features ns-3 cannot reproduce are refused (exit 2).
"""
from __future__ import annotations

import math
import sys

from netcosim.cli import add_scenario_arguments, load_from_args
from topo.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("ns3", help="run a scenario in ns-3 for cross-validation",
                       description="Run SCENARIO in ns-3 (TCP NewReno over point-to-point "
                                   "links, drop-tail queues, static routes) and write "
                                   "summary.json, flows.csv and links.csv into DIR.")
    add_scenario_arguments(p)
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory (default: out/<scenario name>-ns3)")
    p.add_argument("--horizon-ms", type=float, default=0.0,
                   help="stop the ns-3 run at this simulated time (default: run to the end)")
    p.set_defaults(func=run)


def scenario_engine_options(scenario) -> dict:
    """The scenario's [engine] options as the packet engine would see them (the ns-3 run
    reproduces the packet engine's setup whatever engine.kind says)."""
    return {k: v for k, v in scenario.engine.items() if k != "kind"}


def check_horizon(ms: float) -> None:
    """--horizon-ms: 0 (run to the end) or a time ns-3's picosecond clock can stop at."""
    from netcore.packet.limits import TIME_LIMIT_PS, TIME_LIMIT_TEXT

    if not (ms >= 0 and math.isfinite(ms)):  # NaN fails the first test
        raise InputError(f"--horizon-ms {ms!r}: expected a time >= 0 (0: run to the end)")
    if ms * 1e9 >= TIME_LIMIT_PS:
        raise InputError(f"--horizon-ms {ms!r}: beyond the clock the ns-3 run shares with "
                         f"the packet engine, which ends at {TIME_LIMIT_TEXT}")
    if ms > 0 and round(ms * 1e9) < 1:  # Seconds() rounds to whole ps: 0 would stop at once
        raise InputError(f"--horizon-ms {ms!r}: below ns-3's resolution of one picosecond")


def run(args) -> int:
    from netcosim import outputs, workloads
    from netcosim.collective_remedies import building_in_full
    from netcosim.scenario import check_reachable
    from validation.ns3 import available, run_ns3
    from validation.ns3.support import check_options, check_policy

    check_horizon(args.horizon_ms)
    scenario = load_from_args(args)
    out = outputs.command_out_dir(args.out, scenario.name, "-ns3")
    label = outputs.out_label(args.out, out)
    outputs.check_out_dir(out, label, (args.scenario,))
    # refuse what ns-3 cannot reproduce before the (slow) ns-3 import
    check_policy(scenario.policy)
    opts = check_options(scenario_engine_options(scenario))
    # ns-3 runs every transfer; its ACKs come back as the packet engine's do
    with building_in_full("ns-3"):
        prepared = scenario.with_full_detail().prepare(check_engine=False,
                                                       check_reachability=False)
    check_reachable(prepared.topology, prepared.routing, prepared.faults, prepared.schedule,
                    "packet")
    if not available():
        raise InputError("ns-3 is not installed: pip install -e '.[ns3]'")
    result = run_ns3(prepared.topology, prepared.schedule, prepared.routing, prepared.faults,
                     seed=scenario.seed, horizon_s=args.horizon_ms * 1e-3, **opts)
    figures = workloads.report(scenario.workload, prepared.schedule, result)
    summary = outputs.summary(scenario, prepared, result, figures)
    summary["engine"] = "ns3"
    outputs.write_outputs(out, summary,
                          outputs.flows_table(prepared.schedule, result, prepared.topology),
                          outputs.links_table(prepared.topology, result, result.makespan),
                          label=label)
    stranded = f", {summary['stranded']} stranded" if summary["stranded"] else ""
    print(f"{scenario.name}: makespan {summary['makespan_us']:.6g} us, "
          f"{summary['transfers']} transfers{stranded}; ns-3 run {summary['wall_s']:.3g} s "
          f"-> {out}")
    if summary["unfinished"] > summary["stranded"]:
        print(f"warning: {summary['unfinished'] - summary['stranded']} transfer(s) had not "
              f"finished when the run stopped (--horizon-ms {args.horizon_ms:g}, or TCP "
              f"connections that gave up); makespan_us is the end of the last that did",
              file=sys.stderr)
    return 0

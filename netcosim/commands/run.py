"""`netcosim run SCENARIO`: simulate a scenario and write summary.json, flows.csv, links.csv."""
from __future__ import annotations

import sys

from netcosim.cli import add_scenario_arguments, load_from_args


def register(sub) -> None:
    p = sub.add_parser("run", help="simulate a scenario and write its result files",
                       description="Simulate SCENARIO and write summary.json, flows.csv and "
                                   "links.csv into DIR (default out/<scenario name>).")
    add_scenario_arguments(p)
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory (default: out/<scenario name>)")
    p.add_argument("--engine", choices=("flow", "packet"), default=None,
                   help="engine to use instead of the scenario's engine.kind")
    p.add_argument("--link-series", action="store_true",
                   help="also write link_series.csv, each directed link's utilization over "
                        "time (flow engine; refused with the packet engine)")
    p.add_argument("--allow-stranded", action="store_true",
                   help="run transfers between hosts that faults cut apart and report them as "
                        "stranded (what a fault study does with such a trial) instead of "
                        "refusing the scenario")
    p.add_argument("--trace", action="store_true",
                   help="also write trace.json, a Perfetto/Chrome trace of the serving batches "
                        "(inference workloads)")
    p.set_defaults(func=run)


def packet_link_series_note() -> str:
    return ("the packet engine does not record link load over time (link_series.csv comes "
            "from the flow engine; the packet engine samples queue lengths with "
            "engine.sample_queues_us)")


def run(args) -> int:
    from netcosim import outputs
    from netcosim.runner import simulate_scenario

    if args.link_series:  # an engine option: the engine says if it cannot record a series
        args.overrides = list(args.overrides) + ["engine.link_series=true"]
    scenario = load_from_args(args, engine=args.engine)
    if args.link_series and scenario.engine_kind == "packet":
        from topo.errors import InputError

        raise InputError(f"--link-series: {packet_link_series_note()}; use --engine flow for "
                         f"link_series.csv, or leave --link-series out")
    if getattr(args, "trace", False) and (scenario.workload or {}).get("kind") != "inference":
        from topo.errors import InputError

        raise InputError("--trace: a trace of serving batches needs [workload] kind = "
                         "\"inference\" (training: netcosim train --trace)")
    out = outputs.command_out_dir(args.out, scenario.name)
    label = outputs.out_label(args.out, out)
    # before the run: a place we cannot write (or the scenario's own file) is bad input
    outputs.check_out_dir(out, label, (args.scenario,))
    prepared, result, summary = simulate_scenario(
        scenario, check_reachability=not getattr(args, "allow_stranded", False))
    series = outputs.link_series_table(prepared.topology, result) if args.link_series else None
    outputs.write_outputs(out, summary,
                          outputs.flows_table(prepared.schedule, result, prepared.topology),
                          outputs.links_table(prepared.topology, result, result.makespan),
                          series, label=label)
    if getattr(args, "trace", False):
        from netcosim.inference.trace import batch_trace

        batch_trace(prepared.schedule.meta["inference_iterations"], out / "trace.json")
    stranded = f", {summary['stranded']} stranded" if summary["stranded"] else ""
    extra = "".join(f", {k} {summary[k]:.4g}" for k in ("algbw_GBps", "busbw_GBps", "step_time_s",
                                                         "mfu", "ttft_p50_s", "itl_p50_s",
                                                         "output_tokens_per_s_per_gpu")
                    if isinstance(summary.get(k), (int, float)))
    rep = summary.get("transfers_represented", summary["transfers"])
    if summary["transfers"] is None:  # a serving run: communication priced from fabric curves
        flows = "communication priced from curves measured on the fabric"
    elif rep == summary["transfers"]:
        flows = f"{summary['transfers']} transfers"
    else:
        flows = (f"{summary['transfers']} flow{'s' if summary['transfers'] != 1 else ''} "
                 f"standing for {rep:,} transfers")
    print(f"{scenario.name}: makespan {summary['makespan_us']:.6g} us, "
          f"{flows}{stranded}{extra}; {prepared.engine} engine "
          f"{summary['wall_s']:.3g} s -> {out}")
    if summary["stranded"] and summary.get("deadlock_at_s") is None and \
            not summary.get("tcp_gave_up"):
        print(f"warning: {summary['stranded']} transfer(s) stranded (a fault left them no "
              f"path, or they wait behind one that has none): the workload did not finish; "
              f"makespan_us is the end of the last node that did, and figures that need the "
              f"end (step_time_s, mfu, busbw_GBps) are null", file=sys.stderr)
    if summary.get("deadlock_at_s") is not None:
        print(f"warning: the lossless fabric deadlocked at {summary['deadlock_at_s'] * 1e6:,.1f} "
              f"us: {summary['deadlocked_ports']} ports hold packets that PFC pauses (or "
              f"missing credits) keep from ever moving, in a cycle; the "
              f"{summary['unfinished']} transfers that had not finished are stranded "
              f"(makespan: the last that did). Routing without cyclic buffer dependencies "
              f"(dateline / up*-down*) or a lossy transport avoids it; docs/packet_engine.md, "
              f"\"Deadlock\"",
              file=sys.stderr)
    if summary.get("symmetry_uneven_sends"):
        from netcosim.workload_kinds.training import symmetry_warning

        print(f"warning: {symmetry_warning(summary['symmetry_uneven_sends'])}", file=sys.stderr)
    if summary.get("tcp_gave_up"):
        print(f"warning: {summary['tcp_gave_up']} TCP connections gave up after their "
              f"retries (engine.syn_retries / engine.data_retries, timers "
              f"engine.tcp_timers); their transfers and everything waiting on them are "
              f"counted as stranded although a path exists (makespan: the last transfer that "
              f"finished)", file=sys.stderr)
    return 0

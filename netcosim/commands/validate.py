"""`netcosim validate SCENARIO`: check a scenario file without running it."""
from __future__ import annotations

from netcosim.cli import add_scenario_arguments, load_from_args


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a scenario file without running it",
                       description="Load the scenario, build its fabric, routing, faults and "
                                   "workload schedule, check engine options and that every "
                                   "transfer's hosts can reach each other; print OK and counts.")
    add_scenario_arguments(p)
    p.add_argument("--engine", choices=("flow", "packet"), default=None,
                   help="check against this engine instead of the scenario's engine.kind")
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    scenario = load_from_args(args, engine=args.engine)
    prepared = scenario.prepare(check_engine=False)
    topo, sched = prepared.topology, prepared.schedule
    print(f"OK {scenario.name}: {topo.kind} fabric with {topo.n_hosts} hosts, "
          f"{topo.n_switches} switches, {topo.n_links} links; routing {scenario.policy}; "
          f"{len(scenario.faults)} faults ({len(prepared.faults)} link events); "
          f"workload {scenario.workload['kind']}: {sched.n_transfers} transfers"
          f"{_represented(sched)}, "
          f"{sched.total_bytes} bytes, {sched.n} schedule nodes; engine {prepared.engine}")
    if prepared.engine_options is None:
        print(f"note: engine {prepared.engine!r} is not available in this build, so its options "
              f"were not checked", file=sys.stderr)
    return 0


def _represented(sched) -> str:
    """" standing for N point-to-point transfers" under network_detail auto (docs/scale.md)."""
    n = sched.n_member_transfers
    if n == sched.n_transfers:
        return ""
    return f" standing for {n:,} point-to-point transfers (network_detail auto)"

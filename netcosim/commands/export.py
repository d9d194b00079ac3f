"""`netcosim export SCENARIO`: write the scenario's fabric (GraphML, JSON) and its workload as
a Chakra trace."""
from __future__ import annotations

from netcosim.cli import add_scenario_arguments, load_from_args
from topo.errors import InputError


def register(sub) -> None:
    p = sub.add_parser("export", help="write a scenario's fabric as GraphML/JSON and its "
                                      "workload as a Chakra trace",
                       description="Build SCENARIO and write its fabric as GraphML (networkx-"
                                   "readable) and/or netcosim JSON, and its workload Schedule "
                                   "as a Chakra execution trace (one <prefix>.<rank>.et per "
                                   "rank).")
    add_scenario_arguments(p)
    p.add_argument("--graphml", metavar="FILE", help="write the fabric as GraphML")
    p.add_argument("--json", metavar="FILE", help="write the fabric as netcosim JSON "
                                                  "(topo.io format, loads back exactly)")
    p.add_argument("--chakra", metavar="DIR", help="write the workload as a Chakra trace")
    p.add_argument("--prefix", default="netcosim",
                   help="file name prefix of the Chakra files (default: netcosim)")
    p.add_argument("--gzip", action="store_true", help="gzip the Chakra files (.et.gz)")
    p.set_defaults(func=run)


def run(args) -> int:
    from netcosim.interop import export

    from netcosim import outpaths
    from netcosim.interop.chakra_writer import check_prefix

    if not (args.graphml or args.json or args.chakra):
        raise InputError("export: nothing to write; give --graphml FILE, --json FILE and/or "
                         "--chakra DIR")
    # every destination checked before anything is built or written
    outpaths.check_distinct((args.graphml, f"--graphml {args.graphml!r}"),
                            (args.json, f"--json {args.json!r}"),
                            (args.chakra, f"--chakra {args.chakra!r}"))
    if args.graphml:
        outpaths.check_file(args.graphml, f"--graphml {args.graphml!r}", inputs=(args.scenario,))
    if args.json:
        outpaths.check_file(args.json, f"--json {args.json!r}", inputs=(args.scenario,))
    if args.chakra:
        check_prefix(args.prefix)
        outpaths.check_dir(args.chakra, f"--chakra {args.chakra!r}")
    scenario = load_from_args(args)
    kind = scenario.workload.get("kind") if isinstance(scenario.workload, dict) else None
    if args.chakra and kind == "inference":
        # its Schedule is a placeholder (one delay as long as the served span): written, it
        # was 8 files holding one compute node and no transfer, exit 0
        raise InputError(f"--chakra {args.chakra!r}: workload.kind = 'inference' is a serving "
                         f"loop priced from cost curves measured on the fabric, not one "
                         f"schedule of transfers, so it has no Chakra trace (docs/inference.md)")
    topology = scenario.build_topology()
    schedule = None
    if args.chakra:
        # built, and checked to fit as Chakra messages, before anything is written: a refusal
        # leaves no fabric file behind either
        from netcosim.memory_guard import check_chakra
        from netcosim.collective_remedies import building_in_full

        # one op per transfer: a memory refusal offers no scalable form (network_detail =
        # "auto" was offered, which the trace cannot hold)
        with building_in_full("Chakra export"):
            schedule = scenario.with_full_detail().build_schedule(topology)
        check_chakra(schedule.n, f"--chakra {args.chakra!r}", _smaller(kind))
    if args.graphml:
        print(f"fabric -> {export.write_graphml(topology, args.graphml)} (GraphML)")
    if args.json:
        print(f"fabric -> {export.write_json(topology, args.json)} (JSON)")
    if args.chakra:
        from netcosim.interop.chakra_writer import write_schedule

        paths = write_schedule(schedule, args.chakra, prefix=args.prefix,
                               n_ranks=topology.n_hosts, compress=args.gzip,
                               label=f"--chakra {args.chakra!r}")
        print(f"workload ({schedule.n} nodes) -> {len(paths)} Chakra files in {args.chakra}")
    return 0


def _smaller(kind) -> str:
    """How to make a workload of ``kind`` a smaller trace (what the trace's size grows with)."""
    return {"collective": "use fewer ranks, or fewer chunks where the collective has more "
                          "than one",
            "training": "use fewer GPUs, pipeline stages or micro-batches",
            "flows": "use fewer flows",
            "chakra": "use a smaller trace"}.get(kind, "use a smaller workload")

"""`netcosim topo SCENARIO`: build the scenario's fabric and print its figures."""
from __future__ import annotations

import json

from netcosim.cli import add_scenario_arguments, load_from_args


def register(sub) -> None:
    p = sub.add_parser("topo", help="print the fabric of a scenario: counts, bisection, diameter",
                       description="Build the scenario's [topology] and print node and link "
                                   "counts, bisection bandwidth and diameter.")
    add_scenario_arguments(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=run)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


def run(args) -> int:
    scenario = load_from_args(args)
    topology = scenario.build_topology()
    try:
        figures = topology.summary()
    except ModuleNotFoundError as e:  # topo.metrics (bisection, diameter) not in this build
        if e.name != "topo.metrics":
            raise
        figures = {"kind": topology.kind, "hosts": topology.n_hosts,
                   "switches": topology.n_switches, "links": topology.n_links,
                   "bisection_Gbps": "not available in this build",
                   "diameter_hops": "not available in this build"}
    if args.json:
        print(json.dumps(figures, indent=2, default=str))
        return 0
    labels = {"bisection_Gbps": ("bisection", " Gbps"), "diameter_hops": ("diameter", " hops"),
              "host_link_Gbps": ("host links", " Gbps")}
    width = max(len(labels.get(k, (k,))[0]) for k in figures)
    for key, value in figures.items():
        label, unit = labels.get(key, (key, ""))
        print(f"{label:<{width}}  {_fmt(value)}{unit if not isinstance(value, str) else ''}")
    return 0

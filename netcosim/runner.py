"""Run one Scenario end to end: build its parts, simulate, and summarise.

This is what ``netcosim run`` does between loading a file and writing files, as a function that
sweeps, fault studies and the Python API can call many times in one process.
"""
from __future__ import annotations

from topo.errors import InputError


def prepare(scenario, check_reachability: bool = True):
    """``scenario.prepare()`` with the engine required (see ``Scenario.prepare``)."""
    return scenario.prepare(check_engine=True, check_reachability=check_reachability)


def simulate_scenario(scenario, prepared=None, check_reachability: bool = True):
    """``(prepared, result, summary)`` for a ``netcosim.scenario.Scenario``.

    ``prepared`` (from ``scenario.prepare()``) may be passed to skip building the parts again.
    ``summary`` is the dict ``netcosim run`` writes to summary.json. With
    ``check_reachability`` false, transfers between hosts that faults disconnect are run and
    reported as stranded instead of refused.
    """
    from netcore.api import EngineUnavailable, get_engine, simulate
    from netcosim import outputs, workloads

    if prepared is None:
        prepared = prepare(scenario, check_reachability)
    try:
        get_engine(prepared.engine)
    except EngineUnavailable as e:
        raise InputError(f"engine.kind = {prepared.engine!r}: {e}") from None
    options = dict(prepared.engine_options or {})
    if prepared.engine == "flow" and options.get("memory_budget") is None:
        # the flow engine refuses a scalable-form schedule whose paths cannot fit, before
        # building them (netcore/flow/engine.py), with the room the memory guard measures now
        from netcosim.memory_guard import budget

        options["memory_budget"] = budget()[0]
    # prepare() already validated the schedule (build_workload does): do not pay for it twice.
    result = simulate(prepared.topology, prepared.schedule, prepared.routing, prepared.faults,
                      engine=prepared.engine, seed=scenario.seed, validate=False, **options)
    figures = workloads.report(scenario.workload, prepared.schedule, result)
    summary = outputs.summary(scenario, prepared, result, figures)
    return prepared, result, summary


def warm_engine(kind: str = "flow") -> None:
    """Run a two-host transfer so the engine's Numba kernels are compiled and cached on disk.

    Parallel workers that each find a cold cache compile at once and may write the cache
    files concurrently (DESIGN.md, packaging facts); warming in the parent first avoids both.
    """
    from netcosim.scenario import Scenario

    data = {"name": "warm-up", "topology": {"kind": "custom", "hosts": 2, "switches": 1,
                                             "links": [[0, 2, 100, 1.0], [1, 2, 100, 1.0]]},
            "routing": {"policy": "shortest"}, "engine": {"kind": kind},
            "faults": [{"link": [1, 2], "kind": "degrade", "factor": 0.5, "at_us": 1.0}],
            "workload": {"kind": "flows", "flows": [{"src": 0, "dst": 1, "bytes": 1 << 20},
                                                    {"src": 1, "dst": 0, "bytes": 1 << 16,
                                                     "deps": [0]}]}}
    simulate_scenario(Scenario.from_dict(data, default_name="warm-up"))

"""`simulate`: one entry point for both engines.

Each engine module exposes ``run(topology, schedule, routing, faults, seed=0, **options) ->
Result``; this function normalises the arguments, validates the schedule and dispatches.
"""
from __future__ import annotations

import importlib

from netcore.result import Result
from topo.errors import InputError
from netcore.schedule import Schedule

ENGINES = {
    "flow": "netcore.flow.engine",
    "packet": "netcore.packet.engine",
}


class EngineUnavailable(RuntimeError):
    """The engine's module is not part of this build."""


def get_engine(name: str):
    if name not in ENGINES:
        raise InputError(f"engine = {name!r}: expected one of {', '.join(ENGINES)}")
    try:
        return importlib.import_module(ENGINES[name])
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith(ENGINES[name].rsplit(".", 1)[0]):
            raise EngineUnavailable(f"engine = {name!r} is not available in this build") from None
        raise


def simulate(topology, schedule: Schedule, routing="ecmp", faults=None, engine: str = "flow",
             seed: int = 0, validate: bool = True, **options) -> Result:
    """Run ``schedule`` on ``topology``.

    ``routing`` is a policy name or a ``topo.routing.Routing``; ``faults`` a
    ``topo.faults.LinkFaults`` (or None). Engine options (mtu, transport, buffer_packets,
    reroute_delay_us, ...) pass through to the engine. ``validate=False`` skips the schedule
    check for a caller that has just made it (the scenario loader does).
    """
    from topo.faults import LinkFaults
    from topo.routing import Routing

    if isinstance(routing, str):
        routing = Routing(topology, routing, seed=seed)
    if faults is None:
        faults = LinkFaults.none()
    if validate:
        schedule.validate(topology.n_hosts, topology.n_nodes)
    return get_engine(engine).run(topology, schedule, routing, faults, seed=seed, **options)

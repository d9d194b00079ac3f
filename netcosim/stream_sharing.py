"""Where a collective's stream form is not exact: a ring whose own connections share a link.

``network_detail = "auto"`` runs a ring (or each ring of a hierarchical or torus phase) as one
member set moving in lock step (netcore.members). Two of its connections routed over one
directed link then send at once in every step, each at half the link, and wait out the step's
latency at once too. The full form lets them drift apart: one sends while the other waits for
its latency, so a latency-bound ring loses much less. On a 2x2x3 torus in row-major order
(ECMP, seed 1) a 1 MiB ring all-reduce took 217.0 us as a stream against 180.5 us in full
(+20%), at 64 MiB +2.2%. netcore/flow/uneven_split.py repairs collisions *between* sets; this
finds them *within* one, so the workload builder can run the full form instead when it fits in
memory.
"""
from __future__ import annotations

import numpy as np

from netcore.flow.member_routing import route_members
from netcore.schedule import TRANSFER
from topo.arrays import unique


def self_shared_links(schedule, routing, alive=None) -> int:
    """How many directed links two or more members of one member set of a multi-step
    transfer (a ring stream) cross, counted once per set (links ``alive``, default all up)."""
    ms = schedule.sets
    if ms is None or routing is None:
        return 0
    t = (schedule.kind == TRANSFER) & (schedule.mset >= 0) & (schedule.steps > 1)
    sets = unique(schedule.mset[t].astype(np.int64))
    if not sets.size:
        return 0
    pos = ms.positions(sets)
    paths = route_members(routing, ms, pos, alive=alive)
    owner = np.repeat(np.repeat(sets, ms.sizes[sets]), np.diff(paths.ptr))
    # a member lists a link at most once (a spray or plane-striped member with a fraction of
    # its load): two entries of one set on one link are two members sharing it, whatever
    # their fractions (two halves under spray collide as surely as two whole paths)
    key = owner * np.int64(routing.topology.n_dlinks) + paths.link
    _, count = np.unique(key, return_counts=True)
    return int(np.count_nonzero(count > 1))

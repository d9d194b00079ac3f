"""Where a collective's stream form is not exact: ring connections of one phase on one link.

``network_detail = "auto"`` runs a ring (or each ring of a hierarchical or torus phase) as one
member set moving in lock step (netcore.members). Two of its connections routed over one
directed link then send at once in every step, each at half the link, and wait out the step's
latency at once too. The full form lets them drift apart: one sends while the other waits for
its latency, so a latency-bound ring loses much less. On a 2x2x3 torus in row-major order
(ECMP, seed 1) a 1 MiB ring all-reduce took 217.0 us as a stream against 180.5 us in full
(+20%), at 64 MiB +2.2%. Rings of one phase that share a link (a hierarchical all-reduce over
groups that straddle nodes, or over ranks out of fabric order) drift against each other in the
full form too, in either direction: -9.7% and +7.7% on two_tier cases of 8 and 12 GPUs.
This finds both, so the workload builder can run the full form instead when it fits.
"""
from __future__ import annotations

import numpy as np

from netcore.flow.member_routing import route_members
from netcore.schedule import TRANSFER


def self_shared_links(schedule, routing, alive=None, by_phase: bool = False) -> int:
    """How many directed links two or more member connections of one ring stream cross, or
    with ``by_phase`` of the rings of one phase together (the member-set transfers of one
    label: the rings of one hierarchical or torus phase, which run at once), counted once per
    ring (phase) (links ``alive``, default all up).

    Rings of a ring collective laid one per rail (collectives/rail.py) are checked one by one:
    their phase is a single step of symmetric rings that stay in lock step in the full form
    too (tests/test_metamorphic_scale.py, full against scalable on two_tier), where the
    phase-wide check would send them to the full form for nothing."""
    ms = schedule.sets
    if ms is None or routing is None:
        return 0
    t = np.flatnonzero((schedule.kind == TRANSFER) & (schedule.mset >= 0))
    if not t.size:
        return 0
    sets, first = np.unique(schedule.mset[t].astype(np.int64), return_index=True)
    # the group each set is checked in: its phase (label) or itself
    group = schedule.label[t[first]].astype(np.int64) if by_phase else sets
    paths = route_members(routing, ms, ms.positions(sets), alive=alive)
    owner = np.repeat(np.repeat(group, ms.sizes[sets]), np.diff(paths.ptr))
    # a member lists a link at most once (a spray or plane-striped member with a fraction of
    # its load): two entries of one group on one link are two connections sharing it,
    # whatever their fractions (two halves under spray collide as surely as two whole paths)
    key = owner * np.int64(routing.topology.n_dlinks) + paths.link
    _, count = np.unique(key, return_counts=True)
    return int(np.count_nonzero(count > 1))

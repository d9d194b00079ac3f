"""A node split into pieces (plane striping on fullflat in the packet engine, members moving on
their own behind a fault in the flow engine) keeps its dependencies: every piece of a child
waits for every piece of its parents (netcore.schedule.piece_edges). A piece used to wait for
its parent's original node only, and started while the parent's other pieces still ran: the
times came out up to 45% short with nothing to say so."""
from __future__ import annotations

import numpy as np
import pytest

from netcore.api import simulate
from netcore.members import MemberSets
from netcore.schedule import DELAY, TRANSFER, Schedule, piece_edges, with_pieces
from topo.builders import build
from topo.faults import LinkFaults
from topo.topology import Topology, gbps, us

S = 1_000_000


def parents_closure(dep_ptr, dep_idx, i) -> set:
    seen, stack = set(), [i]
    while stack:
        j = stack.pop()
        for p in dep_idx[dep_ptr[j]:dep_ptr[j + 1]]:
            if int(p) not in seen:
                seen.add(int(p))
                stack.append(int(p))
    return seen


def test_every_piece_of_a_child_waits_for_every_piece_of_its_parent():
    # 0 -> 1 -> 2, with 0 and 1 split in two and three pieces, 2 not split
    s = Schedule.from_transfers([0, 1, 2], [1, 2, 3], [10, 10, 10], deps=[[], [0], [1]])
    orig = np.array([0, 1, 1])  # pieces 3 (of 0), 4 and 5 (of 1)
    dep_ptr, dep_idx, joined = piece_edges(s, orig)
    assert list(joined) == [0, 1]  # both split nodes have children: one join each (6, 7)
    assert len(dep_ptr) == 3 + 3 + 2 + 1
    group = {0: {0, 3}, 1: {1, 4, 5}}
    for child in group[1]:
        assert group[0] <= parents_closure(dep_ptr, dep_idx, child)
    assert group[1] | group[0] <= parents_closure(dep_ptr, dep_idx, 2)
    # a piece has its original's parents (a join where the parent was split), nothing more
    assert set(dep_idx[dep_ptr[4]:dep_ptr[5]]) == {6}
    assert set(dep_idx[dep_ptr[3]:dep_ptr[4]]) == set()
    # a join waits for its node and the node's pieces only
    assert set(dep_idx[dep_ptr[6]:dep_ptr[7]]) == {0, 3}
    assert set(dep_idx[dep_ptr[7]:dep_ptr[8]]) == {1, 4, 5}
    grown, origin = with_pieces(s, orig)
    assert list(origin) == [0, 1, 2, 0, 1, 1, 0, 1]
    assert (grown.kind[6:] == DELAY).all() and (grown.duration[6:] == 0).all()
    assert list(grown.dep_idx) == list(dep_idx) and list(grown.size[3:6]) == [10, 10, 10]


@pytest.mark.parametrize("transport", ["ideal", "tcp", "dcqcn"])
def test_a_reply_on_fullflat_starts_after_every_plane_of_its_request(transport):
    t = build("fullflat", {"n_gpus": 4, "planes": 2})  # hosts 0-3, plane switches 4, 5
    s = Schedule.from_transfers([2, 3], [3, 2], [S, S], deps=[[], [0]])
    f = LinkFaults.from_records(t, [{"link": [2, 5], "kind": "degrade", "factor": 0.1}])
    r = simulate(t, s, "ecmp", f, engine="packet", transport=transport)
    assert r.start[1] >= r.end[0]
    assert r.info["plane_pieces"] == 2  # one further piece per transfer, joins not counted
    # the reply crosses the same degraded plane back: it takes about as long as the request
    assert r.end[1] - r.start[1] == pytest.approx(r.end[0], rel=0.05)
    flow = simulate(t, s, "ecmp", f, engine="flow")
    assert r.end[1] >= flow.end[1]  # the fluid bound (it was 38% below it)


def test_member_sets_split_by_a_fault_equal_the_transfers_one_by_one():
    n = 4
    star = Topology("custom", n, 1, np.arange(n), np.full(n, n), np.full(n, gbps(100)),
                    np.full(n, us(1.0)), np.zeros(n))
    sets = MemberSets(np.array([0, 2, 4]), np.array([0, 2, 1, 3]), np.array([1, 3, 0, 2]))
    agg = Schedule(kind=np.full(2, TRANSFER), src=[0, 1], dst=[1, 0], size=[S, S],
                   duration=np.zeros(2), start=np.zeros(2), dep_ptr=[0, 0, 1], dep_idx=[0],
                   mset=[0, 1], sets=sets)  # step 2 (the replies) after step 1
    full = Schedule.from_transfers([0, 2, 1, 3], [1, 3, 0, 2], [S] * 4,
                                   deps=[[], [], [0, 1], [0, 1]])
    f = LinkFaults.from_records(star, [{"link": [2, 4], "kind": "degrade", "factor": 0.1}])
    a = simulate(star, agg, "shortest", f)
    b = simulate(star, full, "shortest", f)
    assert a.info["split_pieces"] == 2 and len(a.end) == 2
    assert a.makespan == pytest.approx(b.makespan, rel=1e-12)  # was 884 against 1,604 us
    assert a.start[1] == pytest.approx(max(b.end[0], b.end[1]), rel=1e-12)

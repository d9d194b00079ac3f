"""Members that routing leaves slower than the rest of their set move on their own
(netcore/flow/uneven_split.py): found, budgeted, and what it does to a step's accuracy."""
import numpy as np
import pytest

from compute.report import summarize
from compute.training import build_step
from netcore.api import simulate
from netcore.flow.uneven_split import outlier_members
from netcore.members import MemberSets
from netcore.schedule import TRANSFER, Schedule
from topo.builders import two_tier
from topo.builders.custom import custom
from topo.routing import Routing

# hosts 0, 1, 2 on switch 5, hosts 3, 4 on switch 6, one link between the switches
DUMBBELL = custom(5, 2, [[0, 5, 100, 1], [1, 5, 100, 1], [2, 5, 100, 1], [3, 6, 100, 1],
                         [4, 6, 100, 1], [5, 6, 100, 1]])


def _sets_schedule(members, steps=None):
    """One transfer node per set; ``members``: list of sets, each a list of (src, dst);
    ``steps``: serial steps of each node (1)."""
    ptr = np.concatenate([[0], np.cumsum([len(m) for m in members])])
    src = np.array([a for m in members for a, _ in m])
    dst = np.array([b for m in members for _, b in m])
    k = len(members)
    return Schedule(kind=[TRANSFER] * k, src=src[ptr[:-1]], dst=dst[ptr[:-1]],
                    size=[1 << 20] * k, duration=[0.0] * k, start=[0.0] * k,
                    dep_ptr=np.zeros(k + 1, np.int64), dep_idx=np.zeros(0),
                    mset=np.arange(k), sets=MemberSets(ptr, src, dst), steps=steps)


def test_independent_members_colliding_on_their_own_are_outliers_a_rings_are_not():
    # set A: 0->3 and 1->4 both cross 5->6, 2->0 stays on switch 5. Set B (2->1, 1->0) loads
    # the host links so that, counted over both sets, every member of A has the same share
    # (a half). Counted on its own, A's two crossing members share 5->6 while 2->0 has its
    # links to itself: when A runs they move at half the rate of 2->0
    sets = [[(0, 3), (1, 4), (2, 0)], [(2, 1), (1, 0)]]
    r = Routing(DUMBBELL, "shortest")
    one_step = outlier_members(_sets_schedule(sets, steps=[1, 2]), r)
    assert one_step.tolist() == [True, True, False, False, False]
    # as a ring stream (3 steps) A's connections wait for one another at every step in the
    # full form too: the collision slows the whole ring there as well, lock step is right
    assert outlier_members(_sets_schedule(sets, steps=[3, 2]), r) is None


def test_the_member_sharing_a_link_with_another_set_is_the_outlier():
    # set 0: 0->1 stays on switch 5, 1->3 crosses 5-6, which set 1's 2->4 crosses too
    s = _sets_schedule([[(0, 1), (1, 3)], [(2, 4)]])
    out = outlier_members(s, Routing(DUMBBELL, "shortest"))
    assert out.tolist() == [False, True, False]  # set 1 has one member: even by definition


def test_an_even_set_is_not_split():
    s = _sets_schedule([[(0, 1), (1, 2), (3, 4)]])
    assert outlier_members(s, Routing(DUMBBELL, "shortest")) is None


def test_budget_repairs_the_most_uneven_sets_first():
    # three paths cross 5->6: set 0's outlier gets a third where its sibling has whole links
    # (best / worst = 3), set 1's a third where its sibling shares 6->4 (1.5)
    s = _sets_schedule([[(0, 1), (1, 3)], [(3, 4), (2, 4)], [(0, 3)]])
    r = Routing(DUMBBELL, "shortest")
    both = outlier_members(s, r)
    assert both.tolist() == [False, True, False, True, False]
    assert outlier_members(s, r, budget=1).tolist() == [False, True, False, False, False]
    assert outlier_members(s, r, budget=0) is None


def test_split_keeps_every_byte_on_its_link():
    s = _sets_schedule([[(0, 1), (1, 3)], [(2, 4)]])
    a = simulate(DUMBBELL, s, "shortest", engine="flow")
    assert a.info["split_pieces"] == 1
    # the same transfers one by one
    src, dst = s.sets.src, s.sets.dst
    k = len(src)
    one = Schedule(kind=[TRANSFER] * k, src=src, dst=dst, size=[1 << 20] * k,
                   duration=[0.0] * k, start=[0.0] * k, dep_ptr=np.zeros(k + 1, np.int64),
                   dep_idx=np.zeros(0))
    b = simulate(DUMBBELL, one, "shortest", engine="flow")
    np.testing.assert_allclose(a.link_bytes, b.link_bytes, rtol=1e-12)
    # lock step would hold 0->1 at half rate; on its own it is done first, as the full form
    assert a.makespan == pytest.approx(b.makespan, rel=1e-9)


# a Mixtral-8x7B-like MoE whose data-parallel rings cross rails through the spines under ECMP
MOE = dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, gated_mlp=True,
           experts=8, top_k=2, seq=4096, vocab=32000, name="moe-8x7b-like")


def test_moe_step_with_collided_rings_auto_within_one_percent_of_full():
    """The auto-against-full row that lock step missed (+1.07%; docs/scale.md)."""
    fab = two_tier(nodes=32, gpus_per_node=8, nic_gbps=400, scaleup_gbps=7200)
    par = dict(tp=2, pp=4, ep=8, sp=True, recompute="selective", global_batch=64)
    t = {}
    for detail in ("full", "auto"):
        s = build_step(MOE, par, "h100_sxm", fab, granularity="coarse", network_detail=detail)
        r = simulate(fab, s, "ecmp", engine="flow")
        t[detail] = summarize(s, r.start, r.end)["step_time_s"]
        if detail == "auto":
            assert r.info["split_pieces"] > 0
    assert t["auto"] == pytest.approx(t["full"], rel=0.01)

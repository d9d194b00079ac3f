"""The flow engine's local repair (docs/flow_engine.md "Local repair") against the whole
component solve it replaces: same start and end of every transfer and same link loads at every
instant, on random DAGs (ecmp, spray, faults), and on pipelined trees where it must be used."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collectives as co
from netcore import Schedule, simulate
from topo.builders import fat_tree
from flow_fuzz import FT4, link_faults



def _run_both(topo, sched, policy, faults=None, **opts):
    a = simulate(topo, sched, policy, faults, link_series=True, local_repair=False, **opts)
    b = simulate(topo, sched, policy, faults, link_series=True, local_repair=True, **opts)
    return a, b


def _loads_at(res, probes):
    """Rate of every directed link at each probe time, from the piecewise-constant series."""
    ptr, tt, rr = (res.link_extra[k] for k in ("series_ptr", "series_t", "series_rate"))
    out = np.zeros((len(ptr) - 1, len(probes)))
    for l in range(len(ptr) - 1):
        t, r = tt[ptr[l]:ptr[l + 1]], rr[ptr[l]:ptr[l + 1]]
        if len(t):
            i = np.searchsorted(t, probes, side="right") - 1
            out[l] = np.where(i >= 0, r[np.maximum(i, 0)], 0.0)
    return out


def _assert_same(a, b, bw):
    np.testing.assert_allclose(b.start, a.start, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(b.end, a.end, rtol=1e-9, atol=1e-15)
    assert np.array_equal(np.isnan(a.end), np.isnan(b.end))
    # every allocation in between: link loads at instants away from any event
    ev = np.unique(np.concatenate([a.link_extra["series_t"], b.link_extra["series_t"]]))
    if len(ev) > 1:
        probes = (ev[:-1] + ev[1:]) / 2
        probes = probes[np.diff(ev) > 1e-12 * max(ev[-1], 1e-9)]
        la, lb = _loads_at(a, probes), _loads_at(b, probes)
        np.testing.assert_allclose(lb, la, rtol=0, atol=1e-9 * float(np.max(bw)))


@st.composite
def dags(draw):
    """Random transfer DAGs on the 16 hosts of fat_tree(4): distinct sizes and start times
    (no exact ties, whose order is a matter of rounding in any solver), chains of parents."""
    n = draw(st.integers(20, 90))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(10_000, 3_000_000, n)
    start = rng.random(n) * 40e-6 * rng.integers(0, 2, n)
    deps = [[int(rng.integers(0, i))] if i and rng.random() < 0.4 else [] for i in range(n)]
    policy = draw(st.sampled_from(["ecmp", "spray", "shortest"]))
    return Schedule.from_transfers(src, dst, size, start=start, deps=deps), policy


@settings(max_examples=40, deadline=None)
@given(dags())
def test_local_repair_gives_the_component_solve(sc):
    sched, policy = sc
    a, b = _run_both(FT4, sched, policy)
    _assert_same(a, b, FT4.dlink_bw)
    assert a.info["local_repairs"] == 0 and a.info["local_repairs_given_up"] == 0
    assert b.info["local_repairs"] + b.info["local_repairs_given_up"] > 0  # it was tried


@settings(max_examples=25, deadline=None)
@given(dags(), st.integers(0, 2**32 - 1))
def test_local_repair_under_faults(sc, seed):
    """Links going down (re-routes, strands), degrading and coming back up: capacity changes
    reach the solver as seeded links, which the repair re-solves whole."""
    sched, policy = sc
    faults = link_faults(seed, 4, [0.25, 0.5])
    a, b = _run_both(FT4, sched, policy, faults, reroute_delay_us=2.0)
    _assert_same(a, b, FT4.dlink_bw)


@pytest.mark.parametrize("k", [6, 8])
def test_pipelined_trees_repair_locally(k):
    """The case the repair is for: a pipelined double binary tree, whose chunk starts are
    additions to one component spanning the fabric. Same makespan to rounding, a fraction of
    the work."""
    topo = fat_tree(k, link_gbps=400)
    sched = co.build("all_reduce", "double_binary_tree", list(range(topo.n_hosts)), 64 << 20,
                     fabric=topo).with_connections()
    a = simulate(topo, sched, "ecmp", local_repair=False)
    b = simulate(topo, sched, "ecmp", local_repair=True)
    assert b.makespan == pytest.approx(a.makespan, rel=1e-9)
    assert b.info["local_repairs"] > 0.75 * b.info["recomputes"]
    assert b.info["solved_flows"] < a.info["solved_flows"] / 3


def test_local_repair_grows_gives_up_and_stays_exact():
    """200 overlapping flows on 16 hosts keep most rates coupled: repairs need several rounds,
    some outgrow their limit and hand the batch to the component solve (then back off for a
    while): the results are those of the component solve all the same."""
    n = 200
    rng = np.random.default_rng(5)
    src = rng.integers(0, 16, n)
    dst = (src + 1 + rng.integers(0, 15, n)) % 16
    size = rng.integers(100_000, 5_000_000, n)
    start = np.sort(rng.random(n)) * 1e-3
    sched = Schedule.from_transfers(src, dst, size, start=start)
    a, b = _run_both(FT4, sched, "spray")
    _assert_same(a, b, FT4.dlink_bw)
    assert b.info["local_repairs"] > 0
    assert b.info["local_repairs_given_up"] > 0
    assert b.info["local_repair_rounds"] > b.info["local_repairs"] + b.info["local_repairs_given_up"]


def test_local_repair_option_is_checked():
    from topo.errors import InputError

    with pytest.raises(InputError, match=r"engine\.local_repair"):
        simulate(FT4, Schedule.from_transfers([0], [1], [10]), "ecmp", local_repair="yes")

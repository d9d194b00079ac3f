"""Slack links (docs/flow_engine.md, "Slack links"): a link whose potential load (each active
flow at its solo rate) is below its capacity is left out of every solve, and a flow starting or
ending on it seeds nothing. The allocation must be what a solve over every link gives: runs with
link series (which keep every link in) are the reference."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcore import Schedule, simulate
from netcore.flow.state import FlowState
from flow_fuzz import FT4, tied_dags, link_faults
from topo.builders import leaf_spine
from topo.faults import DEGRADE, UP, LinkFaults

ARRAYS = ("start", "end", "link_bytes", "link_busy")


def _same(a, b):
    for k in ARRAYS:
        np.testing.assert_allclose(getattr(a, k), getattr(b, k), rtol=1e-9, atol=1e-15,
                                   err_msg=k)


def _faults(rows):
    rows = sorted(rows)
    return LinkFaults(*(np.array(c) for c in zip(*rows)))


# Four hosts of leaf 0 send to the four of leaf 1 through one 100 Gb/s uplink (4:1). Their
# host links start at a tenth of their rate: each flow's solo rate is then 1.25 GB/s and the
# uplink, 5 GB/s of potential against 12.5, is slack. At 200 us the host links recover: the
# solo rates become 12.5 GB/s and the uplink binds (3.125 GB/s each).
LS = leaf_spine(2, 4, 1, oversubscription=4, link_gbps=100, latency_us=1.0)
SIZE = 2_000_000
T_UP = 200e-6


def _recovery_case(**opts):
    sched = Schedule.from_transfers([0, 1, 2, 3], [4, 5, 6, 7], [SIZE] * 4)
    rows = [(0.0, d, DEGRADE, 0.1) for d in (0, 2, 4, 6)]
    rows += [(T_UP, d, UP, 1.0) for d in (0, 2, 4, 6)]
    return simulate(LS, sched, "ecmp", _faults(rows), **opts)


def test_a_recovered_link_makes_a_slack_uplink_bind():
    res = _recovery_case()
    _same(res, _recovery_case(link_series=True))
    # 1.25 GB/s until the recovery, then a quarter of the 12.5 GB/s uplink each: 760 us of
    # payload (the engine adds headers and the path latency: 764 us)
    expect = T_UP + (SIZE - 1.25e9 * T_UP) / (12.5e9 / 4)
    np.testing.assert_allclose(res.end, expect, rtol=0.01)


def test_without_the_rebuild_the_recovery_case_is_wrong(monkeypatch):
    """The potential loads must be recomputed when a capacity rises: left at the degraded solo
    rates, the uplink stays slack and the four flows overrun it."""
    right = _recovery_case()
    monkeypatch.setattr(FlowState, "rebuild_potential", lambda self: None)
    wrong = _recovery_case()
    assert wrong.end.max() < 0.5 * right.end.max()  # 344 us against 764


def test_a_link_that_turns_slack_frees_the_flows_it_bound():
    """Four flows share a 200 Gb/s uplink (6.25 GB/s each). At 100 us three of their host
    links fall to 5%: the uplink turns slack, and the fourth flow, reached through no link the
    fault touched, must go up to its own host link's 12.5 GB/s."""
    topo = leaf_spine(2, 4, 1, oversubscription=2, link_gbps=100, latency_us=1.0)
    sched = Schedule.from_transfers([0, 1, 2, 3], [4, 5, 6, 7], [SIZE] * 4)
    t0 = 100e-6
    faults = _faults([(t0, d, DEGRADE, 0.05) for d in (0, 2, 4)])
    res = simulate(topo, sched, "ecmp", faults)
    _same(res, simulate(topo, sched, "ecmp", faults, link_series=True))
    expect = t0 + (SIZE - 6.25e9 * t0) / 12.5e9  # 210 us (it would be 320 us left bound)
    np.testing.assert_allclose(res.end[3], expect, rtol=0.02)


@settings(max_examples=25, deadline=None)
@given(tied_dags(), st.integers(0, 2**32 - 1))
def test_slack_links_change_no_allocation(sc, seed):
    """Host and fabric links degraded deep (slack links everywhere above them), cut, and
    recovered."""
    sched, policy, transport = sc
    faults = link_faults(seed, 4, [0.05, 0.5])
    opts = dict(reroute_delay_us=2.0, transport=transport)
    _same(simulate(FT4, sched, policy, faults, **opts),
          simulate(FT4, sched, policy, faults, link_series=True, **opts))


@pytest.mark.parametrize("local_repair", [True, False])
def test_all_to_all_under_oversubscription(local_repair):
    """Many flows, most of them below links they cannot fill (an oversubscribed leaf-spine
    all-to-all with mixed sizes): local repair and the component solve, slack links or not."""
    topo = leaf_spine(4, 4, 2, oversubscription=2, link_gbps=100, latency_us=1.0)
    rng = np.random.default_rng(7)
    src, dst = np.nonzero(~np.eye(16, dtype=bool))
    size = rng.integers(10_000, 2_000_000, len(src))
    sched = Schedule.from_transfers(src, dst, size)
    a = simulate(topo, sched, "ecmp", local_repair=local_repair)
    b = simulate(topo, sched, "ecmp", local_repair=local_repair, link_series=True)
    _same(a, b)

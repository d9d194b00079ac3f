"""The contention model counts on a link only the transfers that can run at the same time
(netcore/flow/overlap.py; docs/flow_engine.md "The contention model").

Found: transfers of one DAG depth were all counted as sharing their links, whatever their
start times. Eight 1 MiB flows leaving one host 1 ms apart (100 Gb/s: 84.9 us each, alone)
ran at the 8-flow efficiency under tcp, 121.1 us each (packet engine: 88.1 us); eight flows
into one host likewise under dcqcn, 90.9 us (packet engine: 86.0 us). Now transfers whose
active intervals cannot overlap are the fluid model exactly, the same transfers started
together are still slowed, partly overlapping intervals count the most active at one
instant, and spreading start times apart never raises a link's count."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from netcore import Schedule, simulate
from netcore.flow import contention as C
from netcore.flow import overlap as O
from netcosim.scenario import Scenario
from topo.builders import fat_tree

STAR9 = {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 9, "spines": 1,
         "link_gbps": 100, "latency_us": 0.5}
FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)
MIB = 1 << 20
X_US = MIB / 12.5e9 * 1e6  # 1 MiB alone on a 100 Gb/s link: 83.9 us


def _flows_run(flows, contention, topology=STAR9):
    d = {"name": "o", "seed": 1, "topology": topology, "routing": {"policy": "ecmp"},
         "engine": {"kind": "flow", "contention": contention},
         "workload": {"kind": "flows", "flows": flows}}
    p = Scenario.from_dict(d, default_name="o").prepare()
    return simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow", seed=1,
                    validate=False, **p.engine_options)


def _spread(gap_us, fan_out, n=8, size=MIB):
    """n flows from host 0 to hosts 1..n (fan_out) or from hosts 1..n into host 0, flow i
    starting at i x gap_us."""
    return [{"src": 0 if fan_out else i + 1, "dst": i + 1 if fan_out else 0, "bytes": size,
             "start_us": i * gap_us} for i in range(n)]


def _with_stats(fn):
    """(fn's value, the LinkStats of the contention run fn makes)."""
    seen = {}
    real = C.link_stats

    def spy(st, topology):
        seen["ls"] = real(st, topology)
        return seen["ls"]

    C.link_stats = spy
    try:
        out = fn()
    finally:
        C.link_stats = real
    return out, seen.get("ls")


# tcp lowers the links leaving a host (a fan-out shares one), dcqcn every shared link (a
# fan-in's receiver link is the one that loses most)
@pytest.mark.parametrize("model,fan_out", [("tcp", True), ("dcqcn", False), ("dcqcn", True)])
def test_flows_that_never_overlap_run_as_the_fluid_model(model, fan_out):
    fluid = _flows_run(_spread(1000.0, fan_out), "fluid")
    got = _flows_run(_spread(1000.0, fan_out), model)
    np.testing.assert_allclose(got.end - got.start, fluid.end - fluid.start, rtol=1e-9)
    np.testing.assert_allclose(got.end, fluid.end, rtol=1e-9)
    # each alone: S / B + two 0.5 us hops
    assert fluid.end[0] - fluid.start[0] == pytest.approx(X_US * 1e-6 + 1e-6, rel=1e-9)


@pytest.mark.parametrize("model,fan_out", [("tcp", True), ("dcqcn", False)])
def test_the_same_flows_started_together_are_slowed(model, fan_out):
    fluid = _flows_run(_spread(0.0, fan_out), "fluid")
    got = _flows_run(_spread(0.0, fan_out), model)
    assert got.makespan > 1.05 * fluid.makespan  # tcp: 961.4 us, dcqcn: 719.9, fluid: 672.1
    # and 1 ms apart they are not (the case of the test above)
    apart = _flows_run(_spread(1000.0, fan_out), model)
    alone = _flows_run(_spread(1000.0, fan_out), "fluid")
    assert (apart.end - apart.start).max() < 1.01 * (alone.end - alone.start).min()


@pytest.mark.parametrize("model", ["tcp", "dcqcn"])
def test_same_depth_after_parents_of_very_different_lengths(model):
    # A (0 -> 3) after a 1 KiB transfer, B (0 -> 6) after a 10 MiB one: both at depth 1,
    # A done long before B starts, so host 0's uplink carries one at a time
    flows = [{"src": 1, "dst": 2, "bytes": 1024},
             {"src": 4, "dst": 5, "bytes": 10 * MIB},
             {"src": 0, "dst": 3, "bytes": MIB, "deps": [0]},
             {"src": 0, "dst": 6, "bytes": MIB, "deps": [1]}]
    fluid = _flows_run(flows, "fluid")
    got, ls = _with_stats(lambda: _flows_run(flows, model))
    np.testing.assert_allclose(got.end, fluid.end, rtol=1e-9)
    assert ls.flows.max() == 1.0
    # the same two children after equal parents do overlap: counted together, slowed
    flows[0]["bytes"] = 10 * MIB
    fluid = _flows_run(flows, "fluid")
    got, ls = _with_stats(lambda: _flows_run(flows, model))
    assert ls.flows.max() == 2.0
    if model == "tcp":
        assert got.end[2] - got.start[2] > 1.05 * (fluid.end[2] - fluid.start[2])


def _fan_out_counts(starts_us):
    """flows(l) of host 0's uplink for 1 MiB flows from host 0 to hosts 1.. at starts_us."""
    flows = [{"src": 0, "dst": i + 1, "bytes": MIB, "start_us": float(s)}
             for i, s in enumerate(starts_us)]
    _, ls = _with_stats(lambda: _flows_run(flows, "tcp"))
    topo = Scenario.from_dict({"topology": STAR9}).build_topology()
    up = int(np.flatnonzero(topo.dlink_src == 0)[0])
    return ls.flows[up]


def test_partly_overlapping_intervals_count_the_most_active_at_once():
    # A at 0 and B at x/2 overlap (each then takes 2x: sharing the link half and half);
    # C at 2.2x starts after A's 2x but within B's 2.5x: never three at once
    assert _fan_out_counts([0.0, 0.5 * X_US, 2.2 * X_US]) == 2.0
    # C at 1.5x is inside both
    assert _fan_out_counts([0.0, 0.5 * X_US, 1.5 * X_US]) == 3.0
    # all three together, or each alone
    assert _fan_out_counts([0.0, 0.0, 0.0]) == 3.0
    assert _fan_out_counts([0.0, 2 * X_US, 4 * X_US]) == 1.0


def test_max_overlap_sweep():
    # group 0: [0,10) [5,15) [12,20): two at once; group 1: [0,10) [10,20) touch: one;
    # group 2: all share t=3 (weights 2 and 1): their sum; group 3: [0,4) w2, [1,9) w1,
    # [2,3) w1, [5,6) w3: the w3 interval meets only [1,9): 4
    group = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3])
    lo = np.array([0., 5, 12, 0, 10, 0, 3, 0, 1, 2, 5])
    hi = np.array([10., 15, 20, 10, 20, 4, 9, 4, 9, 3, 6])
    wt = np.array([1., 1, 1, 1, 1, 2, 1, 2, 1, 1, 3])
    total = np.bincount(group, weights=wt)
    got, common = O.max_overlap(group, lo, hi, wt, total)
    assert got.tolist() == [2.0, 1.0, 3.0, 4.0] and not common
    got, common = O.max_overlap(group[5:7] - 2, lo[5:7], hi[5:7], wt[5:7], total[2:3])
    assert got.tolist() == [3.0] and common


def test_time_windows():
    level = np.array([0, 0, 0, 1, 1, 0])
    lo = np.array([0., 5, 20, 0, 1, 12])
    hi = np.array([10., 12, 30, 2, 3, 13])
    order = np.lexsort((lo, level)).astype(np.int64)
    # depth 0: [0,10) [5,12) chain; [12,13) starts where they end: a new window; [20,30)
    # another; depth 1: one window
    assert O.time_windows(order, level, lo, hi).tolist() == [0, 0, 2, 3, 3, 1]


def test_earliest_starts():
    # 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone starting at 7
    ndeps = np.array([0, 1, 1, 2, 0])
    cptr = np.array([0, 2, 3, 4, 4, 4])
    cidx = np.array([1, 2, 3, 3])
    start = np.array([0., 0, 6, 0, 7])
    dur = np.array([2., 5, 1, 1, 1])
    assert O.earliest_starts(ndeps, cptr, cidx, start, dur).tolist() == [0, 2, 6, 7, 7]


@pytest.mark.parametrize("model", ["tcp", "dcqcn"])
def test_deterministic(model):
    rng = np.random.default_rng(3)
    n = 40
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(10_000, 3_000_000, n)
    start = rng.choice([0.0, 30e-6, 100e-6, 400e-6], n)
    sc = Schedule.from_transfers(src, dst, size, start=start)
    a, la = _with_stats(lambda: simulate(FT4, sc, "ecmp", contention=model))
    b, lb = _with_stats(lambda: simulate(FT4, sc, "ecmp", contention=model))
    assert np.array_equal(a.end, b.end) and np.array_equal(la.flows, lb.flows)
    assert np.array_equal(la.level, lb.level) and la.span == lb.span


def _counts(sc, policy, model):
    res, ls = _with_stats(lambda: simulate(FT4, sc, policy, contention=model))
    return res, ls


@settings(max_examples=40, deadline=None)
@given(seed=hst.integers(0, 2**32 - 1), n=hst.integers(2, 24),
       model=hst.sampled_from(["tcp", "dcqcn"]),
       policy=hst.sampled_from(["ecmp", "dmodk", "spray"]),
       k=hst.sampled_from([1.5, 3.0, 10.0]))
def test_spreading_start_times_never_raises_a_count(seed, n, model, policy, k):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(1, 3_000_000, n)
    start = rng.integers(0, 6, n) * 40e-6

    def sched(s):
        return Schedule.from_transfers(src, dst, size, start=s)

    _, together = _counts(sched(np.zeros(n)), policy, model)
    _, ls = _counts(sched(start), policy, model)
    _, wider = _counts(sched(start * k), policy, model)
    # all at once: every transfer of the one depth counts on its links
    assert np.array_equal(together.flows, together.tot)
    assert (ls.flows <= together.flows).all()
    assert (wider.flows <= ls.flows).all()


@settings(max_examples=30, deadline=None)
@given(seed=hst.integers(0, 2**32 - 1), n=hst.integers(2, 20),
       model=hst.sampled_from(["tcp", "dcqcn"]),
       policy=hst.sampled_from(["ecmp", "spray"]))
def test_transfers_far_apart_are_the_fluid_model(seed, n, model, policy):
    # transfer i starts at i x 10 ms (each takes at most 0.3 ms alone), some after an
    # earlier one: no two are ever active at once, so nothing is lowered
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(1, 3_000_000, n)
    deps = [[int(rng.integers(0, i))] if i and rng.random() < 0.4 else [] for i in range(n)]
    sc = Schedule.from_transfers(src, dst, size, start=np.arange(n) * 10e-3, deps=deps)
    fluid = simulate(FT4, sc, policy)
    got, ls = _counts(sc, policy, model)
    assert ls.flows.max() <= 1.0
    np.testing.assert_allclose(got.end - got.start, fluid.end - fluid.start, rtol=1e-9)

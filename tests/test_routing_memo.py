"""Single-path walks to hosts memoise a busy node's next hops per anchor of the destination
(topo/_routing.pyx, walk_anchored): the paths must be those of the plain scan, bit for bit."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.builders import leaf_spine, two_tier
from topo.routing import _KERNEL_MODES, Routing
from topo.topology import Topology

NO_MEMO = 10 ** 9


def routed(t, policy, s, d, alive, degree, entries=Routing.memo_entries):
    r = Routing(t, policy, seed=5)
    r.memo_degree, r.memo_entries = degree, entries
    return r.paths(s, d, alive=alive)


def assert_same(a, b):
    for name in ("ptr", "link", "reachable", "latency", "hops"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def own_rows(t, policy, s, d, alive):
    """The walk over each destination's own distance row (no anchors, no memo)."""
    r = Routing(t, policy, seed=5)
    key, alive8 = r._alive(alive)
    fid = np.arange(len(s), dtype=np.int64)
    return r._single_rows(np.asarray(s, np.int32), np.asarray(d, np.int32), fid, key, alive8,
                          _KERNEL_MODES[policy])


@pytest.mark.parametrize("policy", sorted(_KERNEL_MODES))
@pytest.mark.parametrize("fabric", ["two_tier", "leaf_spine"])
@pytest.mark.parametrize("down", [0.0, 0.05])
def test_busy_leaves_give_the_scans_paths(policy, fabric, down):
    # rail leaves of 160 nodes + 160 spines, or 3 leaves of 300 spines: degrees >= 256, so
    # the default threshold memoises them (16 and 3 anchors' lists)
    t = two_tier(160, 4) if fabric == "two_tier" else leaf_spine(3, 4, 300)
    assert np.diff(t.adjacency[0]).max() >= Routing.memo_degree
    rng = np.random.default_rng(3)
    s = rng.integers(0, t.n_hosts, 3000)
    d = rng.integers(0, t.n_hosts, 3000)
    alive = rng.random(t.n_dlinks) >= down
    got = routed(t, policy, s, d, alive, Routing.memo_degree)
    assert_same(got, routed(t, policy, s, d, alive, NO_MEMO))
    assert got.reachable.mean() > 0.5
    # and those of the walk over each destination's own row (flow ids as own_rows numbers them)
    fid = np.arange(len(s))
    assert_same(Routing(t, policy, seed=5).paths(s, d, flow_id=fid, alive=alive),
                own_rows(t, policy, s, d, alive))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_memo_equals_scan_on_random_fabrics(data):
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    n_sw = data.draw(st.integers(1, 10), label="switches")
    n_h = data.draw(st.integers(1, 12), label="hosts")
    edges = {(n_h + int(rng.integers(0, i)), n_h + i) for i in range(1, n_sw)}  # connected
    for _ in range(data.draw(st.integers(0, 2 * n_sw), label="extra")):
        a, b = sorted(rng.choice(n_sw, 2, replace=False).tolist()) if n_sw > 1 else (0, 0)
        if a != b:
            edges.add((n_h + a, n_h + b))
    for h in range(n_h):  # every host on one to three switches (several anchors tie)
        for sw in rng.choice(n_sw, int(rng.integers(1, min(3, n_sw) + 1)), replace=False):
            edges.add((h, n_h + int(sw)))
    u, v = zip(*sorted(edges))
    L = len(u)
    t = Topology("custom", n_h, n_sw, u, v, np.ones(L), rng.random(L) * 1e-6, np.zeros(L))
    alive = rng.random(2 * L) > data.draw(st.sampled_from([0.0, 0.1, 0.3]), label="down")
    s = rng.integers(0, n_h, 60)
    d = rng.integers(0, n_h, 60)
    policy = data.draw(st.sampled_from(sorted(_KERNEL_MODES)), label="policy")
    entries = data.draw(st.sampled_from([0, 3, 10 ** 6]), label="memo_entries")
    scan = routed(t, policy, s, d, alive, NO_MEMO)
    assert_same(routed(t, policy, s, d, alive, 1, entries), scan)

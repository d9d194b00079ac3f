"""topo.metrics: closed forms vs computed figures, BFS diameter vs networkx, speed sanity."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.builders import custom, dragonfly, fat_tree, fullflat, leaf_spine, torus, two_tier
from topo.metrics import bisection_bandwidth, diameter_hops, host_diameter_bfs, min_cut_halving
from topo.topology import gbps

try:
    from _topo_reference import nx_diameter, nx_min_cut
except ImportError:
    from tests._topo_reference import nx_diameter, nx_min_cut

SMALL = [
    lambda: fat_tree(4), lambda: fat_tree(6), lambda: leaf_spine(4, 3, 2, oversubscription=1.5),
    lambda: leaf_spine(3, 2, 2), lambda: torus((4, 4)), lambda: torus((4, 8)), lambda: torus((3, 5)), lambda: torus((2, 3, 4)),
    lambda: fullflat(20, 2, 8), lambda: two_tier(3, 4), lambda: dragonfly(4, 3, 2, 1),
    lambda: dragonfly(3, 2, 2, 1),
]


@pytest.mark.parametrize("make", SMALL)
def test_computed_figures_agree_with_closed_forms_and_networkx(make):
    t = make()
    d = host_diameter_bfs(t)
    assert d == nx_diameter(t)
    assert diameter_hops(t) == d  # the builder's closed form agrees with the BFS
    cut = min_cut_halving(t)
    assert cut == pytest.approx(nx_min_cut(t, np.arange(t.n_hosts // 2)), rel=1e-12)
    if t.kind == "torus" and "bisection_Bps" in t.params:
        # the torus figure is the worst case (across the largest dimension): never above
        # the cut of any particular halving
        assert bisection_bandwidth(t) <= cut * (1 + 1e-12)
    else:
        # builders order hosts so that the id halving is the cut they report
        assert bisection_bandwidth(t) == pytest.approx(cut, rel=1e-12)


def test_fallback_when_params_absent():
    t = torus((3, 5))  # all-odd largest dimension: no closed form
    assert "bisection_Bps" not in t.params
    assert bisection_bandwidth(t) == pytest.approx(nx_min_cut(t, np.arange(7)))


def test_custom_figures():
    # a 4-host ring with host forwarding, one link slower
    t = custom(4, 0, [[0, 1, 100, 1], [1, 2, 100, 1], [2, 3, 100, 1], [3, 0, 50, 1]])
    assert t.hosts_forward
    assert diameter_hops(t) == 2
    # halving {0,1} | {2,3} cuts links 1-2 and 3-0
    assert bisection_bandwidth(t) == pytest.approx(gbps(150))


def test_diameter_respects_hosts_forward():
    # path host0 - host1 - host2 plus switch 3 joining host0 and host2
    links = [[0, 1, 100, 1], [1, 2, 100, 1], [0, 3, 100, 1], [2, 3, 100, 1]]
    fwd = custom(3, 1, links, hosts_forward=True)
    nofwd = custom(3, 1, links, hosts_forward=False)
    assert diameter_hops(fwd) == 2
    assert diameter_hops(nofwd) == 2
    # without the switch, host 0 reaches host 2 only through host 1
    chain = custom(3, 1, [[0, 1, 100, 1], [1, 2, 100, 1], [2, 3, 100, 1]], hosts_forward=False)
    assert diameter_hops(chain) == -1
    chain_fwd = custom(3, 1, [[0, 1, 100, 1], [1, 2, 100, 1], [2, 3, 100, 1]], hosts_forward=True)
    assert diameter_hops(chain_fwd) == 2


def test_single_host():
    t = custom(1, 0, [])
    assert diameter_hops(t) == 0 and bisection_bandwidth(t) == 0.0


@given(n=st.integers(2, 14), sw=st.integers(0, 4), extra=st.integers(0, 20),
       seed=st.integers(0, 10 ** 6), fwd=st.booleans())
@settings(max_examples=60, deadline=None)
def test_random_graphs_bfs_and_cut(n, sw, extra, seed, fwd):
    """Random connected fabrics: the compiled BFS equals networkx; the cut equals networkx."""
    rng = np.random.default_rng(seed)
    nodes = n + sw
    order = rng.permutation(nodes)
    edges = {(min(a, b), max(a, b)) for a, b in
             ((int(order[i]), int(order[rng.integers(0, i)])) for i in range(1, nodes))}
    for _ in range(extra):
        a, b = rng.integers(0, nodes, 2)
        if a != b:
            edges.add((int(min(a, b)), int(max(a, b))))
    links = [[a, b, float(rng.integers(1, 9) * 25), 1.0] for a, b in sorted(edges)]
    t = custom(n, sw, links, hosts_forward=fwd)
    assert host_diameter_bfs(t) == nx_diameter(t)
    assert min_cut_halving(t) == pytest.approx(nx_min_cut(t, np.arange(n // 2)), rel=1e-12)


def test_bfs_more_than_64_hosts():
    # chunking over 64-source words: 130 hosts in a torus (ring of 130: diameter 65)
    t = torus((130,))
    assert host_diameter_bfs(t) == 65
    t = fat_tree(8)  # 128 hosts
    assert host_diameter_bfs(t) == 6


def test_bfs_on_ten_thousand_nodes():
    """Correctness at scale (speed is reported by the docs, not asserted)."""
    t = torus((22, 22, 22))
    assert host_diameter_bfs(t) == 33
    t = fat_tree(32)
    assert host_diameter_bfs(t) == 6


def test_summary_uses_metrics():
    s = fat_tree(4, link_gbps=100).summary()
    assert s["bisection_Gbps"] == pytest.approx(800.0)
    assert s["diameter_hops"] == 6
    assert s["hosts"] == 16 and s["switches"] == 20 and s["links"] == 48


@pytest.mark.parametrize("make, gbps_each", [
    (lambda g: fat_tree(4, link_gbps=g), 8), (lambda g: torus((4, 4), link_gbps=g), 8),
    (lambda g: fullflat(20, 2, 8, gpu_gbps=g), 10)])
def test_summary_bisection_at_the_top_of_the_rate_range(make, gbps_each):
    """1e299 Gb/s is an accepted link rate; a bisection of several such links overflows a
    float in bytes/s (it printed `bisection inf Gbps`, and `--json` wrote Infinity, which is
    not JSON) where in Gb/s it is finite. The figure scales with the rates, exactly."""
    import json

    top = make(1e299).summary()["bisection_Gbps"]
    assert top == pytest.approx(make(1.0).summary()["bisection_Gbps"] * 1e299, rel=1e-12)
    assert top == pytest.approx(gbps_each * 1e299, rel=1e-12)
    json.loads(json.dumps(top, allow_nan=False))

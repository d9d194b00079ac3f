"""Builders: textbook counts and figures, structure, independent networkx checks, errors."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topo.builders import (ACCEPTED_KEYS, build, custom, dragonfly, fat_tree, fullflat,
                           leaf_spine, torus, two_tier)
from topo.errors import InputError
from topo.topology import gbps, us

try:
    from _topo_reference import degrees, nx_diameter, nx_min_cut
except ImportError:  # tests/ imported as a package
    from tests._topo_reference import degrees, nx_diameter, nx_min_cut


def lower_half(t):
    return np.arange(t.n_hosts // 2)


def check_figures_against_networkx(t, side_a=None):
    """params figures equal independent networkx computations on this instance."""
    assert t.params["diameter_hops"] == nx_diameter(t)
    if "bisection_Bps" in t.params:
        side = lower_half(t) if side_a is None else side_a
        assert t.params["bisection_Bps"] == pytest.approx(nx_min_cut(t, side), rel=1e-12)


# ------------------------------------------------------------------ fat-tree
@pytest.mark.parametrize("k", [2, 4, 8, 16, 48])
def test_fat_tree_textbook_counts(k):
    t = fat_tree(k, link_gbps=400, latency_us=0.5)
    assert t.n_hosts == k ** 3 // 4
    assert t.n_switches == 5 * k ** 2 // 4
    assert t.n_links == 3 * k ** 3 // 4
    assert t.params["bisection_Bps"] == k ** 3 / 8 * gbps(400)
    assert t.params["diameter_hops"] == 6
    # every switch uses all k ports, every host one
    deg = degrees(t)
    assert (deg[: t.n_hosts] == 1).all() and (deg[t.n_hosts:] == k).all()
    # one third of the links per tier
    for i, name in enumerate(("edge", "aggregation", "core")):
        assert t.layer_id(name) == i
        assert (t.link_layer == i).sum() == k ** 3 // 4
    assert (t.link_bw == gbps(400)).all() and (t.link_lat == 0.5e-6).all()
    assert t.hosts_forward is False
    # host_group is the edge switch each host hangs off
    edge_of = t.link_v[: t.n_hosts] - t.n_hosts
    np.testing.assert_array_equal(t.host_group, edge_of)


@pytest.mark.parametrize("k", [2, 4, 6])
def test_fat_tree_figures_match_networkx(k):
    check_figures_against_networkx(fat_tree(k))


def test_fat_tree_core_reaches_every_pod_once():
    k = 8
    t = fat_tree(k)
    core0 = t.n_hosts + k * k
    core = t.link_layer == 2
    pod_of_agg = (t.link_u[core] - t.n_hosts - k * k // 2) // (k // 2)
    for c in range(core0, t.n_nodes):
        pods = np.sort(pod_of_agg[t.link_v[core] == c])
        np.testing.assert_array_equal(pods, np.arange(k))


@pytest.mark.parametrize("k", [3, 0, -2, 2.0, "4", True])
def test_fat_tree_bad_k(k):
    with pytest.raises(InputError, match=r"topology\.k"):
        fat_tree(k)


# ------------------------------------------------------------------ leaf-spine
@pytest.mark.parametrize("leaves,hpl,spines,os_", [(4, 8, 4, 1.0), (8, 16, 4, 2.0),
                                                   (6, 3, 2, 3.0), (2, 4, 8, 0.5)])
def test_leaf_spine_counts_and_oversubscription(leaves, hpl, spines, os_):
    t = leaf_spine(leaves, hpl, spines, oversubscription=os_, link_gbps=100)
    n = leaves * hpl
    assert (t.n_hosts, t.n_switches, t.n_links) == (n, leaves + spines, n + leaves * spines)
    up = t.link_bw[t.link_layer == 1]
    assert len(up) == leaves * spines
    # downlink/uplink capacity of every leaf equals the oversubscription
    for leaf in range(leaves):
        node = n + leaf
        down = t.link_bw[(t.link_v == node) & (t.link_layer == 0)].sum()
        upl = t.link_bw[(t.link_u == node) & (t.link_layer == 1)].sum()
        assert down / upl == pytest.approx(os_, rel=1e-12)
    assert t.params["bisection_Bps"] == pytest.approx(n / 2 * gbps(100) * min(1, 1 / os_))
    assert t.params["diameter_hops"] == 4
    check_figures_against_networkx(t)


def test_leaf_spine_three_tier():
    t = leaf_spine(4, 4, 2, tiers=3, pods=4, super_spines=4, oversubscription=1.0,
                   spine_oversubscription=2.0)
    n = 4 * 4 * 4
    assert t.n_hosts == n
    assert t.n_switches == 16 + 8 + 4
    assert t.n_links == n + 16 * 2 + 8 * 2
    assert t.layer_names == ("edge", "spine", "super_spine")
    # spine j of every pod joins exactly the super-spines of plane j
    ss = t.link_layer == 2
    s0 = n + 16
    spine_local = (t.link_u[ss] - s0) % 2
    plane = (t.link_v[ss] - (s0 + 8)) // 2
    np.testing.assert_array_equal(spine_local, plane)
    assert t.params["bisection_Bps"] == pytest.approx(n / 2 * gbps(100) / 2)
    assert t.params["diameter_hops"] == 6
    check_figures_against_networkx(t)


@given(leaves=st.integers(1, 5), hpl=st.integers(1, 4), spines=st.integers(1, 3),
       os_=st.sampled_from([0.5, 1.0, 1.5, 3.0]), tiers=st.sampled_from([2, 3]),
       pods=st.integers(1, 3), per_plane=st.integers(1, 2),
       os2=st.sampled_from([1.0, 2.0]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_leaf_spine_figures_random(leaves, hpl, spines, os_, tiers, pods, per_plane, os2):
    extra = dict(pods=pods, super_spines=spines * per_plane, spine_oversubscription=os2) \
        if tiers == 3 else {}
    check_figures_against_networkx(leaf_spine(leaves, hpl, spines, oversubscription=os_,
                                              tiers=tiers, **extra))


def test_leaf_spine_errors():
    with pytest.raises(InputError, match=r"topology\.pods"):
        leaf_spine(2, 2, 2, pods=2)
    with pytest.raises(InputError, match=r"topology\.super_spines = 3"):
        leaf_spine(2, 2, 2, tiers=3, super_spines=3)
    with pytest.raises(InputError, match=r"topology\.oversubscription"):
        leaf_spine(2, 2, 2, oversubscription=-1)
    with pytest.raises(InputError, match=r"topology\.tiers = 4"):
        leaf_spine(2, 2, 2, tiers=4)


# ------------------------------------------------------------------ torus
@pytest.mark.parametrize("dims", [(4, 4, 4), (8, 8), (2, 4), (2, 2, 2), (3, 5), (6,),
                                  (4, 1, 3), (2,), (1,), (2, 3, 4, 5)])
def test_torus_counts_and_structure(dims):
    t = torus(dims, link_gbps=200, latency_us=0.1)
    n = math.prod(dims)
    per_node = sum(2 if d > 2 else (1 if d == 2 else 0) for d in dims)
    assert t.n_hosts == n and t.n_switches == 0
    assert t.n_links == n * per_node // 2
    assert t.params["diameter_hops"] == sum(d // 2 for d in dims)
    assert t.hosts_forward is True
    assert t.coords.shape == (n, len(dims))
    assert tuple(t.params["dims"]) == tuple(dims)
    np.testing.assert_array_equal(t.coords, np.stack(np.unravel_index(np.arange(n), dims), 1))
    if n > 1:
        assert (degrees(t) == per_node).all()
        # every link joins ring neighbours in exactly the dimension it is labelled with
        du = t.coords[t.link_u]
        dv = t.coords[t.link_v]
        diff = du != dv
        assert (diff.sum(axis=1) == 1).all()
        axis = np.argmax(diff, axis=1)
        np.testing.assert_array_equal(axis, t.link_layer)
        d = np.asarray(dims)[axis]
        step = (dv[np.arange(len(axis)), axis] - du[np.arange(len(axis)), axis]) % d
        assert (step == 1).all()  # u -> its +1 ring neighbour (wrap-around included)
        assert nx_diameter(t) == t.params["diameter_hops"]


def test_torus_444_textbook_bisection():
    t = torus((4, 4, 4), link_gbps=100)
    # k-ary n-cube: 2 k^(n-1) links cross the bisection
    assert t.params["bisection_Bps"] == 2 * 16 * gbps(100)
    assert nx_min_cut(t, lower_half(t)) == pytest.approx(t.params["bisection_Bps"])


def _brute_force_bisection_links(t):
    """Minimum number of links cut over every balanced split of the nodes."""
    n = t.n_hosts
    best = None
    combos = np.array(list(itertools.combinations(range(1, n), n // 2 - 1)), dtype=np.int64)
    # fix node 0 on side A to halve the work
    member = np.zeros((len(combos), n), bool)
    member[:, 0] = True
    member[np.arange(len(combos))[:, None], combos] = True
    cut = (member[:, t.link_u] != member[:, t.link_v]).sum(axis=1)
    best = int(cut.min())
    return best


@pytest.mark.parametrize("dims", [(4, 4), (2, 6), (3, 4), (2, 2, 4), (6,), (2, 4), (4, 2, 2)])
def test_torus_bisection_is_minimal(dims):
    t = torus(dims, link_gbps=8)  # 1 GB/s per link: figure = number of links
    assert t.params["bisection_Bps"] == _brute_force_bisection_links(t) * 1e9


def test_torus_size_two_has_one_link_per_pair():
    t = torus((2, 2))
    assert t.n_links == 4  # a 4-cycle, not 8 parallel links


@pytest.mark.parametrize("dims", [(), [0, 2], "44", [2, -1], [2.5], 4])
def test_torus_bad_dims(dims):
    with pytest.raises(InputError, match=r"topology\.dims"):
        torus(dims)


# ------------------------------------------------------------------ fullflat
def test_fullflat_single_switch_planes():
    t = fullflat(64, planes=8, switch_radix=64, gpu_gbps=6400)
    assert (t.n_hosts, t.n_switches, t.n_links) == (64, 8, 64 * 8)
    assert t.params["plane"] == "single_switch"
    assert (t.link_bw == gbps(800)).all()
    # per-GPU bandwidth totals gpu_gbps, one link per plane
    per_gpu = np.bincount(t.link_u, weights=t.link_bw, minlength=t.n_nodes)[:64]
    assert np.allclose(per_gpu, gbps(6400))
    assert (degrees(t)[:64] == 8).all() and (degrees(t)[64:] == 64).all()
    assert t.params["diameter_hops"] == 2
    assert t.params["bisection_Bps"] == 32 * gbps(6400)
    check_figures_against_networkx(fullflat(10, planes=3, switch_radix=16, gpu_gbps=300))


def test_fullflat_two_tier_planes():
    n, planes, radix = 100, 4, 16
    t = fullflat(n, planes=planes, switch_radix=radix, gpu_gbps=1600)
    leaves = math.ceil(n / (radix // 2))
    spines = radix // 2
    assert t.params["plane"] == "leaf_spine"
    assert t.n_switches == planes * (leaves + spines)
    assert t.n_links == planes * (n + leaves * spines)
    deg = degrees(t)
    assert (deg[:n] == planes).all()
    assert (deg[n:] <= radix).all()  # no switch uses more ports than it has
    assert t.params["diameter_hops"] == 4
    assert t.params["bisection_Bps"] == n // 2 * gbps(1600)
    check_figures_against_networkx(t)


@given(n=st.integers(1, 40), planes=st.integers(1, 3), half=st.integers(1, 5))
@settings(max_examples=30, deadline=None)
def test_fullflat_figures_random(n, planes, half):
    radix = 2 * half
    if n > radix * radix // 2:
        with pytest.raises(InputError, match=r"topology\.n_gpus"):
            fullflat(n, planes=planes, switch_radix=radix)
        return
    t = fullflat(n, planes=planes, switch_radix=radix, gpu_gbps=800)
    assert (degrees(t)[n:] <= radix).all()
    check_figures_against_networkx(t)


def test_fullflat_errors():
    with pytest.raises(InputError, match=r"topology\.switch_radix = 15"):
        fullflat(20, switch_radix=15)
    with pytest.raises(InputError, match=r"topology\.gpu_gbps"):
        fullflat(4, gpu_gbps=0)


# ------------------------------------------------------------------ two-tier
def test_two_tier_rail_optimized():
    nodes, G = 8, 4
    t = two_tier(nodes, G, scaleup_gbps=3600, nic_gbps=400)
    n = nodes * G
    assert t.n_hosts == n
    assert t.n_switches == nodes + G + nodes  # node switches, one leaf per rail, spines
    assert t.n_links == 2 * n + G * nodes
    assert t.hosts_forward is False
    np.testing.assert_array_equal(t.host_group, np.arange(n) // G)
    edge = t.link_layer == t.layer_id("edge")
    leaf_of_gpu = t.link_v[edge] - (n + nodes)
    np.testing.assert_array_equal(leaf_of_gpu, t.link_u[edge] % G)  # GPU i -> rail leaf i
    su = t.link_layer == t.layer_id("scaleup")
    assert (t.link_bw[su] == gbps(3600)).all() and (t.link_bw[edge] == gbps(400)).all()
    assert t.params["bisection_Bps"] == n / 2 * gbps(400)
    assert t.params["diameter_hops"] == 4
    check_figures_against_networkx(t)


def test_two_tier_cross_rail_goes_through_spines():
    t = two_tier(2, 2, nic_gbps=100)
    # GPU 0 (node 0, rail 0) to GPU 3 (node 1, rail 1): hosts do not relay, so the only
    # 4-hop route is leaf0 -> spine -> leaf1; through node 0's scale-up switch it would need
    # GPU 1 to forward.
    assert nx_diameter(t) == 4


@given(nodes=st.integers(1, 6), G=st.integers(1, 4), rails=st.booleans(),
       npl=st.one_of(st.none(), st.integers(1, 4)), spines=st.one_of(st.none(), st.integers(1, 3)),
       os_=st.sampled_from([1.0, 2.0]))
@settings(max_examples=40, deadline=None)
def test_two_tier_figures_random(nodes, G, rails, npl, spines, os_):
    t = two_tier(nodes, G, rails=rails, nodes_per_leaf=npl, spines=spines, oversubscription=os_,
                 scaleup_gbps=1000, nic_gbps=200)
    assert t.n_hosts == nodes * G
    check_figures_against_networkx(t)


# ------------------------------------------------------------------ dragonfly
def test_dragonfly_balanced_textbook():
    # Kim et al.'s balanced dragonfly: a = 2p = 2h, g = a*h + 1
    p, h = 2, 2
    a = 2 * p
    g = a * h + 1
    t = dragonfly(g, a, p, h, link_gbps=100, global_gbps=200)
    assert t.n_hosts == g * a * p
    assert t.n_switches == g * a
    assert t.n_links == g * a * p + g * a * (a - 1) // 2 + g * a * h // 2
    assert t.params["links_per_group_pair"] == 1
    assert t.params["diameter_hops"] == 5
    _check_global_wiring(t, g, a, h, 1, gbps(200))
    assert nx_diameter(t) == 5


def _check_global_wiring(t, g, a, h, m, gbw):
    gl = t.link_layer == t.layer_id("global")
    r0 = t.n_hosts
    gu = t.link_u[gl] - r0
    gv = t.link_v[gl] - r0
    ch = np.rint(t.link_bw[gl] / gbw).astype(int)  # channels per (merged) link
    assert np.allclose(ch * gbw, t.link_bw[gl])
    pair = np.zeros((g, g), int)
    np.add.at(pair, (gu // a, gv // a), ch)
    pair = pair + pair.T
    off = ~np.eye(g, dtype=bool)
    assert (pair[off] == m).all()  # every pair of groups, the same number of channels
    per_router = np.bincount(np.concatenate([gu, gv]), weights=np.concatenate([ch, ch]),
                             minlength=g * a)
    assert (per_router == h).all()  # every router uses exactly its global ports


@pytest.mark.parametrize("g,a,p,h", [(4, 2, 2, 3), (9, 4, 2, 2), (2, 2, 1, 2), (3, 3, 1, 2),
                                     (5, 2, 1, 4), (6, 5, 1, 1), (1, 4, 2, 0)])
def test_dragonfly_wiring_and_figures(g, a, p, h):
    t = dragonfly(g, a, p, h, global_gbps=50)
    m = a * h // (g - 1) if g > 1 else 0
    if g > 1:
        _check_global_wiring(t, g, a, h, m, gbps(50))
    check_figures_against_networkx(t)


@given(g=st.integers(1, 7), a=st.integers(1, 4), p=st.integers(1, 2), h=st.integers(0, 6),
       gg=st.sampled_from([25, 100, 400]))
@settings(max_examples=60, deadline=None)
def test_dragonfly_random(g, a, p, h, gg):
    ok = (g == 1 and h == 0) or (g > 1 and 0 < h <= a * (g - 1) and (a * h) % (g - 1) == 0)
    if not ok:
        with pytest.raises(InputError, match=r"topology\.global_links"):
            dragonfly(g, a, p, h)
        return
    t = dragonfly(g, a, p, h, global_gbps=gg)
    if g > 1:
        _check_global_wiring(t, g, a, h, a * h // (g - 1), gbps(gg))
    check_figures_against_networkx(t)


# ------------------------------------------------------------------ custom
def test_custom_contract():
    t = custom(4, 2, [[0, 4, 100, 1], [1, 4, 100, 1], [2, 5, 100, 1], [3, 5, 100, 1],
                      [4, 5, 400, 2.5]])
    assert (t.n_hosts, t.n_switches, t.n_links) == (4, 2, 5)
    assert t.link_bw[4] == gbps(400) and t.link_lat[4] == us(2.5)
    assert t.layer_names[t.link_layer[4]] == "fabric"
    assert t.layer_names[t.link_layer[0]] == "edge"
    assert t.hosts_forward is False
    assert "bisection_Bps" not in t.params


@pytest.mark.parametrize("links,match", [
    ([[0, 9, 100, 1]], r"topology\.links\[0\].*node 9 does not exist"),
    ([[0, 2, 100, 1], [1, 2, -5, 1]], r"topology\.links\[1\]\[2\]"),
    ([[0, 2, 100, 1], [1, 2, 0, 1]], r"topology\.links\[1\]\[2\]"),
    ([[0, 2, 100, 1], [2, 0, 100, 1]], r"topology\.links\[1\].*duplicate of topology\.links\[0\]"),
    ([[0, 2, 100, 1]], r"topology\.links.*disconnected"),
    ([[0, 0, 100, 1]], r"topology\.links\[0\].*itself"),
    ([[0, 2, 100]], r"topology\.links\[0\]"),
    ([[0, 2, 100, -1]], r"topology\.links\[0\]\[3\]"),
    ("abc", r"topology\.links"),
])
def test_custom_errors(links, match):
    with pytest.raises(InputError, match=match):
        custom(2, 1, links)


# ------------------------------------------------------------------ build registry
def test_build_matches_direct_call():
    t = build("fat_tree", {"k": 4, "link_gbps": 400, "latency_us": 0.5})
    assert t.n_hosts == 16 and t.link_bw[0] == gbps(400)
    t = build("torus", {"dims": [4, 4, 4]})
    assert t.n_links == 192


@pytest.mark.parametrize("kind,params,match", [
    ("fat_tree", {"k": 4, "bogus": 1}, r"topology\.bogus = 1: unknown key"),
    ("fat_tree", {}, r"topology\.k: required"),
    ("fat_tree", {"k": 4, "link_gbps": -100}, r"topology\.link_gbps = -100"),
    ("fat_tree", {"k": "8"}, r"topology\.k = '8'"),
    ("leaf_spine", {"leaves": 2, "hosts_per_leaf": 2, "spines": 0}, r"topology\.spines = 0"),
    ("mesh", {}, r"topology\.kind = 'mesh'"),
    ("dragonfly", {"groups": 4, "routers_per_group": 2, "hosts_per_router": 1,
                   "global_links": 2}, r"topology\.global_links = 2"),
    ("fat_tree", {"k": 100000}, r"topology\.k = 100000.*limit"),
])
def test_build_errors(kind, params, match):
    with pytest.raises(InputError, match=match):
        build(kind, params)


def test_build_where_prefix():
    with pytest.raises(InputError, match=r"^fabric\.k = 3"):
        build("fat_tree", {"k": 3}, where="fabric")


def test_accepted_keys_cover_common_keys():
    for kind in ("fat_tree", "leaf_spine", "torus", "dragonfly"):
        assert {"link_gbps", "latency_us"} <= set(ACCEPTED_KEYS[kind])
    assert "where" not in ACCEPTED_KEYS["fat_tree"]


# ------------------------------------------------------------------ fuzzing
_values = st.one_of(
    st.integers(-3, 12), st.sampled_from([10 ** 6, 10 ** 12, 2 ** 63, -(2 ** 63)]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.text(max_size=3), st.lists(st.integers(-2, 6), max_size=4),
    st.lists(st.lists(st.one_of(st.integers(-2, 8), st.floats(-1, 500)), max_size=5),
             max_size=6),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@st.composite
def _build_args(draw):
    kind = draw(st.sampled_from(sorted(ACCEPTED_KEYS) + ["bogus"]))
    keys = list(ACCEPTED_KEYS.get(kind, ())) + ["junk"]
    chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    return kind, {k: draw(_values) for k in chosen}


@given(_build_args())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_build_fuzz_only_input_errors(args):
    kind, params = args
    try:
        t = build(kind, params)
    except InputError as e:
        assert str(e).startswith("topology")  # every message names the field
        return
    assert t.n_hosts >= 1 and t.n_links == len(t.link_bw)


@given(hosts=st.integers(-1, 6), switches=st.integers(-1, 4),
       links=st.lists(st.lists(st.one_of(st.integers(-1, 10), st.floats(-10, 1e3),
                                         st.just(float("nan"))), min_size=3, max_size=5),
                      max_size=12))
@settings(max_examples=150, deadline=None)
def test_custom_fuzz_only_input_errors(hosts, switches, links):
    try:
        t = custom(hosts, switches, links)
    except InputError as e:
        assert str(e).startswith("topology")
        return
    assert t.n_links == len(links)
    assert (t.link_bw > 0).all()

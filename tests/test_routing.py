"""Routing: compiled kernels checked against slow pure-Python references and networkx."""
from collections import deque

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.errors import InputError
from topo.routing import POLICIES, Paths, Routing, RoutingError
from topo.topology import Topology

from topo.builders import dragonfly, fat_tree, fullflat, leaf_spine, two_tier
from topo.builders import torus as torus_builder
from topo.builders.fullflat import dlink_planes


def torus(dims):
    """The builder's torus with unequal link latencies (catches latency bookkeeping errors)."""
    t = torus_builder(dims)
    lat = 1e-7 * (1 + np.arange(t.n_links) % 3)
    return Topology(t.kind, t.n_hosts, t.n_switches, t.link_u, t.link_v, t.link_bw, lat,
                    t.link_layer, t.layer_names, coords=t.coords, params=t.params,
                    hosts_forward=t.hosts_forward)


# ---------------------------------------------------------------- pure-Python references
def ref_dist(t, d, alive=None):
    """Reverse BFS with the transit rule, one node at a time (slow, obviously right)."""
    alive = np.ones(t.n_dlinks, bool) if alive is None else alive
    src, dst = t.dlink_src, t.dlink_dst
    into = {v: [] for v in range(t.n_nodes)}
    for l in range(t.n_dlinks):
        if alive[l]:
            into[int(dst[l])].append(int(src[l]))
    dist = [-1] * t.n_nodes
    dist[d] = 0
    q = deque([d])
    while q:
        v = q.popleft()
        if v != d and v < t.n_hosts and not t.hosts_forward:
            continue
        for w in into[v]:
            if dist[w] < 0:
                dist[w] = dist[v] + 1
                q.append(w)
    return np.array(dist)


def ref_candidates(t, u, d, dist, alive):
    """Next hops of u towards d, ascending: alive link, one hop closer, allowed to enter."""
    out = []
    for v in sorted(t.graph.neighbors(u)):
        link = t.dlink_id(u, v)
        if alive[link] and dist[v] == dist[u] - 1 and (v == d or v >= t.n_hosts or t.hosts_forward):
            out.append((v, link))
    return out


def walk_nodes(t, s, d, links):
    """Node sequence of a link list, asserting it is a walk from s to d."""
    nodes = [s]
    for l in links:
        assert t.dlink_src[l] == nodes[-1], "links do not chain"
        nodes.append(int(t.dlink_dst[l]))
    assert nodes[-1] == d
    return nodes


def pairs(n_hosts, rng, m):
    return rng.integers(0, n_hosts, m), rng.integers(0, n_hosts, m)


# ---------------------------------------------------------------- single-path policies
@pytest.mark.parametrize("policy", ["shortest", "ecmp", "dmodk"])
@pytest.mark.parametrize("topo", ["fat_tree", "torus"])
def test_single_paths_are_shortest_walks(policy, topo):
    t = fat_tree(4) if topo == "fat_tree" else torus((3, 4, 2))
    rng = np.random.default_rng(1)
    s, d = pairs(t.n_hosts, rng, 200)
    p = Routing(t, policy, seed=3).paths(s, d)
    dist = {x: ref_dist(t, x) for x in np.unique(d)}
    assert p.ptr.dtype == np.int64 and p.link.dtype == np.int32 and p.hops.dtype == np.int32
    assert p.reachable.all()
    np.testing.assert_array_equal(p.weight, 1.0)
    for i in range(len(s)):
        links = p.links_of(i)
        nodes = walk_nodes(t, int(s[i]), int(d[i]), links)
        assert len(links) == p.hops[i] == dist[d[i]][s[i]]
        assert all(x >= t.n_hosts for x in nodes[1:-1]) or t.hosts_forward
        assert p.latency[i] == pytest.approx(t.dlink_lat[links].sum(), rel=1e-12, abs=0)


@pytest.mark.parametrize("policy", ["ecmp", "dmodk", "spray", "valiant"])
def test_paths_valid_on_every_builder(policy):
    fabrics = [leaf_spine(4, 3, 2, 1.0), dragonfly(3, 2, 2, 1), two_tier(2, 4, 900, 400),
               fullflat(8, 2, 16, 800)]
    rng = np.random.default_rng(7)
    for t in fabrics:
        s, d = pairs(t.n_hosts, rng, 100)
        r = Routing(t, policy, seed=1)
        p = r.paths(s, d)
        assert p.reachable.all(), t
        # fullflat: one walk per plane, listed plane after plane (tests/test_fullflat_planes.py)
        plane = dlink_planes(t) if r.striped else None
        for i in range(len(s)):
            dist = ref_dist(t, int(d[i]))[s[i]]
            if policy == "spray":
                assert p.hops[i] == dist
                continue
            links = p.links_of(i)
            walks = [links] if plane is None else \
                [links[plane[links] == q] for q in range(r.planes)]
            for w in walks:
                nodes = walk_nodes(t, int(s[i]), int(d[i]), w)
                assert all(x >= t.n_hosts for x in nodes[1:-1]) or t.hosts_forward
                if policy != "valiant":
                    assert len(nodes) - 1 == dist


def test_shortest_takes_lowest_id_neighbour():
    t = fat_tree(4)
    p = Routing(t, "shortest").paths([0, 3, 9], [15, 12, 1])
    for i, (s, d) in enumerate([(0, 15), (3, 12), (9, 1)]):
        dist = ref_dist(t, d)
        alive = np.ones(t.n_dlinks, bool)
        u, expect = s, []
        while u != d:
            v, link = ref_candidates(t, u, d, dist, alive)[0]
            expect.append(link)
            u = v
        assert p.links_of(i).tolist() == expect


@pytest.mark.parametrize("topo", ["fat_tree", "torus"])
def test_dmodk_matches_design_rule(topo):
    t = fat_tree(4) if topo == "fat_tree" else torus((4, 3))
    alive = np.ones(t.n_dlinks, bool)
    s, d = np.meshgrid(np.arange(t.n_hosts), np.arange(t.n_hosts), indexing="ij")
    s, d = s.ravel(), d.ravel()
    p = Routing(t, "dmodk").paths(s, d, flow_id=np.arange(len(s)) * 7919)
    for i in range(len(s)):
        dist = ref_dist(t, int(d[i]))
        u, expect = int(s[i]), []
        while u != d[i]:
            cand = ref_candidates(t, u, int(d[i]), dist, alive)
            v, link = cand[int(d[i]) % len(cand)]  # DESIGN.md: index d mod count
            expect.append(link)
            u = v
        assert p.links_of(i).tolist() == expect


@pytest.mark.parametrize("topo", ["fat_tree", "torus", "two_tier"])
def test_dmodk_level_takes_the_digits_of_d(topo):
    # the i-th hop with a choice takes digit i of d in the mixed radix of the counts so far
    t = {"fat_tree": lambda: fat_tree(8), "torus": lambda: torus((4, 3)),
         "two_tier": lambda: two_tier(8, 4)}[topo]()
    alive = np.ones(t.n_dlinks, bool)
    rng = np.random.default_rng(2)
    s, d = rng.integers(0, t.n_hosts, 300), rng.integers(0, t.n_hosts, 300)
    p = Routing(t, "dmodk_level").paths(s, d, flow_id=np.arange(len(s)) * 7919)
    for i in range(len(s)):
        dist = ref_dist(t, int(d[i]))
        u, expect, div = int(s[i]), [], 1
        while u != d[i]:
            cand = ref_candidates(t, u, int(d[i]), dist, alive)
            v, link = cand[int(d[i]) // div % len(cand)]
            div *= len(cand)
            expect.append(link)
            u = v
        assert p.links_of(i).tolist() == expect


def test_dmodk_level_spreads_an_all_to_all_over_the_whole_core():
    # fat_tree(8): dmodk sends every inter-pod flow through 4 of the 16 core switches (the
    # edge and the aggregation take the same index d mod 4); level-wise D-mod-k uses them all
    # evenly, and every aggregation-to-core link carries the same number of flows
    t = fat_tree(8)
    s, d = np.meshgrid(np.arange(t.n_hosts), np.arange(t.n_hosts), indexing="ij")
    s, d = s.ravel(), d.ravel()
    inter = s // 16 != d // 16
    s, d = s[inter], d[inter]
    core0 = t.n_hosts + 2 * 8 * 4

    def loads(policy):
        p = Routing(t, policy).paths(s, d)
        up = p.link[(t.dlink_dst[p.link] >= core0) & (t.dlink_src[p.link] < core0)]
        return np.bincount(t.dlink_dst[up] - core0, minlength=16), np.unique(up, return_counts=True)

    core, (links, per_link) = loads("dmodk_level")
    assert (core == core.mean()).all() and len(links) == 8 * 4 * 4
    assert (per_link == per_link[0]).all()
    core, (links, _) = loads("dmodk")
    assert (core > 0).sum() == 4 and len(links) == 32  # the test can tell


def test_dmodk_level_is_destination_based():
    t = fat_tree(8)
    s, d = np.arange(64), np.full(64, 77)
    p = Routing(t, "dmodk_level").paths(s, d, flow_id=np.arange(64) * 3)
    core0 = t.n_hosts + 2 * 8 * 4
    cores = {int(n) for n in t.dlink_dst[p.link] if n >= core0}
    assert len(cores) == 1  # every flow to one host meets at one core switch: D-mod-k's tree


def test_dmodk_ignores_flow_id_ecmp_does_not():
    t = fat_tree(4)
    s, d = np.zeros(64, int), np.full(64, 15)
    dm = Routing(t, "dmodk").paths(s, d, flow_id=np.arange(64))
    assert len({tuple(dm.links_of(i)) for i in range(64)}) == 1
    ec = Routing(t, "ecmp").paths(s, d, flow_id=np.arange(64))
    assert len({tuple(ec.links_of(i)) for i in range(64)}) == 4  # all 4 core paths used


def test_ecmp_deterministic_and_seed_dependent():
    t = fat_tree(8)
    rng = np.random.default_rng(0)
    s, d = pairs(t.n_hosts, rng, 2000)
    a = Routing(t, "ecmp", seed=11).paths(s, d)
    b = Routing(t, "ecmp", seed=11).paths(s, d)
    c = Routing(t, "ecmp", seed=12).paths(s, d)
    np.testing.assert_array_equal(a.link, b.link)
    np.testing.assert_array_equal(a.ptr, c.ptr)  # same lengths, different choices
    assert (a.link != c.link).mean() > 0.2


def test_ecmp_balances_over_the_core():
    t = fat_tree(8)
    half, pod_hosts = 4, 16
    s, d = np.meshgrid(np.arange(t.n_hosts), np.arange(t.n_hosts), indexing="ij")
    s, d = s.ravel(), d.ravel()
    inter = s // pod_hosts != d // pod_hosts
    s, d = s[inter], d[inter]
    core0 = t.n_hosts + 2 * 8 * half

    def core_load(policy):
        p = Routing(t, policy, seed=5).paths(s, d)
        nodes = t.dlink_dst[p.link]
        load = np.bincount(nodes[nodes >= core0] - core0, minlength=half * half)
        assert load.sum() == len(s)  # every inter-pod flow crosses exactly one core switch
        return load

    load = core_load("ecmp")
    assert load.max() / load.mean() < 1.1 and load.min() / load.mean() > 0.9
    assert (core_load("shortest") == 0).sum() == half * half - 1  # the test can tell


def test_ecmp_hash_is_splitmix_of_seed_flow_node():
    from topo import _routing

    def mix(z):
        m = (1 << 64) - 1
        z = (z + 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return z ^ (z >> 31)

    a = np.array([0, 1, 2 ** 40, -1], dtype=np.int64)
    b = np.array([3, 0, 17, 5], dtype=np.int64)
    got = _routing.hash3(7, a, b)
    want = [mix(mix(mix(7) ^ (int(x) & (2 ** 64 - 1))) ^ int(y)) for x, y in zip(a, b)]
    assert got.tolist() == want


# ---------------------------------------------------------------- spray / adaptive
def spray_reference(t, s, d):
    """Fraction of networkx's shortest paths (transit rule applied) through each link."""
    keep = [x for x in range(t.n_nodes) if x >= t.n_hosts or t.hosts_forward or x in (s, d)]
    g = t.graph.subgraph(keep)
    paths = list(nx.all_shortest_paths(g, s, d))
    counts = {}
    for path in paths:
        for u, v in zip(path, path[1:]):
            link = t.dlink_id(u, v)
            counts[link] = counts.get(link, 0) + 1
    return {k: c / len(paths) for k, c in counts.items()}, len(paths[0]) - 1


@pytest.mark.parametrize("policy", ["spray", "adaptive"])
@pytest.mark.parametrize("topo", ["fat_tree", "torus"])
def test_spray_weights_match_networkx_path_counts(policy, topo):
    t = fat_tree(4) if topo == "fat_tree" else torus((4, 3, 2))
    rng = np.random.default_rng(2)
    s, d = pairs(t.n_hosts, rng, 60)
    p = Routing(t, policy).paths(s, d)
    for i in range(len(s)):
        links, w = p.links_of(i), p.weight[p.ptr[i]:p.ptr[i + 1]]
        if s[i] == d[i]:
            assert len(links) == 0 and p.hops[i] == 0
            continue
        want, hops = spray_reference(t, int(s[i]), int(d[i]))
        assert p.hops[i] == hops
        assert len(set(links.tolist())) == len(links)
        assert dict(zip(links.tolist(), w.tolist())) == pytest.approx(want, rel=1e-12)
        # per hop the weights sum to 1: level of a link = distance of its tail from s
        dist_d = ref_dist(t, int(d[i]))
        level = hops - dist_d[t.dlink_src[links]]
        np.testing.assert_allclose(np.bincount(level, weights=w), np.ones(hops), rtol=1e-12)
        assert p.latency[i] == pytest.approx(float(w @ t.dlink_lat[links]), rel=1e-12)


# ---------------------------------------------------------------- dor
@pytest.mark.parametrize("dims", [(4, 3, 5), (2, 3, 2), (6,)])
def test_dor_follows_dimension_order_on_3d_torus(dims):
    t = torus(dims)
    s, d = np.meshgrid(np.arange(t.n_hosts), np.arange(t.n_hosts), indexing="ij")
    s, d = s.ravel(), d.ravel()
    p = Routing(t, "dor").paths(s, d)
    dist_all = {x: ref_dist(t, x) for x in range(t.n_hosts)}
    for i in range(len(s)):
        nodes = walk_nodes(t, int(s[i]), int(d[i]), p.links_of(i))
        assert p.hops[i] == len(nodes) - 1 == dist_all[d[i]][s[i]]
        c = t.coords[nodes]
        step = c[1:] - c[:-1]
        dim = np.argmax(step != 0, axis=1)
        assert (np.count_nonzero(step, axis=1) == 1).all()
        assert (np.diff(dim) >= 0).all()  # dimension 0 first, then 1, then 2
        for k, nk in enumerate(dims):
            delta = (t.coords[d[i], k] - t.coords[s[i], k]) % nk
            moves = step[dim == k, k] % nk  # 1 = + direction, nk-1 = - direction
            if delta == 0:
                assert len(moves) == 0
            elif 2 * delta <= nk:  # shorter way, or a tie: + direction
                assert len(moves) == delta and (moves == 1).all()
            else:
                assert len(moves) == nk - delta and (moves == nk - 1).all()


def test_dor_rejects_non_torus():
    with pytest.raises(RoutingError, match="routing.policy"):
        Routing(fat_tree(4), "dor")


def test_dor_falls_back_to_shortest_over_alive_links():
    t = torus((4, 4))
    r = Routing(t, "dor")
    base = r.paths([0], [10])
    alive = np.ones(t.n_dlinks, bool)
    alive[base.links_of(0)[0]] = False
    p = r.paths([0, 1], [10, 2], alive=alive)
    assert p.reachable.all()
    assert not np.isin(p.link, np.flatnonzero(~alive)).any()
    walk_nodes(t, 0, 10, p.links_of(0))
    assert p.hops[0] == ref_dist(t, 10, alive)[0]
    np.testing.assert_array_equal(p.links_of(1), r.paths([1], [2]).links_of(0))


# ---------------------------------------------------------------- faults / reachability
@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "dor"])
def test_dead_links_never_used_and_cut_host_unreachable(policy):
    t = fat_tree(4)
    rng = np.random.default_rng(4)
    alive = rng.random(t.n_dlinks) > 0.15
    host = 5
    up = t.dlink_id(host, int(t.graph[host].__iter__().__next__()))
    alive[up] = alive[up ^ 1] = False  # host 5's only link, both ways
    s, d = pairs(t.n_hosts, rng, 300)
    s[:3], d[:3] = host, [0, 9, host]
    d[3] = host
    r = Routing(t, policy, seed=2)
    p = r.paths(s, d, alive=alive)
    assert not np.isin(p.link, np.flatnonzero(~alive)).any()
    for i in range(len(s)):
        reach = ref_dist(t, int(d[i]), alive)[s[i]] >= 0
        assert p.reachable[i] == reach
        if not reach:
            assert p.ptr[i] == p.ptr[i + 1] and p.hops[i] == -1
        elif policy not in ("spray", "adaptive"):
            walk_nodes(t, int(s[i]), int(d[i]), p.links_of(i))
    assert p.reachable[2] and p.hops[2] == 0  # host to itself
    assert not p.reachable[0] and not p.reachable[1] and not p.reachable[3]
    # the same object afterwards, all links up: fresh answers, not the faulty cache
    q = r.paths(s, d)
    assert q.reachable.all()


def test_hosts_do_not_transit_on_switched_fabrics():
    # hosts 0 (on switch 3), 1 (on switch 4) and 2 (on both); switches 3-5-6-4 form a long way
    u = [0, 1, 2, 2, 3, 5, 6]
    v = [3, 4, 3, 4, 5, 6, 4]
    L = len(u)
    args = (3, 4, u, v, np.full(L, 1e9), np.full(L, 1e-6), np.zeros(L))
    switched = Topology("custom", *args, hosts_forward=False)
    p = Routing(switched, "ecmp").paths([0], [1])
    assert walk_nodes(switched, 0, 1, p.links_of(0)) == [0, 3, 5, 6, 4, 1]
    assert Routing(switched, "spray").paths([0], [1]).hops[0] == 5
    assert Routing(switched, "ecmp").distances([1])[0, 0] == 5
    forwarding = Topology("custom", *args, hosts_forward=True)
    p = Routing(forwarding, "ecmp").paths([0], [1])
    assert walk_nodes(forwarding, 0, 1, p.links_of(0)) == [0, 3, 2, 4, 1]


# ---------------------------------------------------------------- valiant
def test_valiant_goes_via_a_hashed_switch():
    t = fat_tree(4)
    rng = np.random.default_rng(6)
    s, d = pairs(t.n_hosts, rng, 200)
    r = Routing(t, "valiant", seed=9)
    p = r.paths(s, d)
    assert p.reachable.all()
    via = 0
    for i in range(len(s)):
        nodes = walk_nodes(t, int(s[i]), int(d[i]), p.links_of(i))
        assert p.hops[i] == len(nodes) - 1
        assert all(x >= t.n_hosts for x in nodes[1:-1])
        via += len(nodes) - 1 > ref_dist(t, int(d[i]))[s[i]]
    assert via > len(s) // 4  # detours are common (an intermediate off the shortest path)
    np.testing.assert_array_equal(p.link, Routing(t, "valiant", seed=9).paths(s, d).link)
    assert (p.hops != Routing(t, "valiant", seed=10).paths(s, d).hops).any()


def test_valiant_on_torus_uses_hosts():
    t = torus((3, 3))
    p = Routing(t, "valiant", seed=1).paths(np.arange(9), (np.arange(9) + 4) % 9)
    for i in range(9):
        walk_nodes(t, i, (i + 4) % 9, p.links_of(i))
    assert p.reachable.all()


def test_valiant_without_forwarders_goes_direct():
    # a triangle of hosts that do not forward: no node may serve as the intermediate
    t = Topology("custom", 3, 0, [0, 1, 0], [1, 2, 2], np.ones(3), np.zeros(3), np.zeros(3),
                 hosts_forward=False)
    p = Routing(t, "valiant").paths([0, 1, 2] * 4, [1, 2, 0] * 4, flow_id=np.arange(12))
    assert (p.hops == 1).all()


# ---------------------------------------------------------------- distances, cache, input
def _random_connected_edges(data, n):
    """A seeded rng and the sorted edges of a random spanning tree of n nodes plus extra
    edges: connected, no duplicates."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    edges = {(int(rng.integers(0, i)), i) for i in range(1, n)}
    for _ in range(data.draw(st.integers(0, 2 * n), label="extra")):
        a, b = sorted(rng.choice(n, 2, replace=False).tolist())
        edges.add((a, b))
    return rng, sorted(edges)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_compiled_distances_equal_networkx(data):
    n = data.draw(st.integers(2, 14), label="nodes")
    rng, edges = _random_connected_edges(data, n)
    n_hosts = data.draw(st.integers(1, n), label="hosts")
    forward = data.draw(st.booleans(), label="hosts_forward")
    L = len(edges)
    t = Topology("custom", n_hosts, n - n_hosts, [e[0] for e in edges], [e[1] for e in edges],
                 np.ones(L), np.zeros(L), np.zeros(L), hosts_forward=forward)
    alive = rng.random(2 * L) > data.draw(st.sampled_from([0.0, 0.2, 0.5]), label="down")
    got = Routing(t, "ecmp").distances(np.arange(n), alive=alive)
    assert got.dtype == np.int32 and got.shape == (n, n)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((int(t.dlink_src[l]), int(t.dlink_dst[l])) for l in range(2 * L) if alive[l])
    for d in range(n):
        for s in range(n):
            keep = [x for x in range(n) if x >= n_hosts or forward or x in (s, d)]
            try:
                want = nx.shortest_path_length(g.subgraph(keep), s, d)
            except nx.NetworkXNoPath:
                want = -1
            assert got[d, s] == want


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_paths_on_random_graphs_with_faults(data):
    n = data.draw(st.integers(2, 12), label="nodes")
    rng, edges = _random_connected_edges(data, n)
    L = len(edges)
    n_hosts = data.draw(st.integers(1, n), label="hosts")
    t = Topology("custom", n_hosts, n - n_hosts, [e[0] for e in edges], [e[1] for e in edges],
                 np.ones(L), rng.random(L) * 1e-6, np.zeros(L),
                 hosts_forward=data.draw(st.booleans(), label="hosts_forward"))
    alive = rng.random(2 * L) > 0.2
    s, d = pairs(n_hosts, rng, 30)
    policy = data.draw(st.sampled_from(["shortest", "ecmp", "dmodk", "spray", "valiant"]))
    p = Routing(t, policy, seed=3).paths(s, d, alive=alive)
    assert not np.isin(p.link, np.flatnonzero(~alive)).any()
    for i in range(len(s)):
        dist = ref_dist(t, int(d[i]), alive)[s[i]]
        assert p.reachable[i] == (dist >= 0)
        if dist < 0:
            assert p.ptr[i] == p.ptr[i + 1] and p.hops[i] == -1
        elif policy == "spray":
            assert p.hops[i] == dist
            w = p.weight[p.ptr[i]:p.ptr[i + 1]]
            assert w.sum() == pytest.approx(max(dist, 0), rel=1e-9)  # 1 per hop
        else:
            nodes = walk_nodes(t, int(s[i]), int(d[i]), p.links_of(i))
            assert t.hosts_forward or all(x >= n_hosts for x in nodes[1:-1])
            if policy != "valiant":
                assert len(nodes) - 1 == dist


def test_chunked_when_cache_budget_is_small():
    t = fat_tree(4)
    rng = np.random.default_rng(8)
    s, d = pairs(t.n_hosts, rng, 500)
    for policy in ("ecmp", "spray", "valiant"):
        big = Routing(t, policy, seed=1).paths(s, d)
        row = t.n_nodes * 4
        small = Routing(t, policy, seed=1, cache_bytes=3 * row)  # 3 destinations at a time
        got = small.paths(s, d)
        for name in ("ptr", "link", "weight", "reachable", "latency", "hops"):
            np.testing.assert_array_equal(getattr(got, name), getattr(big, name))
        assert small.cache_nbytes <= 3 * row
    r = Routing(t, "ecmp", cache_bytes=3 * t.n_nodes * 4)
    np.testing.assert_array_equal(r.distances(np.arange(16)), Routing(t).distances(np.arange(16)))


def test_cache_reuses_rows_and_respects_budget():
    t = fat_tree(4)
    row = t.n_nodes * 4
    r = Routing(t, "ecmp", cache_bytes=20 * row)
    r.paths(np.arange(16), (np.arange(16) + 1) % 16)
    first = r.cache_nbytes
    r.paths(np.arange(16), (np.arange(16) + 1) % 16)
    assert r.cache_nbytes == first <= 20 * row
    for seed in range(5):  # several fault masks: older ones evicted, never over budget
        alive = np.random.default_rng(seed).random(t.n_dlinks) > 0.1
        r.paths(np.arange(16), (np.arange(16) + 3) % 16, alive=alive)
        assert r.cache_nbytes <= 20 * row


def test_bad_input_names_the_field():
    t = fat_tree(4)
    with pytest.raises(RoutingError, match="routing.policy = 'bogus'"):
        Routing(t, "bogus")
    r = Routing(t)
    assert issubclass(RoutingError, InputError)
    with pytest.raises(RoutingError, match=r"dst\[1\] = 99"):
        r.paths([0, 1], [2, 99])
    with pytest.raises(RoutingError, match="alive"):
        r.paths([0], [1], alive=np.ones(3, bool))
    with pytest.raises(RoutingError, match="flow_id"):
        r.paths([0, 1], [2, 3], flow_id=[1])
    with pytest.raises(RoutingError, match="dsts"):
        r.distances([-1])


def test_empty_and_take():
    t = fat_tree(4)
    p = Routing(t, "spray").paths(np.zeros(0, int), np.zeros(0, int))
    assert len(p) == 0 and p.ptr.tolist() == [0] and len(p.link) == 0
    q = Routing(t, "ecmp").paths([0, 1, 2], [15, 14, 13])
    sub = q.take([2, 0])
    assert isinstance(sub, Paths)
    np.testing.assert_array_equal(sub.links_of(0), q.links_of(2))
    np.testing.assert_array_equal(sub.links_of(1), q.links_of(0))

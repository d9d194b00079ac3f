"""Metamorphic and property tests of fabrics, routing, faults and collectives: relations that
hold by construction or by the documented model, checked against independent computations
(networkx, textbook formulas, brute force) rather than against numbers the code printed.

* Figures: every closed-form bisection is the least cut over *all* balanced host splits
  (brute force), not just the id halving; the exact enumeration of topo.metrics equals
  networkx over every halving. (Found: the dragonfly's g-even closed form over-reported the
  bisection, up to 4x.)
* Import/export: a fabric written as the plain custom contract, as JSON, or as GraphML read
  back by networkx routes every pair the same way and runs every collective in the same time.
* Symmetry: a torus translation or reflection, a fat-tree pod permutation, applied to a
  collective's ranks, leaves its time unchanged under routing policies that respect it.
* Scaling and physics: rates x2 with no latency halves `netcosim collective` on the flow
  engine and the estimate; a single transfer runs at the builders' documented rates (FullFlat
  planes and a cut plane, leaf-spine oversubscription, two-tier scale-up vs NIC, dragonfly
  global links); a ring all-reduce on a ring of n hosts takes 2(n-1)(S/n/bw + latency).
* Routing: ECMP over many flow ids reaches every shortest path networkx lists; striped plane
  paths are walks inside their plane, weight 1/k over the k surviving planes, avoiding what
  is down; a forward-only fault leaves the reverse direction in use; a link down and back up
  before anything starts changes nothing.
* Collectives: bytes sent and received per rank equal the textbook formulas; chunks and
  protocols keep the payload (wire ratio times it, up to rounding) and pass the checker; a
  collective on the hosts of one leaf equals the same collective on a star of only those hosts;
  sizes with units are the bytes they name.
"""
from __future__ import annotations

import dataclasses
import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collectives as co
from collectives import check
from netcore.api import simulate
from netcore.schedule import TRANSFER, Schedule
from topo import io
from topo.builders import build, custom
from topo.builders.fullflat import dlink_planes
from topo.faults import LinkFaults
from topo.metrics import bisection, exact_bisection, min_cut_halving
from topo.routing import Routing
from topo.topology import gbps, us

from collective_helpers import options_for
from _topo_reference import brute_bisection

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
S = 1 << 22


def all_pairs(n):
    s, d = np.meshgrid(np.arange(n), np.arange(n))
    return s.ravel(), d.ravel()


def named_paths(t, p, i):
    """Flow i's links as sorted (from, to, weight) triples: comparable across node-id-equal
    fabrics whose link numbering differs."""
    sl = slice(p.ptr[i], p.ptr[i + 1])
    return sorted(zip(t.dlink_src[p.link[sl]].tolist(), t.dlink_dst[p.link[sl]].tolist(),
                      np.round(p.weight[sl], 12).tolist()))


def walk(t, s, d, links):
    """Nodes of a single-path walk; asserts consecutive links connect s to d."""
    nodes = [s]
    for l in links:
        assert t.dlink_src[l] == nodes[-1]
        nodes.append(int(t.dlink_dst[l]))
    assert nodes[-1] == d
    return nodes


def scaled(t, bw=1.0, lat=1.0):
    return dataclasses.replace(t, link_bw=t.link_bw * bw, link_lat=t.link_lat * lat,
                               params={k: v for k, v in t.params.items() if k != "bisection_Bps"})


def makespan(t, sched, policy="ecmp", faults=None, **kw):
    r = simulate(t, sched, Routing(t, policy), faults, engine="flow", **kw)
    assert not r.stranded.any()
    return r.makespan


# ====================================================================== figures: bisection
@pytest.mark.parametrize("params", [
    {"groups": 2, "routers_per_group": 2, "hosts_per_router": 2, "global_links": 2},
    {"groups": 2, "routers_per_group": 2, "hosts_per_router": 3, "global_links": 1,
     "global_gbps": 400},
    {"groups": 2, "routers_per_group": 2, "hosts_per_router": 2, "global_links": 1},
    {"groups": 3, "routers_per_group": 2, "hosts_per_router": 2, "global_links": 1},
])
def test_dragonfly_bisection_is_the_least_balanced_cut(params):
    """docs/topologies.md defines the bisection as the least cut over all halvings. The
    g-even closed form min(n/2 link, m (g/2)^2 global) is the group halving only: with
    2 groups of 2 routers and 2 global links each, router r links only to router r of the
    other group, and cutting the 2 local links (200 Gb/s) halves the hosts; the builder
    reported 400 Gb/s as a closed form (600 for 3 hosts per router and 400 Gb/s globals)."""
    t = build("dragonfly", params)
    truth = brute_bisection(t)
    got, method = bisection(t)
    assert got == pytest.approx(truth, rel=1e-12), method
    assert t.summary()["bisection_Gbps"] == pytest.approx(truth * 8 / 1e9, rel=1e-12)


@settings(max_examples=25, **FAST)
@given(st.integers(3, 9), st.integers(1, 4), st.integers(0, 8), st.integers(0, 10**6))
def test_exact_bisection_equals_networkx_over_every_halving(n, sw, extra, seed):
    """Random fabrics whose hosts each hang off one switch: the switch-split enumeration
    equals the least networkx cut over all balanced host splits."""
    rng = np.random.default_rng(seed)
    links = {(h, n + int(rng.integers(sw))) for h in range(n)}
    for j in range(1, sw):  # a random tree over the switches, then extra switch links
        links.add((n + int(rng.integers(j)), n + j))
    for _ in range(extra if sw > 1 else 0):
        a, b = sorted(rng.choice(sw, 2, replace=False))
        links.add((n + int(a), n + int(b)))
    hb = float(rng.choice([25, 100]))
    t = custom(n, sw, [[u, v, hb if u < n else float(rng.integers(1, 9) * 25), 1.0]
                       for u, v in sorted(links)])
    got = exact_bisection(t)
    assert got is not None
    assert got == pytest.approx(brute_bisection(t), rel=1e-9)
    # what `netcosim topo` prints for such a custom fabric
    assert t.summary()["bisection_Gbps"] == pytest.approx(got * 8 / 1e9, rel=1e-12)
    assert got <= min_cut_halving(t) * (1 + 1e-12)  # never above the id halving's cut


CLOSED_FORMS = [
    ("leaf_spine", {"leaves": 4, "hosts_per_leaf": 3, "spines": 2, "oversubscription": 1.5}),
    ("leaf_spine", {"leaves": 4, "hosts_per_leaf": 2, "spines": 1, "oversubscription": 0.5}),
    ("leaf_spine", {"leaves": 2, "hosts_per_leaf": 2, "spines": 2, "tiers": 3, "pods": 2,
                    "oversubscription": 0.5, "spine_oversubscription": 3}),
    ("leaf_spine", {"leaves": 1, "hosts_per_leaf": 3, "spines": 2, "tiers": 3, "pods": 4,
                    "super_spines": 4, "oversubscription": 0.5, "spine_oversubscription": 0.25}),
    ("fat_tree", {"k": 4}),
    ("dragonfly", {"groups": 1, "routers_per_group": 6, "hosts_per_router": 2,
                   "global_links": 0}),
    ("fullflat", {"n_gpus": 8, "planes": 1, "switch_radix": 4}),
]


@pytest.mark.parametrize("kind,params", CLOSED_FORMS)
def test_closed_form_bisections_are_the_least_cut_over_every_switch_split(kind, params):
    """Each builder's closed form against the exact enumeration (all 2^(S-1) splits), not the
    id halving the builder chose (which is what the older tests compared)."""
    t = build(kind, params)
    assert "bisection_Bps" in t.params
    assert t.params["bisection_Bps"] == pytest.approx(exact_bisection(t), rel=1e-12)


@pytest.mark.parametrize("params", [
    {"nodes": 2, "gpus_per_node": 4},
    {"nodes": 4, "gpus_per_node": 2, "rails": False, "nodes_per_leaf": 2,
     "oversubscription": 2.0},
    {"nodes": 2, "gpus_per_node": 4, "scaleup_gbps": 50, "nic_gbps": 400},
])
def test_two_tier_closed_form_is_the_least_balanced_cut(params):
    """GPUs have two links (scale-up and NIC), so brute force over the host halvings."""
    t = build("two_tier", params)
    assert t.params["bisection_Bps"] == pytest.approx(brute_bisection(t), rel=1e-12)


# ====================================================================== import / export
PLAIN = {
    "fat_tree": build("fat_tree", {"k": 4}),
    "leaf_spine": build("leaf_spine", {"leaves": 3, "hosts_per_leaf": 2, "spines": 2,
                                       "oversubscription": 1.5}),
    "torus": build("torus", {"dims": [3, 4], "latency_us": 0.3}),
    "dragonfly": build("dragonfly", {"groups": 3, "routers_per_group": 2,
                                     "hosts_per_router": 2, "global_links": 1,
                                     "global_gbps": 50}),
    "fullflat": build("fullflat", {"n_gpus": 8, "planes": 2, "gpu_gbps": 800}),
}


def _plain_custom(t):
    d = io.to_dict(t)
    return io.from_dict(json.loads(json.dumps({k: d[k] for k in ("hosts", "switches", "links")})))


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_plain_custom_contract_routes_and_times_like_the_builder(name):
    """The contract file (hosts, switches, links in Gbps/us) loads through `custom`: same
    node ids, links, rates. Every pair routes the same under every graph policy, and the
    collectives take the same time. FullFlat's planes are known from its kind only: the
    custom copy routes as one graph, like Routing(..., stripe=False) on the original."""
    t = PLAIN[name]
    c = _plain_custom(t)
    assert c.kind == "custom" and c.n_hosts == t.n_hosts and c.n_links == t.n_links
    s, d = all_pairs(t.n_hosts)
    for pol in ("shortest", "ecmp", "dmodk", "spray", "valiant"):
        a = Routing(t, pol, seed=3, stripe=False).paths(s, d)
        b = Routing(c, pol, seed=3).paths(s, d)
        np.testing.assert_array_equal(a.hops, b.hops, err_msg=pol)
        np.testing.assert_allclose(a.latency, b.latency, rtol=1e-12, err_msg=pol)
        for i in range(len(s)):
            assert named_paths(t, a, i) == named_paths(c, b, i), (pol, s[i], d[i])
    for algo in ("ring", "double_binary_tree", "recursive_halving_doubling"):
        sch = co.build("all_reduce", algo, t.n_hosts, S, protocol="simple").with_connections()
        want = simulate(t, sch, Routing(t, "ecmp", stripe=False), engine="flow").makespan
        assert makespan(c, sch) == pytest.approx(want, rel=1e-12), algo


def test_json_round_trip_keeps_planes_rails_and_dimension_order(tmp_path):
    """save_json/load_json keep the kind and params that striping, rail rings, the NCCL
    choice and dor read: every time and figure equals the original's."""
    fabs = [build("two_tier", {"nodes": 2, "gpus_per_node": 4}),
            build("fullflat", {"n_gpus": 8, "planes": 2}),
            build("torus", {"dims": [3, 4]})]
    for t in fabs:
        io.save_json(t, tmp_path / "t.json")
        c = io.load_json(tmp_path / "t.json")
        assert c.summary() == t.summary()
        ca, cb = co.choose(t, "all_reduce", S), co.choose(c, "all_reduce", S)
        assert (ca.algorithm, list(ca.ranks)) == (cb.algorithm, list(cb.ranks))
        for pol in ("ecmp", "dor") if t.kind == "torus" else ("ecmp",):
            assert Routing(c, pol).striped == Routing(t, pol).striped
            for algo in ("ring", "double_binary_tree"):
                a = co.build("all_reduce", algo, t.n_hosts, S, protocol="simple", fabric=t)
                b = co.build("all_reduce", algo, c.n_hosts, S, protocol="simple", fabric=c)
                assert a.n == b.n
                assert makespan(c, b.with_connections(), pol) == \
                    makespan(t, a.with_connections(), pol)


def test_graphml_read_by_networkx_rebuilds_the_same_fabric(tmp_path):
    """to_graphml -> networkx.read_graphml -> custom: same paths for every pair."""
    for t in (PLAIN["fat_tree"], PLAIN["dragonfly"]):
        io.to_graphml(t, tmp_path / "t.graphml")
        g = nx.read_graphml(tmp_path / "t.graphml")
        hosts = sorted(int(x) for x, a in g.nodes(data=True) if a["kind"] == "host")
        assert hosts == list(range(t.n_hosts))
        links = [[int(u), int(v), e["bw"] * 8 / 1e9, e["latency"] * 1e6]
                 for u, v, e in g.edges(data=True)]
        c = custom(len(hosts), g.number_of_nodes() - len(hosts), links)
        s, d = all_pairs(t.n_hosts)
        for pol in ("shortest", "ecmp", "spray"):
            a, b = Routing(t, pol).paths(s, d), Routing(c, pol).paths(s, d)
            assert all(named_paths(t, a, i) == named_paths(c, b, i) for i in range(len(s))), pol


# ====================================================================== symmetry
TORUS = build("torus", {"dims": [4, 4], "latency_us": 0.3})
FT4 = build("fat_tree", {"k": 4, "latency_us": 0.5})


def _torus_map(a, b, fa, fb):
    return [(((-i if fa else i) + a) % 4) * 4 + ((-j if fb else j) + b) % 4
            for i in range(4) for j in range(4)]


@pytest.mark.parametrize("algo,opts", [("ring", {}), ("bidirectional_ring", {}),
                                       ("torus", {"dims": (4, 4)}),
                                       ("double_binary_tree", {}),
                                       ("recursive_halving_doubling", {})])
@pytest.mark.parametrize("protocol", [None, "ll128"])
def test_collective_time_invariant_under_a_torus_symmetry(algo, opts, protocol):
    """Ranks relabelled by a translation (dor and spray respect it) or a reflection (spray):
    the same collective, the same time."""
    base = co.build("all_reduce", algo, list(range(16)), S, protocol=protocol, fabric=TORUS,
                    **opts).with_connections()
    for pol, maps in (("dor", [(1, 0, 0, 0), (2, 3, 0, 0)]),
                      ("spray", [(1, 2, 0, 0), (0, 0, 1, 0), (3, 1, 1, 1)])):
        want = makespan(TORUS, base, pol)
        for m in maps:
            s = co.build("all_reduce", algo, _torus_map(*m), S, protocol=protocol,
                         fabric=TORUS, **opts).with_connections()
            assert makespan(TORUS, s, pol) == pytest.approx(want, rel=1e-9), (pol, m)


@pytest.mark.parametrize("op,algo", [("all_reduce", "ring"), ("all_reduce", "direct"),
                                     ("all_reduce", "double_binary_tree"),
                                     ("all_to_all", "pairwise"), ("broadcast", "tree")])
def test_collective_time_invariant_under_a_fat_tree_pod_permutation(op, algo):
    """fat_tree(4): pods 0 and 2 swapped, the edge switches of pod 1 swapped (host id =
    pod*4 + edge*2 + host); spray and shortest respect the relabelling."""
    perm = np.arange(16)
    perm[0:4], perm[8:12], perm[4:8] = np.arange(8, 12), np.arange(0, 4), [6, 7, 4, 5]
    a = co.build(op, algo, list(range(16)), S, protocol="simple").with_connections()
    b = co.build(op, algo, perm.tolist(), S, protocol="simple").with_connections()
    for pol in ("spray", "shortest"):
        assert makespan(FT4, b, pol) == pytest.approx(makespan(FT4, a, pol), rel=1e-9), pol


# ====================================================================== scaling and rates
SCALE_FABRICS = {
    "fat_tree": FT4,
    "leaf_spine": build("leaf_spine", {"leaves": 4, "hosts_per_leaf": 2, "spines": 2,
                                       "oversubscription": 2.0}),
    "two_tier": build("two_tier", {"nodes": 2, "gpus_per_node": 4}),
    "fullflat": build("fullflat", {"n_gpus": 8, "planes": 2}),
    "dragonfly": PLAIN["dragonfly"],
}


@pytest.mark.parametrize("name", sorted(SCALE_FABRICS))
def test_netcosim_collective_halves_with_every_rate_doubled(name):
    """`netcosim collective` (scalable stream form on the flow engine, the alpha-beta
    estimate) with no latency anywhere: every rate x2 halves every time, whatever the
    algorithm (the chooser included: its pick does not depend on a uniform scale)."""
    from netcosim.commands.collective import sweep

    t0 = scaled(SCALE_FABRICS[name], lat=0.0)
    t2 = scaled(SCALE_FABRICS[name], bw=2.0, lat=0.0)
    for op, algo in (("all_reduce", "ring"), ("all_reduce", "auto"), ("all_gather", "ring"),
                     ("all_to_all", "pairwise"), ("all_reduce", "double_binary_tree")):
        for eng in ("flow", "analytical"):
            a = sweep(t0, op, algo, [S], engine=eng, step_latency_s=0.0, protocol="simple")[0]
            b = sweep(t2, op, algo, [S], engine=eng, step_latency_s=0.0, protocol="simple")[0]
            assert a["algorithm"] == b["algorithm"]
            assert a["time_s"] == pytest.approx(2 * b["time_s"], rel=1e-9), (op, algo, eng)


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize("lat_us", [0.0, 0.7])
def test_ring_all_reduce_on_a_ring_of_hosts_is_the_textbook_time(n, lat_us):
    """A ring all-reduce whose ring is the physical ring (torus (n,), dor): each of the
    2(n-1) steps moves S/n over one link nobody else uses: 2(n-1)(S/n/bw + latency), on the
    flow engine and in the alpha-beta estimate."""
    from collectives.analytical import estimate

    t = build("torus", {"dims": [n], "link_gbps": 100, "latency_us": lat_us})
    nb = n * 3 * 2**16
    s = co.build("all_reduce", "ring", n, nb).with_connections()
    want = 2 * (n - 1) * (nb / n / gbps(100) + us(lat_us))
    assert makespan(t, s, "dor") == pytest.approx(want, rel=1e-12)
    assert estimate(t, "all_reduce", "ring", n, nb, routing="dor") == \
        pytest.approx(want, rel=1e-12)


def test_single_transfers_run_at_the_builders_rates():
    """One transfer alone, no latency: FullFlat stripes over its planes (gpu_gbps in total,
    (k-1)/k of it with one plane cut), two-tier goes over NVLink inside a node and the NIC
    across, leaf-spine hosts of a leaf share uplinks cut by the oversubscription, dragonfly
    cross-group traffic runs at global_gbps."""
    nb = 1 << 24
    one = Schedule.from_transfers([0], [5], [nb])
    for planes in (1, 2, 4):
        t = build("fullflat", {"n_gpus": 8, "planes": planes, "gpu_gbps": 800,
                               "latency_us": 0.0})
        assert makespan(t, one) == pytest.approx(nb / gbps(800), rel=1e-12)
        if planes > 1:
            cut = LinkFaults.from_records(t, [{"link": [0, t.n_hosts], "kind": "down"}])
            assert makespan(t, one, faults=cut) == pytest.approx(
                nb / gbps(800 * (planes - 1) / planes), rel=1e-12)
    t = build("fullflat", {"n_gpus": 16, "planes": 2, "switch_radix": 8, "gpu_gbps": 800,
                           "latency_us": 0.0})
    assert makespan(t, Schedule.from_transfers([0], [15], [nb])) == \
        pytest.approx(nb / gbps(800), rel=1e-12)
    t = build("two_tier", {"nodes": 2, "gpus_per_node": 4, "scaleup_gbps": 800,
                           "nic_gbps": 200, "latency_us": 0, "scaleup_latency_us": 0})
    for dst, bw in ((1, 800), (4, 200), (5, 200)):
        assert makespan(t, Schedule.from_transfers([0], [dst], [nb])) == \
            pytest.approx(nb / gbps(bw), rel=1e-12), dst
    for o in (0.5, 1.0, 2.0):
        t = build("leaf_spine", {"leaves": 2, "hosts_per_leaf": 4, "spines": 2,
                                 "oversubscription": o, "latency_us": 0})
        s = Schedule.from_transfers(np.arange(4), np.arange(4) + 4, [nb] * 4)
        assert makespan(t, s, "spray") == pytest.approx(
            4 * nb / (4 * gbps(100) * min(1.0, 1 / o)), rel=1e-12), o
    t = build("dragonfly", {"groups": 3, "routers_per_group": 2, "hosts_per_router": 1,
                            "global_links": 1, "global_gbps": 25, "latency_us": 0})
    assert makespan(t, Schedule.from_transfers([0], [2], [nb])) == \
        pytest.approx(nb / gbps(25), rel=1e-12)


# ====================================================================== routing
@pytest.mark.parametrize("t,pairs", [
    (build("fat_tree", {"k": 4}), [(0, 15), (0, 2), (5, 9)]),
    (build("leaf_spine", {"leaves": 3, "hosts_per_leaf": 2, "spines": 3}), [(0, 5)]),
    (build("dragonfly", {"groups": 2, "routers_per_group": 2, "hosts_per_router": 1,
                         "global_links": 2}), [(0, 3), (0, 1)]),
    (build("torus", {"dims": [3, 4]}), [(0, 6), (0, 5)]),
])
def test_ecmp_over_many_flow_ids_reaches_every_shortest_path(t, pairs):
    """docs/routing.md: ecmp hashes over the equal-cost next hops at every node, so over
    enough flow ids it uses every shortest path networkx lists (hosts not transiting on
    switched fabrics), and only those."""
    k = 600
    g = nx.Graph()
    g.add_edges_from(zip(t.link_u.tolist(), t.link_v.tolist()))
    for s, d in pairs:
        want = {tuple(p) for p in nx.all_shortest_paths(g, s, d)
                if t.hosts_forward or all(x >= t.n_hosts for x in p[1:-1])}
        p = Routing(t, "ecmp", seed=5).paths(np.full(k, s), np.full(k, d), np.arange(k))
        got = {tuple(walk(t, s, d, p.links_of(i))) for i in range(k)}
        assert got == want, (s, d)


@settings(max_examples=20, **FAST)
@given(st.integers(0, 10**6), st.sampled_from(["shortest", "ecmp", "dmodk", "valiant"]),
       st.sampled_from([(8, 4, 64), (16, 2, 8)]))
def test_striped_paths_are_walks_inside_their_planes_and_avoid_faults(seed, policy, shape):
    """FullFlat striping: every flow lists one walk per plane that reaches its destination,
    inside that plane, weight 1/k over the k surviving planes; links down never appear; the
    latency is the mean of the plane paths' latencies and hops the longest."""
    n, planes, radix = shape
    t = build("fullflat", {"n_gpus": n, "planes": planes, "switch_radix": radix})
    rng = np.random.default_rng(seed)
    alive = rng.random(t.n_dlinks) > 0.1
    r = Routing(t, policy, seed=seed)
    plane_of = dlink_planes(t)
    s, d = all_pairs(n)
    p = r.paths(s, d, alive=alive)
    assert not np.isin(p.link, np.flatnonzero(~alive)).any()
    for i in range(len(s)):
        if s[i] == d[i]:
            continue
        links, w = p.links_of(i), p.weight[p.ptr[i]:p.ptr[i + 1]]
        used = np.unique(plane_of[links])
        k = len(used)
        reach = [q for q in range(planes)
                 if r.plane_paths([s[i]], [d[i]], q, alive=alive).reachable[0]]
        assert list(used) == reach and p.reachable[i] == (k > 0)
        if not k:
            continue
        np.testing.assert_allclose(w, 1.0 / k, rtol=1e-12)
        lats, hops = [], []
        for q in used:
            walk(t, int(s[i]), int(d[i]), links[plane_of[links] == q])
            lats.append(t.dlink_lat[links[plane_of[links] == q]].sum())
            hops.append(int((plane_of[links] == q).sum()))
        assert p.latency[i] == pytest.approx(np.mean(lats), rel=1e-12)
        assert p.hops[i] == max(hops)


def test_forward_only_fault_leaves_the_reverse_direction_in_use():
    """direction = "forward" takes down u->v only: flows v->u keep the link (and their time),
    flows u->v avoid it."""
    t = build("leaf_spine", {"leaves": 2, "hosts_per_leaf": 2, "spines": 2, "latency_us": 0})
    leaf0, spine0 = t.n_hosts, t.n_hosts + 2
    f = LinkFaults.from_records(t, [{"link": [leaf0, spine0], "kind": "down",
                                     "direction": "forward"}])
    alive = f.alive_at(t.n_dlinks, 0.0)
    fwd, rev = t.dlink_id(leaf0, spine0), t.dlink_id(spine0, leaf0)
    assert not alive[fwd] and alive[rev]
    up = Routing(t, "spray").paths([0, 2], [2, 0], alive=alive)
    assert fwd not in up.links_of(0) and rev in up.links_of(1)
    nb = 1 << 24
    for src, dst, slower in ((0, 2, True), (2, 0, False)):
        s = Schedule.from_transfers([src, src + 1], [dst, dst + 1], [nb, nb])
        clean, faulted = makespan(t, s, "spray"), makespan(t, s, "spray", faults=f)
        if slower:  # both flows squeeze onto the one surviving uplink of leaf 0
            assert faulted == pytest.approx(2 * nb / gbps(100), rel=1e-12)
            assert clean == pytest.approx(nb / gbps(100), rel=1e-12)
        else:
            assert faulted == clean


def _down_up_before_start(t, l):
    u, v = int(t.link_u[l]), int(t.link_v[l])
    return LinkFaults.from_records(t, [{"link": [u, v], "kind": "down", "at_us": 0.0},
                                       {"link": [u, v], "kind": "up", "at_us": 1.0}])


def test_a_link_down_and_back_up_before_anything_starts_changes_nothing():
    """Flow engine: routes are chosen when a transfer starts, over what is up then; a link that
    is back before the first start (a host's only link included) changes no time."""
    t = build("fat_tree", {"k": 4})
    s = co.build("all_reduce", "ring", 16, S, protocol="simple").with_connections()
    s = dataclasses.replace(s, start=s.start + 2e-6)
    clean = simulate(t, s, Routing(t, "ecmp"), engine="flow")
    for l in (5, 20, 30, 40):
        for opts in ({}, {"reroute_delay_us": 3.0}):
            r = simulate(t, s, Routing(t, "ecmp"), _down_up_before_start(t, l), engine="flow",
                         **opts)
            np.testing.assert_array_equal(r.end, clean.end)


@pytest.mark.parametrize("transport", ["tcp", "ideal"])
def test_packet_engine_link_down_and_back_up_before_the_transfers_start(transport):
    """The packet engine as the flow engine: a link back up before the transfers start changes
    nothing. It never routed again on an `up`: transfers left without a path by the `down`
    (a host's only link, l = 5) were stranded at their start although the link was back (0->5
    and 5->9 on fat_tree(4); the fault-free run ends them in 131.6 us), and those routed around
    an uplink kept the detour."""
    t = build("fat_tree", {"k": 4})
    s = co.build("all_reduce", "ring", 16, 1 << 20, protocol="simple").with_connections()
    s = dataclasses.replace(s, start=s.start + 2e-6)
    clean = simulate(t, s, Routing(t, "ecmp"), engine="packet", transport=transport)
    for l in (5, 20, 30, 40):
        r = simulate(t, s, Routing(t, "ecmp"), _down_up_before_start(t, l), engine="packet",
                     transport=transport)
        assert not r.stranded.any(), l
        np.testing.assert_array_equal(r.end, clean.end)


# ====================================================================== collectives
def _sent_recv(s, n):
    tr = s.kind == TRANSFER
    m = max(n, int(s.src[tr].max()) + 1, int(s.dst[tr].max()) + 1)
    return (np.bincount(s.src[tr], weights=s.size[tr], minlength=m)[:n],
            np.bincount(s.dst[tr], weights=s.size[tr], minlength=m)[:n])


# per rank, what every rank sends and receives (fraction of S), by the textbook
PER_RANK = {
    ("all_reduce", "ring"): lambda n: 2 * (n - 1) / n,
    ("all_reduce", "bidirectional_ring"): lambda n: 2 * (n - 1) / n,
    ("all_reduce", "direct"): lambda n: 2 * (n - 1) / n,
    ("all_reduce", "hierarchical"): lambda n: 2 * (n - 1) / n,
    ("all_reduce", "torus"): lambda n: 2 * (n - 1) / n,
    ("all_reduce", "recursive_halving_doubling"): lambda n: 2 * (n - 1) / n,  # n = 2^k
    ("reduce_scatter", "ring"): lambda n: (n - 1) / n,
    ("reduce_scatter", "direct"): lambda n: (n - 1) / n,
    ("all_gather", "ring"): lambda n: (n - 1) / n,
    ("all_gather", "direct"): lambda n: (n - 1) / n,
    ("all_to_all", "direct"): lambda n: (n - 1) / n,
    ("all_to_all", "pairwise"): lambda n: (n - 1) / n,
}
# in total (fraction of S): each non-root rank gets / gives the buffer once; two trees of
# half the buffer, up and down, over n - 1 edges each
TOTAL = {("broadcast", "ring"): lambda n: n - 1, ("broadcast", "tree"): lambda n: n - 1,
         ("reduce", "ring"): lambda n: n - 1, ("reduce", "tree"): lambda n: n - 1,
         ("all_reduce", "double_binary_tree"): lambda n: 2 * (n - 1),
         ("send_recv", "direct"): lambda n: n - 1}


@pytest.mark.parametrize("case", sorted(PER_RANK) + sorted(TOTAL))
@pytest.mark.parametrize("n", [4, 6, 8])
def test_bytes_moved_match_the_textbook_and_survive_chunks_and_protocols(case, n):
    """Payload bytes per rank (or in total) equal the textbook formula; every chunk count and
    protocol passes the checker and carries the payload times the wire ratio (LL 2, LL128
    16/15), up to a byte per transfer of rounding."""
    op, algo = case
    if algo == "recursive_halving_doubling" and n & (n - 1):
        n = 8  # the formula is for powers of two (others add 2r full-buffer steps)
    opts = options_for(op, algo, n)
    assert opts is not None
    nb = n * 4 * 3 * 5 * 7 * 64  # divisible by every block count used
    base = co.build(op, algo, list(range(n)), nb, chunks=1, **opts)
    check(base)
    sent, recv = _sent_recv(base, n)
    if case in PER_RANK:
        np.testing.assert_allclose(sent, PER_RANK[case](n) * nb, rtol=1e-12)
        np.testing.assert_allclose(recv, PER_RANK[case](n) * nb, rtol=1e-12)
    else:
        assert sent.sum() == recv.sum() == TOTAL[case](n) * nb
    payload = base.total_bytes
    for chunks, protocol in ((2, None), (4, None), (1, "simple"), (3, "ll128"), (2, "ll")):
        s = co.build(op, algo, list(range(n)), nb, chunks=chunks, protocol=protocol, **opts)
        check(s)
        # meta["wire_ratio"] = (payload, wire) bytes
        pay, wire = s.meta["wire_ratio"] if protocol else (1, 1)
        assert wire / pay == {None: 1, "simple": 1, "ll128": 16 / 15, "ll": 2}[protocol]
        transfers = int((s.kind == TRANSFER).sum())
        assert 0 <= s.total_bytes - payload * wire / pay <= transfers, (chunks, protocol)


LEAF = build("leaf_spine", {"leaves": 3, "hosts_per_leaf": 4, "spines": 2, "latency_us": 0.4,
                            "oversubscription": 2.0})


@pytest.mark.parametrize("op,algo", [("all_reduce", "ring"), ("all_reduce", "double_binary_tree"),
                                     ("all_reduce", "recursive_halving_doubling"),
                                     ("all_gather", "ring"), ("all_to_all", "direct"),
                                     ("broadcast", "tree")])
def test_a_collective_on_one_leaf_equals_it_on_a_star_of_those_hosts(op, algo):
    """The hosts of leaf 1 (ids 4..7) only talk through their leaf: the collective over them
    takes what it takes on a star of 4 hosts with the same host links."""
    ranks = [4, 5, 6, 7]
    star = custom(4, 1, [[h, 4, 100, 0.4] for h in range(4)])
    a = co.build(op, algo, ranks, S, protocol="simple", fabric=LEAF).with_connections()
    b = co.build(op, algo, [0, 1, 2, 3], S, protocol="simple", fabric=star).with_connections()
    for pol in ("ecmp", "spray"):
        assert makespan(LEAF, a, pol) == pytest.approx(makespan(star, b, pol), rel=1e-12)


def test_sizes_with_units_are_the_bytes_they_name():
    """A scenario's `bytes = "1MiB"` is 1048576 bytes, "4MB" 4,000,000, "1.5KiB" 1536: the
    same schedules and times as the integers."""
    from netcosim.workloads import build_workload

    t = FT4
    for text, n in (("1MiB", 1 << 20), ("4MB", 4_000_000), ("1.5KiB", 1536), ("2GiB", 1 << 31)):
        spec = {"kind": "collective", "op": "all_reduce", "algorithm": "ring",
                "protocol": "simple"}
        a = build_workload(t, dict(spec, bytes=text), engine="flow")
        b = build_workload(t, dict(spec, bytes=n), engine="flow")
        # a ring all-reduce over 16 hosts moves 2 (n - 1) shards of S / n from every rank
        assert a.total_bytes == b.total_bytes == 2 * 15 * n
        assert makespan(t, a) == makespan(t, b)

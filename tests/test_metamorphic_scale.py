"""Metamorphic and property tests at the sizes users design (16k-100k GPUs) and at the limits of
integer widths: relations that hold by construction or by a documented closed form, checked
against numbers computed here (textbook formulas, Python integers, breadth-first search), not
against figures the code printed before.

* Fabrics: fat_tree k=48/64/74, two_tier 2,048-12,800 nodes, fullflat 102,400 GPUs, torus
  32x32x32, a 16,640-host dragonfly and a 16,384-host three-tier leaf-spine have the documented
  host, switch and link counts and closed-form bisections; the builders' diameters equal a
  breadth-first search from every host; node and directed-link ids fit their int32 columns and
  CSR offsets are int64.
* Routing: sampled pairs (and ring neighbours) of 100k-host fabrics have the hop count of the
  fabric's formula under ecmp, dmodk and shortest (and dor on tori), and topo.hops agrees;
  connection keys stay distinct and above every node id up to the 10^7-node fabric limit.
* Collectives in their scalable form (docs/scale.md), flow engine, non-blocking fabrics: the
  time equals the alpha-beta closed form, to 1e-9 relative: the ring all-reduce over 65,536
  hosts (2(n-1) lock-step path latencies + 2(n-1)/n S / bw), the rail rings over 2,047 and
  2,048 two_tier nodes (an odd count closes across the spines), the striped ring over 16,384
  FullFlat GPUs, the torus all-reduce on 32x32x32 and 16x32x64 tori (sum over dimensions of
  2((d-1) lat + (d-1)/d S_j / bw)) and the hierarchical all-reduce over 16,384 GPUs.
* Byte and transfer totals, exact in integers: a ring stream over up to 102,400 ranks of up
  to 4e18 bytes moves 2(n-1) S (S per rank for reduce-scatter and all-gather: (n-1) S), with a
  protocol 2(n-1) times the wire bytes of its blocks; the hierarchical and torus all-reduces'
  `bytes` and `transfers_represented` at 16,384 GPUs are their formulas; `netcosim run` of a
  ring over 27,648 hosts reports busbw = 2(n-1)/n S / t, its makespan is launch + steps x
  (step latency + path latency) + busiest connection / bandwidth, and links.csv's host uplinks
  carry n x the busiest connection's bytes, `bytes` less the documented short.
* Double binary trees over 16k-10^6 ranks: two spanning binary trees of depth <= ceil(log2
  (n + 1)), no rank inner in both; the binomial tree's parents and reduce depths equal brute
  force.
* Full form against scalable form on fabrics tests/test_scale.py does not cover (FullFlat
  striped over planes, dragonfly, three-tier leaf-spine, two_tier rail rings with even and odd
  node counts and several leaves per rail), every ring op, LL / LL128 / Simple, ecmp and
  dmodk: the same transfers and bytes exactly, the same makespan within 1e-5 (shards a byte
  apart: the stream moves its busiest connection's total, docs/scale.md).
* Limits: `nbytes` of 2^63 and beyond is an InputError naming nbytes in every schedule
  builder, the estimate and `choose` (found: OverflowError "Python int too large to convert to
  C long"); 2^63 - 1 still builds. The memory guard's transfer count equals the built
  schedule's for every algorithm it counts exactly (found: send_recv counted 1 transfer per
  chunk where the schedule has one per pair, so 20,460,000 transfers passed a 2 GiB budget and
  died of MemoryError; strict xfail, netcosim.memory_guard.collective_transfers).
* Scale-up domains: two GPUs of one two_tier node talk over its switch, never through their
  NICs, also with rails = false, where the top-of-rack leaf joins them in as few hops (found:
  ecmp sent half the pairs through two NIC links, spray all of them in part; a one-node 8-GPU
  ring all-reduce ran at 49.9 instead of 873.6 GB/s of bus bandwidth, and a ring over 16,384
  GPUs 27% slow); rails = true fabrics are routed exactly as before.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import collectives as co
from collectives import protocols
from collectives._trees import (binomial_parent, binomial_reduce_depths, depths,
                                double_binary_trees)
from collectives.streams import ring_stream, stream_schedule
from netcore.schedule import connection_keys
from netcosim.cli import main
from netcosim.commands.collective import sweep
from topo.builders import build
from topo.errors import InputError
from topo.hops import pair_hops
from topo.metrics import host_diameter_bfs
from topo.routing import Routing

MAX_BYTES = 2**63 - 1


def _rng(seed=5):
    return np.random.default_rng(seed)


# ====================================================================== fabrics
def _gbps(x):
    return x * 1e9 / 8


LARGE = [
    # kind, params, hosts, switches, links, bisection (bytes/s)
    ("fat_tree", {"k": 48}, 48**3 // 4, 5 * 48**2 // 4, 3 * 48**3 // 4, 48**3 // 8 * _gbps(100)),
    ("fat_tree", {"k": 64, "link_gbps": 400}, 65536, 5120, 196608, 32768 * _gbps(400)),
    ("two_tier", {"nodes": 12800}, 102400, 12800 + 8 + 12800, 2 * 102400 + 8 * 12800,
     51200 * _gbps(400)),
    ("two_tier", {"nodes": 2048, "nodes_per_leaf": 32}, 16384, 2048 + 8 * 64 + 32,
     2 * 16384 + 8 * 64 * 32, 8192 * _gbps(400)),
    # two planes of radix-512 leaf/spine: 400 leaves and 256 spines per plane
    ("fullflat", {"n_gpus": 102400, "planes": 2, "switch_radix": 512}, 102400, 2 * (400 + 256),
     2 * (102400 + 400 * 256), 51200 * _gbps(7200)),
    ("torus", {"dims": [32, 32, 32]}, 32768, 0, 3 * 32768, 2 * 32768 // 32 * _gbps(100)),
    ("leaf_spine", {"leaves": 64, "hosts_per_leaf": 32, "spines": 16, "tiers": 3, "pods": 8,
                    "super_spines": 64}, 16384, 8 * (64 + 16) + 64,
     16384 + 8 * 64 * 16 + 8 * 16 * 4, 8192 * _gbps(100)),
    # g a p h: g a p hosts, g a routers, g a p + g a (a - 1) / 2 + g a h / 2 links
    ("dragonfly", {"groups": 65, "routers_per_group": 16, "hosts_per_router": 16,
                   "global_links": 4}, 65 * 16 * 16, 65 * 16,
     65 * 16 * 16 + 65 * 16 * 15 // 2 + 65 * 16 * 4 // 2, None),
]


@pytest.mark.parametrize("kind,params,hosts,switches,links,bis", LARGE,
                         ids=[f"{k}-{p}" for k, p, *_ in LARGE])
def test_large_fabrics_have_the_documented_counts_and_widths(kind, params, hosts, switches,
                                                             links, bis):
    t = build(kind, params)
    assert (t.n_hosts, t.n_switches, t.n_links) == (hosts, switches, links)
    if bis is not None:
        assert t.params["bisection_Bps"] == pytest.approx(bis, rel=1e-12)
    # ids in their narrow columns, CSR offsets wide
    assert t.link_u.dtype == np.int32 and t.dlink_src.dtype == np.int32
    assert int(t.dlink_src.max()) == t.n_nodes - 1 or int(t.dlink_dst.max()) == t.n_nodes - 1
    ptr, nbr, dl = t.adjacency
    assert ptr.dtype == np.int64 and ptr[-1] == 2 * links
    assert int(dl.max()) == 2 * links - 1
    assert np.array_equal(np.sort(dl), np.arange(2 * links))


@pytest.mark.parametrize("kind,params", [
    ("dragonfly", {"groups": 65, "routers_per_group": 16, "hosts_per_router": 16,
                   "global_links": 4}),
    ("dragonfly", {"groups": 129, "routers_per_group": 16, "hosts_per_router": 8,
                   "global_links": 8}),
    ("dragonfly", {"groups": 5, "routers_per_group": 64, "hosts_per_router": 64,
                   "global_links": 1}),
    ("leaf_spine", {"leaves": 64, "hosts_per_leaf": 32, "spines": 16, "tiers": 3, "pods": 8,
                    "super_spines": 64}),
    ("two_tier", {"nodes": 2048, "rails": False, "nodes_per_leaf": 4}),
    ("two_tier", {"nodes": 2048, "nodes_per_leaf": 32}),
    ("fullflat", {"n_gpus": 16300, "switch_radix": 256, "planes": 2}),
    ("torus", {"dims": [25, 25, 27]}),
])
def test_closed_form_diameters_equal_a_search_from_every_host(kind, params):
    t = build(kind, params)
    assert t.n_hosts >= 16000
    assert host_diameter_bfs(t) == t.params["diameter_hops"]


def _hops_formula(kind, params, s, d):
    if kind == "fat_tree":
        half = params["k"] // 2
        return np.where(s == d, 0, np.where(s // half == d // half, 2,
                                            np.where(s // half**2 == d // half**2, 4, 6)))
    if kind == "two_tier":
        G = params.get("gpus_per_node", 8)
        same_node, same_rail = s // G == d // G, s % G == d % G
        return np.where(s == d, 0, np.where(same_node | same_rail, 2, 4))
    if kind == "fullflat":
        down = params["switch_radix"] // 2
        return np.where(s == d, 0, np.where(s // down == d // down, 2, 4))
    dims = np.array(params["dims"])
    cs = np.stack(np.unravel_index(s, tuple(dims)), 1)
    cd = np.stack(np.unravel_index(d, tuple(dims)), 1)
    delta = (cd - cs) % dims
    return np.minimum(delta, dims - delta).sum(axis=1)


@pytest.mark.parametrize("kind,params,policies", [
    ("fat_tree", {"k": 74}, ("ecmp", "dmodk")),  # 101,306 hosts
    ("two_tier", {"nodes": 12800}, ("ecmp", "dmodk", "shortest")),  # 102,400 GPUs
    ("fullflat", {"n_gpus": 102400, "planes": 2, "switch_radix": 512}, ("ecmp", "shortest")),
    ("torus", {"dims": [32, 32, 32]}, ("ecmp", "dor")),
])
def test_sampled_routes_at_scale_have_the_formula_hop_count(kind, params, policies):
    t = build(kind, params)
    n = t.n_hosts
    rng = _rng()
    s = np.r_[rng.integers(0, n, 600), np.arange(0, n - 1, n // 200)]
    d = np.r_[rng.integers(0, n, 600), np.arange(1, n, n // 200)]
    want = _hops_formula(kind, params, s, d)
    for policy in policies:
        p = Routing(t, policy).paths(s, d, flow_id=connection_keys(s, d))
        assert p.reachable.all() and p.ptr.dtype == np.int64
        assert np.array_equal(p.hops, want), policy
        if not t.params.get("planes", 1) > 1:  # one path per flow: its links are its hops
            assert np.array_equal(np.diff(p.ptr), want)
    if kind != "torus":  # a search per anchor switch: quick where hosts do not relay
        assert np.array_equal(pair_hops(t, s, d), want)


def test_connection_keys_stay_distinct_and_above_node_ids_at_the_fabric_limit():
    from topo.builders._check import MAX_NODES

    top = MAX_NODES - 1
    s = np.array([0, 0, 1, top, top, top - 1, 12345], dtype=np.int64)
    d = np.array([1, top, 0, 0, top - 1, top, 54321], dtype=np.int64)
    k = connection_keys(s, d)
    assert len(np.unique(k)) == len(k) and (k > MAX_NODES).all()
    # the key decodes back to its pair: no bits of src and dst overlap
    assert np.array_equal((k - (1 << 62)) >> 31, s)
    assert np.array_equal((k - (1 << 62)) & ((1 << 31) - 1), d)


# ====================================================================== closed forms
def _flow_time(topo, op, algo, size, routing="ecmp", **kw):
    """Seconds of ``op`` on the flow engine as `netcosim collective --engine flow` runs it
    (scalable form), without protocol latencies; a list of sizes gives a list."""
    t = build(*topo) if isinstance(topo, tuple) else topo
    rows = sweep(t, op, algo, size if isinstance(size, list) else [size], "flow",
                 step_latency_s=0.0, routing=routing, protocol="simple", **kw)
    return [r["time_s"] for r in rows] if isinstance(size, list) else rows[0]["time_s"]


def test_ring_all_reduce_over_65536_hosts_is_the_alpha_beta_closed_form():
    """fat_tree k=64, 400 Gb/s, 0.5 us: each step of the lock-step ring pays the slowest
    connection's path latency (6 hops across pods), and the busiest connection carries
    2(n-1)/n S; one stream over 65,536 connections."""
    t = build("fat_tree", {"k": 64, "link_gbps": 400, "latency_us": 0.5})
    n, bw, lat = 65536, 50e9, 6 * 0.5e-6
    sizes = [1 << 30, 8 << 30]
    want = [2 * (n - 1) * lat + 2 * (n - 1) / n * S / bw for S in sizes]
    assert _flow_time(t, "all_reduce", "ring", sizes) == pytest.approx(want, rel=1e-9)
    # reduce-scatter: (n - 1) steps of S / n (all-gather is its mirror, checked in full
    # against the scalable form below)
    want = (n - 1) * lat + (n - 1) / n * sizes[0] / bw
    assert _flow_time(t, "reduce_scatter", "ring", sizes[0]) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("nodes,lat", [(2048, 2e-6), (2047, 4e-6)])
def test_rail_rings_over_two_tier_nodes_are_the_closed_form(nodes, lat):
    """8 rail rings of 1/8 of the buffer over every GPU: each NIC sends once and receives once
    (50 GB/s), every step pays the leaf's 2 x 1 us, or with an odd node count the closing
    hop's 4 x 1 us across a spine."""
    t = build("two_tier", {"nodes": nodes})
    n = 8 * nodes
    S = 8 * n * 8192  # about 1 GiB, in whole blocks of every ring's shard
    want = 2 * (n - 1) * lat + 2 * (n - 1) / n * (S / 8) / 50e9
    assert _flow_time(t, "all_reduce", "ring", S) == pytest.approx(want, rel=1e-9)


def test_striped_ring_over_16384_fullflat_gpus_is_the_closed_form():
    """8 planes of radix-512 leaf/spine: every connection is split over the planes, so it
    runs at the GPU's 7,200 Gb/s; the slowest connection crosses a spine (4 x 0.5 us)."""
    t = build("fullflat", {"n_gpus": 16384, "switch_radix": 512, "latency_us": 0.5})
    n, S = 16384, 8 << 30
    want = 2 * (n - 1) * 4 * 0.5e-6 + 2 * (n - 1) / n * S / 900e9
    assert _flow_time(t, "all_reduce", "ring", S) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("dims", [(32, 32, 32), (16, 32, 64)])
def test_torus_all_reduce_over_32768_nodes_is_the_closed_form(dims):
    """Dimension by dimension, a ring of physical neighbours on the shard the previous one
    left: 2 sum_j ((d_j - 1) lat + (d_j - 1)/d_j S_j / bw), S_j = S / prod(d_i, i < j)."""
    t = build("torus", {"dims": list(dims), "link_gbps": 400, "latency_us": 0.7})
    S = 1 << 30
    want, Sj = 0.0, float(S)
    for d in dims:
        want += 2 * ((d - 1) * 0.7e-6 + (d - 1) / d * Sj / 50e9)
        Sj /= d
    assert _flow_time(t, "all_reduce", "torus", S, routing="dor") == \
        pytest.approx(want, rel=1e-9)


def test_hierarchical_all_reduce_over_16384_gpus_is_the_closed_form():
    """Ring reduce-scatter and all-gather inside each node (NVLink, 900 GB/s, 2 x 0.25 us),
    ring all-reduce of each shard along its rail across the 2,048 nodes (NIC, 2 x 1 us)."""
    t = build("two_tier", {"nodes": 2048})
    g, G, S = 8, 2048, 1 << 30
    want = (2 * ((g - 1) * 0.5e-6 + (g - 1) / g * S / 900e9)
            + 2 * (G - 1) * 2e-6 + 2 * (G - 1) / G * (S / g) / 50e9)
    assert _flow_time(t, "all_reduce", "hierarchical", S, group_size=8) == \
        pytest.approx(want, rel=1e-9)


# ====================================================================== exact totals
def _wire(b, num, den):
    return -(-b * den // num)


@pytest.mark.parametrize("g", [16384, 100000, 102400])
def test_ring_stream_bytes_are_exact_far_beyond_float_precision(g):
    """Python-integer totals: 2(n-1) S for all-reduce, (n-1) S for reduce-scatter and
    all-gather, with S up to 4e18 (totals of 8e23, far past 2^63 and 2^53); a protocol puts
    every block on the wire as ceil(b x den / num), 2(n-1) times."""
    for S in (1, 12345, (1 << 40) + 12345, (1 << 53) + 1, 3 * 10**18 + 7, 4 * 10**18 + 99991):
        for op, f in (("all_reduce", 2), ("reduce_scatter", 1), ("all_gather", 1)):
            st = ring_stream(op, "ring", g, S)
            s = stream_schedule(range(g), st, op)
            assert s.total_bytes == f * (g - 1) * S, (op, S)
            assert s.n_member_transfers == f * (g - 1) * g
    q, r = divmod((1 << 40) + 12345, g)
    for proto in ("ll", "ll128"):
        c = protocols.PROTOCOLS[proto]
        st = ring_stream("all_reduce", "ring", g, (1 << 40) + 12345, wire=(c.num, c.den))
        s = stream_schedule(range(g), st, "all_reduce")
        blocks = r * _wire(q + 1, c.num, c.den) + (g - r) * _wire(q, c.num, c.den)
        assert s.total_bytes == 2 * (g - 1) * blocks


def _run(tmp_path, text, *sets, name="s"):
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    out = tmp_path / f"out_{name}"
    args = ["run", str(p), "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0
    return json.loads((out / "summary.json").read_text()), out


def test_composed_all_reduces_at_16384_gpus_count_bytes_and_transfers_exactly(tmp_path):
    S = 1 << 30
    s, _ = _run(tmp_path, '[topology]\nkind = "two_tier"\nnodes = 2048\n[workload]\n'
                          'kind = "collective"\nop = "all_reduce"\nalgorithm = "hierarchical"\n'
                          f'bytes = {S}\nprotocol = "simple"\n', name="h")
    g, G = 8, 2048
    n = g * G
    assert s["network_detail_used"] == "auto" and s["engine_flows"] == 2 * G + g
    assert s["bytes"] == 2 * (g - 1) * S * G + 2 * (G - 1) * S
    assert s["transfers_represented"] == 2 * (g - 1) * n + 2 * (G - 1) * n
    dims = (32, 32, 16)
    s, _ = _run(tmp_path, '[topology]\nkind = "torus"\ndims = [32, 32, 16]\n[routing]\n'
                          'policy = "dor"\n[workload]\nkind = "collective"\nop = "all_reduce"\n'
                          f'algorithm = "torus"\nbytes = {S}\nprotocol = "simple"\n', name="t")
    n = math.prod(dims)
    b = tr = 0
    Sj = S
    for d in dims:
        b += 2 * (d - 1) * Sj * (n // d)
        tr += 2 * (d - 1) * n
        Sj //= d
    assert s["bytes"] == b and s["transfers_represented"] == tr


def test_run_of_a_ring_over_27648_hosts_reports_consistent_figures(tmp_path):
    """LL128, 8 GiB per rank, fat_tree k=48 (27,648 hosts: the shards do not split evenly).
    busbw from size and time; bytes = 2(n-1) x the wire bytes of the blocks; the makespan is
    the launch, every step's LL128 latency and path latency, and the busiest connection's wire
    bytes at 50 GB/s; the host uplinks of links.csv carry n x the busiest connection's bytes."""
    S = 8 << 30
    s, out = _run(tmp_path, '[topology]\nkind = "fat_tree"\nk = 48\nlink_gbps = 400\n'
                            'latency_us = 0.5\n[workload]\nkind = "collective"\n'
                            'op = "all_reduce"\nalgorithm = "ring"\n'
                            f'bytes = {S}\nprotocol = "ll128"\n')
    n = 27648
    c = protocols.PROTOCOLS["ll128"]
    q, r = divmod(S, n)
    w = np.array([_wire(q + 1, c.num, c.den)] * r + [_wire(q, c.num, c.den)] * (n - r),
                 dtype=np.int64)
    assert s["bytes"] == 2 * (n - 1) * int(w.sum())
    assert s["transfers_represented"] == 2 * (n - 1) * n and s["engine_flows"] == 1
    # member p sends every block but its own (reduce-scatter) and but p+1's (all-gather)
    busiest = int((2 * w.sum() - w - np.roll(w, -1)).max())
    steps = 2 * (n - 1)
    want_us = 14.0 + steps * (4.0 + 3 * 2 * 0.5) + busiest / 50e9 * 1e6
    assert s["makespan_us"] == pytest.approx(want_us, rel=1e-9)
    assert s["busbw_GBps"] == pytest.approx(S / (s["makespan_us"] * 1e-6) / 1e9
                                            * 2 * (n - 1) / n, rel=1e-12)
    import csv

    with open(out / "links.csv") as f:
        up = sum(round(float(row["bytes"])) for row in csv.DictReader(f) if int(row["u"]) < n)
    # the stream loads every member's links with the busiest connection's bytes; `bytes`
    # counts what each connection really carries, a wire byte or two less per step on some
    # (BYTES_SHORT, docs/scale.md)
    sent = 2 * w.sum() - w - np.roll(w, -1)
    assert up == n * busiest and s["bytes"] == up - int((busiest - sent).sum())


# ====================================================================== trees
@pytest.mark.parametrize("n", [16384, 16385, 65535, 100000, 102400, 131072, 1000003])
def test_double_binary_trees_at_scale_are_complementary_spanning_binary_trees(n):
    parents = double_binary_trees(n)
    inner = []
    for par in parents:
        assert (par < 0).sum() == 1
        kids = np.bincount(par[par >= 0], minlength=n)
        assert kids.max() <= 2
        assert depths(par).max() <= math.ceil(math.log2(n + 1))  # reaches the root: spanning
        inner.append(kids > 0)
    assert not (inner[0] & inner[1]).any()


@pytest.mark.parametrize("n", [2, 3, 1000, 4097, 65536, 100003])
def test_binomial_trees_equal_brute_force(n):
    v = np.arange(n, dtype=np.int64)
    high = np.array([0] + [1 << (int(x).bit_length() - 1) for x in v[1:]], dtype=np.int64)
    par = binomial_parent(n)
    assert par[0] == -1 and np.array_equal(par[1:], v[1:] - high[1:])
    # reduce depth: 0 for a leaf, else 1 + the largest of its children's (children follow
    # their parent in id order, so one sweep from the top settles every rank)
    want = np.zeros(n, dtype=np.int64)
    for x in range(n - 1, 0, -1):
        want[par[x]] = max(want[par[x]], want[x] + 1)
    assert np.array_equal(binomial_reduce_depths(n), want)


# ====================================================================== full vs scalable
FABRICS = {
    "fullflat_planes": 'kind = "fullflat"\nn_gpus = 96\nplanes = 4\nswitch_radix = 32\n'
                       'gpu_gbps = 1600\nlatency_us = 0.5',
    "dragonfly": 'kind = "dragonfly"\ngroups = 9\nrouters_per_group = 4\nhosts_per_router = 2\n'
                 'global_links = 2',
    "leaf_spine_3": 'kind = "leaf_spine"\nleaves = 4\nhosts_per_leaf = 8\nspines = 4\n'
                    'tiers = 3\npods = 3\nsuper_spines = 8\noversubscription = 2.0',
    "two_tier_rails": 'kind = "two_tier"\nnodes = 12\ngpus_per_node = 8',
    "two_tier_odd": 'kind = "two_tier"\nnodes = 7\ngpus_per_node = 4\nnodes_per_leaf = 2',
}
CASES = [(f, op, proto, routing)
         for i, f in enumerate(FABRICS)
         for j, op in enumerate(("all_reduce", "reduce_scatter", "all_gather"))
         for proto, routing in [(("ll", "ll128", "simple")[(i + j) % 3],
                                 ("ecmp", "dmodk")[(i + j) % 2])]]


@pytest.mark.parametrize("fabric,op,proto,routing", CASES)
def test_full_and_scalable_forms_agree_on_more_fabrics(tmp_path, fabric, op, proto, routing):
    text = (f'[topology]\n{FABRICS[fabric]}\n[routing]\npolicy = "{routing}"\n[workload]\n'
            f'kind = "collective"\nop = "{op}"\nalgorithm = "ring"\nbytes = 1000003\n'
            f'protocol = "{proto}"\n')
    got = {d: _run(tmp_path, text, f"workload.network_detail={d}", name=d)[0]
           for d in ("auto", "full")}
    a, f = got["auto"], got["full"]
    assert a["network_detail_used"] == "auto" and a["engine_flows"] < f["engine_flows"]
    assert a["bytes"] == f["bytes"]
    assert a["transfers_represented"] == f["transfers_represented"] == f["engine_flows"]
    assert a["makespan_us"] == pytest.approx(f["makespan_us"], rel=1e-5)


# ====================================================================== limits
BUILDERS = [(op, algo) for op, algos in co.ALGORITHMS.items() if op != "all_to_all_v"
            for algo in algos if algo not in ("nvls", "sharp", "nvls_tree")]


def _opts(algo):
    return {"hierarchical": {"group_size": 2}, "torus": {"dims": (2, 2)}}.get(algo, {})


@pytest.mark.parametrize("op,algo", BUILDERS)
@pytest.mark.parametrize("nbytes", [2**63, 2**64 + 5, 2.0**63, 1e19])
def test_a_size_beyond_int64_is_an_input_error_naming_nbytes(op, algo, nbytes):
    """Was OverflowError: Python int too large to convert to C long (exit 1 through the CLI's
    library users; the scenario layer's own size parser refuses it first)."""
    with pytest.raises(InputError, match=r"^nbytes = .*int64"):
        co.build(op, algo, list(range(4)), nbytes, **_opts(algo))


@pytest.mark.parametrize("op,algo", BUILDERS)
def test_the_largest_size_still_builds_or_is_refused_naming_the_bytes(op, algo):
    try:
        s = co.build(op, algo, list(range(4)), MAX_BYTES, **_opts(algo))
    except InputError as e:  # a protocol or a layout whose sums pass int64, said so
        assert "bytes" in str(e)
        return
    assert (s.size >= 0).all() and s.total_bytes > 0


def test_in_network_builders_estimate_and_choose_refuse_beyond_int64():
    fab = build("two_tier", {"nodes": 2, "gpus_per_node": 4, "reduce_gbps": "line"})
    for algo in ("nvls", "sharp"):
        ranks = list(range(4)) if algo == "nvls" else list(range(8))
        with pytest.raises(InputError, match=r"nbytes = 9223372036854775808"):
            co.build("all_reduce", algo, ranks, 2**63, fabric=fab)
    with pytest.raises(InputError, match=r"nbytes = 9223372036854775808"):
        co.build("all_reduce", "nvls_tree", list(range(8)), 2**63, fabric=fab, group_size=4)
    from collectives.analytical import estimate

    ft = build("fat_tree", {"k": 4})
    with pytest.raises(InputError, match="nbytes"):
        estimate(ft, "all_reduce", "ring", list(range(16)), 2**63)
    with pytest.raises(InputError, match="nbytes"):
        co.choose(ft, "all_reduce", 2**63)
    # the largest size: the estimate in floats, 2(n-1)/n S / bw
    t = estimate(ft, "all_reduce", "ring", list(range(16)), MAX_BYTES)
    assert t == pytest.approx(2 * 15 / 16 * MAX_BYTES / _gbps(100), rel=1e-6)


# which (op, algorithm) the guard counts exactly (the others are documented upper bounds)
EXACT_COUNTS = [("all_reduce", "ring"), ("all_reduce", "bidirectional_ring"),
                ("all_reduce", "double_binary_tree"), ("all_reduce", "hierarchical"),
                ("all_reduce", "torus"), ("reduce_scatter", "ring"), ("all_gather", "ring"),
                ("broadcast", "ring"), ("broadcast", "tree"), ("reduce", "ring"),
                ("reduce", "tree"), ("all_to_all", "direct"), ("all_to_all", "pairwise")]


def _guard_count(fab, op, algo, n, chunks, opts, nbytes=1 << 20):
    from collectives import rail
    from netcosim.memory_guard import collective_transfers

    side = rail.side_by_side(fab, op, algo, np.arange(n))
    c = chunks if chunks is not None else protocols.chunks_for(
        op, algo, nbytes, n, None, opts.get("group_size"), side)
    return collective_transfers(op, algo, n, c, opts.get("dims"),
                                opts.get("group_size")) * side


@pytest.mark.parametrize("kind,params", [("fat_tree", {"k": 4}),
                                         ("two_tier", {"nodes": 4, "gpus_per_node": 4})])
def test_memory_guard_counts_the_transfers_the_builders_make(kind, params):
    fab = build(kind, params)
    n = fab.n_hosts
    for op, algo in EXACT_COUNTS:
        opts = {"hierarchical": {"group_size": 4}, "torus": {"dims": (4, 4)}}.get(algo, {})
        for chunks in (None, 3):
            s = co.build(op, algo, list(range(n)), 1 << 20, fabric=fab, chunks=chunks, **opts)
            assert _guard_count(fab, op, algo, n, chunks, opts) == s.n_transfers, (op, algo)
    for op, algo in (("all_reduce", "recursive_halving_doubling"), ("all_to_all", "hierarchical"),
                     ("reduce_scatter", "direct"), ("all_gather", "direct"),
                     ("all_reduce", "direct")):
        opts = {"group_size": 4} if algo == "hierarchical" else {}
        s = co.build(op, algo, list(range(n)), 1 << 20, fabric=fab, **opts)
        assert _guard_count(fab, op, algo, n, None, opts) >= s.n_transfers, (op, algo)


def test_memory_guard_counts_every_pair_of_a_send_recv():
    """It counted 1 transfer per chunk; the schedule has one per pair (n - 1 by default):
    20,460,000 transfers over 1,024 ranks passed a 2 GiB budget and died of MemoryError."""
    from netcosim.memory_guard import collective_transfers

    for n, chunks in ((16, 1), (1000, 3)):
        s = co.build("send_recv", "direct", list(range(n)), 1 << 20, chunks=chunks)
        assert collective_transfers("send_recv", "direct", n, chunks) == s.n_transfers
    pairs = [[0, 5], [5, 0], [3, 9], [9, 3], [1, 2]]  # a scenario's own pairs: counted as given
    s = co.build("send_recv", "direct", list(range(10)), 1 << 20, chunks=4, pairs=pairs)
    assert collective_transfers("send_recv", "direct", 10, 4, pairs=pairs) == s.n_transfers


def test_a_send_recv_beyond_the_budget_is_refused_as_a_broadcast_of_as_many_is(
        tmp_path, capsys, monkeypatch):
    """1,024 ranks x 10 chunks: 10,230 transfers either way, about 10 MB past the 400 MiB
    base; a budget of 401 MiB refuses the broadcast chain and let the send_recv through."""
    from netcosim import memory_guard

    monkeypatch.setenv(memory_guard.BUDGET_ENV, "401MiB")
    p = tmp_path / "sr.toml"
    base = ('[topology]\nkind = "fat_tree"\nk = 16\n[workload]\nkind = "collective"\n'
            'bytes = "1MiB"\nchunks = 10\nnetwork_detail = "full"\n')
    p.write_text(base + 'op = "broadcast"\nalgorithm = "ring"\n')
    assert main(["validate", str(p)]) == 2
    assert "10,230 transfers" in capsys.readouterr().err
    p.write_text(base + 'op = "send_recv"\nalgorithm = "direct"\n')
    assert main(["validate", str(p)]) == 2


# ====================================================================== scale-up domains
def _nic_share(t, src, dst, policy):
    """Per flow, the weight of its path on scale-out (non-scale-up) links."""
    p = Routing(t, policy).paths(src, dst, flow_id=connection_keys(src, dst))
    out_of_node = t.link_layer[p.link // 2] != t.layer_names.index("scaleup")
    owner = np.repeat(np.arange(len(src)), np.diff(p.ptr))
    return np.bincount(owner, weights=out_of_node * p.weight, minlength=len(src)), p


@pytest.mark.parametrize("policy", ["ecmp", "dmodk", "shortest", "spray"])
def test_gpus_of_one_node_talk_over_its_switch_whatever_the_leaves(policy):
    for params in ({"nodes": 4, "rails": False}, {"nodes": 8, "rails": False,
                                                  "nodes_per_leaf": 4}, {"nodes": 4}):
        t = build("two_tier", params)
        s, d = np.meshgrid(np.arange(t.n_hosts), np.arange(t.n_hosts))
        s, d = s.ravel(), d.ravel()
        keep = (s != d) & (s // 8 == d // 8)
        share, p = _nic_share(t, s[keep], d[keep], policy)
        assert (share == 0).all(), (params, policy)
        assert (p.hops == 2).all()
        # between nodes nothing is held back: the NIC path as before
        other = (s != d) & (s // 8 != d // 8)
        share, _ = _nic_share(t, s[other], d[other], policy)
        assert (share > 0).all()


def test_a_one_node_ring_is_as_fast_behind_a_top_of_rack_leaf_as_behind_rails():
    """Found at 16,384 GPUs (rails = false, 4 nodes per leaf: 174.0 ms against the rails'
    136.4 ms); the cleanest form: one node, 1 GiB, 49.9 GB/s of bus bandwidth against 873.6."""
    got = [sweep(build("two_tier", {"nodes": 1, "rails": rails}), "all_reduce", "ring",
                 [1 << 30], "flow", protocol="simple")[0]["busbw_GBps"] for rails in (True, False)]
    assert got[1] == pytest.approx(got[0], rel=1e-12) and got[0] > 800


def test_a_node_whose_scale_up_link_is_down_still_reaches_its_peer_through_the_leaf():
    t = build("two_tier", {"nodes": 2, "rails": False})
    r = Routing(t, "ecmp")
    nvl = int(np.flatnonzero((t.link_layer == 0) & (t.link_u == 0))[0])
    alive = np.ones(t.n_dlinks, bool)
    alive[[2 * nvl, 2 * nvl + 1]] = False
    p = r.paths(np.array([0, 1]), np.array([1, 2]), alive=alive)
    assert p.reachable.all()
    assert (t.link_layer[p.links_of(0) // 2] == 1).all()  # 0 -> leaf -> 1
    assert (t.link_layer[p.links_of(1) // 2] == 0).all()  # 1 -> NVSwitch -> 2


def test_rail_fabrics_route_exactly_as_before():
    """rails = true: a node's GPUs sit on different leaves, so nothing is held back and the
    paths are the plain walk's, bit for bit."""
    t = build("two_tier", {"nodes": 16})
    r = Routing(t, "ecmp")
    rng = _rng(2)
    s, d = rng.integers(0, t.n_hosts, 4000), rng.integers(0, t.n_hosts, 4000)
    assert r._inside_domain(s.astype(np.int32), d.astype(np.int32)) is None
    a = r.paths(s, d, flow_id=connection_keys(s, d))
    b = r._policy(*(np.ascontiguousarray(x, dtype=np.int32) for x in (s, d)),
                  connection_keys(s, d), None, r._ones)
    assert np.array_equal(a.ptr, b.ptr) and np.array_equal(a.link, b.link)

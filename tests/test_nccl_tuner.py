"""NCCL's tuner model (collectives/nccl_tuner.py) and `choose` running its pick on two_tier."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import collectives as co
from collectives import nccl_tuner as nt
from collectives.choose import ordered_ranks
from topo.builders import build
from topo.errors import InputError
from validation.nccl_tests import FABRIC as H100  # the DGX H100 clusters: 400 Gb/s ports


def _view(nodes, **kw):
    t = build("two_tier", dict(H100, nodes=nodes, **kw))
    return nt.view(t, ordered_ranks(t))


def test_engines_price_steps_with_the_tuners_latencies():
    """The pick (this module) and the price (protocols.FAMILY_LATENCY) are one NCCL version:
    NVLSTree's network step was 20.9 us in the engines against the tuner's 14 until session
    37, so the engines ran NCCL 2.24-2.27's pick at a newer NCCL's cost."""
    from collectives.protocols import FAMILY_LATENCY
    spread = {"ring": 1, "tree": 1, "nvls_tree": 4}  # NVLSTree's 25 us over its 4 NVLink steps
    for fam, n in spread.items():
        for i, proto in enumerate(nt.PROTOS):
            if proto not in FAMILY_LATENCY[fam]:
                assert fam == "nvls_tree" and nt.NET_US[fam][i] == 0.0
                continue
            intra, net, base = FAMILY_LATENCY[fam][proto]
            assert intra == pytest.approx(nt.NVLINK_US[fam][i] * 1e-6 / n), (fam, proto)
            assert net == pytest.approx(nt.NET_US[fam][i] * 1e-6), (fam, proto)
            assert base == pytest.approx(nt.BASE_US[fam][i] * 1e-6), (fam, proto)


def test_graphs_follow_nccls_search_rules():
    v = _view(4)
    assert (v.nic_GBps, v.nvlink_GBps, v.nvls) == (50.0, 370.0, True)
    # 48 GB/s a channel would put 384 on a 370 GB/s NVLink: 8 channels of 45
    assert nt.ring_graph(v) == nt.Graph(8, 45.0, 45.0)
    # NVLS: a head carries its channel twice, so 9 x 45 would not fit: 8 heads of 40 inside,
    # the network side raised alone to the NIC's 48
    assert nt.nvls_graph(v) == nt.Graph(8, 40.0, 48.0)
    assert nt.nvls_graph(nt.View(4, 8, 450.0, 50.0, True)) == nt.Graph(8, 48.0, 48.0)
    wide = nt.View(4, 8, 450.0, 50.0, True)
    assert nt.ring_graph(wide) == nt.Graph(8, 48.0, 48.0)
    # two channels per 100 GB/s NIC; slow channels are doubled at half the rate
    assert nt.ring_graph(nt.View(4, 8, 900.0, 100.0, True)) == nt.Graph(16, 48.0, 48.0)
    assert nt.ring_graph(nt.View(4, 2, 100.0, 50.0, False)) == nt.Graph(4, 24.0, 24.0)
    # 72 heads on a 3 GB/s NVLink: no NVLS speed fits, so NVLS-Tree is not a candidate
    starved = nt.View(4, 72, 3.0, 50.0, True)
    assert nt.nvls_graph(starved).bw_intra == 0
    assert ("nvls_tree", "simple") not in nt.times_us(starved, 1 << 20)
    # links below NCCL's slowest speed: its fallback graph, one channel of 0.1 GB/s
    assert nt.ring_graph(nt.View(2, 8, 0.05, 0.05, False)) == nt.Graph(1, 0.1, 0.1)
    assert nt.pick(nt.View(2, 8, 0.05, 0.05, False), 1 << 20)[0] in ("ring",
                                                                      "double_binary_tree")


def test_times_are_nccls_formula():
    """Hand-computed from NCCL 2.26's tuning.cc on 4 nodes of 8 (32 ranks, 62 steps)."""
    v = _view(4)
    t = nt.times_us(v, 1 << 20)
    # Tree/LL128: 14 + 2 (7 x 1.25 + 2 x 8.5) us; min(.92 x 360, 8 x 36) = 288 GB/s of bus,
    # then min(288 x 120/128, 8 x 29) = 232, halved, times the 1 MiB correction 0.6
    assert t[("tree", "ll128")] == pytest.approx(65.5 + (1 << 20) / (1e3 * 116 * 0.6))
    # Ring/LL128: 14 + 56 x 1.9 + 6 x 4.0 us; min(.92 x 360, 8 x 36.7) x 32/62
    assert t[("ring", "ll128")] == pytest.approx(
        144.4 + (1 << 20) / (1e3 * min(.92 * 360, 8 * 36.7) * 32 / 62))
    # NVLS-Tree: 25 + 2 x 2 x 14 us; 8 heads x min(40, 48/2) x 5/6
    assert t[("nvls_tree", "simple")] == pytest.approx(81 + (1 << 20) / (1e3 * 160))
    # Ring/Simple from 64 bytes per channel and rank pays 1.4 x its latency
    big = nt.times_us(v, 1 << 30)[("ring", "simple")]
    assert big == pytest.approx(1.4 * (8.4 + 56 * 3.4 + 6 * 14) +
                                (1 << 30) / (1e3 * 360 * 32 / 62))
    assert set(t) == {(a, p) for a in ("ring", "tree") for p in nt.PROTOS} | \
        {("nvls_tree", "simple")}


def _picks(nodes):
    return [nt.pick(_view(nodes), 1 << k)[0] for k in range(20, 34)]  # 1 MiB .. 8 GiB


def test_switches_where_the_published_tables_connection_spikes_put_them():
    """nccl-tests' out-of-place column spikes where NCCL first runs an algorithm: 2 MiB on 4
    nodes, 8 MiB on 8 (validation/nccl_tests_data); warm-up ran the smallest and largest
    sizes, so the spike is the mid-size algorithm's (NVLS-Tree), Tree below it, Ring at the
    top. On 2 nodes no spike: the same algorithm (NVLS-Tree) from 1 MiB to 8 GiB."""
    tree, nvls, ring = "double_binary_tree", "nvls_tree", "ring"
    p4 = _picks(4)
    assert p4[0] == tree and p4[1] == nvls and p4[-1] == ring
    p8 = _picks(8)
    assert p8[:3] == [tree] * 3 and p8[3] == nvls and p8[-1] == ring
    assert _picks(2) == [nvls] * 14
    # the switches are monotone in size: Tree, then NVLS-Tree, then Ring
    for p in (p4, p8):
        order = [a for i, a in enumerate(p) if i == 0 or a != p[i - 1]]
        assert order == [tree, nvls, ring]


def test_without_reducing_switches_ring_and_tree_only():
    kw = dict(H100, nodes=4)
    kw.pop("reduce_gbps")
    t = build("two_tier", kw)
    v = nt.view(t, ordered_ranks(t))
    assert not v.nvls
    assert {nt.pick(v, 1 << k)[0] for k in range(10, 34)} == {"ring", "double_binary_tree"}


def test_a_fixed_protocol_limits_the_pick():
    v = _view(4)
    for p in ("ll", "ll128"):
        for k in (20, 24, 30):
            a, proto, _ = nt.pick(v, 1 << k, p)
            assert proto == p and a != "nvls_tree"  # NVLS-Tree runs Simple only


def test_choose_runs_the_pick_and_it_computes_an_all_reduce():
    t = build("two_tier", {"nodes": 2, "gpus_per_node": 4, "reduce_gbps": "line"})
    seen = set()
    for k in (12, 16, 20, 26, 30):
        c = co.choose(t, "all_reduce", 1 << k)
        assert c.nccl_tuner and "NCCL's tuner" in c.reason
        seen.add(c.algorithm)
        co.check(c.build(fabric=t))
    assert "nvls_tree" in seen
    t = build("two_tier", {"nodes": 4, "gpus_per_node": 2})
    for k in (10, 20, 30):
        c = co.choose(t, "all_reduce", 1 << k)
        assert c.algorithm in ("ring", "double_binary_tree")
        co.check(c.build(fabric=t))


def test_all_gather_and_reduce_scatter_are_the_ring_with_nccls_protocol():
    """Hand-computed from NCCL 2.26's tuning.cc on 4 nodes of 8: the ring's n - 1 steps, 3 of
    them across nodes, no plateau factor; LL's bus bandwidth capped at 20.4 GB/s, LL128's at
    8 x 36.7; nBytes is the all-gather's output."""
    v = _view(4)
    t = nt.times_us(v, 1 << 20, op="all_gather")
    assert set(t) == {("ring", p) for p in nt.PROTOS}
    # LL: 6.6 + 28 x max(0.6, 1.0) + 3 x 2.7 us; 20.4 x 32/31 GB/s
    assert t[("ring", "ll")] == pytest.approx(42.7 + (1 << 20) / (1e3 * 20.4 * 32 / 31))
    # Simple: 8.4 + 28 x max(3.4, 3 x 1.0) + 3 x 14 us; 8 x 45 x 32/31 GB/s
    big = nt.times_us(v, 1 << 30, op="reduce_scatter")[("ring", "simple")]
    assert big == pytest.approx(145.6 + (1 << 30) / (1e3 * 360 * 32 / 31))
    # LL below about 0.8 MB, LL128 to 64 MiB, Simple from 128 MiB
    got = [nt.pick(v, 1 << k, op="all_gather")[:2] for k in (19, 20, 26, 27)]
    assert got == [("ring", "ll"), ("ring", "ll128"), ("ring", "ll128"), ("ring", "simple")]
    with pytest.raises(InputError, match="op = 'broadcast'"):
        nt.times_us(v, 1 << 20, op="broadcast")
    # choose runs it on whole nodes, and what it builds computes the collective
    t2 = build("two_tier", {"nodes": 2, "gpus_per_node": 4})
    for op in ("all_gather", "reduce_scatter"):
        for k in (14, 20, 28):
            c = co.choose(t2, op, 1 << k)
            assert c.nccl_tuner and c.algorithm == "ring" and c.op == op
            co.check(c.build(fabric=t2))


def test_nic_port_speed_defaults_to_the_link_rate_and_is_checked():
    t = build("two_tier", {"nodes": 2, "nic_gbps": 200})
    assert t.params["nic_port_gbps"] == 200.0
    assert nt.view(t, ordered_ranks(t)).nic_GBps == 25.0
    with pytest.raises(InputError, match="topology.nic_port_gbps"):
        build("two_tier", {"nodes": 2, "nic_port_gbps": 0})
    with pytest.raises(InputError, match="two_tier"):
        nt.view(build("fat_tree", {"k": 4}), list(range(16)))


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(2, 64), per_node=st.sampled_from([2, 4, 8, 16, 72]),
       nvlink=st.floats(3, 2000), nic=st.floats(3, 200), nvls=st.booleans(),
       size=st.integers(1, 1 << 36))
def test_the_pick_is_an_algorithm_with_a_finite_time(nodes, per_node, nvlink, nic, nvls, size):
    v = nt.View(nodes, per_node, nvlink, nic, nvls)
    a, p, us = nt.pick(v, size)
    assert a in nt.ALGORITHMS.values() and p in nt.PROTOS and math.isfinite(us) and us > 0
    assert a != "nvls_tree" or (nvls and p == "simple")


SCENARIO = """
[topology]
kind = "two_tier"
nodes = 4
gpus_per_node = 8
scaleup_gbps = 2960
nic_gbps = 349
nic_port_gbps = 400
reduce_gbps = {{scaleup = 2400}}
[workload]
kind = "collective"
op = "all_reduce"
bytes = "{size}"
"""


@pytest.mark.parametrize("size", ["1MiB", "4MiB"])
def test_netcosim_run_runs_the_tuners_algorithm_and_protocol(tmp_path, capsys, size):
    """`netcosim run` with the algorithm left to the choice takes the protocol picked with it
    (before, it re-picked the protocol by the estimate: Tree with LL where NCCL runs LL128)."""
    import json

    from cli_helpers import cli, write

    out = tmp_path / "out"
    rc, _, err = cli(capsys, "run", write(tmp_path, SCENARIO.format(size=size)), "--out", out)
    assert rc == 0, err
    summary = json.loads((out / "summary.json").read_text())
    t = build("two_tier", dict(H100, nodes=4))
    c = co.choose(t, "all_reduce", int(size[0]) << 20)
    assert (summary["algorithm"], summary["protocol"]) == (c.algorithm, c.protocol)
    assert summary["protocol"] == ("ll128" if size == "1MiB" else "simple")


def test_attainable_counts_what_one_model_can_reach_across_disagreeing_tables():
    """Tables of one node count from different clusters: at a size where they differ by more
    than the band, no one value is within target of all of them (validation/nccl_tests.py)."""
    from validation.nccl_tests import LARGE, attainable

    def row(name, size, m):
        return {"dataset": name, "nodes": 4, "bytes": size, "measured_busbw": m,
                "target": .10 if size >= LARGE else .25, "calibration": False}

    rows = [row("a", LARGE, 294.2), row("b", LARGE, 235.9), row("c", LARGE, 239.8),
            row("a", 1 << 20, 80.0), row("b", 1 << 20, 68.0),  # 25% bands overlap
            row("x", 2 << 20, 100.0)]
    a = attainable(rows)
    assert (a["large"], a["small"]) == (2, 3)
    assert [(n, s, best) for n, s, _, best in a["conflicts"]] == [(4, LARGE, 2)]
    # bands that only touch still leave one value within both
    assert attainable([row("a", LARGE, 110.0), row("b", LARGE, 110.0 * 1.1 / 0.9)])["large"] == 2
    # calibration points are not counted
    assert attainable([dict(row("a", LARGE, 1.0), calibration=True)])["large"] == 0

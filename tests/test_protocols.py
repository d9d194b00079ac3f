"""NCCL's protocols (LL, LL128, Simple) and default chunking: wire bytes, latencies on the data
path, launch latency, the size-based choice, nvls_tree, bad input, and the ns-3 scenarios."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import collectives as co
from collectives import protocols
from collectives.analytical import estimate
from collectives.streams import ring_stream, stream_schedule
from netcore.api import simulate
from netcore.schedule import DELAY, TRANSFER
from topo.builders import build
from topo.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


def star(n, gbps=100.0, lat_us=1.0):
    return build("fat_tree", {"k": 2, "link_gbps": gbps, "latency_us": lat_us}) if n == 2 \
        else build("leaf_spine", {"leaves": 1, "spines": 1, "hosts_per_leaf": n,
                                  "link_gbps": gbps, "latency_us": lat_us})


# ---------------------------------------------------------------- wire bytes
@pytest.mark.parametrize("proto,num,den", [("ll", 1, 2), ("ll128", 15, 16), ("simple", 1, 1)])
def test_wire_bytes_per_transfer(proto, num, den):
    n, S = 5, 999_983  # prime: uneven blocks
    bare = co.build("all_reduce", "ring", n, S)
    s = co.build("all_reduce", "ring", n, S, protocol=proto)
    co.check(s)
    tb, ts = bare.kind == TRANSFER, s.kind == TRANSFER
    want = (bare.size[tb] * den + num - 1) // num  # every transfer rounded up on its own
    assert np.array_equal(np.sort(s.size[ts]), np.sort(want))
    if proto == "ll":
        assert s.size[ts].sum() == 2 * bare.size[tb].sum()
    # the checker holds the schedule to the protocol's ratio
    bad = s.copy()
    bad.size[np.flatnonzero(ts)[0]] -= 1
    with pytest.raises(co.CheckFailed, match="on the wire|blocks hold"):
        co.check(bad)


def test_in_network_algorithms_run_with_simple_only():
    fab = build("two_tier", {"nodes": 1, "reduce_gbps": "line"})
    with pytest.raises(InputError, match="protocol = 'll': nvls runs only with simple"):
        co.build("all_reduce", "nvls", range(8), 1 << 20, fabric=fab, protocol="ll")
    co.check(co.build("all_reduce", "nvls", range(8), 1 << 20, fabric=fab, protocol="simple"))


# ---------------------------------------------------------------- latencies
def test_ring_time_is_launch_plus_a_latency_per_step():
    """NCCL's ring latency: base + nsteps x hop; on a star the flow engine gives exactly
    launch + 2(n-1) (L + alpha + S/n/B) with the protocol's bytes."""
    n, S = 6, 1 << 24
    fab = star(n)
    p = protocols.PROTOCOLS["ll128"]
    r = simulate(fab, co.build("all_reduce", "ring", n, S, protocol="ll128", fabric=fab),
                 routing="shortest", engine="flow")
    B, alpha = 100e9 / 8, 2e-6
    piece = math.ceil(S / n * 16 / 15)
    want = p.launch_s + 2 * (n - 1) * (p.net_step_s + alpha + piece / B)
    assert r.makespan == pytest.approx(want, rel=1e-4)
    assert estimate(fab, "all_reduce", "ring", n, S, protocol="ll128") == \
        pytest.approx(r.makespan, rel=1e-4)


def test_step_latency_follows_the_data_not_every_chunk():
    """A chain of h hops with C chunks: each hop adds its step latency once, while the sender
    streams its chunks; a blocking latency would cost (h + C - 1) latencies."""
    n, S, C, L = 5, 1 << 26, 16, 50e-6
    fab = star(n)
    s = co.build("broadcast", "ring", n, S, chunks=C, step_latency_s=L)
    t = simulate(fab, s, routing="shortest", engine="flow").makespan
    x = S / C / (100e9 / 8) + 2e-6  # one chunk on one hop, path latency included
    pipelined = (n - 1) * (x + L) + (C - 1) * x
    blocking = (n - 1 + C - 1) * (x + L)
    assert t == pytest.approx(pipelined, rel=1e-6)
    assert t < blocking - 10 * L
    assert estimate(fab, "broadcast", "ring", n, S, chunks=C, step_latency_s=L) == \
        pytest.approx(t, rel=1e-6)


def test_latencies_inside_a_node_are_nvlinks():
    # several chunks: every step at its own connection's latency (the ranks stream them)
    fab = build("two_tier", {"nodes": 2})
    s = co.build("all_reduce", "ring", range(16), 1 << 20, protocol="simple", fabric=fab,
                 chunks=2)
    d = np.flatnonzero((s.kind == DELAY) & (s.label == s.labels.index("step_latency")))
    t = d + 1  # a transfer sits right after its delay
    assert (s.kind[t] == TRANSFER).all()
    same = (s.src[t] // 8) == (s.dst[t] // 8)
    nv, net = protocols.FAMILY_LATENCY["ring"]["simple"][:2]
    assert np.allclose(s.duration[d][same], nv)
    assert np.allclose(s.duration[d][~same], net)
    assert same.any() and (~same).any()
    # one chunk (lock step): every step at the mean of the ring's connections, the sum over
    # a round being NCCL's (src/graph/tuning.cc: network steps x net + the rest x NVLink)
    one = co.build("all_reduce", "ring", range(16), 1 << 20, protocol="simple", fabric=fab)
    d1 = np.flatnonzero((one.kind == DELAY) & (one.label == one.labels.index("step_latency")))
    # each of the 8 rail rings (collectives/rail.py) crosses between the nodes twice
    assert np.allclose(one.duration[d1], (14 * nv + 2 * net) / 16)
    launches = s.label == s.labels.index("launch_latency")
    assert launches.sum() == 16 and np.allclose(s.duration[launches], 8.4e-6)


def test_fixed_step_latency_replaces_the_protocols():
    s = co.build("all_reduce", "ring", 4, 1 << 20, protocol="ll128", step_latency_s=0.0)
    assert (s.kind == TRANSFER).all()  # no delays, no launch
    # LL keeps what is the protocol's own, as its wire bytes: its throughput cap
    s = co.build("all_reduce", "ring", 4, 1 << 20, protocol="ll", step_latency_s=0.0)
    d = s.kind == DELAY
    assert d.sum() == (s.kind == TRANSFER).sum()
    assert (s.label[d] == s.labels.index("throughput_cap")).all()
    assert s.size.sum() == 2 * co.build("all_reduce", "ring", 4, 1 << 20).size.sum()


# ---------------------------------------------------------------- LL throughput cap
def test_ll_cap_follows_nccls_table_by_nodes_spanned():
    fab = build("two_tier", {"nodes": 4, "gpus_per_node": 8})
    c = protocols.costs("ll", None, fab)
    for ranks, gbps in ((range(8), 141.0), (range(16), 39.0), (range(24), 20.4),
                        ([0, 8], 39.0), ([0, 8, 16], 20.4)):
        assert c.rate_cap(np.asarray(ranks)) == gbps * 1e9
    # a host is a node on other fabrics; LL128 and Simple have no cap here
    assert protocols.costs("ll", None, star(4)).rate_cap(np.arange(2)) == 39e9
    assert protocols.costs("ll", None, star(4)).rate_cap(np.arange(4)) == 20.4e9
    for p in ("ll128", "simple", None):
        assert protocols.costs(p, None, fab).rate_cap(np.arange(32)) == 0.0


def test_ll_transfer_lasts_at_least_its_payload_over_the_cap(monkeypatch):
    # 2 nodes of 8 GPUs, NVLink and 8 x 400 Gb/s: LL's 39 GB/s binds before any link does
    fab = build("two_tier", {"nodes": 2, "gpus_per_node": 8, "scaleup_gbps": 2960,
                             "nic_gbps": 376})
    r, S = np.arange(16), 1 << 20
    s = co.build("all_reduce", "hierarchical", r, S, protocol="ll", fabric=fab, group_size=8)
    t, cap = s.kind == TRANSFER, s.label == s.labels.index("throughput_cap")
    assert cap.sum() == t.sum() and s.meta["rate_cap_Bps"] == 39e9
    payload = s.size[t] // 2  # LL: half the wire bytes are flags
    assert np.allclose(np.sort(s.duration[cap]), np.sort(payload / 39e9))
    flow = simulate(fab, s, engine="flow").makespan
    # every rank sends ~2(g-1)/g S + its rail share in series, each step at most at the cap
    per_rank = np.bincount(s.src[t], weights=payload).max()
    assert flow >= per_rank / 39e9
    assert estimate(fab, "all_reduce", "hierarchical", r, S, protocol="ll",
                    group_size=8) == pytest.approx(flow, rel=0.01)
    # LL128 has no cap; LL without one would be over a third faster here: the cap binds
    s0 = co.build("all_reduce", "hierarchical", r, S, protocol="ll128", fabric=fab,
                  group_size=8)
    assert "throughput_cap" not in s0.labels
    monkeypatch.setattr(protocols, "LL_MAX_GBPS", (1e12, 1e12, 1e12))
    free = co.build("all_reduce", "hierarchical", r, S, protocol="ll", fabric=fab, group_size=8)
    assert simulate(fab, free, engine="flow").makespan < 0.67 * flow


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_send_recv_estimate_gives_each_pair_lls_whole_cap(n):
    # send_recv's one algorithm is called "direct", but each rank sends to one peer: the
    # builder gives that send the whole cap, and the estimate must too (it used to divide the
    # cap by n - 1 as for an all-pairs "direct", 4x the engines' time on 5 ranks)
    fab, S = star(n, gbps=400), 1 << 24
    s = co.build("send_recv", "direct", range(n), S, protocol="ll", fabric=fab)
    assert s.meta["rate_cap_Bps"] == protocols.costs("ll", None, fab).rate_cap(np.arange(n))
    flow = simulate(fab, s, engine="flow").makespan
    assert flow >= S / s.meta["rate_cap_Bps"]  # S of payload, at most at the cap
    assert estimate(fab, "send_recv", "direct", range(n), S, protocol="ll") == \
        pytest.approx(flow, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(n=hst.integers(2, 8), kib=hst.integers(1, 4096), gbps=hst.sampled_from([100, 400, 1600]))
def test_ll_cap_never_makes_a_collective_faster(n, kib, gbps):
    fab = star(n, gbps=gbps)
    s = co.build("all_reduce", "ring", range(n), kib << 10, protocol="ll", fabric=fab)
    capped = simulate(fab, s, engine="flow").makespan
    keep = protocols.LL_MAX_GBPS
    try:
        protocols.LL_MAX_GBPS = (1e12, 1e12, 1e12)
        free = simulate(fab, co.build("all_reduce", "ring", range(n), kib << 10, protocol="ll",
                                      fabric=fab), engine="flow").makespan
    finally:
        protocols.LL_MAX_GBPS = keep
    assert capped >= free * (1 - 1e-12)
    # a ring sends its 2(n-1) steps one after another, each no faster than the cap
    t = s.kind == TRANSFER
    per_rank = np.bincount(s.src[t], weights=s.size[t] // 2).max()
    assert capped >= per_rank / s.meta["rate_cap_Bps"] * (1 - 1e-12)


# ---------------------------------------------------------------- chunks
def test_pipelined_algorithms_chunk_by_default_and_chunks_overrides():
    fab = build("fat_tree", {"k": 4, "link_gbps": 100})
    S = 256 << 20
    dbt = co.build("all_reduce", "double_binary_tree", range(16), S, protocol="simple")
    assert dbt.meta["chunks"] == S // (protocols.CHANNELS * (512 << 10)) == 32
    one = co.build("all_reduce", "double_binary_tree", range(16), S, chunks=1,
                   protocol="simple")
    assert one.meta["chunks"] == 1
    t_dbt = simulate(fab, dbt, engine="flow").makespan
    t_one = simulate(fab, one, engine="flow").makespan
    t_ring = simulate(fab, co.build("all_reduce", "ring", range(16), S, protocol="simple"),
                      engine="flow").makespan
    assert t_dbt < t_one / 2.5  # the 3.35 GB/s unchunked tree
    assert t_dbt < 1.4 * t_ring  # within reach of the ring, as NCCL's pipelined tree is
    # rings keep one chunk: they already pipeline their n shards
    assert co.build("all_reduce", "ring", 8, S).meta["chunks"] == 1


def test_default_chunks_are_bounded():
    # 65,536 ranks: 4(n-1) transfers per chunk, so at most 2^21 / 262,140 = 8 chunks
    c = protocols.chunks_for("all_reduce", "double_binary_tree", 1 << 30, 65536, "simple")
    assert c == protocols.MAX_DEFAULT_TRANSFERS // (4 * 65535) == 8
    assert protocols.chunks_for("all_reduce", "double_binary_tree", 1 << 40, 16) == \
        protocols.MAX_CHUNKS
    # a few bytes still build (one chunk)
    assert co.build("all_reduce", "double_binary_tree", 16, 7).meta["chunks"] == 1


def test_a_chunk_below_a_byte_per_block_is_refused():
    with pytest.raises(InputError, match="chunks = 100"):
        co.build("all_reduce", "ring", 16, 1024, chunks=100)
    with pytest.raises(InputError, match="chunks = 100"):
        estimate(build("fat_tree", {"k": 4}), "all_reduce", "ring", range(16), 1024, chunks=100)


# ---------------------------------------------------------------- the choice
def test_protocol_by_size_as_ncclss_tuner():
    fab = build("fat_tree", {"k": 4, "link_gbps": 100})
    got = {s: protocols.best(fab, "all_reduce", "ring", range(16), s)[0]
           for s in (1 << 10, 1 << 20, 1 << 30)}
    assert got[1 << 10] == "ll" and got[1 << 30] == "simple"
    # the chosen one is the least estimate
    t = {p: estimate(fab, "all_reduce", "ring", range(16), 1 << 20, protocol=p)
         for p in protocols.NAMES}
    assert t[got[1 << 20]] == min(t.values())
    c = co.choose(fab, "all_reduce", 1 << 30)
    assert c.protocol == "simple" and c.algorithm == "ring"
    assert co.choose(fab, "all_reduce", 1 << 30, protocol="ll").protocol == "ll"


def test_unknown_protocol_names_the_field():
    with pytest.raises(InputError, match=r"^protocol = 'fast': unknown protocol"):
        co.build("all_reduce", "ring", 4, 1 << 20, protocol="fast")
    with pytest.raises(InputError, match="protocol = 'auto'.*needs the fabric"):
        co.build("all_reduce", "ring", 4, 1 << 20, protocol="auto")


# ---------------------------------------------------------------- nvls_tree
@pytest.mark.parametrize("nodes,g", [(2, 4), (3, 2), (5, 3)])
def test_nvls_tree_computes_the_all_reduce(nodes, g):
    fab = build("two_tier", {"nodes": nodes, "gpus_per_node": g, "reduce_gbps": "line"})
    for chunks in (1, 3):
        s = co.build("all_reduce", "nvls_tree", range(nodes * g), 10_007, group_size=g,
                     fabric=fab, chunks=chunks, protocol="simple")
        out = co.check(s)
        assert out["switch_reductions"] == nodes * chunks


def test_nvls_tree_needs_reducing_switches_and_groups():
    with pytest.raises(InputError, match="reduce_gbps"):
        co.build("all_reduce", "nvls_tree", range(16), 1 << 20, group_size=8,
                 fabric=build("two_tier", {"nodes": 2}))
    with pytest.raises(InputError, match="group_size"):
        co.build("all_reduce", "nvls_tree", range(16), 1 << 20,
                 fabric=build("two_tier", {"nodes": 2, "reduce_gbps": "line"}))


def test_nvls_tree_estimate_follows_the_flow_engine():
    fab = build("two_tier", {"nodes": 2, "scaleup_gbps": 2960, "nic_gbps": 376,
                             "reduce_gbps": {"scaleup": 2400}})
    # 1 MiB: one chunk (exact); 1 GiB: 64 NCCL loop steps (steady state); 256 MiB: 16 steps,
    # where the fill's overlapping NVLink stages make the estimate approximate (docs)
    for S, rel in ((1 << 20, 0.01), (1 << 30, 0.01), (1 << 28, 0.05)):
        s = co.build("all_reduce", "nvls_tree", range(16), S, group_size=8, fabric=fab,
                     protocol="simple")
        t = simulate(fab, s, engine="flow").makespan
        e = estimate(fab, "all_reduce", "nvls_tree", range(16), S, group_size=8,
                     protocol="simple")
        assert e == pytest.approx(t, rel=rel)
        # its NVLink carries a chunk and a shard each way: S (1 + 1/8) at 370 GB/s is a floor
        assert t > S * 9 / 8 / 370e9


@pytest.mark.parametrize("nodes", [4, 8])
def test_nvls_tree_estimate_sees_a_parent_sending_to_two_children(nodes):
    # from 4 nodes a tree parent sends to (and receives from) two children at once over its
    # one NIC: with one chunk the estimate is the flow engine's time exactly (8% / 12% low
    # when the level's rounds missed the shared NIC); with many chunks, within 7% (docs)
    fab = build("two_tier", {"nodes": nodes, "scaleup_gbps": 2960, "nic_gbps": 376,
                             "reduce_gbps": {"scaleup": 2400}})
    r = range(8 * nodes)
    for S, rel in ((8 << 20, 1e-6), (32 << 20, 0.07), (1 << 30, 0.07)):
        s = co.build("all_reduce", "nvls_tree", r, S, group_size=8, fabric=fab,
                     protocol="simple")
        t = simulate(fab, s, engine="flow").makespan
        e = estimate(fab, "all_reduce", "nvls_tree", r, S, group_size=8, protocol="simple")
        assert e == pytest.approx(t, rel=rel)


def test_nvls_chunks_follow_nccl_sizes():
    """NCCL's NVLS chunk per channel and head falls with the size (src/enqueue.cc): one
    loop step of 16 channels x 8 heads is 16 MiB from 1 GiB, 8 MiB from 64 MiB, 4 MiB from
    8 MiB and 2 MiB below; NVLS-Tree caps it at 64 KiB per head from 4 domains."""
    per = protocols.nvls_chunk_per_op
    assert [per("nvls", s << 20, 8) for s in (1, 8, 63, 64, 1023, 1024)] == \
        [16384, 32768, 32768, 65536, 65536, 131072]
    assert per("nvls_tree", 1 << 30, 8, 2) == 131072
    assert per("nvls_tree", 1 << 30, 8, 4) == 65536
    assert per("nvls_tree", 4 << 20, 8, 2) == 32768
    assert protocols.chunks_for("all_reduce", "nvls", 1 << 30, 8) == 64


def test_nvls_step_cost_lowers_mid_sizes_only_with_nccl_costs():
    """The NVLS step cost makes a 16 MiB all-reduce (2 MiB steps) run further below the
    reduce rate than a 1 GiB one (16 MiB steps); without a protocol it is not charged."""
    fab = build("two_tier", {"nodes": 1, "scaleup_gbps": 2960,
                             "reduce_gbps": {"scaleup": 2400}})

    def busbw(S, protocol):
        s = co.build("all_reduce", "nvls", range(8), S, fabric=fab, protocol=protocol)
        return S / simulate(fab, s, engine="flow").makespan

    assert busbw(16 << 20, "simple") / busbw(1 << 30, "simple") < 0.8
    plain = co.build("all_reduce", "nvls", range(8), 1 << 30, fabric=fab, chunks=64)
    assert (1 << 30) / simulate(fab, plain, engine="flow").makespan > busbw(1 << 30, "simple")


# ---------------------------------------------------------------- scalable form
def _stream_and_full(fab, n, S, proto):
    full = co.build("all_reduce", "ring", range(n), S, protocol=proto, fabric=fab)
    c = protocols.costs(proto, None, fab)
    r = np.arange(n)
    st = ring_stream("all_reduce", "ring", n, S, 1, float(c.latency(r, np.roll(r, -1)).max()),
                     (c.num, c.den), c.launch_s, c.rate_cap(r))
    a = simulate(fab, full.with_connections(), "ecmp", engine="flow").makespan
    b = simulate(fab, stream_schedule(range(n), st, "all_reduce"), "ecmp",
                 engine="flow").makespan
    return a, b


def test_ring_stream_with_a_protocol_equals_the_full_ring():
    # every connection of the ring has the same path latency and bytes: exact
    fab = build("two_tier", {"nodes": 1, "gpus_per_node": 8})
    for proto in ("ll", "ll128", "simple"):
        a, b = _stream_and_full(fab, 8, 1 << 24, proto)
        assert b == pytest.approx(a, rel=1e-9)


def test_ring_stream_meets_the_ll_cap_as_the_full_ring():
    # 400 Gb/s: LL's 25 GB/s of payload is over the 20.4 GB/s cap (binds on every step);
    # 100 Gb/s: 6.25 GB/s, under it (binds on none): both exact
    for gbps in (400, 100):
        fab = build("fat_tree", {"k": 4, "link_gbps": gbps})
        a, b = _stream_and_full(fab, 16, 1 << 24, "ll")
        assert b == pytest.approx(a, rel=1e-9)
    r = np.arange(16)
    st = ring_stream("all_reduce", "ring", 16, 1 << 24, 1, 0.0, (1, 2), 0.0,
                     protocols.costs("ll", None, fab).rate_cap(r))
    assert st.min_s == pytest.approx(2 * 15 / 16 * (1 << 24) / 20.4e9, rel=1e-6)


def test_ring_stream_with_uneven_path_latencies_is_exact_too():
    """One chunk: a rank's next step waits for its previous one and its data, the latency
    after both, so the ring moves in lock step at its slowest connection, as the stream."""
    fab = build("fat_tree", {"k": 4, "link_gbps": 400, "latency_us": 0.5})
    for proto in ("ll", "simple"):
        a, b = _stream_and_full(fab, 16, 1 << 24, proto)
        assert b == pytest.approx(a, rel=1e-9)


# ---------------------------------------------------------------- scenarios and CLI
def _scenario(tmp_path, extra):
    p = tmp_path / "s.toml"
    p.write_text('[topology]\nkind = "fat_tree"\nk = 4\n[workload]\nkind = "collective"\n'
                 'op = "all_reduce"\nalgorithm = "ring"\nbytes = "1KiB"\n' + extra)
    return p


def test_scenario_protocol_and_chunks_errors(tmp_path):
    from netcosim.runner import prepare
    from netcosim.scenario import load_scenario

    with pytest.raises(InputError, match=r"workload\.protocol = 'lowlat': unknown protocol"):
        prepare(load_scenario(_scenario(tmp_path, 'protocol = "lowlat"\n')))
    with pytest.raises(InputError, match=r"workload\.chunks = 100: .*cannot be cut"):
        prepare(load_scenario(_scenario(tmp_path, "chunks = 100\n")))
    s = prepare(load_scenario(_scenario(tmp_path, 'protocol = "ll128"\n'))).schedule
    assert s.meta["protocol"] == "ll128"


def test_cli_bad_protocol_and_chunks_exit_2(capsys):
    from netcosim.cli import main

    for args, needle in ((["--protocol", "foo"], "--protocol = 'foo'"),
                         (["--algo", "ring", "--chunks", "100"], "--chunks = 100")):
        rc = main(["collective", "--topo", "fat_tree:k=4", "--op", "all_reduce", "--sizes",
                   "1KiB", *args])
        assert rc == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["alltoall_leaf_spine", "fullflat_alltoall",
                                  "ring_allreduce_fat_tree", "torus_ring"])
def test_ns3_scenarios_keep_the_bare_schedules(name):
    """Their protocol = "simple" and step_latency_us = 0 give the schedule the library builds
    without protocol costs (payload bytes, no delays): the schedules of before protocols."""
    from netcosim.runner import prepare
    from netcosim.scenario import load_scenario

    prep = prepare(load_scenario(ROOT / "validation" / "scenarios" / f"{name}.toml"))
    s, t = prep.schedule, prep.topology
    bare = co.build(s.meta["op"], s.meta["algorithm"], np.asarray(s.meta["ranks"]),
                    s.meta["nbytes"])
    for a in ("kind", "src", "dst", "size", "duration", "dep_ptr", "dep_idx"):
        assert np.array_equal(getattr(s, a), getattr(bare, a)), a
    assert t.n_hosts >= s.meta["n_ranks"]


def test_collective_sweep_names_nvls_tree_groups_by_node():
    """`netcosim collective --algo nvls_tree` without --group-size groups ranks by node, as
    for hierarchical (it used to stop on group_size = None)."""
    from netcosim.commands.collective import sweep

    fab = build("two_tier", {"nodes": 2, "scaleup_gbps": 2960, "nic_gbps": 376,
                             "reduce_gbps": {"scaleup": 2400}})
    (row,) = sweep(fab, "all_reduce", "nvls_tree", [64 << 20], engine="flow")
    assert row["algorithm"] == "nvls_tree" and row["busbw_GBps"] > 0


@settings(max_examples=200, deadline=None)
@given(hst.integers(1, 1 << 36), hst.integers(1, 1 << 36), hst.integers(1, 72),
       hst.integers(1, 64), hst.sampled_from(["nvls", "nvls_tree"]))
def test_nvls_chunk_never_shrinks_as_the_buffer_grows(a, b, heads, groups, algorithm):
    """NCCL's NVLS chunk is one of its buffer sizes and grows (never shrinks) with the
    buffer, for any heads and domain count; the step cost per byte falls accordingly."""
    lo, hi = min(a, b), max(a, b)
    per = protocols.nvls_chunk_per_op
    c_lo, c_hi = per(algorithm, lo, heads, groups), per(algorithm, hi, heads, groups)
    assert {c_lo, c_hi} <= {16384, 32768, 65536, 131072}
    assert c_lo <= c_hi
    cost = protocols.costs("simple", algorithm=algorithm)
    assert protocols.nvls_step_s_per_byte(cost, hi, heads, groups) <= \
        protocols.nvls_step_s_per_byte(cost, lo, heads, groups)


def test_ll_cap_is_shared_by_the_rings_a_rank_sends_on(tmp_path):
    """NCCL caps LL's bus bandwidth over all a collective's channels (llMaxBws: 20.4 GB/s on
    more than two nodes of Intel hosts). On whole two_tier nodes a rank sends on 8 rail rings
    side by side, so its LL sends together stay under the cap: a rank's payload / cap bounds
    the time. Each ring at the whole cap ran 8x past it (4 MiB all-gather: 34 GB/s busbw where
    the published 4-node table has 21)."""
    import json

    from fabrics import h100_nodes
    from netcosim.cli import main

    fab, r, S = h100_nodes(4), np.arange(32), 8 << 20
    per_rank = {}
    for op in ("all_gather", "reduce_scatter", "all_reduce"):
        s = co.build(op, "ring", r, S, protocol="ll", fabric=fab)
        assert s.meta["rate_cap_Bps"] == pytest.approx(20.4e9 / 8)
        t = s.kind == TRANSFER
        # LL: half the wire bytes are flags
        per_rank[op] = np.bincount(s.src[t], weights=s.size[t] // 2).max()
        flow = simulate(fab, s, engine="flow").makespan
        assert flow >= per_rank[op] / 20.4e9 * (1 - 1e-9)
        assert estimate(fab, op, "ring", r, S, protocol="ll") == pytest.approx(flow, rel=0.05)
    # a direct algorithm sends to every peer at once: each send gets 1/(n-1) of the cap
    d = co.build("all_gather", "direct", np.arange(4), 1 << 20, protocol="ll", fabric=star(4))
    assert d.meta["rate_cap_Bps"] == pytest.approx(20.4e9 / 3)
    # the stream form of a run (network_detail = "auto") shares it as the full schedule does
    p = tmp_path / "s.toml"
    p.write_text('[topology]\nkind = "two_tier"\nnodes = 4\ngpus_per_node = 8\n'
                 'scaleup_gbps = 2960\nnic_gbps = 355\n[workload]\nkind = "collective"\n'
                 'op = "all_gather"\nalgorithm = "ring"\nprotocol = "ll"\n'
                 f'bytes = {S}\n')
    got = {}
    for detail in ("auto", "full"):
        assert main(["run", str(p), "--out", str(tmp_path / detail), "--set",
                     f"workload.network_detail={detail}"]) == 0
        got[detail] = json.loads((tmp_path / detail / "summary.json").read_text())
    assert got["auto"]["engine_flows"] < got["full"]["engine_flows"]
    assert got["auto"]["makespan_us"] == pytest.approx(got["full"]["makespan_us"], rel=0.01)
    assert got["auto"]["makespan_us"] * 1e-6 >= per_rank["all_gather"] / 20.4e9 * (1 - 1e-9)

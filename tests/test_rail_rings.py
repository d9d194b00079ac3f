"""Rings on whole two_tier nodes run one ring per rail (collectives/rail.py), as NCCL lays its
ring channels through every NIC. Before, one ring left each node through one GPU and so one
NIC: a 1 GiB reduce-scatter over 4 nodes of 8 GPUs reached 21.9 GB/s of bus bandwidth where
the node's eight NICs carry about 330."""
import numpy as np
import pytest

import collectives as co
from collectives.choose import ordered_ranks
from collectives.rail import rail_rings, rings_of
from collectives.report import run as run_one
from netcore.api import simulate
from fabrics import h100_nodes as _two_tier
from topo.builders import build


@pytest.mark.parametrize("nodes, g", [(2, 8), (4, 8), (3, 4), (5, 2)])
def test_every_ring_visits_every_rank_and_every_nic_once_each_way(nodes, g):
    t = _two_tier(nodes, g)
    r = ordered_ranks(t)
    rails = rail_rings(t, r)
    assert rails.shape == (g, nodes * g)
    assert (np.sort(rails, axis=1) == np.arange(nodes * g)).all()  # each ring a permutation
    src, dst = r[rails], r[np.roll(rails, -1, axis=1)]
    node = np.asarray(t.host_group)
    cross = node[src] != node[dst]
    # every GPU's NIC sends once and receives once across the g rings
    assert (np.bincount(src[cross], minlength=t.n_hosts) == 1).all()
    assert (np.bincount(dst[cross], minlength=t.n_hosts) == 1).all()
    # crossings stay on one rail (local index), but for an odd node count's closing hop
    local = lambda h: h % g  # noqa: E731
    off_rail = (local(src[cross]) != local(dst[cross])).sum()
    assert off_rail == (0 if nodes % 2 == 0 else g)


def test_rail_rings_need_equal_ranks_on_several_two_tier_nodes():
    t = _two_tier(2)
    r = ordered_ranks(t)
    assert rings_of(t, r) == 8
    assert rings_of(t, r[r != 8]) == 1  # nodes holding different numbers of ranks
    assert rings_of(t, r[r % 2 == 0]) == 4  # 4 GPUs of each node (beside tensor parallel 2)
    assert rings_of(t, r[:8]) == 1  # one node: its NVLink ring needs no rails
    assert rings_of(t, np.r_[r[::2], r[1::2]]) == 1  # a node's ranks not together
    assert rings_of(build("fat_tree", {"k": 4}), np.arange(16)) == 1
    assert rings_of(None, r) == 1


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("chunks", [1, 3])
def test_rail_ring_schedules_compute_their_collective(op, chunks):
    t = _two_tier(3, 4)
    r = ordered_ranks(t)
    s = co.build(op, "ring", r, 12_345, fabric=t, chunks=chunks, protocol="ll128")
    co.check(s)
    # g rings of n ranks: g times the transfers of one ring
    steps = (2 if op == "all_reduce" else 1) * (len(r) - 1)
    assert s.n_transfers == 4 * chunks * steps * len(r)


@pytest.mark.parametrize("op", ["reduce_scatter", "all_reduce"])
def test_rail_rings_use_every_nic(op):
    """4 nodes of 8: the rings carry close to what the node's eight NICs can (bus bandwidth
    g x the NIC rate, 8 x 44.4 GB/s), where one ring per node boundary was bound by one NIC."""
    t = _two_tier(4)
    r = ordered_ranks(t)
    S = 1 << 30
    rail = run_one(t, op, "ring", r, S, engine="flow", protocol="simple")["busbw_GBps"]
    one = run_one(t, op, "ring", r[r != 8], S, engine="flow",
                  protocol="simple")["busbw_GBps"]
    nics = 8 * 355 / 8
    assert rail > 5 * one
    assert 0.8 * nics < rail <= nics


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
def test_estimate_and_stream_form_equal_the_full_rail_rings(op):
    """The alpha-beta estimate routes the g rings as the engine does, and the stream form (g
    streams side by side, what `netcosim run` and `netcosim collective --engine flow` use)
    gives the full schedule's time."""
    from collectives.analytical import estimate
    from netcosim.workloads import _collective_scalable

    t = _two_tier(4)
    r = ordered_ranks(t)
    S = 64 << 20
    full = co.build(op, "ring", r, S, fabric=t, protocol="ll128").with_connections()
    a = simulate(t, full, "ecmp", engine="flow").makespan
    sched = _collective_scalable(co, {"network_detail": "auto"}, op, "ring",
                                 [int(x) for x in r], S, {"protocol": "ll128"}, "workload", t)
    assert sched is not None and sched.n_transfers == 8  # one stream per rail ring
    b = simulate(t, sched, "ecmp", engine="flow").makespan
    assert b == pytest.approx(a, rel=1e-6)
    e = estimate(t, op, "ring", r, S, protocol="ll128")
    assert e == pytest.approx(a, rel=0.03)


def test_guard_counts_every_rail_ring(monkeypatch):
    """A full rail-ring schedule has g times one ring's transfers; the memory guard counts
    them all (network_detail = "full")."""
    from netcosim import memory_guard
    from netcosim.workloads import _collective_scalable
    from topo.errors import InputError

    t = _two_tier(4)
    r = [int(x) for x in ordered_ranks(t)]
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1MiB")
    with pytest.raises(InputError, match=f"{8 * 2 * 31 * 32:,} transfers"):
        _collective_scalable(co, {"network_detail": "full"}, "all_reduce", "ring", r,
                             1 << 20, {"protocol": "simple"}, "workload", t)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
@pytest.mark.parametrize("root", [0, 5])
def test_rail_chains_compute_their_collective_and_use_every_nic(op, root):
    """Broadcast and reduce chains: one per rail, opened at the root, 1/g of every chunk each;
    a 1 GiB broadcast over 4 nodes of 8 went from one NIC's rate (41 GB/s) to about 270."""
    t = _two_tier(2, 4)
    r = ordered_ranks(t)
    s = co.build(op, "ring", r, 100_003, fabric=t, chunks=3, root=root, protocol="simple")
    co.check(s)
    assert s.n_transfers == 4 * 3 * (len(r) - 1)
    t = _two_tier(4)
    r = ordered_ranks(t)
    S = 1 << 30
    rail = run_one(t, op, "ring", r, S, engine="flow", protocol="simple", root=root)
    one = run_one(t, op, "ring", r[r != 8], S, engine="flow", protocol="simple", root=root)
    assert rail["busbw_GBps"] > 5 * one["busbw_GBps"]
    assert rail["busbw_GBps"] <= 8 * 355 / 8


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_rail_chain_estimate_is_low_by_at_most_a_fifth(op):
    """The estimate prices each chain's fill alone (the chains' sharing of a GPU's next-GPU
    connection while they fill is left out): documented as 3-20% low against the flow engine."""
    from collectives.analytical import estimate

    t = _two_tier(4)
    r = ordered_ranks(t)
    for S in (1 << 20, 64 << 20, 1 << 30):
        e = estimate(t, op, "ring", r, S, protocol="simple")
        f = run_one(t, op, "ring", r, S, engine="flow", protocol="simple")["time_s"]
        assert 0.75 < e / f <= 1.0


def test_choose_runs_the_rail_ring_where_nccls_tuner_does():
    """Whole two_tier nodes: NCCL's tuner (collectives/nccl_tuner.py) runs the rail ring for
    large all-reduces and Tree for small ones; where the node switch reduces, NVLS-Tree
    (whose bandwidth on two nodes beats the ring's) for large ones."""
    from collectives.choose import choose

    t = _two_tier(4)
    assert choose(t, "all_reduce", 1 << 30).algorithm == "ring"
    assert choose(t, "all_reduce", 1 << 20).algorithm == "double_binary_tree"
    nv = build("two_tier", {"nodes": 2, "gpus_per_node": 8, "scaleup_gbps": 2960,
                            "nic_gbps": 355, "reduce_gbps": {"scaleup": 2400}})
    assert choose(nv, "all_reduce", 8 << 30).algorithm == "nvls_tree"


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("size", [1_000_003, 12_345_678])
def test_rail_stream_form_counts_the_full_schedules_bytes(op, size):
    from netcosim.workloads import _collective_scalable

    t = build("two_tier", {"nodes": 3, "gpus_per_node": 4})
    r = [int(x) for x in ordered_ranks(t)]
    full = co.build(op, "ring", r, size, fabric=t, protocol="ll128")
    st = _collective_scalable(co, {"network_detail": "auto"}, op, "ring", r, size,
                              {"protocol": "ll128"}, "workload", t)
    assert st.n_transfers == 4 and st.total_bytes == full.total_bytes


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
def test_rings_over_part_of_each_node_and_templates_without_a_fabric(op):
    """A group holding 4 GPUs of each node (a data-parallel group beside tensor parallelism 2)
    runs 4 rail rings through those GPUs' NICs; a template over local ranks gets the same
    layout from ``per_node`` (training steps stamp it on every group)."""
    t = _two_tier(4)
    r = ordered_ranks(t)
    half = r[r % 2 == 0]
    s = co.build(op, "ring", half, 1_000_003, fabric=t, protocol="simple")
    co.check(s)
    tpl = co.build(op, "ring", list(range(len(half))), 1_000_003, per_node=4,
                   protocol="simple")
    co.check(tpl)
    assert s.n_transfers == tpl.n_transfers == 4 * len(half) * (len(half) - 1) * \
        (2 if op == "all_reduce" else 1)
    np.testing.assert_array_equal(half[tpl.src[tpl.kind == 0]], s.src[s.kind == 0])
    np.testing.assert_array_equal(half[tpl.dst[tpl.kind == 0]], s.dst[s.kind == 0])


def test_training_data_parallel_groups_run_rail_rings(tmp_path, monkeypatch):
    """Tensor parallelism 2 on nodes of 8: each data-parallel group holds 4 GPUs of every
    node. Its reduce-scatter and all-gather went through one NIC per node boundary (one ring
    in rank order); one ring per rail uses the group's four. Stream and full forms agree."""
    import json

    import compute.comm as comm
    from netcosim.cli import main

    sc = {"name": "dp-tp2", "seed": 1,
          "topology": {"kind": "two_tier", "nodes": 4, "gpus_per_node": 8,
                       "scaleup_gbps": 3600, "nic_gbps": 400},
          "workload": {"kind": "training", "gpu": "h100_sxm", "granularity": "coarse",
                       "model": {"layers": 4, "hidden": 2048, "heads": 16, "seq": 1024,
                                 "vocab": 32000},
                       "parallel": {"tp": 2, "dp": 16, "sp": True, "global_batch": 16,
                                    "dist_opt": True}}}

    def step(detail):
        sc["workload"]["network_detail"] = detail
        p = tmp_path / f"{detail}.json"
        p.write_text(json.dumps(sc))
        out = tmp_path / f"out-{detail}-{comm.per_node is per_node}"
        assert main(["run", str(p), "--out", str(out)]) == 0
        s = json.loads((out / "summary.json").read_text())
        return s["step_time_s"], s["exposed_comm_s"]

    per_node = comm.per_node
    (t_auto, e_auto), (t_full, _) = step("auto"), step("full")
    monkeypatch.setattr(comm, "per_node", lambda *a, **k: None)  # one ring in rank order
    t_flat, e_flat = step("auto")
    assert t_auto == pytest.approx(t_full, rel=1e-9)
    dp = lambda e: e.get("dp", 0.0) + e.get("dp_ag", 0.0)  # noqa: E731
    assert dp(e_auto) < 0.5 * dp(e_flat) and t_auto < t_flat

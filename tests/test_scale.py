"""network_detail = "auto" (docs/scale.md): the scalable representation agrees with the
transfer-by-transfer one where both run, routing through switch rows equals routing through
host rows, and what cannot fit is refused before it is built."""
import json

import numpy as np
import pytest

import collectives
from collectives.streams import ring_stream, stream_of
from compute.layers import CKIND
from compute.report import summarize
from compute.training import build_step, fault_args
from fabric_helpers import scaleout_link
from netcore.api import simulate
from netcore.members import MemberSets
from netcore.schedule import TRANSFER, Schedule
from topo.builders import fat_tree, two_tier
from topo.faults import LinkFaults
from topo.routing import Routing

SMALL = dict(layers=8, hidden=512, heads=8, seq=512, vocab=1024)
MOE = dict(SMALL, experts=8, top_k=2, gated_mlp=True)


# ---------------------------------------------------------------- streams
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
def test_ring_stream_is_what_the_template_reduces_to(op):
    for g in (2, 3, 8, 13):
        for nbytes in (1000, 12345, (1 << 20) + 7):
            for chunks, lat in ((1, 0.0), (3, 0.0), (1, 2e-6)):
                t = collectives.build(op, "ring", list(range(g)), nbytes, chunks=chunks,
                                      step_latency_s=lat)
                a, b = stream_of(t), ring_stream(op, "ring", g, nbytes, chunks, lat)
                assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
                assert (a.nbytes, a.steps) == (b.nbytes, b.steps)
                assert a.delay_s == pytest.approx(b.delay_s, rel=1e-12)


def test_no_stream_form_where_the_step_latency_overlaps_other_chunks():
    # with chunks, a step's latency follows its data while the sender streams other chunks
    # (collectives/_plan.py): one stream cannot say that
    t = collectives.build("all_reduce", "ring", list(range(6)), 12345, chunks=3,
                          step_latency_s=2e-6)
    assert stream_of(t) is None
    assert ring_stream("all_reduce", "ring", 6, 12345, 3, 2e-6) is None


def test_trees_and_all_to_all_have_no_stream_form():
    for op, algo in (("all_reduce", "double_binary_tree"), ("all_to_all", "direct"),
                     ("all_reduce", "bidirectional_ring")):
        assert stream_of(collectives.build(op, algo, list(range(8)), 1 << 16)) is None


def test_transfers_a_connection_carries_at_once_are_one_step_of_its_stream():
    # a bidirectional ring over 2 ranks sends both directions' shards to its one peer in the
    # same step: 2 steps (reduce-scatter, all-gather) of 2 shards each, not 4 steps
    t = collectives.build("all_reduce", "bidirectional_ring", [0, 1], 1 << 20,
                          step_latency_s=1e-6)
    st = stream_of(t)
    assert st.steps == 2 and st.delay_s == pytest.approx(2e-6)
    # each direction's shards are a member of their own: 2 per connection
    assert sorted(zip(st.src.tolist(), st.dst.tolist())) == [(0, 1), (0, 1), (1, 0), (1, 0)]
    assert 4 * st.nbytes - st.short == t.size.sum()


def test_tensor_parallel_bidirectional_rings_on_the_network_auto_equals_full():
    # they were 4 steps a stream: the path latency paid twice too often, the step 3 % long
    f, a = _agree(dict(tp=2, pp=1, dist_opt=True, global_batch=8), fat_tree(4),
                  algorithm={"all_reduce": "bidirectional_ring"}, tp_comm="network")
    assert a["step_time_s"] == pytest.approx(f["step_time_s"], rel=1e-9)


def _stream_of_ring(fab, op="all_reduce", nbytes=64 << 20):
    n = fab.n_hosts
    st = ring_stream(op, "ring", n, nbytes)
    sets = MemberSets(np.array([0, n]), np.arange(n), (np.arange(n) + 1) % n)
    return Schedule(kind=[TRANSFER], src=[0], dst=[1], size=[st.nbytes], duration=[0.0],
                    start=[0.0], dep_ptr=[0, 0], dep_idx=np.zeros(0), mset=[0],
                    steps=[st.steps], sets=sets)


@pytest.mark.parametrize("k,policy", [(4, "dmodk"), (8, "dmodk"), (4, "ecmp"), (8, "ecmp")])
def test_ring_all_reduce_stream_equals_the_full_ring(k, policy):
    fab = fat_tree(k, link_gbps=400, latency_us=0.5)
    full = collectives.ring_all_reduce(list(range(fab.n_hosts)), 64 << 20)
    rf = simulate(fab, full, policy, engine="flow")
    st = _stream_of_ring(fab)
    rs = simulate(fab, st, policy, engine="flow")
    assert st.n_member_transfers == full.n_transfers
    assert st.total_bytes == full.total_bytes
    assert rs.makespan == pytest.approx(rf.makespan, rel=1e-9)
    # bytes per directed link: exact where a connection's path does not depend on the step
    # (dmodk); under ecmp the full ring draws a new hash per step, the stream one per
    # connection, so only the totals per link tier agree
    if policy == "dmodk":
        np.testing.assert_allclose(rs.link_bytes, rf.link_bytes, rtol=1e-12)
    layer = fab.dlink_layer if hasattr(fab, "dlink_layer") else np.repeat(fab.link_layer, 2)
    for ly in np.unique(layer):
        assert rs.link_bytes[layer == ly].sum() == pytest.approx(
            rf.link_bytes[layer == ly].sum(), rel=1e-12)
    assert rs.info["link_classes"] < fab.n_dlinks


# ---------------------------------------------------------------- training steps
def _step(par, fab, detail, faults=None, model=SMALL, **kw):
    s = build_step(model, par, "h100_sxm", fab, granularity="coarse", network_detail=detail,
                   **fault_args(fab, faults), **kw)
    r = simulate(fab, s, "ecmp", faults=faults, engine="flow")
    return s, r, summarize(s, r.start, r.end)


def _agree(par, fab, faults=None, model=SMALL, **kw):
    sf, rf, f = _step(par, fab, "full", faults, model, **kw)
    sa, ra, a = _step(par, fab, "auto", faults, model, **kw)
    assert sa.meta["network_detail_used"] == "auto" and sf.meta["network_detail_used"] == "full"
    assert sa.n_transfers < sf.n_transfers
    assert sa.n_member_transfers == sf.n_transfers
    assert sa.total_bytes == sf.total_bytes
    assert a["step_time_s"] == pytest.approx(f["step_time_s"], rel=0.01)
    used = rf.link_bytes > 0
    np.testing.assert_allclose(ra.link_bytes[used], rf.link_bytes[used], rtol=0.01)
    assert (ra.link_bytes[~used] == 0).all()
    # the compute is the same; the time beside it splits between exposed communication and
    # idle differently: an aggregated collective spans its slowest member, so a GPU waiting
    # inside it for a slow connection counts that wait as that collective's exposed time (the
    # full form counts it idle when the GPU's own transfers are done) -- docs/scale.md
    assert a["compute_s_per_gpu"] == pytest.approx(f["compute_s_per_gpu"], rel=1e-9)
    assert a["exposed_comm_total_s"] + a["idle_s_per_gpu"] == pytest.approx(
        f["exposed_comm_total_s"] + f["idle_s_per_gpu"], rel=0.01)
    return f, a


PAR = dict(tp=4, pp=2, vp=2, sp=True, recompute="selective", dist_opt=True, global_batch=16)


def test_training_step_auto_equals_full_on_two_tier():
    _agree(PAR, two_tier(nodes=8, gpus_per_node=4, nic_gbps=400))


def test_training_step_auto_equals_full_with_tensor_parallelism_on_the_network():
    _agree(dict(PAR, global_batch=8), two_tier(nodes=4, gpus_per_node=4, nic_gbps=200),
           tp_comm="network")


def test_moe_step_with_expert_parallelism_auto_equals_full():
    fab = two_tier(nodes=8, gpus_per_node=4, nic_gbps=400)
    _agree(dict(tp=2, pp=2, ep=4, global_batch=16, recompute="selective"), fab, model=MOE)


@pytest.mark.parametrize("algorithm", [
    {"all_reduce": "double_binary_tree"}, {"all_reduce": "recursive_halving_doubling"},
    {"reduce_scatter": "direct", "all_gather": "direct"}])
def test_data_parallel_collectives_without_a_stream_fold_the_tensor_ranks(algorithm):
    # a stage's data-parallel trees (one per tensor rank) start and end on the same chain
    # nodes: one template instance whose transfers are member sets over the tensor ranks
    fab = two_tier(nodes=8, gpus_per_node=4, nic_gbps=400)
    par = dict(PAR, dist_opt="reduce_scatter" in algorithm)
    _agree(par, fab, algorithm=algorithm)
    s = {how: _step(par, fab, how, algorithm=algorithm)[0] for how in ("auto", "full")}
    dp = {how: (x.kind == TRANSFER) & np.isin(x.extra["ckind"], [CKIND["dp"], CKIND["dp_ag"]])
          for how, x in s.items()}
    members = s["auto"].members_per_node()[dp["auto"]]
    assert members.sum() == dp["full"].sum()  # every transfer of every tensor rank, once
    if "all_reduce" in algorithm:
        assert dp["full"].sum() == PAR["tp"] * dp["auto"].sum() > 0
        assert (members == PAR["tp"]).all()
    else:  # a direct reduce-scatter's transfers are independent: classes of pairs, fewer
        assert PAR["tp"] * dp["auto"].sum() <= dp["full"].sum()


def test_degraded_scaleout_link_auto_equals_full():
    fab = two_tier(nodes=8, gpus_per_node=4, nic_gbps=400)
    faults = LinkFaults.from_records(fab, [{"link": scaleout_link(fab, 5), "kind": "degrade",
                                            "factor": 0.25, "at_us": 0.0}])
    f, a = _agree(PAR, fab, faults)
    g = _step(PAR, fab, "auto")[2]  # the same step without the fault
    assert f["step_time_s"] > g["step_time_s"] * 1.001  # the fault shows its effect


def test_link_down_mid_step_auto_equals_full():
    fab = two_tier(nodes=8, gpus_per_node=4, nic_gbps=400)
    spine = np.flatnonzero(fab.link_layer == fab.layer_names.index("spine"))[0]
    t_half = _step(PAR, fab, "auto")[2]["step_time_s"] / 2
    faults = LinkFaults.from_records(fab, [{"link": [int(fab.link_u[spine]),
                                                     int(fab.link_v[spine])],
                                            "kind": "down", "at_us": t_half * 1e6}])
    _agree(PAR, fab, faults)


# ---------------------------------------------------------------- routing through anchors
@pytest.mark.parametrize("fab", [fat_tree(8), two_tier(nodes=16, gpus_per_node=8)],
                         ids=["fat_tree", "two_tier"])
@pytest.mark.parametrize("policy", ["ecmp", "dmodk", "shortest"])
def test_routing_through_switch_rows_equals_host_rows(fab, policy):
    r = Routing(fab, policy, seed=3)
    rng = np.random.default_rng(1)
    n = fab.n_hosts
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    alive = np.ones(fab.n_dlinks, bool)
    alive[rng.integers(0, fab.n_dlinks, 15)] = False
    mode = {"ecmp": 1, "dmodk": 2, "shortest": 0}[policy]
    for al in (None, alive):
        a = r.paths(src, dst, alive=al)
        b = r._single_rows(r._nodes(src, "s"), r._nodes(dst, "d"), np.arange(3000),
                           *r._alive(al), mode)
        assert np.array_equal(a.ptr, b.ptr) and np.array_equal(a.link, b.link)
        assert np.array_equal(a.hops, b.hops) and np.array_equal(a.reachable, b.reachable)
        np.testing.assert_array_equal(a.latency, b.latency)
    # a cache too small for all switch rows at once goes in chunks, to the same paths
    small = Routing(fab, policy, seed=3, cache_bytes=fab.n_nodes * 4 * 3).paths(src, dst)
    assert np.array_equal(small.link, r.paths(src, dst).link)


# ---------------------------------------------------------------- scenarios
def _scenario(tmp_path, workload, name="s"):
    lines = [f'name = "{name}"', "[topology]", 'kind = "fat_tree"', "k = 4",
             "[workload]"] + [f"{k} = {json.dumps(v)}" for k, v in workload.items()]
    p = tmp_path / f"{name}.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_run_reports_the_representation(tmp_path):
    from netcosim.cli import main

    wl = {"kind": "collective", "op": "all_reduce", "algorithm": "ring", "bytes": "4MiB"}
    p = _scenario(tmp_path, wl)
    got = {}
    for detail in ("auto", "full"):
        assert main(["run", str(p), "--out", str(tmp_path / detail), "--set",
                     f"workload.network_detail={detail}"]) == 0
        got[detail] = json.loads((tmp_path / detail / "summary.json").read_text())
    a, f = got["auto"], got["full"]
    assert a["network_detail_used"] == "auto" and f["network_detail_used"] == "full"
    assert a["engine_flows"] == 1 and f["engine_flows"] == 2 * 15 * 16
    assert a["transfers_represented"] == f["transfers_represented"] == f["engine_flows"]
    assert a["bytes"] == f["bytes"]
    assert a["makespan_us"] == pytest.approx(f["makespan_us"], rel=1e-9)
    head = (tmp_path / "auto" / "flows.csv").read_text().splitlines()
    cols = head[0].split(",")
    m = cols.index("members")
    # the stream's transfer (after the protocol's step-latency delay): 16 members, 30 steps
    assert [r.split(",")[m:m + 2] for r in head[1:] if r.split(",")[m] != "0"] == [["16", "30"]]
    # the packet engine carries every transfer: auto falls back to full
    assert main(["run", str(p), "--out", str(tmp_path / "pk"), "--engine", "packet"]) == 0
    pk = json.loads((tmp_path / "pk" / "summary.json").read_text())
    assert pk["network_detail_used"] == "full" and pk["engine_flows"] == f["engine_flows"]


def test_what_cannot_fit_is_refused_before_it_is_built(tmp_path, monkeypatch, capsys):
    from netcosim import memory_guard
    from netcosim.cli import main

    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 1 << 30)
    wl = {"kind": "collective", "op": "all_reduce", "algorithm": "ring", "bytes": "1GiB",
          "network_detail": "full"}
    p = _scenario(tmp_path, wl)
    # fat_tree k=4 is small; claim a k=64 fabric's ring instead
    assert main(["run", str(p), "--set", "topology.k=64", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "8,589,803,520 transfers" in err[0] and "network_detail" in err[0]
    assert not (tmp_path / "o").exists()
    # the same ring as a stream fits
    assert main(["run", str(p), "--set", "topology.k=16", "--set",
                 "workload.network_detail=auto", "--out", str(tmp_path / "o")]) == 0


def test_network_detail_is_checked(tmp_path, capsys):
    from netcosim.cli import main

    p = _scenario(tmp_path, {"kind": "collective", "op": "all_reduce", "bytes": "1MiB",
                             "network_detail": "fast"})
    assert main(["validate", str(p)]) == 2
    assert "workload.network_detail = 'fast'" in capsys.readouterr().err

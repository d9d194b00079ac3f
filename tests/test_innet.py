"""In-network collectives (nvls, sharp): schedules, checker, timing, choice, scenarios, training."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import collectives as co
from collectives.analytical import estimate
from fabric_helpers import scaleout_link
from netcore.api import simulate
from netcore.schedule import TRANSFER, Schedule
from topo.builders import build, fat_tree, two_tier
from topo.errors import InputError
from topo.innet import apply_reduce, trees

NODE = build("two_tier", {"nodes": 2, "gpus_per_node": 8, "reduce_gbps": "line"})
FT = build("fat_tree", {"k": 4, "link_gbps": 100, "reduce_gbps": "line"})
CASES = [(NODE, "nvls", list(range(8))), (NODE, "sharp", [0, 1, 8, 9, 2, 10]),
         (FT, "sharp", list(range(16))), (FT, "sharp", [0, 5, 2, 9, 15])]


# ---------------------------------------------------------------- the checker
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("fab,algo,ranks", CASES)
@pytest.mark.parametrize("chunks", [1, 3, None])
def test_schedules_compute_their_collective(op, fab, algo, ranks, chunks):
    s = co.build(op, algo, ranks, 1 << 16, fabric=fab, chunks=chunks)
    out = co.check(s)
    assert out["switches"] == len(s.meta["switches"]) >= 1
    if op != "all_gather":
        assert out["switch_reductions"] >= 1


def test_step_latency_keeps_it_correct():
    s = co.build("all_reduce", "nvls", range(8), 1 << 16, fabric=NODE, chunks=2,
                 step_latency_s=1e-6)
    co.check(s)


def _drop_edge(s: Schedule, child: int, parent: int) -> Schedule:
    owner = np.repeat(np.arange(s.n), np.diff(s.dep_ptr))
    keep = ~((owner == child) & (s.dep_idx == parent))
    assert (~keep).sum() == 1
    ptr = np.concatenate([[0], np.cumsum(np.bincount(owner[keep], minlength=s.n))])
    return Schedule(s.kind, s.src, s.dst, s.size, s.duration, s.start, ptr, s.dep_idx[keep],
                    s.tag, s.label, s.labels, s.extra, s.meta)


def _nvls(chunks=1):
    return co.build("all_reduce", "nvls", range(8), 1 << 16, fabric=NODE, chunks=chunks)


def test_missing_contribution_is_caught():
    s = _nvls()
    up = np.flatnonzero((s.kind == TRANSFER) & (s.src == 3) & (s.dst == 16))
    assert len(up) == 1
    keep = np.ones(s.n, bool)
    keep[up] = False
    with pytest.raises(co.CheckFailed, match=r"missing the contribution of rank\(s\) \[3\]"):
        co.check(s.subset(keep))


def test_contribution_counted_twice_is_caught():
    s = _nvls()
    up = int(np.flatnonzero((s.kind == TRANSFER) & (s.src == 3))[0])
    red = int(np.flatnonzero(s.extra["reduce"] == 2)[0])
    # a second upload from rank 3 (node 0) that the reduction also waits for
    dup = s.subset(np.arange(s.n) == up)
    both = Schedule.concat([dup, s])
    both.meta = s.meta
    # the reduction (shifted by one) also waits for the duplicate (node 0)
    owner = np.repeat(np.arange(both.n), np.diff(both.dep_ptr))
    child = np.concatenate([owner, [red + 1]])
    parent = np.concatenate([both.dep_idx, [0]])
    o = np.argsort(child, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(child, minlength=both.n))])
    bad = Schedule(both.kind, both.src, both.dst, both.size, both.duration, both.start, ptr,
                   parent[o], both.tag, both.label, both.labels, both.extra, s.meta)
    with pytest.raises(co.CheckFailed, match="more than once"):
        co.check(bad)


def test_multicast_before_the_reduction_is_caught():
    s = _nvls()
    red = int(np.flatnonzero(s.extra["reduce"] == 2)[0])
    down = int(np.flatnonzero((s.kind == TRANSFER) & (s.src == 16) & (s.dst == 5))[0])
    with pytest.raises(co.CheckFailed, match="switch 16 .output.|may still be writing"):
        co.check(_drop_edge(s, down, red))


def test_reduction_not_waiting_for_an_upload_is_caught():
    s = _nvls()
    red = int(np.flatnonzero(s.extra["reduce"] == 2)[0])
    up = int(np.flatnonzero((s.kind == TRANSFER) & (s.src == 6) & (s.dst == 16))[0])
    with pytest.raises(co.CheckFailed, match="may still be writing"):
        co.check(_drop_edge(s, red, up))


def test_reduction_turned_into_nothing_is_caught():
    s = _nvls()
    ex = {k: v.copy() for k, v in s.extra.items()}
    ex["reduce"][ex["reduce"] == 2] = -1  # a plain delay: the switch output is never filled
    bad = Schedule(s.kind, s.src, s.dst, s.size, s.duration, s.start, s.dep_ptr, s.dep_idx,
                   s.tag, s.label, s.labels, ex, s.meta)
    with pytest.raises(co.CheckFailed, match="missing"):
        co.check(bad)


def test_an_unknown_switch_is_refused():
    s = _nvls()
    meta = dict(s.meta, switches=np.array([17]))
    bad = Schedule(s.kind, s.src, s.dst, s.size, s.duration, s.start, s.dep_ptr, s.dep_idx,
                   s.tag, s.label, s.labels, s.extra, meta)
    with pytest.raises(co.CheckFailed, match="neither one of the ranks nor a switch|not one "
                                             "of the schedule's switches"):
        co.check(bad)


# ---------------------------------------------------------------- timing
def _sent_received(s, n_nodes):
    t = s.kind == TRANSFER
    out = np.zeros(n_nodes)
    inn = np.zeros(n_nodes)
    np.add.at(out, s.src[t], s.size[t])
    np.add.at(inn, s.dst[t], s.size[t])
    return out, inn


def test_nvls_moves_s_each_way_and_beats_the_ring_by_2_n_minus_1_over_n():
    S, n = 1 << 30, 8
    line = NODE.link_bw[0]  # 7200 Gb/s scale-up links
    s = co.build("all_reduce", "nvls", range(n), S, fabric=NODE)
    out, inn = _sent_received(s, NODE.n_nodes)
    assert (out[:n] == S).all() and (inn[:n] == S).all()
    r = simulate(NODE, s, engine="flow")
    ring = simulate(NODE, co.build("all_reduce", "ring", range(n), S), engine="flow")
    algbw = S / r.makespan
    # algbw -> the per-GPU link rate (pipeline fill of 64 chunks and per-chunk latency aside)
    assert 0.93 * line < algbw < line
    # ring: 2(n-1)/n S per GPU; the ratio of times approaches 2(n-1)/n = 1.75
    assert 1.6 < ring.makespan / r.makespan < 1.75
    assert estimate(NODE, "all_reduce", "nvls", range(n), S) == pytest.approx(r.makespan,
                                                                              rel=0.01)


def test_sharp_halves_the_bytes_per_nic_on_a_fat_tree():
    S, n = 64 << 20, 16
    s = co.build("all_reduce", "sharp", range(n), S, fabric=FT)
    ring = co.build("all_reduce", "ring", range(n), S)
    out, inn = _sent_received(s, FT.n_nodes)
    rout, _ = _sent_received(ring, FT.n_nodes)
    assert (out[:n] == S).all() and (inn[:n] == S).all()
    assert out[:n].sum() / rout[:n].sum() == pytest.approx(n / (2 * (n - 1)))
    r = simulate(FT, s, engine="flow")
    rr = simulate(FT, ring, engine="flow")
    assert rr.makespan / r.makespan > 1.4
    # every link of the tree carries S each way at most once: no link above S
    assert r.link_bytes.max() == S
    assert estimate(FT, "all_reduce", "sharp", range(n), S) == pytest.approx(r.makespan,
                                                                             rel=0.01)


def test_switch_reduce_rate_slows_it_down():
    slow = build("two_tier", {"nodes": 1, "gpus_per_node": 8,
                              "reduce_gbps": {"scaleup": 1800}})
    S = 64 << 20
    t_slow = simulate(slow, co.build("all_reduce", "nvls", range(8), S, fabric=slow)).makespan
    t_line = simulate(NODE, co.build("all_reduce", "nvls", range(8), S, fabric=NODE)).makespan
    assert t_slow > 3 * t_line  # a quarter of the line rate
    assert S / t_slow < 1800e9 / 8


def test_packet_engine_runs_switch_endpoints():
    s = co.build("all_reduce", "nvls", range(4), 1 << 20, fabric=NODE, chunks=2)
    r = simulate(NODE, s, engine="packet")
    assert np.isfinite(r.end).all() and r.makespan > 0


# ---------------------------------------------------------------- the fabric parameter
def test_refusals_name_the_field():
    with pytest.raises(InputError, match="needs a scale-up switch"):
        co.build("all_reduce", "nvls", range(4), 1 << 20, fabric=FT)
    plain = two_tier(nodes=2)
    with pytest.raises(InputError, match=r"topology\.reduce_gbps"):
        co.build("all_reduce", "nvls", range(4), 1 << 20, fabric=plain)
    with pytest.raises(InputError, match=r"topology\.reduce_gbps"):
        co.build("all_reduce", "sharp", [0, 8], 1 << 20, fabric=plain)
    with pytest.raises(InputError, match="span 2 scale-up switches"):
        co.build("all_reduce", "nvls", [0, 8], 1 << 20, fabric=NODE)
    with pytest.raises(InputError, match=r"topology\.reduce_gbps\.bogus"):
        build("two_tier", {"nodes": 2, "reduce_gbps": {"bogus": 1}})
    with pytest.raises(InputError, match=r"topology\.reduce_gbps"):
        build("fat_tree", {"k": 4, "reduce_gbps": -3})
    with pytest.raises(InputError, match="fabric = None"):
        co.build("all_reduce", "sharp", range(4), 1 << 20)
    edge_only = build("fat_tree", {"k": 4, "reduce_gbps": {"edge": "line"}})
    with pytest.raises(InputError, match="no tree of reducing switches"):
        trees(edge_only, range(16), "sharp")
    assert len(trees(edge_only, [0, 1], "sharp")[0].switches) == 1


def test_reduce_gbps_per_layer():
    t = build("two_tier", {"nodes": 2, "reduce_gbps": {"scaleup": "line", "edge": 100}})
    bw = t.reduce_bw * 8 / 1e9
    assert (bw[16:18] == 7200).all() and (bw[18:26] == 100).all() and (bw[26:] == 0).all()
    t2 = apply_reduce(fat_tree(4), "scaleup:line/edge:100".replace("scaleup:line/", ""))
    assert (t2.reduce_bw[16:24] > 0).all() and (t2.reduce_bw[24:] == 0).all()


# ---------------------------------------------------------------- choice
def test_choose_prefers_in_network_where_switches_reduce():
    c = co.choose(NODE, "all_reduce", 1 << 26, list(range(8)))
    assert c.algorithm == "nvls"
    co.check(c.build())
    assert co.choose(two_tier(nodes=2), "all_reduce", 1 << 26,
                     list(range(8))).algorithm != "nvls"
    assert co.choose(FT, "all_reduce", 1 << 26).algorithm == "sharp"
    # across the 16 GPUs of two_tier: NVLS inside the nodes and a tree between them (NCCL's
    # NVLSTree), whose switch reduction replaces the 2(g-1) intra-node ring steps
    c = co.choose(NODE, "all_reduce", 1 << 26)
    assert c.algorithm == "nvls_tree" and c.protocol == "simple"
    # without reducing switches NCCL's tuner weighs Ring and Tree only
    assert co.choose(two_tier(nodes=2), "all_reduce", 1 << 26).algorithm == "ring"
    # reduce-scatter moves S up per GPU where the ring moves (n-1)/n S: large ones stay ring
    assert co.choose(NODE, "reduce_scatter", 1 << 30, list(range(8))).algorithm == "ring"


# ---------------------------------------------------------------- scenarios and the CLI
SCEN = """
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 4
reduce_gbps = "line"

[workload]
kind = "collective"
op = "{op}"
algorithm = "{algo}"
bytes = "4MiB"
ranks = {ranks}
network_detail = "{detail}"
"""


def _run(path):
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import load_scenario

    return simulate_scenario(load_scenario(path))


@pytest.mark.parametrize("detail", ["auto", "full"])
@pytest.mark.parametrize("op,algo,ranks", [("all_reduce", "nvls", [0, 1, 2, 3]),
                                           ("all_reduce", "sharp", [0, 4]),
                                           ("reduce_scatter", "nvls", [0, 1, 2, 3]),
                                           ("all_gather", "sharp", [1, 5])])
def test_scenario_collective(tmp_path, op, algo, ranks, detail):
    p = tmp_path / "s.toml"
    p.write_text(SCEN.format(op=op, algo=algo, ranks=ranks, detail=detail))
    prep, res, summary = _run(p)
    assert res.makespan > 0 and prep.schedule.meta["algorithm"] == algo
    co.check(prep.schedule)


def test_cli_collective(capsys):
    from netcosim.cli import main

    # the bandwidth alone (no protocol latencies): near the line rate
    rc = main(["collective", "--topo", "two_tier:nodes=1,reduce_gbps=scaleup:line", "--op",
               "all_reduce", "--algo", "nvls", "--sizes", "1GiB", "--engine", "flow",
               "--step-latency-us", "0"])
    assert rc in (0, None)
    line = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("1073741824")]
    algbw = float(line[0].split()[2])
    assert 0.93 * 900 < algbw < 900


# ---------------------------------------------------------------- training
sys.path.insert(0, str(Path(__file__).parent))
from test_scale import SMALL, _agree, _step  # noqa: E402
from compute.training import build_step  # noqa: E402


@pytest.mark.parametrize("algo", [{"all_reduce": "nvls"},
                                  {"all_reduce": "nvls", "reduce_scatter": "sharp",
                                   "all_gather": "sharp"}])
def test_training_step_auto_equals_full(algo):
    fab = apply_reduce(two_tier(nodes=4, gpus_per_node=4, nic_gbps=200), "line")
    par = dict(tp=4, pp=2, vp=2, sp=False, recompute="selective", dist_opt=True, global_batch=8)
    sf, rf, f = _step(par, fab, "full", tp_comm="network", algorithm=algo)
    sa, ra, a = _step(par, fab, "auto", tp_comm="network", algorithm=algo)
    assert sa.n_member_transfers == sf.n_transfers and sa.total_bytes == sf.total_bytes
    assert a["step_time_s"] == pytest.approx(f["step_time_s"], rel=0.01)
    used = rf.link_bytes > 0
    np.testing.assert_allclose(ra.link_bytes[used], rf.link_bytes[used], rtol=0.01)
    # switches are endpoints: the scale-up switches send and receive
    assert (sf.kind == TRANSFER).any() and (sf.dst[sf.kind == TRANSFER] >= fab.n_hosts).any()
    _, _, ring = _step(par, fab, "full", tp_comm="network")
    assert f["exposed_comm_s"]["tp"] < ring["exposed_comm_s"]["tp"]


SHARP_DP = ({"all_reduce": "sharp"}, False), \
    ({"all_reduce": "sharp", "reduce_scatter": "sharp", "all_gather": "sharp"}, True)


@pytest.mark.parametrize("fab", [apply_reduce(two_tier(nodes=8, gpus_per_node=4, nic_gbps=200),
                                              "line"),
                                 apply_reduce(fat_tree(4), "line"),
                                 build("fullflat", {"n_gpus": 32, "reduce_gbps": "line"})],
                         ids=["two_tier", "fat_tree", "fullflat"])
@pytest.mark.parametrize("algo,dist_opt", SHARP_DP, ids=["all_reduce", "dist_opt"])
def test_training_sharp_data_parallel_groups_fold_into_member_sets(fab, algo, dist_opt):
    """Under network_detail auto the in-network data-parallel collectives of a stage's groups
    (one per tensor rank) run as one instance of member sets, not one instance per group
    (which made the co-design study's SHARP steps 12.8 M and 18.4 M transfers): the same step
    time and link bytes as the full form (``_agree``), in fewer transfers."""
    par = dict(tp=4, pp=2, sp=False, recompute="selective", dist_opt=dist_opt,
               global_batch=fab.n_hosts // 4)
    _agree(par, fab, algorithm=algo)

    # the switch-endpoint transfers are folded over the 4 tensor ranks' groups where their
    # trees have one shape (every group on two_tier's rails and FullFlat's switch); on the
    # fat-tree the groups' pairs sit under different switches, and only some of them fold
    def innet(detail):
        s = build_step(SMALL, par, "h100_sxm", fab, granularity="coarse", network_detail=detail,
                       algorithm=algo)
        t = s.kind == TRANSFER
        return int((t & ((s.src >= fab.n_hosts) | (s.dst >= fab.n_hosts))).sum())
    if fab.kind == "fat_tree":
        assert 0 < innet("auto") < innet("full")
    else:
        assert innet("auto") * 4 == innet("full") > 0


def test_training_sharp_folded_groups_split_around_a_degraded_link():
    """A degraded scale-out link slows one tensor rank's SHARP group: the engine splits that
    copy off its member sets, and the step equals the full form's (``_agree``)."""
    from topo.faults import LinkFaults
    fab = apply_reduce(two_tier(nodes=8, gpus_per_node=4, nic_gbps=200), "line")
    faults = LinkFaults.from_records(fab, [{"link": scaleout_link(fab, 5), "kind": "degrade",
                                            "factor": 0.25, "at_us": 0.0}])
    par = dict(tp=4, pp=2, sp=False, recompute="selective", dist_opt=False, global_batch=8)
    algo = {"all_reduce": "sharp"}
    f, _ = _agree(par, fab, faults, algorithm=algo)
    g = _step(par, fab, "auto", algorithm=algo)[2]
    assert f["step_time_s"] > g["step_time_s"] * 1.001  # the fault shows its effect


def test_training_scenario_with_nvls(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text("""
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 4
reduce_gbps = {scaleup = "line"}

[workload]
kind = "training"
gpu = "h100_sxm"
model = {layers = 4, hidden = 512, heads = 8, seq = 512, vocab = 1024}
tp_comm = "network"
algorithm = {all_reduce = "nvls"}
granularity = "coarse"

[workload.parallel]
tp = 4
pp = 2
sp = false
global_batch = 4
""")
    prep, res, summary = _run(p)
    assert res.makespan > 0
    t = prep.schedule.kind == TRANSFER
    assert (prep.schedule.dst[t] >= prep.topology.n_hosts).any()
    p.write_text(p.read_text().replace('reduce_gbps = {scaleup = "line"}\n', ""))
    with pytest.raises(InputError, match=r"reduce_gbps"):
        _run(p)

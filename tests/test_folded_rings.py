"""Under network_detail = "auto" the tensor-parallel rings of every data-parallel replica at one
chain position are one stream over all their connections (docs/scale.md, "member sets"): on a
fabric without a scale-up layer (FullFlat) tensor parallelism runs on the network, and one
stream per replica made GPT-3 175B on 16,384 GPUs 3.2 M flows. The folded form must agree with
the transfer-by-transfer step, and a replica simulated on its own (a slowed GPU) keeps its own
streams."""
import numpy as np
import pytest

from compute.layers import CKIND
from compute.report import summarize
from compute.training import build_step, parse_gpu_faults
from netcore.api import simulate
from netcore.schedule import TRANSFER
from topo.builders import fullflat

MODEL = dict(layers=8, hidden=512, heads=8, seq=512, vocab=1024)
PAR = dict(tp=4, pp=2, sp=True, recompute="selective", dist_opt=True)


def _fab(gpus):  # leaves of 8 GPUs, two planes: tensor-parallel groups sit under one leaf
    return fullflat(gpus, planes=2, switch_radix=16, gpu_gbps=800)


def _step(fab, detail, gpu_faults=None):
    par = dict(PAR, global_batch=2 * fab.n_hosts // 8)
    s = build_step(MODEL, par, "h100_sxm", fab, granularity="coarse", network_detail=detail,
                   gpu_faults=gpu_faults)
    r = simulate(fab, s, "ecmp", engine="flow")
    return s, r, summarize(s, r.start, r.end)["step_time_s"]


def _tp_transfers(s):
    return (s.kind == TRANSFER) & (s.extra["ckind"] == CKIND["tp"])


def test_tensor_parallel_streams_do_not_grow_with_the_replicas():
    small, large = (_step(_fab(g), "auto")[0] for g in (32, 64))
    assert small.meta["tp_comm"] == "network"
    n_small, n_large = _tp_transfers(small).sum(), _tp_transfers(large).sum()
    assert n_small == n_large > 0  # one stream per chain position, whatever the replicas
    members = lambda s: s.sets.sizes[s.mset[_tp_transfers(s)]].sum()  # noqa: E731
    assert members(large) == 2 * members(small)  # twice the replicas' connections


def test_folded_tensor_parallel_streams_agree_with_the_full_step():
    fab = _fab(64)
    sf, rf, tf = _step(fab, "full")
    sa, ra, ta = _step(fab, "auto")
    assert sa.n_member_transfers == sf.n_transfers and sa.total_bytes == sf.total_bytes
    assert ta == pytest.approx(tf, rel=0.01)
    used = rf.link_bytes > 0
    np.testing.assert_allclose(ra.link_bytes[used], rf.link_bytes[used], rtol=0.01)


def test_a_replica_with_a_slowed_gpu_keeps_its_own_streams():
    fab = _fab(64)
    gf = parse_gpu_faults([{"gpus": [9], "kind": "slow", "factor": 0.5}])
    sa, _, ta = _step(fab, "auto", gf)
    clean, _, t_clean = _step(fab, "auto")
    # the slowed GPU's replica runs its own chains, so its rings are streams of their own
    assert _tp_transfers(sa).sum() > _tp_transfers(clean).sum()
    tf = _step(fab, "full", gf)[2]
    assert ta == pytest.approx(tf, rel=0.01)
    assert ta > t_clean * 1.001  # the slowed GPU shows (a step mostly on the network here)

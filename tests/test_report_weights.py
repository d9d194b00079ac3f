"""Per-GPU figures of a folded training step (compute.report.summarize) weigh each simulated
rank by the GPUs it stands for. Before, they averaged the simulated ranks: with a slowed GPU
simulated on its own beside one representative of seven healthy replicas, the slowed GPU
counted half instead of an eighth (compute_s_per_gpu 1.880 ms against 1.791 ms, +5%)."""
import pytest
from hypothesis import given, settings, strategies as st

from compute.report import summarize
from compute.training import build_step
from netcore.api import simulate
from topo.builders import fat_tree, two_tier

SMALL = dict(layers=8, hidden=512, heads=8, seq=512, vocab=1024)


def _summary(par, fab, gpu_faults, symmetry, detail="full", **kw):
    s = build_step(SMALL, par, "h100_sxm", fab, granularity="segment", symmetry=symmetry,
                   network_detail=detail, gpu_faults=gpu_faults, **kw)
    r = simulate(fab, s, "shortest", engine="flow")
    return s, summarize(s, r.start, r.end)


def _agree(par, fab, gpu_faults, **kw):
    s_ref, ref = _summary(par, fab, gpu_faults, "none", **kw)
    for detail in ("full", "auto"):
        s, got = _summary(par, fab, gpu_faults, "auto", detail, **kw)
        assert s.meta["simulated_ranks"] < s_ref.meta["simulated_ranks"]  # folded
        assert got["step_time_s"] == pytest.approx(ref["step_time_s"], rel=1e-9)
        assert got["compute_s_per_gpu"] == pytest.approx(ref["compute_s_per_gpu"], rel=1e-9)
        assert got["exposed_comm_total_s"] + got["idle_s_per_gpu"] == pytest.approx(
            ref["exposed_comm_total_s"] + ref["idle_s_per_gpu"], rel=1e-6)
    return ref


def test_a_slowed_gpu_counts_as_one_gpu():
    par = dict(dp=8, micro_batch=2, global_batch=16, dist_opt=True, recompute="selective",
               bucket_mb=4.0)
    ref = _agree(par, fat_tree(4), [{"gpus": [12], "kind": "slow", "factor": 0.5,
                                     "at_us": 300.0}], placement="spread")
    assert ref["compute_s_per_gpu"] == pytest.approx(1.791104e-3, rel=1e-6)


@settings(max_examples=10, deadline=None)
@given(tp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2]), gpu=st.integers(0, 15),
       kind=st.sampled_from(["slow", "hbm_degrade"]), factor=st.sampled_from([0.25, 0.5]),
       at_us=st.sampled_from([0.0, 200.0]))
def test_folded_summary_equals_every_gpu_simulated(tp, pp, gpu, kind, factor, at_us):
    fab = two_tier(nodes=4, gpus_per_node=4, nic_gbps=400)
    par = dict(tp=tp, pp=pp, dp=16 // (tp * pp), global_batch=2 * 16 // (tp * pp))
    _agree(par, fab, [{"gpus": [gpu], "kind": kind, "factor": factor, "at_us": at_us}])

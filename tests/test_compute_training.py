import numpy as np
import pytest

from compute import pipeline
from compute.critical_path import evaluate
from compute.layers import CKIND
from compute.model import TransformerConfig, get_model
from compute.training import build_step
from netcore.schedule import COMPUTE, TRANSFER
from topo.errors import InputError

SMALL = dict(layers=8, hidden=256, heads=8, seq=128, vocab=512)
# zero launch cost, no shape penalty, near-infinite HBM: every op costs its FLOPs at one rate
IDEAL = {"name": "ideal", "peak_tflops_fp16": 100, "peak_tflops_bf16": 100, "hbm_gb": 80,
         "hbm_GBps": 1e9, "scaleup_GBps": 100, "efficiency": {"launch_us": 0, "gemm_knee": 0}}


def groups(n, g):
    return [i // g for i in range(n)]


def flop_total(s):
    c = s.kind == COMPUTE
    return float((s.extra["flops"][c] * s.extra["mult"][c]).sum())


CONFIGS = [
    (SMALL, dict(tp=2, pp=2, global_batch=4), 4, {}),
    (SMALL, dict(tp=2, pp=2, sp=True, recompute="selective", global_batch=4), 8, {}),
    (SMALL, dict(tp=2, pp=2, recompute="full", global_batch=8, dist_opt=True), 8,
     {"symmetry": "none"}),
    (SMALL, dict(tp=4, pp=2, vp=2, sp=True, global_batch=4, flash_attention=False), 8,
     {"tp_comm": "network", "granularity": "op"}),
    (SMALL, dict(tp=2, cp=2, pp=1, global_batch=4), 8, {}),
    (dict(SMALL, experts=4, top_k=2, kv_heads=2, gated_mlp=True),
     dict(tp=2, ep=2, pp=2, global_batch=8, recompute="selective"), 8, {"granularity": "coarse"}),
]


@pytest.mark.parametrize("model,par,n,opts", CONFIGS)
def test_schedule_flops_equal_the_analytical_count(model, par, n, opts):
    s = build_step(model, par, "H100-SXM", n_hosts=n, host_group=groups(n, 4), **opts)
    s.validate(n)  # acyclic, hosts exist
    m = get_model(model)
    gb = par["global_batch"]
    want = gb * (m.model_flops_per_sequence() +
                 m.recompute_flops_per_sequence(par.get("recompute", "none")))
    assert flop_total(s) == pytest.approx(want, rel=1e-9)
    assert s.meta["hardware_flops_per_step"] == pytest.approx(want, rel=1e-12)
    assert s.meta["model_flops_per_step"] == pytest.approx(gb * m.model_flops_per_sequence())
    assert s.meta["tokens_per_step"] == gb * m.seq


def test_model_flops_match_the_megatron_formula():
    for name in ("22b", "gpt3-175b", "1t"):
        m = get_model(name)
        s, l, h, V = m.seq, m.layers, m.hidden, m.vocab
        want = 72 * s * l * h * h * (1 + s / (6 * h) + V / (12 * h * l))
        assert m.model_flops_per_sequence() == pytest.approx(want, rel=1e-12)
    assert get_model("gpt3-175b").params == pytest.approx(174.6e9, rel=1e-3)


@pytest.mark.parametrize("p,m,v", [(4, 8, 1), (2, 6, 1), (4, 3, 1), (4, 8, 2), (4, 4, 4)])
def test_pipeline_bubble_on_an_infinitely_fast_network(p, m, v):
    # vocab 1 makes the output layer negligible (~1e-4 of a layer), so every stage does the same
    # work and 1F1B idles (p-1)/(m+p-1) of the step; interleaving divides the bubble by v
    s = build_step(dict(layers=2 * p * v, hidden=256, heads=4, seq=128, vocab=1),
                   dict(pp=p, vp=v, global_batch=m), IDEAL, n_hosts=p)
    st, en = evaluate(s)
    opt = np.isin(s.label, [s.labels.index("compute:optimizer")])
    work = s.duration[(s.kind == COMPUTE) & ~opt & (s.extra["rank"] == 0)].sum()
    bubble = 1 - work / en[~opt].max()
    assert bubble == pytest.approx((p - 1) / (v * m + p - 1), abs=1e-3)


@pytest.mark.parametrize("p,m", [(4, 8), (4, 2), (1, 3), (8, 8)])
def test_1f1b_order(p, m):
    for s in range(p):
        ph, ch, mb = pipeline.order(p, m, 1, s)
        assert len(ph) == 2 * m
        first_b = int(np.flatnonzero(ph == pipeline.BWD)[0])
        assert first_b == min(p - s, m)  # warm-up forwards, then the first backward
        inflight = np.cumsum(np.where(ph == pipeline.FWD, 1, -1))
        assert inflight.max() <= min(p - s, m) and inflight[-1] == 0
        for j in range(m):  # forward before backward, micro-batches in order
            assert np.flatnonzero((ph == 0) & (mb == j))[0] < np.flatnonzero((ph == 1) & (mb == j))[0]
        assert (np.diff(mb[ph == 0]) == 1).all() and (np.diff(mb[ph == 1]) == 1).all()


def test_interleaved_order_visits_every_chunk_and_microbatch_once():
    p, m, v = 4, 8, 3
    for s in range(p):
        ph, ch, mb = pipeline.order(p, m, v, s)
        for phase in (0, 1):
            pairs = set(zip(ch[ph == phase].tolist(), mb[ph == phase].tolist()))
            assert pairs == {(c, j) for c in range(v) for j in range(m)}


def test_pipeline_transfers_feed_the_next_stage():
    s = build_step(SMALL, dict(tp=2, pp=2, global_batch=2), "A100-80GB", n_hosts=4,
                   host_group=groups(4, 2), symmetry="none")
    pp = (s.kind == TRANSFER) & (s.extra["ckind"] == CKIND["pp"])
    # 2 micro-batches x (activation forward + gradient backward) x 2 tensor ranks
    assert pp.sum() == 8
    st, en = evaluate(s, 10e9, 1e-6)
    cptr, cidx = s.children()
    for i in np.flatnonzero(pp):
        kids = cidx[cptr[i]:cptr[i + 1]]
        assert kids.size and (s.kind[kids] == COMPUTE).all()
        assert (st[kids] >= en[i] - 1e-15).all()
        # activations go stage 0 -> 1 (hosts 0,1 -> 2,3) in forward and back in backward
        assert (s.src[i] < 2) != (s.dst[i] < 2)


def test_dp_buckets_overlap_the_backward_pass():
    kw = dict(n_hosts=8, host_group=groups(8, 2))
    par = dict(tp=2, pp=1, global_batch=4, bucket_mb=0.5)
    s = build_step(SMALL, par, "A100-80GB", symmetry="none", **kw)
    st, en = evaluate(s, 10e9, 1e-6)
    dp = (s.kind == TRANSFER) & (s.extra["ckind"] == CKIND["dp"])
    comp = (s.kind == COMPUTE) & (s.labels.index("compute:optimizer") != s.label)
    assert dp.any()
    assert st[dp].min() < en[comp].max()  # the first bucket leaves before the backward ends
    s2 = build_step(SMALL, dict(par, overlap_grad_reduce=False), "A100-80GB", symmetry="none", **kw)
    st2, en2 = evaluate(s2, 10e9, 1e-6)
    dp2 = (s2.kind == TRANSFER) & (s2.extra["ckind"] == CKIND["dp"])
    comp2 = (s2.kind == COMPUTE) & (s2.labels.index("compute:optimizer") != s2.label)
    assert st2[dp2].min() >= en2[comp2].max() - 1e-15
    assert en2.max() > en.max()


def test_symmetry_matches_the_full_simulation_on_a_symmetric_fabric():
    import topo.builders as tb
    from netcore.api import simulate

    topo = tb.two_tier(nodes=4, gpus_per_node=4, nic_gbps=100, scaleup_gbps=1200)
    par = dict(tp=4, pp=2, global_batch=8, sp=True, dist_opt=True)
    full = build_step(SMALL, par, "A100-80GB", topo, symmetry="none")
    sym = build_step(SMALL, par, "A100-80GB", topo)
    assert "replicas" in sym.meta["symmetry"] and full.meta["symmetry"].startswith("none")
    assert sym.n < full.n and sym.n_transfers == full.n_transfers
    a = simulate(topo, full, "ecmp").makespan
    b = simulate(topo, sym, "ecmp").makespan
    assert b == pytest.approx(a, rel=1e-6)


def test_tp_placement_inside_the_scaleup_domain():
    s = build_step(SMALL, dict(tp=4, pp=2, global_batch=4), "A100-80GB", n_hosts=8,
                   host_group=groups(8, 4))
    assert s.meta["tp_comm"] == "local"
    assert s.meta["rank_host"] == list(range(8))
    s = build_step(SMALL, dict(tp=4, pp=2, global_batch=4), "A100-80GB", n_hosts=8,
                   host_group=groups(8, 4), placement="spread")
    assert s.meta["tp_comm"] == "network"  # a TP group split over two domains goes on the wire
    assert s.meta["rank_host"][:4] == [0, 4, 1, 5]
    tp = (s.kind == TRANSFER) & (s.extra["ckind"] == CKIND["tp"])
    assert tp.any()


@pytest.mark.parametrize("par,n,msg", [
    (dict(tp=3, global_batch=4), 6, "parallel.tp = 3: does not divide model.heads"),
    # 8 layers on 16 positions: not every middle position can hold one
    (dict(pp=8, vp=2, global_batch=16), 16, r"pp x vp = 8 x 2 = 16 pipeline positions, but "
                                            r"model.layers = 8: too few layers"),
    (dict(pp=2, stage_layers=[3, 3, 2], global_batch=4), 4,
     r"parallel.stage_layers: 3 entries, but pp x vp = 2 x 1 = 2 pipeline positions"),
    (dict(pp=4, stage_layers=[3, 0, 3, 2], global_batch=4), 4, r"parallel.stage_layers\[1\] = 0"),
    (dict(pp=2, stage_layers=[5, 4], global_batch=4), 4,
     "parallel.stage_layers: the entries sum to 9, but model.layers = 8"),
    (dict(pp=2, stage_layers=[9, -1], global_batch=4), 4, r"parallel.stage_layers\[1\] = -1"),
    (dict(pp=2, stage_layers=[4.0, 4], global_batch=4), 4, r"parallel.stage_layers\[0\] = 4.0"),
    (dict(pp=2, stage_layers="4,4", global_batch=4), 4, "parallel.stage_layers = '4,4'"),
    (dict(tp=2, pp=2, global_batch=3), 8, "global_batch = 3: not divisible by micro_batch x dp"),
    (dict(tp=4, pp=2, global_batch=4), 12, "does not divide the GPU count 12"),
    (dict(tp=2, dp=3, global_batch=6), 4, "6 GPUs needed but the topology has 4 hosts"),
    (dict(pp=2, vp=2, global_batch=3), 2, "multiple of pp"),
    (dict(ep=2, global_batch=4), 4, "no experts"),
    (dict(recompute="some", global_batch=4), 4, "parallel.recompute = 'some'"),
    (dict(tp=0, global_batch=4), 4, "parallel.tp = 0"),
    (dict(tp=2, global_batch=4, colour=1), 4, "parallel.colour"),
])
def test_bad_parallel_configs_are_refused(par, n, msg):
    with pytest.raises(InputError, match=msg):
        build_step(SMALL, par, "A100-80GB", n_hosts=n)


def test_bad_model_and_gpu_are_refused():
    with pytest.raises(InputError, match="model.heads = 7: does not divide hidden"):
        TransformerConfig(layers=2, hidden=256, heads=7)
    with pytest.raises(InputError, match="model.hidden: missing"):
        get_model({"layers": 2, "heads": 4})
    with pytest.raises(InputError, match="gpu = 'Z9'"):
        build_step(SMALL, dict(global_batch=1), "Z9", n_hosts=1)
    with pytest.raises(InputError, match="precision = 'fp8'"):
        build_step(SMALL, dict(global_batch=1, precision="fp8"), "A100-80GB", n_hosts=1)
    with pytest.raises(InputError, match="8 GPUs needed"):
        build_step(SMALL, dict(tp=8, dp=1, global_batch=1), "A100-80GB", n_hosts=4)


def test_tp_goes_on_the_network_without_a_scaleup_domain():
    import topo.builders as tb

    fat = tb.fat_tree(4)  # 16 hosts on switches, no NVLink-class layer
    s = build_step(SMALL, dict(tp=2, global_batch=8), "A100-80GB", fat)
    assert s.meta["tp_comm"] == "network"
    two = tb.two_tier(nodes=2, gpus_per_node=8, scaleup_gbps=800)  # 100 GB/s NVLink ports
    s = build_step(SMALL, dict(tp=8, global_batch=2), "A100-80GB", two)
    assert s.meta["tp_comm"] == "local" and s.meta["tp_scaleup_GBps"] == pytest.approx(100.0)

"""MoE presets, shared experts, dense first layers, latent attention, expert imbalance."""
import numpy as np
import pytest

from compute.critical_path import evaluate
from compute.memory import params_per_stage
from compute.model import get_model
from compute.parallel import ParallelConfig, validate
from compute.training import build_step
from netcore.schedule import COMPUTE, TRANSFER
from topo.errors import InputError

SM = dict(layers=4, hidden=256, heads=8, seq=256, vocab=512, experts=8, top_k=2, gated_mlp=True)
DS = dict(layers=5, hidden=256, heads=8, head_size=32, seq=256, vocab=512, experts=8, top_k=2,
          gated_mlp=True, ffn=512, expert_ffn=64, shared_experts=1, dense_layers=2,
          q_lora_rank=96, kv_lora_rank=64, rope_head_dim=16, tied_embeddings=False)


@pytest.mark.parametrize("name,total,active", [
    ("mixtral-8x7b", 46.7e9, 12.9e9),     # arXiv:2401.04088
    ("mixtral-8x22b", 141e9, 39e9),       # Mistral AI announcement
    ("deepseek-v3", 671e9, 37e9),         # arXiv:2412.19437
    ("gpt4-1.8t-moe", 1.8e12, 280e9),     # SemiAnalysis figures behind arXiv:2506.15006
])
def test_presets_match_the_published_totals(name, total, active):
    m = get_model(name)
    assert m.params == pytest.approx(total, rel=0.02)
    assert m.active_params == pytest.approx(active, rel=0.02)


def test_deepseek_v3_structure():
    m = get_model("deepseek-v3")
    assert [m.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    # MLA GEMMs of arXiv:2412.19437 section 2.1.1: W^DQ 7168x1536, W^UQ/W^QR 1536x128(128+64),
    # W^DKV/W^KR 7168x(512+64), W^UK/W^UV 512x128x2x128, W^O 128x128x7168
    want = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert m.attn_gemm_params == want
    # attention FLOPs: QK^T over 192-wide heads, AV over 128-wide heads
    assert m.attn_core_flops() == pytest.approx(2 * 4096 ** 2 * 128 * (192 + 128))
    # a dense layer has the 18,432-wide MLP, an expert layer 257 experts of 2048 and the router
    assert m.layer_params_of(False) - m.attn_params == 3 * 7168 * 18432
    assert m.layer_params_of(True) - m.attn_params == 257 * 3 * 7168 * 2048 + 7168 * 256


def test_flops_of_dense_and_expert_layers():
    m = get_model(DS)
    s = m.seq
    moe = m.layer_fwd_flops(True) - m.attn_core_flops() - 2 * s * m.attn_gemm_params
    dense = m.layer_fwd_flops(False) - m.attn_core_flops() - 2 * s * m.attn_gemm_params
    assert moe == pytest.approx(2 * s * (3 * m.expert_params + 256 * 8))  # top-2 + 1 shared
    assert dense == pytest.approx(2 * s * 3 * 256 * 512)
    assert m.layers_fwd_flops() == pytest.approx(2 * m.layer_fwd_flops(False)
                                                 + 3 * m.layer_fwd_flops(True))


def flop_total(s):
    c = s.kind == COMPUTE
    return float((s.extra["flops"][c] * s.extra["mult"][c]).sum())


@pytest.mark.parametrize("model,par,rel", [
    (DS, dict(tp=2, ep=4, global_batch=16), 1e-9),
    (DS, dict(tp=2, ep=2, pp=2, global_batch=16, recompute="full"), 1e-9),
    (dict(DS, expert_imbalance=[4, 1, 1, 1, 1, 1, 1, 1]), dict(tp=2, ep=4, global_batch=16), 1e-3),
    (dict(SM, expert_imbalance={"zipf": 1.2}), dict(tp=2, ep=4, global_batch=16), 1e-3),
])
def test_schedule_flops_equal_the_analytical_count(model, par, rel):
    s = build_step(model, par, "H100-SXM", n_hosts=16, host_group=[i // 4 for i in range(16)])
    s.validate(16)
    m = get_model(model)
    want = par["global_batch"] * (m.model_flops_per_sequence() +
                                  m.recompute_flops_per_sequence(par.get("recompute", "none")))
    # imbalanced experts: each rank's tokens are rounded to whole tokens per expert
    assert flop_total(s) == pytest.approx(want, rel=rel)


def test_expert_shares():
    assert np.allclose(get_model(SM).expert_shares(), 1 / 8)
    z = get_model(dict(SM, expert_imbalance={"zipf": 1.2})).expert_shares()
    assert z.sum() == pytest.approx(1) and np.all(np.diff(z) < 0)
    assert z[0] / z[1] == pytest.approx(2 ** 1.2)
    # a token picks top_k different experts: no expert gets more than 1/top_k
    hot = get_model(dict(SM, expert_imbalance={"zipf": 4.0})).expert_shares()
    assert hot.max() == pytest.approx(0.5) and hot.sum() == pytest.approx(1)
    sh = get_model(dict(SM, expert_imbalance={"shares": [3, 1, 1, 1, 1, 1, 1, 1]}))
    assert sh.expert_shares()[0] == pytest.approx(0.3)
    shuffled = get_model(dict(SM, expert_imbalance={"zipf": 1.2, "seed": 7})).expert_shares()
    assert sorted(shuffled) == pytest.approx(sorted(z)) and not np.allclose(shuffled, z)


@pytest.mark.parametrize("imb,match", [
    ({"zipf": -1}, "zipf"), ({"zipf": 1, "shares": [1] * 8}, "exactly one"),
    ({"shares": [1, 2]}, "8 numbers"), ({"hot": 2}, "unknown key"), ("x", "expected"),
    ({"shares": [0] * 8}, "all zero"), ({"shares": [1] * 7 + [-1]}, r"shares\[7\]"),
])
def test_bad_imbalance_is_refused(imb, match):
    with pytest.raises(InputError, match=match):
        get_model(dict(SM, expert_imbalance=imb))
    with pytest.raises(InputError, match="mixture of experts"):
        get_model(dict(SM, experts=0, expert_imbalance={"zipf": 1.0}))


@pytest.mark.parametrize("bad,match", [
    (dict(kv_lora_rank=0, q_lora_rank=8), "q_lora_rank"),
    (dict(dense_layers=5), "no expert layer"),
    (dict(experts=0, top_k=1, shared_experts=1, expert_ffn=0, dense_layers=0), "shared_experts"),
    (dict(kv_heads=2), "kv_heads"),
])
def test_bad_moe_fields(bad, match):
    with pytest.raises(InputError, match=match):
        get_model(dict(DS, **bad))


def test_imbalanced_all_to_all_follows_the_shares():
    shares = [4, 1, 1, 1, 1, 1, 1, 1]  # EP 4: ranks get 5/11, 2/11, 2/11, 2/11
    model = dict(SM, expert_imbalance=shares)
    s = build_step(model, dict(ep=4, global_batch=8), "H100-SXM", n_hosts=4,
                   symmetry="none", network_detail="full")
    t = s.kind == TRANSFER
    ep = t & (np.char.find(np.array(s.labels)[s.label], "comm:ep:all_to_all_v") == 0)
    assert ep.any()
    recv = np.bincount(s.dst[ep], weights=s.size[ep], minlength=4)
    send = np.bincount(s.src[ep], weights=s.size[ep], minlength=4)
    # dispatch and combine (and their backward twins): rank j receives share_j of every peer's
    # tokens and sends them back, so bytes in and out of rank j follow (share_j, 1 - share_j)
    load = np.array([5, 2, 2, 2]) / 11
    a2a = 256 * 2 * 256 * 2  # tokens x top_k x hidden x 2 bytes
    one = a2a * load * 3 + a2a * (1 - load)  # per direction pair: the other 3 ranks' shares
    assert recv == pytest.approx(send)
    assert recv / recv.sum() == pytest.approx(one / one.sum(), rel=1e-3)
    # the busiest rank's expert GEMMs take longest
    c = s.kind == COMPUTE
    busy = np.bincount(s.extra["rank"][c], weights=s.duration[c], minlength=4)
    assert busy.argmax() == 0 and busy[0] > 1.03 * busy[1:].max()


def test_imbalance_slows_the_step_and_symmetry_stays_exact():
    import topo.builders as tb
    from netcore.api import simulate

    topo = tb.two_tier(nodes=4, gpus_per_node=4, nic_gbps=100, scaleup_gbps=1200)
    par = dict(tp=2, ep=4, global_batch=16)
    times = {}
    for imb in (None, {"zipf": 1.5}):
        for sym in ("auto", "none"):
            s = build_step(dict(SM, expert_imbalance=imb), par, "H100-SXM", topo, symmetry=sym)
            times[(str(imb), sym)] = simulate(topo, s, "ecmp").makespan
    assert times[("None", "auto")] == pytest.approx(times[("None", "none")], rel=1e-9)
    zipf = str({"zipf": 1.5})
    assert times[(zipf, "auto")] == pytest.approx(times[(zipf, "none")], rel=1e-9)
    assert times[(zipf, "auto")] > 1.03 * times[("None", "auto")]


def test_memory_counts_dense_first_layers_and_local_experts():
    m = get_model(DS)
    par = validate(m, ParallelConfig(tp=1, pp=1, ep=4, global_batch=4), 4)
    want = (2 * m.layer_params_of(False, 4) + 3 * m.layer_params_of(True, 4)
            + 2 * 512 * 256)
    assert params_per_stage(m, par)[0] == pytest.approx(want)
    assert m.layer_params_of(True, 4) == pytest.approx(
        m.attn_params + (2 + 1) * m.expert_params + 256 * 8)

"""Llama 3 presets, vocabulary padding, uneven pipeline stages (parallel.stage_layers and the
default split), per-stage memory, context parallelism, and bad layouts refused by field."""
import json

import numpy as np
import pytest

from compute.critical_path import evaluate
from compute.layers import CKIND
from compute.memory import memory_per_gpu, params_per_stage
from compute.model import get_model
from compute.parallel import ParallelConfig, layer_split, stage_layer_counts
from compute.training import build_step
from netcore.schedule import COMPUTE, TRANSFER
from netcosim.cli import main
from topo.errors import InputError

IDEAL = {"name": "ideal", "peak_tflops_fp16": 100, "peak_tflops_bf16": 100, "hbm_gb": 80,
         "hbm_GBps": 1e9, "scaleup_GBps": 100, "efficiency": {"launch_us": 0, "gemm_knee": 0}}


# ---------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name,params,layers,hidden", [
    ("llama3-8b", 8.03e9, 32, 4096),
    ("llama3-70b", 70.6e9, 80, 8192),
    ("llama3-405b", 405e9, 126, 16384),
])
def test_llama3_presets_have_the_published_sizes(name, params, layers, hidden):
    m = get_model(name)
    assert m.params == pytest.approx(params, rel=0.01)
    assert (m.layers, m.hidden, m.g, m.seq, m.gated_mlp) == (layers, hidden, 8, 8192, True)
    assert not m.tied_embeddings and m.output_params == m.embedding_params
    s, h, V, L, f = m.seq, m.hidden, m.vocab, m.layers, m.f
    # GQA: Q and output projection h^2 each, K and V 8 heads of 128; three FFN matrices
    kv = 2 * 8 * 128
    want = 3 * L * (2 * s * h * (2 * h + kv) + 6 * s * h * f + 4 * s * s * h) + 6 * s * h * V
    assert m.model_flops_per_sequence() == pytest.approx(want, rel=1e-12)


def test_405b_preset_details():
    m = get_model("llama3-405b")
    assert (m.heads, m.kv_heads, m.ffn, m.vocab) == (128, 8, 53248, 128000)
    assert get_model({"preset": "llama3-405b", "seq": 131072}).seq == 131072


def test_vocabulary_is_padded_like_megatron():
    m = get_model("llama3-8b")  # 128,256 rows, padded to a multiple of 128 x TP
    assert m.padded_vocab(1) == 128256 and m.padded_vocab(8) == 129024
    assert get_model("llama3-405b").padded_vocab(8) == 128000
    # default vocab_multiple = 1: only to a multiple of TP; a vocabulary TP divides is unchanged
    odd = dict(layers=2, hidden=256, heads=8, seq=128, vocab=50257)
    assert get_model(odd).padded_vocab(8) == 50264 and get_model(odd).padded_vocab(1) == 50257
    # a vocabulary TP does not divide runs (it used to be refused); FLOPs stay the real ones
    s = build_step(odd, dict(tp=8, global_batch=2), "H100-SXM", n_hosts=8)
    c = s.kind == COMPUTE
    flops = float((s.extra["flops"][c] * s.extra["mult"][c]).sum())
    assert flops == pytest.approx(2 * get_model(odd).model_flops_per_sequence(), rel=1e-9)
    with pytest.raises(InputError, match="model.vocab_multiple = 0"):
        get_model(dict(odd, vocab_multiple=0))
    with pytest.raises(InputError, match="model.tied_embeddings = 'no'"):
        get_model(dict(odd, tied_embeddings="no"))


# ---------------------------------------------------------------------------- layer split
@pytest.mark.parametrize("layers,pp,vp,want", [
    (126, 16, 1, (7,) + (8,) * 14 + (7,)),  # Llama 3 405B: one layer fewer on first and last
    (126, 16, 8, (0,) + (1,) * 126 + (0,)),  # embedding-only first chunk, loss-only last chunk
    (126, 16, 2, (3,) + (4,) * 30 + (3,)),
    (96, 8, 1, (12,) * 8),  # even: unchanged
    (8, 3, 1, (3, 3, 2)),  # remainder to the middle, then the first, then the last
    (10, 4, 1, (2, 3, 3, 2)),
    (11, 4, 1, (3, 3, 3, 2)),
    (1, 2, 1, (1, 0)),
])
def test_default_split(layers, pp, vp, want):
    m = get_model(dict(layers=layers, hidden=256, heads=4))
    got = layer_split(m, ParallelConfig(pp=pp, vp=vp))
    assert got == want and sum(got) == layers


def test_stage_layers_given_explicitly():
    m = get_model("llama3-405b")
    sl = [6] + [8] * 14 + [8]
    par = ParallelConfig(pp=16, stage_layers=sl)
    assert par.stage_layers == tuple(sl)  # a list becomes a tuple
    assert layer_split(m, par) == tuple(sl)
    # interleaved: position c * pp + s; a stage holds all its chunks
    m8 = get_model(dict(layers=8, hidden=256, heads=4))
    par = ParallelConfig(pp=2, vp=2, stage_layers=[1, 2, 3, 2])
    assert stage_layer_counts(m8, par) == [1 + 3, 2 + 2]


def _stage_compute(s, rank):
    opt = s.labels.index("compute:optimizer")
    sel = (s.kind == COMPUTE) & (s.extra["rank"] == rank) & (s.label != opt)
    return float(s.duration[sel].sum())


def test_uneven_stages_compute_in_proportion_to_their_layers():
    # one flop rate for every op and a one-row vocabulary: a stage's work is its layers
    model = dict(layers=10, hidden=256, heads=4, seq=128, vocab=1)
    for par, want in ((dict(pp=4, global_batch=4), (2, 3, 3, 2)),
                      (dict(pp=4, global_batch=4, stage_layers=[1, 4, 4, 1]), (1, 4, 4, 1))):
        s = build_step(model, par, IDEAL, n_hosts=4)
        s.validate(4)
        assert s.meta["stage_layers"] == list(want)
        work = np.array([_stage_compute(s, r) for r in range(4)])
        assert work / work.sum() == pytest.approx(np.array(want) / 10, rel=1e-3)
        # the slowest stage sets the pace: the step ends later with the 1, 4, 4, 1 split
        st, en = evaluate(s)
        if want == (1, 4, 4, 1):
            assert en.max() > even_end * 1.1
        else:
            even_end = en.max()
    # the optimizer steps the stage's own parameters
    m = get_model(model)
    s = build_step(model, dict(pp=4, global_batch=4, stage_layers=[1, 4, 4, 1]), "H100-SXM",
                   n_hosts=4)
    opt = s.labels.index("compute:optimizer")
    d = {int(r): float(x) for r, x in zip(s.extra["rank"][s.label == opt],
                                           s.duration[s.label == opt])}
    assert d[1] > d[0] and d[1] == pytest.approx(d[2])
    from compute.hardware import get_gpu

    launch = get_gpu("H100-SXM").efficiency.launch_us * 1e-6
    assert (d[1] - launch) / (d[3] - launch) == pytest.approx(
        4 * m.layer_params / (m.layer_params + m.embedding_params), rel=1e-9)


def test_uneven_interleaved_step_matches_the_flop_count():
    model = dict(layers=14, hidden=256, heads=4, seq=128, vocab=512)
    s = build_step(model, dict(pp=2, vp=4, global_batch=4, tp=2), "H100-SXM", n_hosts=4)
    s.validate(4)
    assert s.meta["stage_layers"] == [1, 2, 2, 2, 2, 2, 2, 1]
    c = s.kind == COMPUTE
    flops = float((s.extra["flops"][c] * s.extra["mult"][c]).sum())
    assert flops == pytest.approx(4 * get_model(model).model_flops_per_sequence(), rel=1e-9)


# ---------------------------------------------------------------------------- memory
def test_memory_prices_the_busiest_stage():
    m = get_model("llama3-405b")
    par = ParallelConfig(tp=8, pp=16, dp=128, global_batch=2048, sp=True, dist_opt=True,
                         recompute="full")
    r = memory_per_gpu(m, par, "H100-SXM")
    # 7, 8 x 14, 7: the second stage holds 8 layers and 15 micro-batches in flight; the first
    # 7 layers + the embedding and 16 micro-batches
    assert r.stage == 1 and r.as_dict()["stage"] == 1 and r.fits
    per_layer = m.layer_params / 8
    assert r.weights_bytes == pytest.approx(2 * 8 * per_layer)
    assert r.activations_bytes == pytest.approx(8 * 15 * 2 * 8192 * 16384 / 8)
    assert params_per_stage(m, par)[0] == pytest.approx((7 * m.layer_params + 128000 * 16384) / 8)
    # without recomputation it does not fit
    assert not memory_per_gpu(m, ParallelConfig(tp=8, pp=16, dp=128, global_batch=2048, sp=True,
                                                dist_opt=True), "H100-SXM").fits
    # a heavy middle stage is the one reported
    small = dict(layers=12, hidden=512, heads=8, seq=256, vocab=64)
    heavy = memory_per_gpu(small, dict(pp=4, global_batch=8, stage_layers=[1, 1, 9, 1]),
                           "H100-SXM")
    assert heavy.stage == 2
    sm = get_model(small)
    assert heavy.weights_bytes == pytest.approx(2 * 9 * sm.layer_params)
    # untied single stage: the embedding and the output layer
    one = memory_per_gpu("llama3-8b", dict(tp=8, global_batch=1), "H100-SXM")
    l8 = get_model("llama3-8b")
    assert one.weights_bytes == pytest.approx(2 * (32 * l8.layer_params + 2 * 129024 * 4096) / 8)


# ---------------------------------------------------------------------------- context parallel
def test_context_parallel_all_gathers_keys_and_values_after_the_qkv_gemm():
    model = dict(layers=2, hidden=256, heads=8, kv_heads=2, seq=4096, vocab=512, gated_mlp=True)
    C, T = 4, 2
    s = build_step(model, dict(tp=T, cp=C, global_batch=1, sp=True), "H100-SXM", n_hosts=8,
                   host_group=[i // 2 for i in range(8)], granularity="op")
    s.validate(8)
    cp = (s.kind == TRANSFER) & (s.extra["ckind"] == CKIND["cp"])
    # per layer a forward all-gather and a backward reduce-scatter of the whole sequence's K, V
    # (this rank's kv_heads / TP heads of 32): a ring moves (C - 1) x the buffer per group
    kv = 4096 * 2 * (2 // T) * 32 * 2
    groups = T
    assert float(s.size[cp].sum()) == pytest.approx(2 * 2 * groups * (C - 1) * kv)
    # the gather waits for the QKV GEMM (it gathers its output), not for the layer norm before it
    ag = np.flatnonzero(cp & (s.label == s.labels.index("comm:cp:all_gather")))
    parents = s.dep_idx[s.dep_ptr[ag.min()]:s.dep_ptr[ag.min() + 1]]
    qkv_flops = 2.0 * (4096 // C) * ((256 + 2 * 2 * 32) // T) * 256
    assert np.all(s.extra["flops"][parents] == qkv_flops)


def test_llama3_long_context_layout_builds():
    """TP 8 x CP 16 x PP 16 at 131,072 tokens (Llama 3's long-context stage), one data-parallel
    replica of 20 layers so that the test stays fast."""
    model = {"preset": "llama3-405b", "seq": 131072, "layers": 20}
    par = dict(tp=8, cp=16, pp=16, global_batch=1, sp=True, recompute="full")
    r = memory_per_gpu(model, par, "H100-SXM")
    assert r.fits
    import topo.builders as tb

    topo = tb.two_tier(nodes=256, gpus_per_node=8, scaleup_gbps=3600)
    s = build_step(model, par, "H100-SXM", topo, granularity="coarse")
    assert s.meta["stage_layers"] == [1] + [2] * 4 + [1] * 11
    cp = (s.kind == TRANSFER) & (s.extra["ckind"] == CKIND["cp"])
    assert cp.sum() == 20 * 3 * 8 * 16 * 15  # layers x (fwd, recompute, bwd) x TP x ring


# ---------------------------------------------------------------------------- bad layouts
SCENARIO = {
    "name": "llama-bad", "seed": 1,
    "topology": {"kind": "two_tier", "nodes": 2, "gpus_per_node": 8, "nic_gbps": 400},
    "routing": {"policy": "ecmp"}, "engine": {"kind": "flow"},
    "workload": {"kind": "training", "gpu": "H100-SXM",
                 "model": {"layers": 6, "hidden": 256, "heads": 8, "seq": 128, "vocab": 512},
                 "parallel": {"tp": 2, "pp": 4, "global_batch": 8}},
}


@pytest.mark.parametrize("patch,msg", [
    ({"parallel": {"tp": 4, "pp": 3, "global_batch": 8}},
     "workload.parallel: tp x cp x pp = 4 x 1 x 3 = 12 does not divide the GPU count 16"),
    ({"model": {"layers": 6, "hidden": 256, "heads": 8, "seq": 128, "experts": 4},
      "parallel": {"tp": 2, "pp": 4, "ep": 4, "global_batch": 8}},
     "workload.parallel.ep = 4: does not divide the data-parallel degree 2"),
    ({"model": "llama4-2t"}, "workload.model = 'llama4-2t': unknown preset"),
    ({"model": {"preset": "llama-9"}}, "workload.model.preset = 'llama-9': unknown"),
    ({"parallel": {"tp": 2, "pp": 4, "global_batch": 8, "stage_layers": [2, 2, 2]}},
     "workload.parallel.stage_layers: 3 entries, but pp x vp = 4 x 1 = 4 pipeline positions"),
    ({"parallel": {"tp": 2, "pp": 4, "global_batch": 8, "stage_layers": [2, 0, 2, 2]}},
     "workload.parallel.stage_layers[1] = 0: expected >= 1"),
    ({"parallel": {"tp": 2, "pp": 4, "global_batch": 8, "stage_layers": [2, -1, 3, 2]}},
     "workload.parallel.stage_layers[1] = -1: expected an integer >= 0"),
    ({"parallel": {"tp": 2, "pp": 4, "global_batch": 8, "stage_layers": [2, 2, 2, 2]}},
     "workload.parallel.stage_layers: the entries sum to 8, but model.layers = 6"),
    ({"parallel": {"tp": 2, "pp": 4, "vp": 3, "global_batch": 8}},
     "workload.parallel: pp x vp = 4 x 3 = 12 pipeline positions, but model.layers = 6"),
])
def test_impossible_layouts_exit_2_naming_the_field(tmp_path, capsys, patch, msg):
    sc = json.loads(json.dumps(SCENARIO))
    sc["workload"].update(patch)
    p = tmp_path / "s.json"
    p.write_text(json.dumps(sc))
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_uneven_layout_runs_from_the_cli(tmp_path, capsys):
    sc = json.loads(json.dumps(SCENARIO))  # 6 layers on 4 stages: 1, 2, 2, 1
    p = tmp_path / "s.json"
    p.write_text(json.dumps(sc))
    assert main(["run", str(p), "--out", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["step_time_s"] > 0 and s["memory"]["fits"]

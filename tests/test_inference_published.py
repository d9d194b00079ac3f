"""validation.inference_published: a published row becomes a scenario, its error is model/measured - 1."""
import copy

import pytest

from netcosim.runner import simulate_scenario
from netcosim.scenario import Scenario
from validation import inference_published as ip

EFF = {"memory": 0.85, "gemm_max": 0.6}


def _row(rid):
    return next(r for r in ip.load_rows() if r["id"] == rid)


def test_data_rows_are_complete_and_the_calibration_set_is_named():
    rows = ip.load_rows()
    assert len(rows) >= 10
    assert {r["role"] for r in rows} == {"calibration", "held-out", ip.ANCHOR, ip.CHECK}
    cal = [r["id"] for r in rows if r["role"] == "calibration"]
    assert sorted(cal) == ["v061-70b-2048-128", "v061-7b-128-2048"]
    # the 20 Llama 2 rows are calibration or held-out; the anchor and the checks are other
    # models (their first-token latencies in the same table), never a held-out row's model
    llama = [r for r in rows if r["model"].startswith("llama2")]
    assert len(llama) == 20 and {r["role"] for r in llama} == {"calibration", "held-out"}
    other = [r for r in rows if not r["model"].startswith("llama2")]
    assert {r["role"] for r in other} == {ip.ANCHOR, ip.CHECK}
    assert [r["id"] for r in other if r["role"] == ip.ANCHOR] == ["v061-ttft-gptj-128"]
    for r in rows:
        assert r["source"] in ip.SOURCES and r["model"] in ip.MODELS
        assert r["measured"] > 0 and r["tp"] in (1, 2, 4, 8)
        assert r["metric"] in ("out_tok_s", "out_tok_s_per_gpu", "ttft_ms")


def test_one_row_is_built_as_stated_and_its_error_is_model_over_measured_minus_one():
    row = _row("v061-ttft-7b-2048")      # batch 1, one 2048-token prompt: one iteration
    d = ip.scenario_dict(row, EFF)
    w = d["workload"]
    assert w["parallel"]["tp"] == 1 and w["precision"] == "fp8"
    assert w["gpu"] == {"base": "h100_sxm", "efficiency": EFF}
    assert w["requests"]["concurrency"] == w["requests"]["count"] == w["max_seqs"] == 1
    assert (w["requests"]["input_tokens"], w["requests"]["output_tokens"]) == (2048, 1)
    assert w["model"]["kv_heads"] == 32 and w["model"]["ffn"] == 11008
    assert w["decode_attention"] == "per_query_head"   # both sources predate XQA (v0.8)
    assert d["topology"]["gpus_per_node"] == 8 and d["topology"]["nodes"] == 1
    # the same scenario through the runner, independently of the module's reader
    s = simulate_scenario(Scenario.from_dict(copy.deepcopy(d), default_name="t"))[2]
    value, err = ip.error(row, EFF)
    assert value == pytest.approx(s["ttft_mean_s"] * 1e3, rel=1e-9)
    assert err == pytest.approx(value / 36.0 - 1, rel=1e-12)
    # a higher GEMM efficiency makes this prefill faster: the efficiency override reaches the cost model
    faster, _ = ip.error(row, {**EFF, "gemm_max": 0.9})
    assert faster < value


def test_gemm_anchor_data_parses_and_the_derived_gemm_max_is_a_fraction():
    pts = ip.load_gemm_points()
    assert len(pts) >= 4 and any(p["use"] for p in pts)
    for p in pts:
        assert p["m"] > 0 and p["n"] > 0 and p["k"] > 0
        assert 0 < p["tflops"] < 1979.0          # below the H100 SXM dense FP8 peak
    a = ip.gemm_anchor(pts)
    assert 0 < a["gemm_max"] < 1
    # each point's implied figure is measured / (peak x the library's shape factor)
    from compute.hardware import get_gpu
    from compute.operators import gemm_efficiency

    spec = get_gpu("h100_sxm")
    p = a["points"][0]
    sf = gemm_efficiency(p["m"], p["n"], p["k"], spec) / spec.efficiency.gemm_max
    assert p["implied"] == pytest.approx(p["tflops"] / (1979.0 * sf), rel=1e-9)
    used = sorted(q["implied"] for q in a["points"] if q["use"])
    assert min(used) <= a["gemm_max"] <= max(used)


def test_gemm_anchor_method_holds_out_the_prefill_row_and_fits_memory_only():
    rows = ip.with_method(ip.load_rows(), "gemm-anchor")
    assert [r["id"] for r in rows if r["role"] == "calibration"] == ["v061-7b-128-2048"]
    assert [r["id"] for r in ip.with_method(ip.load_rows(), "rows")
            if r["role"] == "calibration"] == ["v061-7b-128-2048", "v061-70b-2048-128"]
    with pytest.raises(ValueError):
        ip.with_method(ip.load_rows(), "nope")
    cal = [r for r in rows if r["role"] == "calibration"]
    eff = ip.calibrate(cal, log=lambda *a: None, method="gemm-anchor")
    assert eff["gemm_max"] == ip.gemm_anchor()["gemm_max"]
    assert 0.3 < eff["memory"] <= 1.0
    assert abs(ip.error(cal[0], eff)[1]) < 0.01     # memory fitted on the decode-bound row


def test_throughput_check_rows_of_other_models_stay_out_of_the_headline():
    """The v0.6.1 throughput table's GPT-J 6B (multi-head) and Falcon 180B (29 query heads per
    KV head) rows are role check: grouped by model beside the headline, never in it."""
    rows = ip.with_method(ip.load_rows())   # the default method: 19 held-out rows
    thr = [r for r in rows if r["role"] == ip.CHECK and r["metric"] != "ttft_ms"]
    assert sorted({r["model"] for r in thr}) == ["falcon-180b", "gptj-6b"]
    assert len(thr) == 8 and all(r["source"] == "v061" for r in thr)
    # every row at a made-up error: the check rows' large errors do not reach the headline
    res = [{**r, "error": (0.5 if r["role"] == ip.CHECK else 0.01)} for r in rows]
    h = ip.headline(res)
    assert h["held_out"] == 19 and h["within"] == 19
    names = [name for name, _ in ip.groups(res, ip.CHECK)]
    assert any(n.startswith("GPT-J 6B") for n in names)
    assert any(n.startswith("Falcon 180B") for n in names)
    # the held-out groups name the Llama models only (a GPT-J row is TP 1 like the 7B rows)
    held = dict(ip.groups(res))
    assert held["Llama 2 7B, TP 1, throughput"]["held_out"] == 7
    assert held["Llama 2 70B, TP 2-4, throughput"]["held_out"] == 8

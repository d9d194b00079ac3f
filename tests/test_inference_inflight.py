"""validation.inference_inflight: the in-flight-batching rows parse, are built as the source ran
them, and a small row runs to a positive throughput."""
import pytest

from validation import inference_inflight as ii

EFF = {"memory": 0.85, "gemm_max": 0.8}


def test_data_rows_parse_and_are_all_held_out():
    rows = ii.load_rows()
    assert len(rows) == 20
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source"] in ii.SOURCES and r["model"] in ii.MODELS
        assert r["metric"] == "out_tok_s" and r["measured"] > 0
        assert r["tp"] in (1, 2) and r["requests"] >= 1000
        assert "role" not in r        # no calibration role: every row is held out


def test_trtllm_bench_heuristic_limits():
    # Llama 3.1 8B FP8 on one H100, 128/2048: ~488 requests fit the cache -> batch 512, and
    # tokens rounded up to the 2048 floor; 20000/2000: tokens raised to ISL + batch (no chunking)
    assert ii.trtllm_bench_limits("llama3.1-8b", 1, 128, 2048) == (512, 2048)
    assert ii.trtllm_bench_limits("llama3.1-8b", 1, 20000, 2000) == (64, 20064)
    assert ii.trtllm_bench_limits("llama3.1-8b", 1, 128, 128) == (4096, 8192)   # 4096 cap
    bs, tok = ii.trtllm_bench_limits("llama3.3-70b", 2, 128, 2048)
    assert bs == 256 and tok >= bs


def test_one_small_row_runs_in_flight_with_positive_throughput():
    row = next(r for r in ii.load_rows() if r["id"] == "v10-8b-5000-500")
    d = ii.scenario_dict(row, EFF, count=64)
    w = d["workload"]
    assert w["decode_attention"] == "grouped" and w["precision"] == "fp8"
    assert w["requests"]["concurrency"] == w["requests"]["count"] == 64   # all at t = 0
    assert (w["max_seqs"], w["max_batch_tokens"]) == ii.trtllm_bench_limits(
        "llama3.1-8b", 1, 5000, 500)
    s = ii.simulate(row, EFF, count=64)
    assert s["requests"] == 64 and s["output_tokens"] == 64 * 500
    assert s["output_tokens_per_s"] > 0
    assert 1 < s["mean_batch_seqs"] <= w["max_seqs"]     # the scheduler set the batch
    v = ii.model_value(row, EFF, count=64)
    assert v == pytest.approx(s["output_tokens_per_s"], rel=1e-12)

"""Disaggregated serving: prefill and decode pools, KV-cache transfers over the fabric."""
import copy
import json

import numpy as np
import pytest

from cli_helpers import refused, write
from compute.inference import kv_transfer_bytes_per_token
from compute.model import get_model
from netcosim.runner import simulate_scenario
from netcosim.scenario import Scenario

# two two-tier nodes of 8 H100s: hosts 0..15, scale-up switches 16, 17, rail leaves 18..25;
# host 0's NIC link (rail 0) is [0, 18]: on the path of the KV transfers of GPU 0 to GPU 8
NIC0 = [0, 18]
POOLS = {"prefill": {"tp": 8, "dp": 1}, "decode": {"tp": 8, "dp": 1}}


def scenario(disagg=True, **req):
    requests = {"arrival": "poisson", "rate": 20, "count": 200,
                "input_tokens": {"dist": "uniform", "min": 1000, "max": 3000},
                "output_tokens": {"dist": "uniform", "min": 50, "max": 150}}
    requests.update(req)
    w = {"kind": "inference", "model": "llama3-8b", "gpu": "h100_sxm", "requests": requests}
    if disagg:
        w["disaggregated"] = copy.deepcopy(POOLS)
    else:
        w["parallel"] = {"tp": 8, "dp": 2}  # the same 16 GPUs, collocated
    return {"name": "dis", "seed": 5,
            "topology": {"kind": "two_tier", "nodes": 2, "gpus_per_node": 8,
                         "scaleup_gbps": 3600, "nic_gbps": 400},
            "routing": {"policy": "ecmp"}, "workload": w}


def run(d):
    return simulate_scenario(Scenario.from_dict(copy.deepcopy(d), default_name="dis"))[2]


def degraded(d, factor=0.25):
    d = copy.deepcopy(d)
    d["faults"] = [{"link": NIC0, "kind": "degrade", "factor": factor, "at_us": 0}]
    return d


def test_kv_bytes_per_request_follow_the_formula_and_move_at_nic_speed():
    m = get_model("llama3-8b")
    per_tok = m.layers * 2 * m.g * m.head_dim * 2
    assert kv_transfer_bytes_per_token("llama3-8b", "bf16") == per_tok == 131072
    assert kv_transfer_bytes_per_token("llama3-8b", "fp8") == per_tok / 2
    r = run(scenario(input_tokens=1500, count=40))
    assert r["kv_transfer_bytes_mean"] == 1500 * per_tok
    assert r["kv_transfer_bytes_total"] == 40 * 1500 * per_tok
    assert r["kv_transfer_gpu_pairs"] == 8
    # each of the 8 GPU pairs sends its shard over its own 400 Gb/s NIC (one rail, in parallel)
    wire = 1500 * per_tok / 8 / (400e9 / 8)
    assert wire <= r["kv_transfer_p50_s"] < 1.05 * wire + 20e-6


def test_ttft_is_prefill_plus_transfer_plus_the_first_decode_iteration():
    r = run(scenario())
    assert r["ttft_mean_s"] == pytest.approx(
        r["ttft_prefill_mean_s"] + r["kv_transfer_mean_s"] + r["decode_first_token_mean_s"],
        rel=1e-9)
    assert r["decode_first_token_p50_s"] > 0
    assert r["ttft_prefill_p99_s"] < r["ttft_p99_s"]
    assert r["prefill_mean_batch_seqs"] >= 1 and r["decode_mean_batch_seqs"] > 1


def test_a_slower_scale_out_raises_kv_transfer_and_ttft():
    fast = run(scenario())
    d = scenario()
    d["topology"]["nic_gbps"] = 100
    slow = run(d)
    assert slow["kv_transfer_mean_s"] == pytest.approx(4 * fast["kv_transfer_mean_s"], rel=0.05)
    assert slow["ttft_mean_s"] > fast["ttft_mean_s"] + 2 * fast["kv_transfer_mean_s"]
    assert slow["ttft_prefill_mean_s"] == fast["ttft_prefill_mean_s"]  # TP is in the node


def test_a_degraded_link_between_the_pools_hurts_disaggregated_not_collocated():
    base, hurt = run(scenario()), run(degraded(scenario()))
    # the slowest pair of the TP-sharded transfer (GPU 0 -> GPU 8 at 1/4 bandwidth) sets it
    assert hurt["kv_transfer_mean_s"] == pytest.approx(4 * base["kv_transfer_mean_s"], rel=0.05)
    assert hurt["ttft_p99_s"] > base["ttft_p99_s"]
    assert hurt["ttft_mean_s"] > base["ttft_mean_s"]
    cbase, churt = run(scenario(disagg=False)), run(degraded(scenario(disagg=False)))
    for k in ("ttft_mean_s", "ttft_p99_s", "itl_mean_s", "e2e_p99_s"):
        assert churt[k] == cbase[k]  # its TP all-reduces stay inside a node


def test_the_decode_pool_sees_no_prefill_interference():
    dis, col = run(scenario()), run(scenario(disagg=False))
    assert dis["itl_mean_s"] < col["itl_mean_s"]
    assert dis["itl_p99_s"] < 0.5 * col["itl_p99_s"]  # collocated: prefill chunks in batches
    assert dis["output_tokens"] == col["output_tokens"]


def test_summary_is_deterministic_and_counts_every_token(tmp_path):
    from netcosim.cli import main

    d = scenario(count=60)
    outs = []
    for k in range(2):
        p = tmp_path / f"s{k}.json"
        p.write_text(json.dumps(d))
        assert main(["run", str(p), "--out", str(tmp_path / f"o{k}"), "--trace"]) == 0
        s = json.loads((tmp_path / f"o{k}" / "summary.json").read_text())
        for key in ("wall_s", "events_per_s", "loop_s", "wall_total_s", "setup_s", "compile_s"):
            s.pop(key, None)
        outs.append(s)
    assert outs[0] == outs[1]
    s = outs[0]
    assert s["gpus"] == 16 and s["disaggregated"] is True
    t = json.loads((tmp_path / "o0" / "trace.json").read_text())
    batches = [e for e in t["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    assert sum(e["args"]["decode"] for e in batches) == s["output_tokens"] - s["requests"]
    assert s["iterations"] == s["prefill_iterations"] + s["decode_iterations"]
    other = dict(d, seed=6)
    assert run(other)["ttft_mean_s"] != s["ttft_mean_s"]


def test_several_replicas_per_pool_round_robin():
    d = scenario()
    d["topology"]["nodes"] = 4
    d["workload"]["disaggregated"] = {"prefill": {"tp": 8, "dp": 2}, "decode": {"tp": 4, "dp": 4}}
    r = run(d)
    assert r["prefill_gpus"] == 16 and r["decode_gpus"] == 16
    assert r["kv_transfer_gpu_pairs"] == 8  # TP 8 -> TP 4: each decode GPU takes two shards
    assert np.isfinite(r["ttft_p99_s"]) and r["requests"] == 200


def _toml():
    return """
name = "dis"
seed = 5
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 8
[workload]
kind = "inference"
model = "llama3-8b"
gpu = "h100_sxm"
[workload.disaggregated]
prefill = { tp = 8, dp = 1 }
decode = { tp = 8, dp = 1 }
[workload.requests]
arrival = "poisson"
rate = 5
count = 20
input_tokens = 500
output_tokens = 20
"""


@pytest.mark.parametrize("settings,has", [
    (["workload.disaggregated.prefill.dp=2"],
     "workload.disaggregated: prefill 8 x 1 x 2 + decode 8 x 1 x 1 (tp x pp x dp) = 24 GPUs"),
    (["workload.disaggregated.decode.dp=0"], "workload.disaggregated.decode.dp = 0"),
    (["workload.disaggregated.prefill.tp=3"], "workload.disaggregated.prefill.tp = 3"),
    (["workload.disaggregated.prefill.dq=1"], "workload.disaggregated.prefill"),
    (["workload.disaggregated.pool=1"], "workload.disaggregated"),
    (["workload.parallel.tp=8"], "workload.parallel: not used with workload.disaggregated"),
    (["workload.requests.arrival=concurrency", "workload.requests.concurrency=4"],
     "workload.requests.arrival = 'concurrency'"),
    (["workload.gpu.hbm_gb=10", "workload.disaggregated.decode.tp=1"],
     "workload.disaggregated.decode: weights of"),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, settings, has):
    text = _toml()
    if any("hbm_gb" in s for s in settings):
        text = text.replace('gpu = "h100_sxm"\n', "") + '[workload.gpu]\nbase = "h100_sxm"\n'
    p = write(tmp_path, text)
    refused(capsys, "run", p, "--out", tmp_path / "o",
            *[a for s in settings for a in ("--set", s)], has=(has,))


def test_a_missing_pool_is_named(tmp_path, capsys):
    p = write(tmp_path, _toml().replace("decode = { tp = 8, dp = 1 }\n", ""))
    refused(capsys, "run", p, "--out", tmp_path / "o", has=("workload.disaggregated.decode",))


def test_a_fault_later_in_the_run_is_refused_for_the_kv_curves_too():
    from topo.errors import InputError

    d = scenario()
    d["faults"] = [{"link": NIC0, "kind": "degrade", "factor": 0.25, "at_us": 1e6}]
    with pytest.raises(InputError, match=r"faults: at_us = 1000000:"):
        run(d)

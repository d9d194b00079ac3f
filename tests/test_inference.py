"""[workload] kind = "inference": the per-iteration cost model, the serving loop, bad input."""
import copy
import json

import pytest

from cli_helpers import SERVE_HEAD, refused, write
from compute.hardware import get_gpu
from compute.inference import (ServingLayout, batch_compute, cost_model, decode_bytes)
from compute.model import get_model
from netcosim.runner import simulate_scenario
from netcosim.scenario import Scenario

NO_LAUNCH = {"base": "h100_sxm", "efficiency": {"launch_us": 0}}


def scenario(**over):
    """Llama 3 8B, one replica of TP 8 on one two-tier node (plus a second node)."""
    d = {"name": "inf", "seed": 3,
         "topology": {"kind": "two_tier", "nodes": 2, "gpus_per_node": 8,
                      "scaleup_gbps": 3600, "nic_gbps": 400},
         "routing": {"policy": "ecmp"},
         "workload": {"kind": "inference", "model": "llama3-8b", "gpu": "h100_sxm",
                      "parallel": {"tp": 8, "dp": 1},
                      "requests": {"arrival": "poisson", "rate": 5, "count": 60,
                                   "input_tokens": {"dist": "uniform", "min": 200, "max": 800},
                                   "output_tokens": {"dist": "uniform", "min": 20, "max": 120}},
                      "slo": {"ttft_ms": 500, "tpot_ms": 30}}}
    for path, v in over.items():
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = v
    return d


def run(d):
    return simulate_scenario(Scenario.from_dict(copy.deepcopy(d), default_name="inf"))[2]


# ------------------------------------------------------------------ the cost model
@pytest.mark.parametrize("model,tp", [("llama3-8b", 1), ("llama3-70b", 4)])
def test_small_decode_is_memory_bound_weights_plus_kv_over_hbm(model, tp):
    cm = cost_model(model, NO_LAUNCH, ServingLayout(tp=tp), "bf16")
    ctx = [700, 1500, 3000, 4000]
    t = batch_compute(cm, decode=ctx)
    spec = get_gpu(NO_LAUNCH)
    expect = decode_bytes(cm, ctx) / (spec.hbm_Bps * spec.efficiency.memory)
    # the byte count from the model's shapes, independently of the cost model's tables
    m = get_model(model)
    linear = m.layers * (m.attn_gemm_params + m.mlp_params) + m.vocab * m.hidden
    kv = sum(ctx) * m.layers * 2 * (m.g // tp) * m.head_dim * 2
    assert decode_bytes(cm, ctx) == pytest.approx(linear * 2 / tp + kv, rel=2e-3)
    assert t == pytest.approx(expect, rel=0.01)
    assert t >= expect  # activations and norms only add


def test_per_query_head_decode_attention_reads_a_gqa_kv_head_once_per_query_head():
    """A kernel without a GQA path (one thread block per sequence and query head) reads each
    cached KV head hq / hkv times: Llama 3 70B at TP 4 has 16 query and 2 KV heads per GPU."""
    ctx = [3000] * 64
    grp = cost_model("llama3-70b", NO_LAUNCH, ServingLayout(tp=4), "fp8")
    per = cost_model("llama3-70b", NO_LAUNCH, ServingLayout(tp=4), "fp8",
                     decode_attention="per_query_head")
    m = get_model("llama3-70b")
    kv = sum(ctx) * m.layers * 2 * (m.g // 4) * m.head_dim * 1.0   # fp8 KV, read once
    assert decode_bytes(per, ctx) - decode_bytes(grp, ctx) == pytest.approx(7 * kv, rel=1e-9)
    spec = get_gpu(NO_LAUNCH)
    extra = 7 * kv / (spec.hbm_Bps * spec.efficiency.memory)
    assert batch_compute(per, decode=ctx) - batch_compute(grp, decode=ctx) == \
        pytest.approx(extra, rel=0.02)
    # multi-head attention (a KV head per query head) and prefill are unchanged
    mha = {"preset": "llama3-8b", "kv_heads": 32}
    assert batch_compute(cost_model(mha, NO_LAUNCH, ServingLayout(), "fp8",
                                    decode_attention="per_query_head"), decode=ctx) == \
        batch_compute(cost_model(mha, NO_LAUNCH, ServingLayout(), "fp8"), decode=ctx)
    assert batch_compute(per, prefill=[(0, 2048)]) == batch_compute(grp, prefill=[(0, 2048)])
    with pytest.raises(Exception, match="decode_attention"):
        cost_model("llama3-70b", NO_LAUNCH, ServingLayout(tp=4), "fp8", decode_attention="xqa")


def test_fp8_halves_the_weight_reads_of_decode():
    bf = batch_compute(cost_model("llama3-8b", NO_LAUNCH, ServingLayout(), "bf16"), decode=[64])
    f8 = batch_compute(cost_model("llama3-8b", NO_LAUNCH, ServingLayout(), "fp8"), decode=[64])
    assert f8 == pytest.approx(bf / 2, rel=0.02)


def test_long_prefill_is_compute_bound():
    cm = cost_model("llama3-70b", NO_LAUNCH, ServingLayout(tp=8), "bf16")
    spec = get_gpu(NO_LAUNCH)
    s = 8000
    t = batch_compute(cm, prefill=[(0, s)])
    m = get_model("llama3-70b")
    linear_flops = 2 * s * (m.layers * (m.attn_gemm_params + m.mlp_params)) / 8
    at_peak = linear_flops / (spec.peak_flops("bf16") * spec.efficiency.gemm_max)
    memory_bound = decode_bytes(cm, [s]) / (spec.hbm_Bps * spec.efficiency.memory)
    assert t > 10 * memory_bound
    assert at_peak < t < 1.6 * at_peak  # GEMMs near peak plus causal attention over 8k


def test_fp4_only_where_the_gpu_has_it():
    from topo.errors import InputError

    assert batch_compute(cost_model("llama3-8b", "b200", ServingLayout(), "fp4"),
                         prefill=[(0, 4096)]) > 0
    with pytest.raises(InputError, match="workload.precision = 'fp4'"):
        cost_model("llama3-8b", "h100_sxm", ServingLayout(), "fp4")


# ------------------------------------------------------------------ the serving loop
def test_throughput_and_itl_rise_with_concurrency():
    res = []
    for c in (1, 8, 48):
        d = scenario()
        d["workload"]["requests"] = {"arrival": "concurrency", "concurrency": c, "count": 96,
                                     "input_tokens": 512, "output_tokens": 128}
        res.append(run(d))
    tput = [r["output_tokens_per_s"] for r in res]
    itl = [r["itl_mean_s"] for r in res]
    assert tput[0] < tput[1] < tput[2]
    assert itl[0] < itl[1] < itl[2]
    assert res[0]["mean_batch_seqs"] == pytest.approx(1.0)


def test_lower_fabric_bandwidth_raises_tp_comm_share_and_ttft():
    fast = run(scenario())
    slow = run(scenario(**{"topology.scaleup_gbps": 200}))
    assert slow["comm_share"] > fast["comm_share"] + 0.05
    assert slow["ttft_mean_s"] > fast["ttft_mean_s"]
    assert slow["itl_mean_s"] > fast["itl_mean_s"]


def test_a_degraded_link_slows_the_replica_using_it():
    base = run(scenario())
    d = scenario()
    # GPU 0's scale-up link to its node switch (hosts 0..15, switches follow)
    d["faults"] = [{"link": [0, 16], "kind": "degrade", "factor": 0.1, "at_us": 0}]
    hurt = run(d)
    assert hurt["comm_share"] > base["comm_share"]
    assert hurt["tpot_mean_s"] > base["tpot_mean_s"]


def test_requests_wait_when_the_kv_cache_is_full():
    d = scenario(**{"workload.gpu": {"base": "h100_sxm", "hbm_gb": 20},
                    "workload.parallel": {"tp": 1}})
    d["workload"]["requests"] = {"arrival": "concurrency", "concurrency": 64, "count": 64,
                                 "input_tokens": 1000, "output_tokens": 200}
    r = run(d)
    cap = r["kv_capacity_tokens"]
    assert 1200 <= cap < 64 * 1200
    assert r["mean_batch_seqs"] <= cap // 1200 + 1e-9


def test_summary_has_the_figures_and_is_deterministic(tmp_path, capsys):
    from netcosim.cli import main

    p = write(tmp_path, _toml(), "s.toml")
    outs = []
    for k in range(2):
        assert main(["run", str(p), "--out", str(tmp_path / f"o{k}")]) == 0
        s = json.loads((tmp_path / f"o{k}" / "summary.json").read_text())
        for k in ("wall_s", "events_per_s", "loop_s", "wall_total_s", "setup_s", "compile_s"):
            s.pop(k, None)  # engine timings of the placeholder node
        outs.append(s)
    assert outs[0] == outs[1]
    s = outs[0]
    for m in ("ttft", "itl", "e2e", "tpot"):
        for q in ("mean", "p50", "p90", "p99"):
            assert s[f"{m}_{q}_s"] > 0
        assert s[f"{m}_p50_s"] <= s[f"{m}_p90_s"] <= s[f"{m}_p99_s"]
    assert s["output_tokens_per_s_per_gpu"] == pytest.approx(s["output_tokens_per_s"] / 8)
    assert 0 <= s["goodput_rps"] <= s["request_rate_rps"] + 1e-12
    other = run(scenario(seed=4))
    assert other["ttft_mean_s"] != s["ttft_mean_s"]


def _toml(extra=""):
    return SERVE_HEAD + f"""[workload.requests]
arrival = "poisson"
rate = 8
count = 80
input_tokens = {{ dist = "lognormal", mean = 600, sigma = 0.5, min = 8, max = 4000 }}
output_tokens = {{ dist = "uniform", min = 2, max = 100 }}
{extra}
"""


@pytest.mark.parametrize("setting,has", [
    ("workload.requests.output_tokens=0", "workload.requests.output_tokens = 0"),
    ("workload.requests.input_tokens=8100", "workload.requests.input_tokens"),
    ("workload.parallel.tp=3", "workload.parallel.tp = 3"),
    ("workload.parallel.dp=4", "workload.parallel"),  # 16 GPUs on 8 hosts
    ("workload.gpu.hbm_gb=17", "workload.parallel"),   # the weights do not fit
    (("workload.gpu.hbm_gb=19.6", "workload.requests.input_tokens=3000"),
     "workload.requests: the KV cache"),   # KV cache below one request
    ("workload.precision=fp4", "workload.precision = 'fp4'"),
    ("workload.max_seqs=0", "workload.max_seqs = 0"),
    ("workload.decode_attention=xqa", "workload.decode_attention = 'xqa'"),
    ("workload.gpu.efficiency.prefill_host_us=-3",
     "workload.gpu.efficiency.prefill_host_us = -3: expected a finite number >= 0"),
    ("workload.gpu.efficiency.prefill_host_us=fast",
     "workload.gpu.efficiency.prefill_host_us = 'fast': expected a finite number >= 0"),
    ("workload.algorithm.protocol=ll64", "workload.algorithm.protocol = 'll64'"),
    ("workload.slo.ttft_ms=-1", "workload.slo.ttft_ms = -1"),
    ("workload.requests.arrival=bursty", "workload.requests.arrival = 'bursty'"),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, setting, has):
    gpu = '\n[workload.gpu]\nbase = "h100_sxm"\n'
    text = _toml().replace('gpu = "h100_sxm"\n', "") + gpu
    p = write(tmp_path, text.replace("tp = 4, dp = 2", "tp = 1, dp = 1")
              if "hbm_gb" in str(setting) else text)
    sets = [setting] if isinstance(setting, str) else list(setting)
    refused(capsys, "run", p, "--out", tmp_path / "o", *[a for x in sets for a in ("--set", x)],
            has=(has,))


def test_trace_of_the_batches(tmp_path, capsys):
    from netcosim.cli import main

    p = write(tmp_path, _toml())
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--trace"]) == 0
    t = json.loads((tmp_path / "o" / "trace.json").read_text())
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    batches = [e for e in t["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    assert len(batches) == s["iterations"]
    assert {e["pid"] for e in batches} == {0, 1}  # two replicas
    assert sum(e["args"]["decode"] for e in batches) == s["output_tokens"] - s["requests"]


def test_trace_needs_an_inference_workload(tmp_path, capsys):
    p = write(tmp_path, _toml().split("[workload]")[0] +
              '[workload]\nkind = "collective"\nop = "all_reduce"\nbytes = "1MiB"\n')
    refused(capsys, "run", p, "--out", tmp_path / "o", "--trace", has=("--trace",))


def test_a_fault_later_in_the_run_is_refused_not_ignored(tmp_path, capsys):
    """The cost curves are measured from time 0 on collectives that last microseconds: a fault
    striking later would never apply, a silently wrong answer."""
    late = '\n[[faults]]\nlink = [0, 8]\nkind = "degrade"\nfactor = 0.1\nat_us = 1234567.891\n'
    p = write(tmp_path, _toml().replace("[workload]", late.lstrip("\n") + "\n[workload]", 1))
    refused(capsys, "run", p, "--out", tmp_path / "o", has=("faults: at_us = 1234567.891:",))


def test_serving_all_reduce_curve_carries_nccls_protocol_latencies():
    """The TP all-reduce curve of a serving run is the collective `netcosim collective` prices
    (same algorithm, NCCL protocol chosen per size): at decode sizes NCCL's launch and per-step
    latencies dominate, so it is several times the bare transfers' time."""
    import numpy as np

    from compute.inference import ServingLayout as Lay
    from netcosim.commands.collective import sweep
    from netcosim.inference import fabric
    from topo.builders import build
    from topo.routing import Routing

    topo = build("two_tier", {"nodes": 1, "gpus_per_node": 8, "scaleup_gbps": 3600,
                              "nic_gbps": 400})
    hosts = fabric.replica_hosts(topo.n_hosts, Lay(tp=4), "packed", "w")
    lo, hi = 16384, 2 << 20

    def curve(protocol):
        algos = {"all_reduce": "ring", "all_to_all": "direct", "protocol": protocol}
        log_s, log_t, _ = fabric.measure(topo, Routing(topo, "ecmp", seed=1), None, "flow", 1,
                                         hosts, {"all_reduce": (lo, hi)}, algos, "w")
        return np.exp(log_s[0]), np.exp(log_t[0, 0])

    sizes, t_auto = curve("auto")
    _, t_bare = curve(None)
    assert sizes[0] == pytest.approx(lo)
    ref = sweep(topo, "all_reduce", "ring", [lo], engine="flow", ranks=list(range(4)),
                protocol="auto")[0]
    assert ref["protocol"] == "ll"
    assert t_auto[0] == pytest.approx(ref["time_s"], rel=0.02)
    assert t_auto[0] > 3 * t_bare[0] and t_auto[0] > 5e-6

"""Metamorphic and property tests of the inference workload (docs/inference.md).

Each test checks a relation between runs, or between a run's figures and the per-request and
per-iteration arrays they are made from, that must hold whatever the exact numbers are:

* determinism (twice in a process, in another process), sweep rows = single runs;
* summary figures recomputed from the per-request times and the iterations (percentiles,
  means, throughput, goodput), token conservation over the iterations, batch limits;
* equivalent inputs run the same: count vs duration, degenerate distributions vs integers,
  a trace at any time offset / row order / with or without header, all-at-once trace vs
  concurrency, a Poisson stream vs the trace of its own arrivals, seeds on a fabric without
  path choice, replicas independent of each other;
* faults that change no capacity a serving run uses change nothing; monotonicity in link
  rate and degradation where the batches cannot reorder (every request released at once);
* the disaggregated prefill pool equals a collocated run with one output token;
* cost model and KV formulas from the model's dimensions.
"""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cli_helpers import SERVE_HEAD, cli, write
from compute.hardware import get_gpu
from compute.inference import ServingLayout, batch_compute, cost_model
from compute.model import get_model
from netcosim.inference import metrics, requests
from netcosim.inference.loop import (IT_COLS, IT_COMM, IT_DECODE, IT_DUR, IT_KV, IT_PREFILL,
                                     IT_SEQS, IT_START)
from netcosim.runner import simulate_scenario
from netcosim.scenario import Scenario

# figures that measure the machine, not the model
WALL = {"wall_s", "compile_s", "setup_s", "loop_s", "wall_total_s", "events_per_s"}
# one two-tier node of 8 H100s: hosts 0..7, scale-up switch 8, rail leaves 9..16
ONE_NODE = {"kind": "two_tier", "nodes": 1, "gpus_per_node": 8, "scaleup_gbps": 3600}
# two nodes: hosts 0..15, scale-up switches 16, 17, rail leaves 18..25 (host k and 8 + k on
# rail k % 8)
TWO_NODES = {"kind": "two_tier", "nodes": 2, "gpus_per_node": 8, "scaleup_gbps": 3600,
             "nic_gbps": 400}
STREAM = {"arrival": "poisson", "rate": 10, "count": 40,
          "input_tokens": {"dist": "uniform", "min": 100, "max": 1500},
          "output_tokens": {"dist": "uniform", "min": 1, "max": 60}}
QS = (("p50", 50), ("p90", 90), ("p99", 99))


def scenario(requests_=None, topology=ONE_NODE, **over):
    """Llama 3 8B, TP 4 x DP 2 on one node; ``over``: dotted paths to set."""
    d = {"name": "mm", "seed": 3, "topology": dict(topology),
         "workload": {"kind": "inference", "model": "llama3-8b", "gpu": "h100_sxm",
                      "parallel": {"tp": 4, "dp": 2},
                      "requests": copy.deepcopy(requests_ or STREAM),
                      "slo": {"ttft_ms": 18, "tpot_ms": 4.3, "e2e_ms": 250}}}
    for path, v in over.items():
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = v
    return d


def disagg(prefill=None, decode=None, requests_=None, topology=TWO_NODES, **over):
    """The same model on two nodes, a prefill pool and a decode pool."""
    d = scenario(requests_, topology, **over)
    w = d["workload"]
    w.pop("parallel")
    w["disaggregated"] = {"prefill": prefill or {"tp": 4, "dp": 2},
                          "decode": decode or {"tp": 4, "dp": 2}}
    return d


class Run:
    """One run: ``summary`` (without wall-clock figures), ``figs`` (the serving figures),
    ``its`` (iterations per replica), ``req`` (per-request arrays the figures come from:
    arrival, inp, out, first, finish; disaggregated also ttft_prefill, kv_transfer,
    decode_first_token), ``n_gpus``, ``slo``."""

    def __init__(self, d):
        seen, stats = {}, {}
        summarize, stat = metrics.summarize, metrics.stats

        def wrap_summarize(arrival, inp, out, first, finish, iterations, n_gpus, slo):
            seen.update(arrival=arrival.copy(), inp=inp.copy(), out=out.copy(),
                        first=first.copy(), finish=finish.copy(), n_gpus=n_gpus, slo=dict(slo))
            return summarize(arrival, inp, out, first, finish, iterations, n_gpus, slo)

        def wrap_stats(prefix, x, out):
            stats[prefix] = np.array(x, dtype=np.float64)
            return stat(prefix, x, out)

        metrics.summarize, metrics.stats = wrap_summarize, wrap_stats
        try:
            prepared, _, summary = simulate_scenario(
                Scenario.from_dict(copy.deepcopy(d), default_name="mm"))
        finally:
            metrics.summarize, metrics.stats = summarize, stat
        self.summary = {k: v for k, v in summary.items() if k not in WALL}
        self.figs = prepared.schedule.meta["inference"]
        self.its = prepared.schedule.meta["inference_iterations"]
        self.n_gpus, self.slo = seen.pop("n_gpus"), seen.pop("slo")
        self.req = {**seen, **stats}

    def __getitem__(self, k):
        return self.summary[k]


def same_figures(a: Run, b: Run):
    """Every serving figure and every iteration, to the last bit."""
    assert a.figs == b.figs
    assert len(a.its) == len(b.its)
    for x, y in zip(a.its, b.its):
        assert np.array_equal(x, y)


def trace_file(tmp_path, name, rows, header=True):
    lines = ["arrival_s,input_tokens,output_tokens"] if header else []
    lines += [f"{float(a)!r},{int(i)},{int(o)}" for a, i, o in rows]
    return str(write(tmp_path, "\n".join(lines) + "\n", name))


def trace_stream(path):
    return {"arrival": "trace", "trace": path}


def dyadic_rows(n=36, seed=1):
    """Requests at distinct arrival times on a 1/1024 s grid (exact under offsets)."""
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.choice(4096, n, replace=False)) / 1024.0
    return list(zip(arr, rng.integers(50, 1500, n), rng.integers(1, 60, n)))


# ===================================================================== determinism
def test_the_same_scenario_twice_gives_the_same_figures_and_iterations():
    for d in (scenario(), disagg()):
        a, b = Run(d), Run(d)
        assert a.summary == b.summary
        same_figures(a, b)


def test_a_disaggregated_run_in_other_processes_gives_the_same_summary(tmp_path, capsys):
    """In-process CLI run = two subprocesses with other hash seeds and thread counts."""
    text = SERVE_HEAD.replace("nodes = 1", "nodes = 2").replace(
        "parallel = { tp = 4, dp = 2 }", "") + """
[workload.disaggregated]
prefill = { tp = 4, dp = 2 }
decode = { tp = 2, dp = 4 }
[workload.requests]
arrival = "poisson"
rate = 12
count = 30
input_tokens = { dist = "lognormal", mean = 900, sigma = 0.5, min = 8, max = 4000 }
output_tokens = { dist = "uniform", min = 2, max = 40 }
"""
    p = write(tmp_path, text, "dis.toml")
    rc, _, err = cli(capsys, "run", p, "--out", tmp_path / "here")
    assert rc == 0, err
    procs = []
    for seed, threads in (("1", "1"), ("777", "2")):
        env = {**os.environ, "PYTHONHASHSEED": seed, "NUMBA_NUM_THREADS": threads}
        out = tmp_path / f"p{seed}"
        procs.append((out, subprocess.Popen(
            [sys.executable, "-m", "netcosim", "run", str(p), "--out", str(out)], env=env,
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    here = json.loads((tmp_path / "here" / "summary.json").read_text())
    assert here["disaggregated"] is True and here["kv_transfer_mean_s"] > 0
    for out, proc in procs:
        _, se = proc.communicate(timeout=300)
        assert proc.returncode == 0, se[-2000:]
        there = json.loads((out / "summary.json").read_text())
        for k in set(here) | set(there):
            if k not in WALL:
                assert here.get(k) == there.get(k), k


# ===================================================================== summary = arrays
def _expected_figures(r: Run) -> dict:
    """The summary figures recomputed from the per-request arrays and the iterations."""
    q = r.req
    ttft, e2e = q["first"] - q["arrival"], q["finish"] - q["arrival"]
    multi = q["out"] > 1
    tpot = (q["finish"] - q["first"])[multi] / (q["out"][multi] - 1)
    its = np.concatenate(r.its)
    gaps = np.repeat(its[:, IT_DUR], its[:, IT_DECODE].astype(np.int64))  # one per token gap
    exp = {}
    for name, x, method in (("ttft", ttft, "linear"), ("e2e", e2e, "linear"),
                            ("tpot", tpot, "linear"), ("itl", gaps, "inverted_cdf")):
        exp[f"{name}_mean_s"] = x.mean()
        for k, p in QS:
            exp[f"{name}_{k}_s"] = np.percentile(x, p, method=method)
        # a percentile is an order statistic (or between two): it lies in the range
        assert x.min() <= exp[f"{name}_p50_s"] <= exp[f"{name}_p90_s"] <= \
            exp[f"{name}_p99_s"] <= x.max()
    span = q["finish"].max() - q["arrival"].min()
    n = len(q["arrival"])
    ok = (ttft <= r.slo["ttft_ms"] * 1e-3) & (e2e <= r.slo["e2e_ms"] * 1e-3)
    ok[multi] &= tpot <= r.slo["tpot_ms"] * 1e-3
    assert 0 < (e2e <= r.slo["e2e_ms"] * 1e-3).mean() < 1  # each SLO cuts
    assert 0 < (ttft <= r.slo["ttft_ms"] * 1e-3).mean() < 1
    assert 0 < (tpot <= r.slo["tpot_ms"] * 1e-3).mean() < 1
    exp.update(requests=n, input_tokens=int(q["inp"].sum()),
               output_tokens=int(q["out"].sum()), serving_span_s=span,
               request_rate_rps=n / span, output_tokens_per_s=q["out"].sum() / span,
               output_tokens_per_s_per_gpu=q["out"].sum() / span / r.n_gpus,
               slo_attainment=ok.mean(), goodput_rps=ok.sum() / span,
               iterations=len(its),
               comm_share=its[:, IT_COMM].sum() / its[:, IT_DUR].sum(),
               mean_batch_seqs=its[:, IT_SEQS].mean(),
               prefill_tokens_per_iteration=its[:, IT_PREFILL].mean())
    return exp


@pytest.mark.parametrize("kind", ["collocated", "disaggregated"])
def test_summary_figures_are_those_of_the_per_request_times_and_iterations(kind):
    d = scenario() if kind == "collocated" else disagg()
    r = Run(d)
    exp = _expected_figures(r)
    assert 0 < r["slo_attainment"] < 1  # the SLO splits the requests: goodput is a real test
    for k, v in exp.items():
        assert r[k] == pytest.approx(v, rel=1e-12, abs=0), k
    assert r["goodput_rps"] <= r["request_rate_rps"]
    assert r["gpus"] == r.n_gpus == 8 * (1 if kind == "collocated" else 2)
    assert r["makespan_us"] == pytest.approx(r["serving_span_s"] * 1e6, rel=1e-12)
    for name in ("ttft", "e2e", "tpot", "itl"):
        assert r[f"{name}_p50_s"] <= r[f"{name}_p90_s"] <= r[f"{name}_p99_s"]
    if kind == "disaggregated":
        q = r.req
        # TTFT = prefill end + transfer + the decode pool's queue and first iteration, per
        # request (the three stats the summary reports are of these arrays)
        assert np.allclose(q["ttft_prefill"] + q["kv_transfer"] + q["decode_first_token"],
                           q["first"] - q["arrival"], rtol=1e-12, atol=0)
        for prefix in ("ttft_prefill", "kv_transfer", "decode_first_token"):
            x = q[prefix]
            assert (x > 0).all()
            assert r[f"{prefix}_mean_s"] == pytest.approx(x.mean(), rel=1e-12)
            for k, p in QS:
                assert r[f"{prefix}_{k}_s"] == pytest.approx(np.percentile(x, p), rel=1e-12)
        # the pools' figures add up to the run's
        assert r["prefill_iterations"] + r["decode_iterations"] == r["iterations"]
        busy = sum(float(x[:, IT_DUR].sum()) for x in r.its)
        assert r["prefill_busy_s"] + r["decode_busy_s"] == pytest.approx(busy, rel=1e-12)


def test_weighted_itl_percentiles_are_those_of_every_token_gap():
    """metrics: a gap weighted w counts w times; random gaps and weights (zeros too)."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        k = int(rng.integers(1, 15))
        x = rng.choice(rng.random(6), k)  # ties among the gaps
        w = rng.integers(0, 9, k)
        if w.sum() == 0:
            continue
        out = {}
        metrics._stats("itl", x, out, w)
        every = np.repeat(x, w)
        assert out["itl_mean_s"] == pytest.approx(every.mean(), rel=1e-12)
        for name, p in QS:
            assert out[f"itl_{name}_s"] == np.percentile(every, p, method="inverted_cdf")


LAYOUTS = {
    "poisson": {},
    "chunked": {"workload.max_batch_tokens": 256, "workload.max_seqs": 4},
    "kv_bound": {"workload.memory_utilization": 0.0651},  # ~2,500 tokens of cache
    "pp2": {"workload.parallel": {"tp": 2, "pp": 2, "dp": 2}},
    "moe_ep": {"workload.model": {"preset": "mixtral-8x7b", "layers": 4},
               "workload.parallel": {"tp": 4, "ep": 4, "dp": 2}},
    "closed": {"workload.requests.arrival": "concurrency", "workload.requests.concurrency": 5},
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_iterations_conserve_tokens_and_respect_the_batch_limits(name):
    r = Run(scenario(**LAYOUTS[name]))
    q, its = r.req, np.concatenate(r.its)
    # every prompt token is run once, every token gap is one decode step of one iteration
    assert its[:, IT_PREFILL].sum() == q["inp"].sum() == r["input_tokens"]
    assert its[:, IT_DECODE].sum() == q["out"].sum() - len(q["out"])
    assert r["prefill_tokens_per_iteration"] * r["iterations"] == \
        pytest.approx(r["input_tokens"], rel=1e-12)
    # the mean token gap times the gaps is the time between first and last tokens
    assert r["itl_mean_s"] * (r["output_tokens"] - r["requests"]) == \
        pytest.approx(float((q["finish"] - q["first"]).sum()), rel=1e-12)
    w = r.figs
    budget = scenario(**LAYOUTS[name])["workload"].get("max_batch_tokens", 8192)
    seqs = scenario(**LAYOUTS[name])["workload"].get("max_seqs", 256)
    assert (its[:, IT_PREFILL] + its[:, IT_DECODE] <= budget).all()
    assert (its[:, IT_SEQS] <= seqs).all() and (its[:, IT_SEQS] >= 1).all()
    assert (its[:, IT_KV] <= w["kv_capacity_tokens"]).all()
    assert ((its[:, IT_COMM] >= 0) & (its[:, IT_COMM] < its[:, IT_DUR])).all()
    for rep in r.its:  # a replica runs one iteration at a time
        assert (rep[1:, IT_START] >= rep[:-1, IT_START] + rep[:-1, IT_DUR]).all()
    assert (q["first"] > q["arrival"]).all() and (q["finish"] >= q["first"]).all()
    if name == "kv_bound":  # the cache, not max_seqs, bounds the batch here
        assert its[:, IT_KV].max() > 0.8 * w["kv_capacity_tokens"]
        assert w["kv_capacity_tokens"] < 3000


def test_the_decode_pool_runs_every_output_token_once_and_the_prefill_pool_none():
    r = Run(disagg(prefill={"tp": 2, "dp": 4}, decode={"tp": 8, "dp": 1}))
    its_p = np.concatenate(r.its[:4])
    its_d = r.its[4]
    assert len(its_p) == r["prefill_iterations"] and len(its_d) == r["decode_iterations"]
    # every running request of a decode iteration decodes one token; each has out of them
    assert its_d[:, IT_SEQS].sum() == r["output_tokens"]
    assert r["decode_mean_batch_seqs"] * r["decode_iterations"] == \
        pytest.approx(r["output_tokens"], rel=1e-12)
    assert its_d[:, IT_PREFILL].sum() == 0 and its_p[:, IT_DECODE].sum() == 0
    assert its_p[:, IT_PREFILL].sum() == r["input_tokens"]
    assert its_d[:, IT_DECODE].sum() == r["output_tokens"] - r["requests"]


def test_the_decode_pool_takes_a_request_in_the_first_iteration_after_its_kv_arrives():
    """Decode batches hold no prompts: with room in the batch and the cache, a request whose
    KV cache has arrived joins the next iteration of its decode replica, which samples its
    first token, whatever the order in which the requests were sent to prefill (the
    prefill replicas finish them out of order)."""
    from netcosim.inference import loop

    calls = []
    serve_pool = loop.serve_pool

    def spy(groups, arrival, *args, **kw):
        res = serve_pool(groups, arrival, *args, **kw)
        calls.append((groups, arrival.copy(), kw.get("prefilled", False), res))
        return res

    loop.serve_pool = spy
    try:
        r = Run(disagg(prefill={"tp": 2, "dp": 4}, decode={"tp": 4, "dp": 2},
                       **{"workload.requests.rate": 40,
                          "workload.requests.input_tokens.max": 7000}))
    finally:
        loop.serve_pool = serve_pool
    (_, _, pre, _), (groups, ready, dec, (_, first, _, its)) = calls
    assert not pre and dec
    assert np.array_equal(first, r.req["first"])
    overtaken = 0
    for idx, it in zip(groups, its):
        assert (it[:, IT_SEQS] < 256).all()
        starts, ends = it[:, IT_START], it[:, IT_START] + it[:, IT_DUR]
        for i in idx:
            # the first iteration from its arrival on starts then (an idle replica) or when
            # the iteration running at its arrival ends, and samples its first token
            k = np.searchsorted(starts, ready[i], side="left")
            assert starts[k] == max(ready[i], ends[k - 1] if k else ready[i]), i
            assert first[i] == ends[k], i
        # requests whose KV arrives more than an iteration before an earlier request's:
        # the relation is tested where the order of arrival at the decode pool matters
        r_ = ready[np.sort(idx)]
        later_first = np.minimum.accumulate(r_[::-1])[::-1]
        overtaken += int((r_[:-1] - later_first[1:] > it[:, IT_DUR].max()).sum())
    assert overtaken >= 3


# ===================================================================== equivalent inputs
def test_count_and_duration_give_the_same_stream():
    by_count = Run(scenario())
    by_duration = Run(scenario(**{"workload.requests": {
        **{k: v for k, v in STREAM.items() if k != "count"}, "duration_s": 4}}))
    same_figures(by_count, by_duration)


def test_degenerate_distributions_run_as_the_integer():
    conc = {"arrival": "concurrency", "concurrency": 6, "count": 24}
    plain = Run(scenario({**conc, "input_tokens": 700, "output_tokens": 20}))
    for inp, out in ((
            {"dist": "uniform", "min": 700, "max": 700}, {"dist": "normal", "mean": 20, "std": 0}),
            ({"dist": "lognormal", "mean": 700, "sigma": 0}, {"dist": "uniform", "min": 20,
                                                              "max": 20})):
        same_figures(plain, Run(scenario({**conc, "input_tokens": inp, "output_tokens": out})))


def test_a_trace_runs_the_same_at_any_offset_row_order_and_with_or_without_header(tmp_path):
    rows = dyadic_rows()
    base = Run(scenario(trace_stream(trace_file(tmp_path, "a.csv", rows))))
    shifted = [(a + 2.0**20, i, o) for a, i, o in rows]  # exact in float64
    perm = np.random.default_rng(2).permutation(len(rows))
    for name, rr, header in (("b.csv", shifted, True), ("c.csv", [rows[k] for k in perm], False),
                             ("d.csv", [shifted[k] for k in perm[::-1]], True)):
        same_figures(base, Run(scenario(trace_stream(trace_file(tmp_path, name, rr, header)))))


def test_a_trace_of_simultaneous_arrivals_runs_as_concurrency_of_all(tmp_path):
    n = 25  # odd: the replicas get 13 and 12 requests
    trace = Run(scenario(trace_stream(trace_file(tmp_path, "t.csv", [(5.0, 900, 30)] * n))))
    conc = Run(scenario({"arrival": "concurrency", "concurrency": n, "count": n,
                         "input_tokens": 900, "output_tokens": 30}))
    same_figures(trace, conc)


def test_a_poisson_stream_runs_as_the_trace_of_its_own_arrivals(tmp_path):
    """The trace starts its clock at its first arrival, the Poisson stream at 0: the figures
    are differences of times, equal to float rounding (a clock or span measured from the
    wrong origin would be off by the first arrival, ~0.1 s)."""
    arr, inp, out, _ = requests.sample(STREAM, 3, "workload.requests")
    poisson = Run(scenario())
    trace = Run(scenario(trace_stream(trace_file(tmp_path, "p.csv", zip(arr, inp, out)))))
    assert arr[0] > 0.01
    assert set(poisson.figs) == set(trace.figs)
    for k, v in poisson.figs.items():
        if isinstance(v, float):
            assert trace.figs[k] == pytest.approx(v, rel=1e-12), k
        else:
            assert trace.figs[k] == v, k


def test_a_higher_rate_compresses_the_same_poisson_stream():
    a = requests.sample(STREAM, 3, "w")
    b = requests.sample({**STREAM, "rate": 40}, 3, "w")
    assert np.array_equal(b[0], a[0] / 4)  # the same exponential draws, scaled exactly
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])


def test_the_seed_does_not_matter_to_a_trace_on_a_fabric_without_path_choice(tmp_path):
    path = trace_file(tmp_path, "s.csv", dyadic_rows())
    a = Run(scenario(trace_stream(path)))
    b = Run(scenario(trace_stream(path), seed=99))
    same_figures(a, b)


def test_a_replica_serves_its_share_as_it_would_alone(tmp_path):
    """dp = 2 on a trace listing every request twice at the same instant: request 2i goes to
    replica 0, 2i + 1 to replica 1, and each replica's requests have the times of the dp = 1
    run (the replicas' all-reduces share no link on the scale-up switch)."""
    rows = dyadic_rows(24)
    one = Run(scenario(trace_stream(trace_file(tmp_path, "one.csv", rows)),
                       **{"workload.parallel": {"tp": 4, "dp": 1}}))
    two = Run(scenario(trace_stream(trace_file(tmp_path, "two.csv",
                                               [r for r in rows for _ in (0, 1)]))))
    for k in ("first", "finish", "arrival"):
        assert np.array_equal(two.req[k][0::2], one.req[k])
        assert np.array_equal(two.req[k][1::2], one.req[k])
    for rep in two.its:
        assert np.array_equal(rep, one.its[0])
    assert two["output_tokens_per_s_per_gpu"] == pytest.approx(
        one["output_tokens_per_s_per_gpu"], rel=1e-12)
    assert two["ttft_mean_s"] == pytest.approx(one["ttft_mean_s"], rel=1e-12)


def test_one_client_runs_its_requests_back_to_back():
    r = Run(scenario({"arrival": "concurrency", "concurrency": 1, "count": 15,
                      "input_tokens": {"dist": "uniform", "min": 10, "max": 3000},
                      "output_tokens": {"dist": "uniform", "min": 1, "max": 40}},
                     **{"workload.parallel": {"tp": 8, "dp": 1}}))
    q = r.req
    assert q["arrival"][0] == 0 and np.array_equal(q["arrival"][1:], q["finish"][:-1])
    assert r["serving_span_s"] == pytest.approx(float((q["finish"] - q["arrival"]).sum()),
                                                rel=1e-12)
    assert r["mean_batch_seqs"] == 1
    # alone, a prompt (under the token budget) is one iteration, then one per further token
    assert r["iterations"] == r["output_tokens"]


def test_an_idle_replica_serves_a_lone_request_as_a_closed_loop_of_one(tmp_path):
    """Requests 8 s apart each find the replica idle: each takes the time it takes in a
    closed loop of one client (the clock's jump to an arrival adds nothing)."""
    closed = {"arrival": "concurrency", "concurrency": 1, "count": 12,
              "input_tokens": {"dist": "uniform", "min": 10, "max": 3000},
              "output_tokens": {"dist": "uniform", "min": 1, "max": 40}}
    tp8 = {"workload.parallel": {"tp": 8, "dp": 1}}
    loop = Run(scenario(closed, **tp8))
    _, inp, out, _ = requests.sample(closed, 3, "workload.requests")
    rows = [(8.0 * k, i, o) for k, (i, o) in enumerate(zip(inp, out))]
    apart = Run(scenario(trace_stream(trace_file(tmp_path, "apart.csv", rows)), **tp8))
    e2e = apart.req["finish"] - apart.req["arrival"]
    assert (e2e < 8).all()
    assert e2e == pytest.approx(loop.req["finish"] - loop.req["arrival"], rel=1e-12)
    assert apart.req["first"] - apart.req["arrival"] == pytest.approx(
        loop.req["first"] - loop.req["arrival"], rel=1e-12)
    assert apart["iterations"] == loop["iterations"]


def test_without_tensor_parallelism_the_token_budget_only_sizes_the_cache():
    """tp = 1 has no all-reduce curve (whose sampled sizes follow max_batch_tokens); one
    client at a time never fills the budget: only the activation reserve, hence the KV
    capacity, changes."""
    closed = {"arrival": "concurrency", "concurrency": 1, "count": 12,
              "input_tokens": {"dist": "uniform", "min": 10, "max": 3000},
              "output_tokens": {"dist": "uniform", "min": 1, "max": 40}}
    runs = [Run(scenario(closed, **{"workload.parallel": {"tp": 1, "dp": 1},
                                    "workload.max_batch_tokens": b}))
            for b in (4096, 8192, 65536)]
    for a, b in zip(runs, runs[1:]):
        assert a["kv_capacity_tokens"] > b["kv_capacity_tokens"]
        assert {k for k in a.figs if a.figs[k] != b.figs[k]} == {"kv_capacity_tokens"}


def test_a_gpu_and_fabric_twice_as_fast_serve_the_same_stream_twice_as_fast(tmp_path):
    """Every time in the model scales: peaks, HBM and link rates x 2, per-kernel and link
    latencies / 2, arrivals / 2 (NCCL's protocol latencies are fixed constants: protocol =
    "none") gives every latency / 2 and throughput x 2, collocated and disaggregated."""
    rows = dyadic_rows(30)
    h100 = get_gpu("h100_sxm")

    def scaled(k, pools):
        gpu = {"base": "h100_sxm", "peak_tflops_bf16": h100.peak_tflops_bf16 * k,
               "hbm_GBps": h100.hbm_GBps * k,
               "efficiency": {"launch_us": h100.efficiency.launch_us / k,
                              "prefill_host_us": h100.efficiency.prefill_host_us / k}}
        topo = {**TWO_NODES, "scaleup_gbps": 3600 * k, "nic_gbps": 400 * k,
                "scaleup_latency_us": 0.25 / k, "latency_us": 1.0 / k}
        stream = trace_stream(trace_file(tmp_path, f"{pools}{k}.csv",
                                         [(a / k, i, o) for a, i, o in rows]))
        over = {"workload.gpu": gpu, "workload.algorithm": {"protocol": "none"}}
        if pools:
            return Run(disagg(requests_=stream, topology=topo, **over))
        return Run(scenario(stream, topo, **{**over, "workload.parallel": {"tp": 8, "dp": 2}}))

    for pools in (False, True):
        a, b = scaled(1, pools), scaled(2, pools)
        assert a["iterations"] == b["iterations"]
        times = [k for k, v in a.figs.items()
                 if k.endswith("_s") and not k.endswith("per_s") and isinstance(v, float)]
        # 4 latency families x 4 figures and the span; pools: 3 more families, 2 busy times
        assert len(times) == (31 if pools else 17)
        for k in times:
            assert b.figs[k] == pytest.approx(a.figs[k] / 2, rel=1e-12), k
        assert b["output_tokens_per_s"] == pytest.approx(2 * a["output_tokens_per_s"],
                                                         rel=1e-12)
        assert b["comm_share"] == pytest.approx(a["comm_share"], rel=1e-12)


def test_an_slo_changes_only_goodput_and_attainment():
    with_slo = Run(scenario())
    free = Run(scenario(**{"workload.slo": {}}))
    loose = Run(scenario(**{"workload.slo": {"ttft_ms": 1e9, "tpot_ms": 1e9, "e2e_ms": 1e9}}))
    changed = {k for k in with_slo.figs if with_slo.figs[k] != free.figs[k]}
    assert changed == {"slo", "slo_attainment", "goodput_rps"}
    assert free["slo_attainment"] == loose["slo_attainment"] == 1.0
    assert free["goodput_rps"] == loose["goodput_rps"] == free["request_rate_rps"]
    # a tighter SLO never meets more requests
    prev = 1.0
    for ms in (60, 20, 12, 9, 1):
        s = Run(scenario(**{"workload.slo": {"ttft_ms": ms}}))["slo_attainment"]
        assert s <= prev
        prev = s
    assert prev == 0.0


# ===================================================================== faults
@pytest.mark.parametrize("faults", [
    [{"link": [0, 8], "kind": "degrade", "factor": 1.0, "at_us": 0}],   # a TP link, no-op
    [{"link": [0, 8], "kind": "down"}, {"link": [0, 8], "kind": "up"}],  # down and back at 0
    [{"link": [4, 8], "kind": "degrade", "factor": 0.1},
     {"link": [4, 8], "kind": "degrade", "factor": 1.0}],
    [{"link": [0, 9], "kind": "down", "at_us": "0us"}],                # a NIC: TP is in the node
    [{"link": [7, 16], "kind": "degrade", "factor": 0.2}],
])
def test_a_fault_that_leaves_the_links_served_on_as_they_were_changes_nothing(faults):
    base = Run(scenario())
    same_figures(base, Run(scenario(faults=faults)))


def test_a_kv_transfer_sees_only_the_direction_it_uses():
    """The KV cache flows prefill -> decode: degrading host 0's NIC link toward host 0 (which
    only receives nothing) changes nothing; toward the rail slows the transfers alone."""
    pools = {"prefill": {"tp": 8, "dp": 1}, "decode": {"tp": 8, "dp": 1}}
    base = Run(disagg(**pools))
    back = Run(disagg(**pools, faults=[{"link": [18, 0], "kind": "degrade", "factor": 0.25,
                                        "direction": "forward"}]))
    same_figures(base, back)
    fwd = Run(disagg(**pools, faults=[{"link": [0, 18], "kind": "degrade", "factor": 0.25,
                                       "direction": "forward"}]))
    assert np.array_equal(fwd.req["ttft_prefill"], base.req["ttft_prefill"])
    assert (fwd.req["kv_transfer"] > 3 * base.req["kv_transfer"]).all()
    # the decode pool gets its requests later, but runs the same batches at its own speed
    assert fwd["decode_busy_s"] == pytest.approx(base["decode_busy_s"], rel=0.02)


def test_a_degraded_link_changes_the_requests_that_use_it_and_no_other():
    """Collocated: request i is served by replica i mod 2; degrading a TP link of replica 1
    leaves every request of replica 0 as it was, to the bit. Disaggregated (2 prefill, 3
    decode replicas: every pair in use): degrading a NIC link of decode replica 1 slows
    exactly the KV transfers to it, whatever prefill replica they come from."""
    base = Run(scenario())
    deg = Run(scenario(faults=[{"link": [5, 8], "kind": "degrade", "factor": 0.2}]))
    for k in ("first", "finish"):
        assert np.array_equal(deg.req[k][0::2], base.req[k][0::2])
        assert (deg.req[k][1::2] != base.req[k][1::2]).all()
    assert np.array_equal(deg.its[0], base.its[0])

    pools = {"prefill": {"tp": 4, "dp": 2}, "decode": {"tp": 2, "dp": 3}}
    base = Run(disagg(**pools))
    # decode replica 1 is hosts 10, 11; host 10's NIC link is [10, 20] (rail 2)
    deg = Run(disagg(**pools, faults=[{"link": [10, 20], "kind": "degrade", "factor": 0.25}]))
    n = len(base.req["kv_transfer"])
    to_1 = np.arange(n) % 3 == 1
    assert set(np.arange(n)[to_1] % 2) == {0, 1}  # from both prefill replicas
    slower = deg.req["kv_transfer"] / base.req["kv_transfer"]
    assert np.array_equal(slower == 1, ~to_1)
    assert (slower[to_1] > 3).all()
    assert np.array_equal(deg.req["ttft_prefill"], base.req["ttft_prefill"])


def test_swapping_the_pools_between_symmetric_nodes_changes_nothing():
    pools = {"prefill": {"tp": 8, "dp": 1}, "decode": {"tp": 8, "dp": 1}}
    a = Run(disagg(**pools))
    b = Run(disagg(**pools, **{"workload.placement": list(range(8, 16)) + list(range(8))}))
    same_figures(a, b)


# ===================================================================== monotonicity
ALL_AT_ONCE = {"arrival": "concurrency", "concurrency": 48, "count": 48,
               "input_tokens": {"dist": "uniform", "min": 50, "max": 2500},
               "output_tokens": {"dist": "uniform", "min": 1, "max": 80}}


def test_a_faster_scale_up_never_delays_a_batch_released_at_once():
    """Every request arrives at 0, so the batches are the same whatever the link rate: every
    iteration, hence every request's first and last token, can only come sooner."""
    runs = [Run(scenario(ALL_AT_ONCE, **{"topology.scaleup_gbps": g, "workload.max_seqs": 12}))
            for g in (400, 900, 3600, 14400)]
    for slow, fast in zip(runs, runs[1:]):
        assert len(slow.its[0]) == len(fast.its[0])
        for a, b in zip(slow.its, fast.its):
            assert (b[:, IT_COMM] <= a[:, IT_COMM]).all()
            assert np.array_equal(b[:, IT_SEQS], a[:, IT_SEQS])
        assert (fast.req["first"] <= slow.req["first"]).all()
        assert (fast.req["finish"] <= slow.req["finish"]).all()
        assert fast["itl_mean_s"] < slow["itl_mean_s"]
        for k in ("ttft", "e2e"):
            for s in ("mean", "p50", "p90", "p99"):
                assert fast[f"{k}_{s}_s"] <= slow[f"{k}_{s}_s"]


def test_a_more_degraded_tp_link_never_speeds_a_batch_released_at_once():
    runs = [Run(scenario(ALL_AT_ONCE, **{"workload.max_seqs": 12},
                         faults=[{"link": [1, 8], "kind": "degrade", "factor": f}]))
            for f in (1.0, 0.5, 0.2, 0.05)]
    for better, worse in zip(runs, runs[1:]):
        # replica 0 (hosts 0-3) has the link; replica 1 is untouched
        assert np.array_equal(worse.its[1], better.its[1])
        assert (worse.its[0][:, IT_COMM] > better.its[0][:, IT_COMM]).all()
        assert (worse.req["finish"] >= better.req["finish"]).all()
        assert (worse.req["first"] >= better.req["first"]).all()


def test_kv_transfers_never_slow_down_on_a_faster_scale_out():
    runs = [Run(disagg(**{"topology.nic_gbps": g})) for g in (100, 200, 400, 1600)]
    for slow, fast in zip(runs, runs[1:]):
        assert (fast.req["kv_transfer"] < slow.req["kv_transfer"]).all()
        # the pools' tensor parallelism stays in their node
        assert np.array_equal(fast.req["ttft_prefill"], slow.req["ttft_prefill"])
        c_s = slow.figs["comm_curves"]["kv_transfer"]
        c_f = fast.figs["comm_curves"]["kv_transfer"]
        assert c_s["bytes_per_gpu_pair"] == c_f["bytes_per_gpu_pair"]
        assert all(f < s for f, s in zip(c_f["seconds_prefill0_to_decode0"],
                                         c_s["seconds_prefill0_to_decode0"]))


@pytest.mark.parametrize("topo,par", [
    (TWO_NODES, {"tp": 16, "dp": 1}),
    (TWO_NODES, {"tp": 4, "pp": 2, "dp": 2}),
    ({"kind": "fullflat", "n_gpus": 16, "planes": 4, "switch_radix": 16, "gpu_gbps": 1600},
     {"tp": 8, "dp": 2}),
])
def test_measured_communication_curves_grow_with_size_and_sublinearly(topo, par):
    r = Run(scenario({"arrival": "poisson", "rate": 10, "count": 3, "input_tokens": 100,
                      "output_tokens": 3}, topology=dict(topo),
                     **{"workload.parallel": par, "workload.max_batch_tokens": 32768}))
    curves = r.figs["comm_curves"]
    assert set(curves) == ({"all_reduce", "send"} if par.get("pp") else {"all_reduce"})
    for c in curves.values():
        b, s = np.array(c["bytes"], float), np.array(c["seconds_replica0"])
        assert len(b) == 8 and (np.diff(b) > 0).all()
        assert (np.diff(s) > 0).all()            # more bytes take longer
        assert (np.diff(s / b) < 0).all()        # and less time per byte


def test_a_lower_rate_of_the_same_stream_does_not_raise_mean_latency():
    prev = None
    for rate in (40, 10, 2.5):  # the same draws, spread 4x wider each time
        r = Run(scenario(**{"workload.requests.rate": rate}))
        if prev is not None:
            for k in ("ttft_mean_s", "e2e_mean_s", "itl_mean_s"):
                assert r[k] <= prev[k], (rate, k)
            assert r["mean_batch_seqs"] <= prev["mean_batch_seqs"]
        prev = r


def test_more_replicas_for_the_same_stream_do_not_raise_mean_latency():
    heavy = {**STREAM, "rate": 40}
    one = Run(scenario(heavy, **{"workload.parallel": {"tp": 4, "dp": 1}}))
    two = Run(scenario(heavy, **{"workload.parallel": {"tp": 4, "dp": 2}}))
    for k in ("ttft_mean_s", "e2e_mean_s", "itl_mean_s"):
        assert two[k] < one[k], k
    assert two["output_tokens"] == one["output_tokens"]
    assert two["output_tokens_per_s_per_gpu"] == pytest.approx(
        one["output_tokens_per_s_per_gpu"] * one["serving_span_s"] / two["serving_span_s"] / 2,
        rel=1e-12)


# ===================================================================== prefill pool
@pytest.mark.parametrize("prefill", [{"tp": 4, "dp": 2}, {"tp": 8, "dp": 1},
                                     {"tp": 2, "pp": 2, "dp": 2}])
def test_the_prefill_pool_runs_as_a_collocated_run_with_one_output_token(prefill):
    """docs/inference.md: the prefill pool is the batching loop with one output token per
    request, on the first hosts; its time to first token is a collocated run's."""
    dis = Run(disagg(prefill=prefill, decode={"tp": 8, "dp": 1}))
    col = Run(scenario({**STREAM, "output_tokens": 1}, topology=dict(TWO_NODES),
                       **{"workload.parallel": prefill}))
    assert np.array_equal(dis.req["ttft_prefill"], col.req["first"] - col.req["arrival"])
    n_p = prefill["dp"]
    for a, b in zip(dis.its[:n_p], col.its):
        assert np.array_equal(a, b)
    assert dis["prefill_iterations"] == col["iterations"]
    assert dis["prefill_comm_share"] == col["comm_share"]
    assert dis["prefill_kv_capacity_tokens"] == col["kv_capacity_tokens"]


# ===================================================================== formulas
@pytest.mark.parametrize("tp,pp,precision", [(1, 1, "bf16"), (2, 1, "bf16"), (8, 1, "fp8"),
                                             (2, 2, "bf16"), (16, 1, "bf16")])
def test_kv_bytes_and_cache_capacity_follow_the_models_dimensions(tp, pp, precision):
    """docs/inference.md: KV per token per GPU = layers/pp x 2 x max(1, kv_heads/tp) x
    head_dim x bytes; capacity = (HBM x utilization - weights - reserve) / that; the KV
    transfer carries layers x 2 x kv_heads x head_dim x bytes per prompt token."""
    m = get_model("llama3-8b")
    kvb = {"bf16": 2, "fp8": 1}[precision]
    d = disagg(prefill={"tp": tp, "pp": pp, "dp": 1}, decode={"tp": tp, "pp": pp, "dp": 1},
               topology={**TWO_NODES, "nodes": 4}, **{"workload.precision": precision,
                                                      "workload.max_seqs": 64})
    r = Run(d)
    per_gpu = m.layers / pp * 2 * max(1, m.g // tp) * m.head_dim * kvb
    assert r["kv_bytes_per_token_per_gpu"] == per_gpu
    vocab = m.padded_vocab(tp)
    weights = (m.layers * (m.attn_gemm_params + m.mlp_params) + 2 * vocab * m.hidden) \
        / tp / pp * {"bf16": 2, "fp8": 1}[precision]
    assert r["weights_GB_per_gpu"] == pytest.approx(weights / 1e9, rel=1e-12)
    reserve = 8192 * 16 * m.hidden * 2 + 64 * vocab / tp * 4
    cap = (get_gpu("h100_sxm").hbm_bytes * 0.9 - weights - reserve) // per_gpu
    assert r["kv_capacity_tokens"] == r["prefill_kv_capacity_tokens"] == cap
    per_token = m.layers * 2 * m.g * m.head_dim * kvb
    assert r["kv_transfer_bytes_per_token"] == per_token
    assert r["kv_transfer_bytes_total"] == r["input_tokens"] * per_token
    assert r["kv_transfer_bytes_mean"] == r["kv_transfer_bytes_total"] / r["requests"]
    assert r["kv_transfer_gpu_pairs"] == tp * pp


def test_an_iterations_cost_grows_with_its_batch_and_ignores_pp_and_fp16():
    """Adding a request, a longer context or a longer chunk never makes an iteration cheaper;
    pipeline stages run one after another (pp changes no compute); fp16 is priced as bf16."""
    rng = np.random.default_rng(11)
    for model, tp in (("llama3-8b", 1), ("llama3-8b", 8), ("mixtral-8x7b", 2),
                      ("deepseek-v3", 8)):
        cm = cost_model(model, "h100_sxm", ServingLayout(tp=tp), "bf16")
        cm16 = cost_model(model, "h100_sxm", ServingLayout(tp=tp), "fp16")
        # (DeepSeek-V3's 61 layers take no pp = 2)
        cm_pp = None if model == "deepseek-v3" else \
            cost_model(model, "h100_sxm", ServingLayout(tp=tp, pp=2), "bf16")
        for _ in range(150):
            pf = [(int(rng.integers(0, 4000)), int(rng.integers(1, 3000)))
                  for _ in range(rng.integers(0, 4))]
            dec = [int(x) for x in rng.integers(1, 8000, rng.integers(0, 48))]
            if not pf and not dec:
                continue
            t = batch_compute(cm, pf, dec)
            assert batch_compute(cm16, pf, dec) == t
            if cm_pp is not None:
                assert batch_compute(cm_pp, pf, dec) == t
            assert batch_compute(cm, pf, dec + [int(rng.integers(1, 8000))]) >= t
            assert batch_compute(cm, pf + [(int(rng.integers(0, 4000)),
                                            int(rng.integers(1, 3000)))], dec) >= t
            if dec:
                assert batch_compute(cm, pf, [dec[0] + 500] + dec[1:]) >= t
            if pf:
                a, c = pf[0]
                assert batch_compute(cm, [(a + 500, c)] + pf[1:], dec) >= t
                assert batch_compute(cm, [(a, c + 500)] + pf[1:], dec) >= t


# ===================================================================== CLI outputs
SWEEP = SERVE_HEAD.replace("nodes = 1", "nodes = 2") + """[workload.requests]
arrival = "poisson"
rate = 10
count = 20
input_tokens = { dist = "uniform", min = 100, max = 900 }
output_tokens = { dist = "uniform", min = 1, max = 30 }
[workload.slo]
ttft_ms = 15
[[sweep]]
"workload.requests.rate" = [5, 40]
"topology.scaleup_gbps" = [900, 3600]
[[sweep]]
set = { workload = { kind = "inference", model = "llama3-8b", gpu = "h100_sxm", \
requests = { arrival = "poisson", rate = 10, count = 20, input_tokens = 600, \
output_tokens = 10 }, disaggregated = { prefill = { tp = 4, dp = 2 }, \
decode = { tp = 8, dp = 1 } } } }
"topology.nic_gbps" = [100, 400]
"""


def test_every_sweep_row_is_its_scenario_run_alone(tmp_path, capsys):
    import csv

    from netcosim.sweep.table import _cell

    rc, _, err = cli(capsys, "sweep", write(tmp_path, SWEEP, "sw.toml"), "--out",
                     tmp_path / "sw", "-j", "1")
    assert rc == 0, err
    with open(tmp_path / "sw" / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    ttfts = set()
    for r in rows:
        p = write(tmp_path, r["scenario"], f"cell{r['point']}.json")
        rc, _, err = cli(capsys, "run", p, "--out", tmp_path / f"o{r['point']}")
        assert rc == 0, err
        summary = json.loads((tmp_path / f"o{r['point']}" / "summary.json").read_text())
        compared = 0
        for k, v in summary.items():
            if k in WALL or k == "scenario" or isinstance(v, (dict, list)):
                continue
            assert r[k] == _cell(v), (r["point"], k, r[k], v)
            compared += 1
        assert compared >= 40
        ttfts.add(r["ttft_mean_s"])
    assert len(ttfts) == 6  # every point is its own run


def test_the_batch_trace_agrees_with_the_summary(tmp_path, capsys):
    text = SERVE_HEAD + """[workload.requests]
arrival = "poisson"
rate = 10
count = 30
input_tokens = { dist = "uniform", min = 100, max = 900 }
output_tokens = { dist = "uniform", min = 1, max = 30 }
"""
    rc, _, err = cli(capsys, "run", write(tmp_path, text), "--out", tmp_path / "o", "--trace")
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    tr = json.loads((tmp_path / "o" / "trace.json").read_text())
    its = [e for e in tr["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    assert len(its) == s["iterations"] == tr["otherData"]["iterations"]
    assert "truncated_to_iterations" not in tr["otherData"]
    assert sum(e["args"]["prefill_tokens"] for e in its) == s["input_tokens"]
    assert sum(e["args"]["decode"] for e in its) == s["output_tokens"] - s["requests"]
    assert sum(e["args"]["seqs"] for e in its) / len(its) == pytest.approx(
        s["mean_batch_seqs"], rel=1e-12)
    busy = sum(e["dur"] for e in its)
    assert sum(e["args"]["comm_us"] for e in its) / busy == pytest.approx(s["comm_share"],
                                                                           rel=1e-9)
    assert {e["pid"] for e in its} == {0, 1}
    end = max(e["ts"] + e["dur"] for e in its)
    first = min(e["ts"] for e in its)  # the first arrival: the first iteration starts there
    assert (end - first) == pytest.approx(s["serving_span_s"] * 1e6, rel=1e-9)


def test_a_truncated_batch_trace_says_how_many_iterations_it_holds():
    """Replicas with unequal iteration counts (a prefill and a decode pool): the trace's
    truncated_to_iterations is the count of iteration slices it wrote (it said 1000 for 510)."""
    from netcosim.inference.trace import batch_trace

    def its(n):
        a = np.zeros((n, IT_COLS))
        a[:, IT_START], a[:, IT_DUR] = np.arange(n) * 1e-3, 1e-3
        return a

    for sizes, cap in (((10, 1000), 1000), ((3, 400, 7), 300), ((50, 50), 60)):
        tr = batch_trace([its(n) for n in sizes], max_events=cap)
        held = sum(1 for e in tr["traceEvents"] if e["ph"] == "X" and e["tid"] == 0)
        assert held <= cap
        assert tr["otherData"]["iterations"] == sum(sizes)
        assert tr["otherData"]["truncated_to_iterations"] == held

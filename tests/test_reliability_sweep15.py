"""Reliability sweep 15: bad input to serving (inference) scenarios, two_tier rates and the
collective command, found by fuzzing the examples. Each must end with exit 2 and one line
naming the field, or run to finite figures.
"""
import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import FLOWS_BASE, cli, refused, write
from fuzz_helpers import HUGE_OK, LITERALS, mutated, run_clean

# one replica of TP 8 on one node, a handful of requests: runs in well under a second
SERVE = """
[topology]
kind = "two_tier"
nodes = 1
gpus_per_node = 8
scaleup_gbps = 3600
nic_gbps = 400
[workload]
kind = "inference"
model = "llama3-70b"
gpu = "h100_sxm"
parallel = {{ tp = 8, pp = 1, ep = 1, dp = 1 }}
{extra}
[workload.requests]
arrival = "poisson"
rate = 4
count = 4
input_tokens = {inp}
output_tokens = 16
"""


def serve(tmp_path, inp="128", extra=""):
    return write(tmp_path, SERVE.format(inp=inp, extra=extra))


TOPO = "two_tier:nodes=2,gpus_per_node=4"


# ======================================================================= link rates
@pytest.mark.parametrize("kv,field", [
    ("nic_gbps=1e-320", "--topo.nic_gbps = 1e-320"),     # inf times in the table
    ("scaleup_gbps=5e-324", "--topo.scaleup_gbps = 5e-324"),
    ("nic_gbps=1e300", "--topo.nic_gbps = 1e+300"),       # inf bytes/s (named no field)
    ("nic_port_gbps=1e-20", "--topo.nic_port_gbps = 1e-20"),
    ("reduce_gbps=scaleup:1e-320", "--topo.reduce_gbps.scaleup = 1e-320"),
    ("reduce_gbps=5e-324", "--topo.reduce_gbps = 5e-324"),  # "time = 0.0" before
])
@pytest.mark.parametrize("engine", ["analytical", "flow"])
def test_link_rates_beyond_the_range_are_refused_naming_the_field(capsys, kv, field, engine):
    refused(capsys, "collective", "--topo", f"{TOPO},{kv}", "--op", "all_reduce",
            "--sizes", "1KiB,1GiB", "--engine", engine, has=(field, "rate in Gb/s"))


def test_link_rates_in_scenarios_are_refused_naming_the_field(tmp_path, capsys):
    f = write(tmp_path, "[topology]\nkind = \"fat_tree\"\nk = 4\nlink_gbps = 1e-300\n"
                        "[workload]\nkind = \"flows\"\nflows = [{src = 0, dst = 5, bytes = 1}]\n")
    refused(capsys, "run", f, "--out", tmp_path / "o", has=("topology.link_gbps = 1e-300",))
    assert not (tmp_path / "o").exists()


def test_slow_but_valid_rates_still_run(capsys):
    rc, out, err = cli(capsys, "collective", "--topo",
                       f"{TOPO},nic_gbps=1e-15,reduce_gbps=scaleup:1e-15,nic_port_gbps=1e-15",
                       "--op", "all_reduce", "--sizes", "1KiB")
    assert rc == 0 and "inf" not in out and "nan" not in out, (out, err)


# ======================================================================= the request stream
@pytest.mark.parametrize("inp,has", [
    ("9223372036854775807", "workload.requests.input_tokens = 9223372036854775807"),  # hang
    ("18446744073709551616", "workload.requests.input_tokens = 18446744073709551616"),
    ('{dist = "lognormal", mean = 1e300, sigma = 0.5}', "workload.requests.input_tokens: "),
    ('{dist = "normal", mean = 1e300, std = 1}', "workload.requests.input_tokens: "),
    ('{dist = "uniform", min = 9223372036854775807, max = 9223372036854775807}',
     "workload.requests.input_tokens.min = 9223372036854775807"),
    ('{dist = []}', "workload.requests.input_tokens.dist = []"),        # unhashable
    ('{dist = {}}', "workload.requests.input_tokens.dist = {}"),
])
def test_request_lengths_beyond_int64_or_of_the_wrong_type_are_refused(tmp_path, capsys, inp,
                                                                        has):
    refused(capsys, "run", serve(tmp_path, inp), "--out", tmp_path / "o", has=(has,))
    assert not (tmp_path / "o").exists()


def test_rate_times_duration_overflowing_is_refused(tmp_path, capsys):
    f = write(tmp_path, SERVE.format(inp="128", extra="").replace(
        "count = 4", "duration_s = 1e300").replace("rate = 4", "rate = 1e300"))
    refused(capsys, "run", f, "--out", tmp_path / "o",
            has=("workload.requests: rate x duration_s = inf",))


@pytest.mark.parametrize("inp", ['{dist = "lognormal", mean = 128, sigma = -0.0}',
                                 '{dist = "normal", mean = 128, std = -0.0}'])
def test_a_spread_of_minus_zero_is_zero(tmp_path, capsys, inp):
    rc, out, err = cli(capsys, "run", serve(tmp_path, inp), "--out", tmp_path / "o")
    assert rc == 0, err
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["input_tokens"] == 4 * 128


def test_a_trace_with_a_huge_length_is_refused(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("0.0,9223372036854775807,4\n")
    f = write(tmp_path, SERVE.format(inp="1", extra="").replace(
        'arrival = "poisson"', 'arrival = "trace"\ntrace = "t.csv"').replace(
        "rate = 4\ncount = 4\ninput_tokens = 1\noutput_tokens = 16\n", ""))
    refused(capsys, "run", f, "--out", tmp_path / "o",
            has=("workload.requests.trace: line 1: input_tokens = 9223372036854775807",))


# ======================================================================= algorithms and GPU
@pytest.mark.parametrize("algo,has", [
    ("{all_reduce = []}", "workload.algorithm.all_reduce = []"),
    ("{all_to_all = {}}", "workload.algorithm.all_to_all = {}"),
])
def test_an_algorithm_that_is_not_a_name_is_refused(tmp_path, capsys, algo, has):
    refused(capsys, "run", serve(tmp_path, extra=f"algorithm = {algo}"), "--out",
            tmp_path / "o", has=(has,))


def test_a_scenario_collective_algorithm_that_is_not_a_name_is_refused(tmp_path, capsys):
    f = write(tmp_path, "[topology]\nkind = \"fat_tree\"\nk = 4\n[workload]\n"
                        "kind = \"collective\"\nop = \"all_reduce\"\nalgorithm = [\"ring\"]\n"
                        "bytes = \"1MiB\"\n")
    refused(capsys, "run", f, "--out", tmp_path / "o", has=("algorithm = ['ring']",))


def test_a_kv_capacity_beyond_int64_runs(tmp_path, capsys):
    # hbm_gb = 1e15: 2.2e19 tokens of KV cache overflowed the serving loop's int64 (exit 1)
    f = write(tmp_path, SERVE.format(inp="128", extra="").replace(
        '"h100_sxm"', '{ base = "h100_sxm", hbm_gb = 1e15 }'))
    rc, out, err = cli(capsys, "run", f, "--out", tmp_path / "o")
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["kv_capacity_tokens"] == 2**62 and s["requests"] == 4


@pytest.mark.parametrize("gpu,has", [
    ('{base = "h100_sxm", hbm_gb = 1e300}', "workload.gpu.hbm_gb = 1e+300"),  # NaN KV capacity
    ('{base = "h100_sxm", peak_tflops_bf16 = 1e300}', "workload.gpu.peak_tflops_bf16 = 1e+300"),
    ('{base = "h100_sxm", peak_tflops_bf16 = 1e-300, hbm_GBps = 1e-300}',
     "the serving run would last"),  # inf makespan_us (null in summary.json)
])
def test_gpu_specs_that_overflow_the_run_are_refused(tmp_path, capsys, gpu, has):
    f = write(tmp_path, SERVE.format(inp="128", extra="").replace('"h100_sxm"', gpu))
    refused(capsys, "run", f, "--out", tmp_path / "o", has=(has,))
    assert not (tmp_path / "o").exists()


# ======================================================================= netcosim collective
@pytest.mark.parametrize("extra", [[], ["--chunks", "2"], ["--algo", "pairwise"]])
def test_all_to_all_of_the_largest_size_runs(capsys, extra):
    # the estimate split float(2**63 - 1) = 2**63 bytes into int64 (OverflowError)
    rc, out, err = cli(capsys, "collective", "--topo", "two_tier:nodes=1,gpus_per_node=8",
                       "--op", "all_to_all", "--sizes", str(2**63 - 1), *extra)
    assert rc == 0, err
    assert str(2**63 - 1) in out and "inf" not in out and "nan" not in out, out


@pytest.mark.parametrize("ranks,has", [
    ("[]", "workload.ranks = []: a collective needs at least 2 ranks"),  # numpy warnings too
    ("[3]", "workload.ranks = [3]: a collective needs"),                  # "array([3])"
])
@pytest.mark.parametrize("algo", ["auto", "ring"])
def test_too_few_ranks_is_one_line_naming_the_field(tmp_path, capsys, ranks, has, algo):
    f = write(tmp_path, "[topology]\nkind = \"two_tier\"\nnodes = 2\ngpus_per_node = 4\n"
                        "[workload]\nkind = \"collective\"\nop = \"all_reduce\"\n"
                        f"algorithm = \"{algo}\"\nbytes = \"1MiB\"\nranks = {ranks}\n")
    refused(capsys, "run", f, "--out", tmp_path / "o", has=(has,))


# ======================================================================= netcosim plan
PLAN = """
[topology]
kind = "two_tier"
nodes = 1
gpus_per_node = 8
[workload]
kind = "training"
granularity = "coarse"
gpu = { base = "h100_sxm" }
model = { preset = "mixtral-8x7b", seq = 4096 }
parallel = { global_batch = 16 }
plan = { top = 1 }
"""


@pytest.mark.parametrize("kv,has", [
    ("workload.granularity=nan", "workload.granularity = nan"),  # exit 1 after the search
    ("workload.tp_comm=1", "workload.tp_comm = 1"),
    ("workload.symmetry=\"x\"", "workload.symmetry = 'x'"),
    ("workload.parallel.global_batch=9223372036854775807",  # numpy "array is too big"
     "workload.parallel.global_batch = 9223372036854775807: at most 1,000,000"),
])
def test_plan_refuses_options_every_layout_shares_before_its_search(tmp_path, capsys, kv, has):
    refused(capsys, "plan", write(tmp_path, PLAN), "-j", "1", "--out", tmp_path / "o",
            "--set", kv, has=(has,))
    assert not (tmp_path / "o").exists()


def test_run_refuses_a_global_batch_beyond_the_limit(tmp_path, capsys):
    f = write(tmp_path, PLAN.replace("plan = { top = 1 }\n", "").replace(
        "global_batch = 16", "tp = 1, ep = 8, global_batch = 1099511627776"))
    refused(capsys, "run", f, "--out", tmp_path / "o",
            has=("workload.parallel.global_batch = 1099511627776",))  # 256 GiB MemoryError


# ======================================================================= times above 2**64



def test_a_fault_time_above_2_64_is_a_time(tmp_path, capsys):
    # np.isfinite(2**64) raised TypeError (exit 1); a JSON file can hold any integer
    data = tomllib.loads(FLOWS_BASE)
    data["faults"] = [{"link": [16, 24], "kind": "down", "at_us": 2**64}]
    f = tmp_path / "s.json"
    f.write_text(json.dumps(data))
    rc, out, err = cli(capsys, "run", f, "--out", tmp_path / "o")
    assert rc == 0, err  # after the run's end: it never strikes
    data["faults"][0]["at_us"] = -(2**64)
    f.write_text(json.dumps(data))
    refused(capsys, "run", f, "--out", tmp_path / "o2", has=("faults[0].at_us = -",))


def test_a_gpu_fault_time_above_2_64_is_a_time(tmp_path, capsys):
    f = write(tmp_path, PLAN.replace("plan = { top = 1 }\n", "").replace(
        "global_batch = 16", "tp = 1, ep = 8, global_batch = 16") +
        "check_memory = false\ngpu_faults = [{gpus = [0], kind = \"slow\", factor = 0.5, at_us = 1}]\n")
    data = tomllib.loads(f.read_text())
    data["workload"]["gpu_faults"][0]["at_us"] = 2**64
    g = tmp_path / "s.json"
    g.write_text(json.dumps(data))
    rc, out, err = cli(capsys, "run", g, "--out", tmp_path / "o")
    assert rc == 0, err


# ======================================================================= property
# Mutations of the small serving scenario (the request stream, layout, SLOs, algorithms, GPU
# what-ifs) and of its two_tier fabric, run in a forked child: exit 0 or 2, one line, nothing
# written on a refusal, finite non-negative figures otherwise. 15 examples by default
# (NETCOSIM_FUZZ_EXAMPLES=500 x 3/8 for a longer search).
SERVE_LITERALS = LITERALS + ['"lognormal"', '"normal"', '"uniform"', '"concurrency"', '"trace"',
                             '"fp8"', '"fp4"', '"per_query_head"', '"none"', '"ll"', "1e-300",
                             "5e-324", "-0.0", '{dist = "lognormal", mean = 1e300, sigma = 1}',
                             '{dist = "normal", mean = 64, std = -0.0}', "[[]]", "8", "64"]
SERVE_HUGE_OK = HUGE_OK | {"input_tokens", "output_tokens", "rate", "count", "duration_s",
                           "mean", "max", "min", "std", "sigma", "ttft_ms", "tpot_ms",
                           "context", "hbm_gb", "nic_port_gbps", "nic_gbps", "scaleup_gbps"}


@pytest.mark.skipif(sys.platform != "linux", reason="forks the test process")
@settings(max_examples=int(os.environ.get("NETCOSIM_FUZZ_EXAMPLES", "40")) * 3 // 8,
          deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_serving_scenarios_exit_0_or_2_with_one_line(tmp_path, data):
    import tempfile

    base = tomllib.loads(SERVE.format(
        inp='{ dist = "lognormal", mean = 128, sigma = 0.6, min = 16, max = 512 }',
        extra='algorithm = { all_reduce = "ring", protocol = "auto" }\n'
              'gpu = { base = "h100_sxm", hbm_gb = 80 }\n'
              '[workload.slo]\nttft_ms = 1000\ntpot_ms = 50').replace(
        'gpu = "h100_sxm"\n', "").replace("nic_gbps = 400", "nic_gbps = 400\nnic_port_gbps = 400"))
    scen, sets = mutated(base, data.draw, literals=SERVE_LITERALS, huge_ok=SERVE_HUGE_OK,
                         add_keys=["colour", "max", "e2e_ms", "context", "reduce_gbps"])
    here = Path(tempfile.mkdtemp(dir=tmp_path))
    f = here / "s.json"
    f.write_text(json.dumps(scen))
    out = here / "out"
    argv = ["run", f, "--out", out, *sets]
    rc, err, shown = run_clean(argv, here, out)
    if rc == 0:
        text = (out / "summary.json").read_text()
        assert "NaN" not in text and "Infinity" not in text, shown
        s = json.loads(text)
        assert s["makespan_us"] is not None and s["makespan_us"] >= 0, shown
        assert all(v >= 0 for k, v in s.items() if k.endswith("_s") and v is not None), shown

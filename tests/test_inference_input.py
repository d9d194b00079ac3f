"""Serving-scenario input that used to run to a silently wrong answer or a poor message:
arrival times far from zero (float64 lost the simulated durations), a malformed first trace
row taken for a header, request lengths beyond the model's real context, and a huge Poisson
request count printed with 300 digits."""
import json

import pytest

from cli_helpers import SERVE_HEAD, cli, refused, write
from compute.model import get_model

# one replica of Llama 3 8B on TP 8, one two-tier node: the smallest serving run
BASE = """
name = "inf-input"
seed = 1
[topology]
kind = "two_tier"
nodes = 1
gpus_per_node = 8
scaleup_gbps = 3600
[workload]
kind = "inference"
model = "{model}"
gpu = "h100_sxm"
parallel = {{ tp = 8, dp = 1 }}
{extra}
[workload.requests]
{requests}
"""
TRACE = 'arrival = "trace"\ntrace = "tr.csv"'
POISSON = ('arrival = "poisson"\nrate = 20\nduration_s = 1\ninput_tokens = 256\n'
           'output_tokens = 16')
FIGURES = ("ttft_mean_s", "e2e_mean_s", "tpot_mean_s", "itl_mean_s", "serving_span_s",
           "makespan_us", "iterations", "requests", "output_tokens_per_s")


def scenario(tmp_path, requests=TRACE, model="llama3-8b", extra="", trace=None):
    if trace is not None:
        (tmp_path / "tr.csv").write_text(trace)
    return write(tmp_path, BASE.format(model=model, extra=extra, requests=requests))


def run(tmp_path, capsys, p, *sets, out="o"):
    argv = ["run", p, "--out", tmp_path / out]
    for s in sets:
        argv += ["--set", s]
    rc, o, err = cli(capsys, *argv)
    assert rc == 0, (o, err)
    return json.loads((tmp_path / out / "summary.json").read_text())


# ------------------------------------------------------------------ 1. far arrival times
@pytest.mark.parametrize("t0,gap", [("1e16", 2.0), ("1e12", 0.25), ("1700000000", 0.25)])
def test_a_trace_far_from_time_zero_gives_the_figures_of_the_same_trace_at_zero(
        tmp_path, capsys, t0, gap):
    """1e16 s: float64 steps by 2 s there, so every 10 ms iteration vanished (makespan, TTFT
    and e2e all 0 after 64 iterations); 1e12 s: TTFT off by 0.5 %. Unix time stamps (1.7e9)
    are a real trace's origin. The figures must be those of the trace moved to t = 0."""
    rows = [(0.0, 512, 64), (gap, 300, 20), (2 * gap, 1000, 8)]
    at_zero = "".join(f"{a!r},{i},{o}\n" for a, i, o in rows)
    far = "".join(f"{float(t0) + a!r},{i},{o}\n" for a, i, o in rows)
    # the gaps survive the text: t0 + gap is exact at these magnitudes
    assert [float(x.split(",")[0]) - float(t0) for x in far.split()] == [0, gap, 2 * gap]
    ref = run(tmp_path, capsys, scenario(tmp_path, trace=at_zero),
              out="zero")
    got = run(tmp_path, capsys, scenario(tmp_path, trace=far), out="far")
    assert ref["ttft_mean_s"] > 1e-3 and ref["makespan_us"] > 1e3
    for k in FIGURES:
        assert got[k] == ref[k], k


def test_arrivals_spread_beyond_the_clock_horizon_are_refused_naming_the_line(tmp_path,
                                                                              capsys):
    """Relative to the first arrival, a second one 1e16 s later still collapsed its own
    durations: refused, naming the file, line and value."""
    p = scenario(tmp_path, trace="0,512,64\n1e16,512,64\n")
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("workload.requests.trace: line 2: arrival_s = 1e16", "'tr.csv'",
                 "4e+06 s"))


def test_a_request_just_inside_the_horizon_is_priced_as_one_at_the_start(tmp_path, capsys):
    """Two identical requests on an idle replica, the second 3.9e6 s after the first: its
    latencies are the first's to float64's step there (0.5 ns), not rounded away."""
    s = run(tmp_path, capsys, scenario(tmp_path, trace="0,512,64\n3.9e6,512,64\n"))
    assert s["requests"] == 2 and s["ttft_mean_s"] > 1e-3
    for m in ("ttft", "e2e"):
        assert s[f"{m}_p99_s"] == pytest.approx(s[f"{m}_p50_s"], rel=1e-6, abs=0)


@pytest.mark.parametrize("sets,has", [
    # two requests ~1e300 s apart
    (("workload.requests.rate=1e-300", "workload.requests.count=2"),
     ("workload.requests.rate = 1e-300",)),
    # 1 / rate overflows to an infinite mean gap
    (("workload.requests.rate=1e-320", "workload.requests.count=1"),
     ("workload.requests.rate = 1e-320",)),
    # the stream itself lasts past the horizon
    (("workload.requests.rate=0.001", "workload.requests.duration_s=1e9"),
     ("workload.requests.rate = 0.001", "workload.requests.duration_s")),
])
def test_a_poisson_stream_arriving_absurdly_late_is_refused_naming_the_rate(
        tmp_path, capsys, sets, has):
    p = scenario(tmp_path, POISSON)
    refused(capsys, "run", p, "--out", tmp_path / "o", *[a for s in sets for a in ("--set", s)],
            has=has + ("4e+06 s",))


# ------------------------------------------------------------------ 2. the trace's first row
def test_a_malformed_first_row_of_a_headerless_trace_is_an_error_not_a_header(tmp_path,
                                                                               capsys):
    p = scenario(tmp_path, trace="0,5l2,64\n1,512,64\n")
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("workload.requests.trace: line 1: input_tokens = '5l2'", "'tr.csv'"))


@pytest.mark.parametrize("first,has", [
    ("arrival_s,512,64", "arrival_s = 'arrival_s'"),     # one number: data, not a header
    ("0,512", "expected 3 cells"),
    ("0,512,64,7", "expected 3 cells"),
])
def test_a_first_row_with_any_number_is_data(tmp_path, capsys, first, has):
    p = scenario(tmp_path, trace=f"{first}\n1,512,64\n")
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("workload.requests.trace: line 1: ", has, "'tr.csv'"))


@pytest.mark.parametrize("trace,n", [
    ("arrival_s,input_tokens,output_tokens\n0,512,64\n1,512,64\n", 2),
    ("# a comment\n\narrival_s, input_tokens, output_tokens\n0,512,64\n", 1),
    ("0,512,64\n1,512,64\n", 2),                       # no header: both rows are requests
])
def test_a_header_row_is_skipped_and_a_data_row_never_is(tmp_path, capsys, trace, n):
    assert run(tmp_path, capsys, scenario(tmp_path, trace=trace))["requests"] == n


# ------------------------------------------------------------------ 3. the model's real context
def test_presets_carry_their_released_maximum_context():
    expect = {"llama3-8b": 131072, "llama3-70b": 131072, "llama3-405b": 131072,
              "mixtral-8x7b": 32768, "mixtral-8x22b": 65536, "deepseek-v3": 131072,
              "gpt3-175b": 2048, "mt-nlg-530b": 2048}
    for name, ctx in expect.items():
        m = get_model(name)
        assert m.max_context == ctx, name
        assert m.seq <= m.max_context, name       # the default context stays the seq
    assert get_model("22b").max_context == 0       # no released model: no known bound


@pytest.mark.parametrize("model,ctx,cap", [
    ("llama3-70b", 131073, "131,072"),
    ("llama3-8b", 10**9, "131,072"),
    ("mixtral-8x7b", 32769, "32,768"),
    ('{ preset = "llama3-8b", max_context = 8192 }', 8193, "8,192"),  # a table sets its own
])
def test_a_context_above_the_models_maximum_is_refused(tmp_path, capsys, model, ctx, cap):
    text = BASE.format(model="M", extra=f"context = {ctx}", requests=POISSON)
    p = write(tmp_path, text.replace('model = "M"', f"model = {model}" if model[0] == "{"
                                     else f'model = "{model}"'))
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=(f"workload.context = {ctx}", f"maximum context of {cap} tokens"))


def test_the_default_context_is_capped_at_the_models_maximum(tmp_path, capsys):
    """A table whose seq exceeds its maximum (a training length) must not lift the bound."""
    model = '{ preset = "llama3-8b", seq = 16384, max_context = 8192 }'
    text = BASE.format(model="M", extra="", requests=POISSON.replace(
        "input_tokens = 256", "input_tokens = 9000"))
    p = write(tmp_path, text.replace('model = "M"', f"model = {model}"))
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("a request of 9000 + 16 tokens", "context of 8192 tokens"))


def test_a_table_without_a_maximum_has_no_bound_and_a_bad_maximum_is_refused(tmp_path,
                                                                              capsys):
    custom = dict(layers=2, hidden=256, heads=4, seq=128)
    assert get_model(custom).max_context == 0
    assert get_model({"preset": "llama3-8b", "max_context": 0}).max_context == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(Exception, match="model.max_context"):
            get_model({"preset": "llama3-8b", "max_context": bad})


# ------------------------------------------------------------------ 4. huge request counts
@pytest.mark.parametrize("sets,has", [
    (("workload.requests.rate=1e300",),
     ("rate x duration_s = 1e+300 requests", "workload.requests.rate = 1e+300",
      "workload.requests.duration_s = 1")),
    (("workload.requests.rate=1e300", "workload.requests.duration_s=1e300"),
     ("rate x duration_s = inf requests", "workload.requests.rate = 1e+300",
      "workload.requests.duration_s = 1e+300")),
    (("workload.requests.count=100000000",), ("workload.requests.count = 100000000",)),
])
def test_too_many_requests_names_the_fields_compactly(tmp_path, capsys, sets, has):
    p = scenario(tmp_path, POISSON)
    line = refused(capsys, "run", p, "--out", tmp_path / "o",
                   *[a for s in sets for a in ("--set", s)], has=has + ("10,000,000",))
    assert len(line) < 300 and "0000000000000" not in line, line


def test_a_poisson_stream_of_fewer_than_one_request_is_refused(tmp_path, capsys):
    """rate x duration_s = 0.2 requests was served as one request (the draw took at least one)."""
    p = write(tmp_path, SERVE_HEAD + "[workload.requests]\narrival = \"poisson\"\nrate = 0.1\n"
              "duration_s = 2\ninput_tokens = 64\noutput_tokens = 4\n")
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("workload.requests: rate x duration_s = 0.2 requests", "fewer than one"))

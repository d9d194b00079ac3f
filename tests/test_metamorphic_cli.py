"""Metamorphic and consistency properties at the CLI and scenario level (the second round after
tests/test_metamorphic.py, which works on the engines and libraries directly).

* Determinism across processes: the same scenarios run in two processes with different
  PYTHONHASHSEED (one with NUMBA_NUM_THREADS=1) write the same numbers and the same CSV text
  (flow and packet engines, collectives, a training step, a serving run, a Chakra trace, a
  fault study); only wall-clock figures may differ.
* Sweeps (docs/sweeps.md): every row equals `netcosim run` of its scenario cell, cell for
  cell; 2 workers give the table of 1 worker; `--resume` from a journal cut short and
  reordered gives the same table.
* Scenario forms (docs/scenarios.md): the same quantity written in each allowed form (sizes,
  times with units), inline arrays vs sections, key and section order, JSON vs TOML, defaults
  written out, and `--set` give identical results.
* Output consistency: summary.json, flows.csv, links.csv and link_series.csv of one run agree
  (makespan, counts, bytes, per-link bytes along the paths and under the rate series).
* `netcosim collective --engine flow` equals the same collective run as a scenario,
  `algorithm = "auto"` included; `netcosim plot` draws the result columns a sweep writes.

Bugs found here: a time with a unit was scaled in binary ("13ns" was 0.013000000000000001 us,
so a fault at "13ns" struck after a transfer starting at 0.013 us: 64.013 us instead of
14.013); a scenario's `algorithm = "auto"` dropped the chooser's options (the two_tier
all-to-all ran its node-leader variant, 2-4x slower than the rail-aligned one picked) and
chose over all hosts for a subset of ranks.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from cli_helpers import SERVE_HEAD, STUDY, TRAIN_BASE, cli, write
from netcosim.sweep.table import _cell

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# figures that measure the machine, not the model: allowed to differ between runs
WALL = {"wall_s", "compile_s", "setup_s", "loop_s", "wall_total_s", "events_per_s", "run_s",
        "cpu_s", "check_s", "reroute_wall_s"}


def normalized(out: Path) -> dict:
    """Every result file under ``out`` without its wall-clock figures: JSON as dicts, CSV
    (and rows.jsonl) as their cells' text, so floats compare to the last bit."""
    res = {}
    for f in sorted(out.rglob("*")):
        name = str(f.relative_to(out))
        if f.suffix == ".json":
            d = json.loads(f.read_text())
            res[name] = {k: v for k, v in d.items() if k not in WALL}
        elif f.suffix == ".jsonl":
            rows = []
            for line in f.read_text().splitlines():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:  # a line a crash cut short (resume test)
                    pass
            # the journal is in order of arrival (docs/sweeps.md): compare it as a set of rows
            res[name] = sorted(json.dumps({k: v for k, v in r.items() if k not in WALL},
                                          sort_keys=True) for r in rows)
        elif f.suffix == ".csv":
            rows = list(csv.reader(io.StringIO(f.read_text())))
            keep = [i for i, h in enumerate(rows[0]) if h not in WALL] if rows else []
            res[name] = [[r[i] for i in keep] for r in rows]
    return res


def run_out(capsys, tmp_path, text, name, *argv, suffix=".toml") -> Path:
    p = write(tmp_path, text, name + suffix)
    out = tmp_path / ("o_" + name)
    rc, _, err = cli(capsys, "run", p, "--out", out, *argv)
    assert rc == 0, err
    return out


def results(out: Path) -> dict:
    """summary.json (no wall clock, no name) and the CSV text of one run."""
    n = normalized(out)
    n["summary.json"].pop("scenario")
    return n


# =========================================================================== determinism
FLOWS_FAULTS = """
name = "det-flows"
seed = 9
[topology]
kind = "fat_tree"
k = 4
[engine]
reroute_delay_us = 2
[[faults]]
link = [24, 32]
kind = "down"
at_us = 5
[[faults]]
link = [16, 24]
kind = "degrade"
factor = 0.5
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 300000}, {src = 1, dst = 9, bytes = 200000},
         {src = 2, dst = 13, bytes = "256KiB", start_us = 3},
         {src = 3, dst = 12, bytes = 100000, deps = [0, 1]},
         {src = 4, dst = 1, bytes = 150000}, {src = 6, dst = 0, bytes = 150000}]
"""
PACKET_SPRAY = """
name = "det-packet"
seed = 4
[topology]
kind = "fat_tree"
k = 4
[routing]
policy = "spray"
[engine]
kind = "packet"
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 200000}, {src = 1, dst = 5, bytes = 200000},
         {src = 2, dst = 13, bytes = 100000, deps = [0]}]
"""
COLLECTIVES = """
name = "det-a2a"
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 4
[workload]
kind = "collective"
op = "all_to_all"
bytes = "256KiB"
"""
DBT = COLLECTIVES.replace('"det-a2a"', '"det-dbt"').replace(
    'op = "all_to_all"', 'op = "all_reduce"\nalgorithm = "double_binary_tree"')
TRAIN_PP = TRAIN_BASE.replace("pp = 1", "pp = 2").replace("global_batch = 4", "global_batch = 8")
SERVE = SERVE_HEAD + """[workload.requests]
arrival = "poisson"
rate = 8
count = 30
input_tokens = { dist = "lognormal", mean = 600, sigma = 0.5, min = 8, max = 4000 }
output_tokens = { dist = "uniform", min = 2, max = 60 }
"""
STUDY_2 = 'name = "det-study"\n' + STUDY.replace("trials = 1", "trials = 2")

DRIVER = """
import sys
from netcosim.cli import main
out = sys.argv[1]
for line in sys.argv[2:]:
    argv = line.split("|")
    argv.insert(2, "--out")
    argv.insert(3, out + "/" + argv[1].rsplit("/", 1)[-1].split(".")[0])
    assert main(argv) == 0, line
"""


def test_same_numbers_in_processes_with_other_hash_seeds(tmp_path):
    files = {"flows": FLOWS_FAULTS, "packet": PACKET_SPRAY, "a2a": COLLECTIVES, "dbt": DBT,
             "train": TRAIN_PP, "serve": SERVE, "study": STUDY_2}
    runs = [f"run|{write(tmp_path, t, k + '.toml')}" for k, t in files.items() if k != "study"]
    runs += [f"faults|{tmp_path / 'study.toml'}|-j|1",
             f"run|{EXAMPLES / 'chakra_ring.toml'}"]
    write(tmp_path, STUDY_2, "study.toml")
    driver = write(tmp_path, DRIVER, "driver.py")
    procs = []
    for seed, extra in (("1", {}), ("4242", {"NUMBA_NUM_THREADS": "1",
                                                "OMP_NUM_THREADS": "1"})):
        env = {**os.environ, "PYTHONHASHSEED": seed, **extra}
        out = tmp_path / f"p{seed}"
        procs.append((out, subprocess.Popen([sys.executable, str(driver), str(out), *runs],
                                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)))
    outs = []
    for out, p in procs:
        so, se = p.communicate(timeout=300)
        assert p.returncode == 0, se[-2000:]
        outs.append(normalized(out))
    a, b = outs
    assert len(a) >= 8 * 3 and set(a) == set(b)
    for name in a:
        assert a[name] == b[name], name


# =========================================================================== sweeps
SWEEP = """
name = "sw"
seed = 2
[topology]
kind = "fat_tree"
k = 4
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "1MiB"
[[sweep]]
"topology.link_gbps" = [100, 400]
"workload.bytes" = ["64KiB", "2MB"]
"workload.algorithm" = ["ring", "double_binary_tree"]
[[sweep]]
set = { "routing.policy" = "spray", "engine.kind" = "packet" }
"workload.bytes" = "16KiB..64KiB x4"
[[sweep]]
set = { workload = { kind = "flows", flows = [{src = 0, dst = 5, bytes = 100000},
                                              {src = 1, dst = 5, bytes = 200000}] } }
"seed" = [1, 7]
"""
PLOT_YS = ["step_time_s", "mfu", "tokens_per_s", "exposed_tp_s", "memory_total_GB"]
TRAIN_SWEEP = TRAIN_BASE + f"""
[sweep]
"topology.nic_gbps" = [100, 400]
"workload.parallel.tp" = [1, 2]
[[plot]]
name = "tr"
x = "topology.nic_gbps"
y = {json.dumps(PLOT_YS)}
hue = "workload.parallel.tp"
"""


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    from netcosim.cli import main

    d = tmp_path_factory.mktemp("sweeps")
    (d / "sw.toml").write_text(SWEEP)
    (d / "tr.toml").write_text(TRAIN_SWEEP)
    for src, out, jobs in (("sw.toml", "j1", "1"), ("sw.toml", "j2", "2"),
                           ("tr.toml", "tr", "1")):
        assert main(["sweep", str(d / src), "--out", str(d / out), "-j", jobs]) == 0
    return d


def test_sweep_with_two_workers_writes_the_table_of_one(sweeps):
    a, b = normalized(sweeps / "j1"), normalized(sweeps / "j2")
    assert a["sweep.csv"] == b["sweep.csv"]
    assert a["rows.jsonl"] == b["rows.jsonl"]
    table = a["sweep.csv"]
    assert len(table) == 1 + 8 + 2 + 2
    assert [r[0] for r in table[1:]] == [str(i) for i in range(12)]  # point order


@pytest.mark.parametrize("which", ["j2", "tr"])
def test_every_sweep_row_is_its_scenario_run_alone(sweeps, tmp_path, capsys, which):
    """docs/sweeps.md: "save its scenario cell as a .json file and netcosim run it (the result
    is bit for bit the same)"; every summary figure, not only the makespan."""
    with open(sweeps / which / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(r["status"] == "ok" for r in rows)
    for r in rows:
        out = run_out(capsys, tmp_path, r["scenario"], f"{which}{r['point']}", suffix=".json")
        summary = json.loads((out / "summary.json").read_text())
        compared = 0
        for k, v in summary.items():
            if k in WALL or k == "scenario" or isinstance(v, (dict, list)):
                continue
            assert k in r, k
            assert r[k] == _cell(v), (r["point"], k, r[k], v)
            compared += 1
        assert compared >= 20
        if isinstance(summary.get("memory"), dict):  # training: memory_<field> columns
            assert r["memory_total_GB"] == _cell(summary["memory"]["total_GB"])


def test_resume_from_a_cut_and_reordered_journal_gives_the_same_table(sweeps, tmp_path,
                                                                      capsys):
    out = tmp_path / "rs"
    shutil.copytree(sweeps / "j1", out)
    lines = (out / "rows.jsonl").read_text().splitlines()
    kept = lines[1:9:2][::-1]  # four finished points, in another order
    (out / "rows.jsonl").write_text("\n".join(kept) + "\n" + lines[9][:40])  # a torn line
    rc, text, err = cli(capsys, "sweep", sweeps / "sw.toml", "--out", out, "-j", "1",
                        "--resume")
    assert rc == 0, err
    assert "(4 resumed)" in text + err
    assert normalized(out)["sweep.csv"] == normalized(sweeps / "j1")["sweep.csv"]


def test_plot_draws_the_result_columns_a_sweep_writes(sweeps, tmp_path, capsys):
    """The training sweep's [[plot]] names result columns that are checked only after the run
    (docs/sweeps.md): each is in sweep.csv and drawn; a collective sweep's default figures."""
    out = tmp_path / "tr"
    shutil.copytree(sweeps / "tr", out)
    with open(out / "sweep.csv", newline="") as fh:
        cols = next(csv.reader(fh))
    assert set(PLOT_YS) <= set(cols)
    rc, _, err = cli(capsys, "plot", out)
    assert rc == 0, err
    for y in PLOT_YS:
        assert (out / f"tr_{y}.png").stat().st_size > 0
    coll = tmp_path / "j1"
    shutil.copytree(sweeps / "j1", coll)
    rc, _, err = cli(capsys, "plot", coll)
    assert rc == 0, err
    assert any("busbw_GBps" in p.name for p in coll.glob("*.png"))


# =========================================================================== scenario forms
FT = 'name = "forms"\n[topology]\nkind = "fat_tree"\nk = 4\n'


def _flows(size, start):
    return FT + f"""[workload]
kind = "flows"
flows = [{{src = 0, dst = 5, bytes = {size}, start_us = {start}}},
         {{src = 1, dst = 5, bytes = 300000}}]
"""


FLOWS_SECTIONS = FT + """[workload]
kind = "flows"
[[workload.flows]]
start_us = 2
bytes = 1048576
dst = 5
src = 0
[[workload.flows]]
dst = 5
bytes = 300000
src = 1
"""
# every default written out, tables and keys in another order
FLOWS_DEFAULTS = """
[workload]
flows = [{deps = [], start_us = "2us", dst = 5, src = 0, bytes = "1MiB"},
         {src = 1, dst = 5, bytes = 300000, start_us = 0, deps = []}]
kind = "flows"
[engine]
link_series = false
contention = "fluid"
record_paths = true
reroute_delay_us = 0.0
kind = "flow"
[routing]
policy = "ecmp"
[topology]
latency_us = 1.0
link_gbps = 100
k = 4
kind = "fat_tree"
"""


def _same_results(capsys, tmp_path, texts, argvs=None):
    outs = []
    for i, t in enumerate(texts):
        suffix = ".json" if t.lstrip().startswith("{") else ".toml"
        argv = argvs[i] if argvs else ()
        outs.append(results(run_out(capsys, tmp_path, t, f"f{i}", *argv, suffix=suffix)))
    for i, o in enumerate(outs[1:], 1):
        assert o == outs[0], (i, texts[i])
    return outs[0]


def test_sizes_in_every_allowed_form_run_the_same(tmp_path, capsys):
    forms = [1048576, '"1MiB"', '"1 MiB"', '"1024KiB"', '"1048576B"', 1048576.0, '"1.0MiB"',
             '"0.0009765625GiB"']
    res = _same_results(capsys, tmp_path, [_flows(f, 0) for f in forms])
    assert res["summary.json"]["bytes"] == 1048576 + 300000


@pytest.mark.parametrize("forms", [
    [2, 2.0, '"2us"', '"2000ns"', '"0.002ms"', '"2e3ns"', '"2000000ps"'],
    [0.013, '"13ns"', '"13000ps"', '"0.013us"', '"1.3e-5ms"'],
    [2010, '"2.01ms"', '"2010000ns"', '"0.00201s"'],
])
def test_times_in_every_allowed_form_run_the_same(tmp_path, capsys, forms):
    res = _same_results(capsys, tmp_path, [_flows(100000, f) for f in forms])
    assert res["flows.csv"][1][4] == repr(float(forms[0]))  # start_us as the plain number


def test_a_time_with_a_unit_is_the_number_it_reads_as():
    """"13ns" is the double nearest 0.013 us (it was 13 * 1e-3 = 0.013000000000000001):
    exact decimal scaling, as sizes are parsed (netcosim/units.py)."""
    from netcosim.units import parse_gbps, parse_us

    scale = {"ps": "1e-6", "ns": "1e-3", "us": "1", "ms": "1e3", "s": "1e6"}
    for unit, f in scale.items():
        for i in range(1, 400):
            for text in (str(i), f"{i / 10}", f"{i / 100}", f"{i}e-2", f".{i}"):
                assert parse_us(text + unit) == float(Decimal(text) * Decimal(f)), text + unit
    assert parse_gbps("1.1GB/s") == 8.8 and parse_gbps("0.3Tbps") == 300.0
    assert parse_gbps("12.5Mbps") == 0.0125


def test_a_fault_at_a_time_with_a_unit_strikes_when_the_number_does(tmp_path, capsys):
    """The reproduction: a link goes down at the instant a transfer starts on it. At the same
    instant routing avoids the link (14.013 us); a fault written "13ns" used to strike
    0.013000000000000001 us, after the start, so the transfer waited the 50 us reroute delay
    (64.013 us)."""
    base = """
name = "tie"
[topology]
kind = "fat_tree"
k = 4
[routing]
policy = "shortest"
[engine]
reroute_delay_us = 50
[[faults]]
link = [16, 24]
kind = "down"
at_us = AT
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 100000, start_us = 0.013}]
"""
    res = _same_results(capsys, tmp_path, [base.replace("AT", a) for a in
                                           ("0.013", '"13ns"', '"13000ps"', '"0.000013ms"')])
    assert res["summary.json"]["makespan_us"] == 14.013


def test_sections_key_order_defaults_json_and_set_run_the_same(tmp_path, capsys):
    import tomllib

    inline = _flows(1048576, 2)
    as_json = json.dumps(tomllib.loads(FLOWS_DEFAULTS) | {"name": "forms"})
    _same_results(capsys, tmp_path,
                  [inline, FLOWS_SECTIONS, 'name = "forms"\n' + FLOWS_DEFAULTS, as_json,
                   _flows(5, 2)],
                  argvs=[(), (), (), (), ("--set", "workload.flows.0.bytes=1MiB")])


TT = """name = "tt"
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 4
"""
TT_DEFAULTS = """name = "tt"
seed = 0
[topology]
oversubscription = 1.0
rails = true
latency_us = 1.0
scaleup_latency_us = 0.25
nic_gbps = 400
scaleup_gbps = 7200
gpus_per_node = 4
nodes = 2
kind = "two_tier"
"""


@pytest.mark.parametrize("algo", ["ring", "hierarchical", "double_binary_tree"])
def test_collective_defaults_written_out_run_the_same(tmp_path, capsys, algo):
    body = f'[workload]\nkind = "collective"\nop = "all_reduce"\nalgorithm = "{algo}"\n'
    res = _same_results(capsys, tmp_path, [
        TT + body + 'bytes = "1MiB"\n',
        TT_DEFAULTS + body + 'bytes = 1048576\nranks = "all"\nnetwork_detail = "auto"\n'
                             'protocol = "auto"\noptions = {}\n',
        TT + body + 'bytes = "1MiB"\nranks = [0, 1, 2, 3, 4, 5, 6, 7]\n'])
    assert res["summary.json"]["algorithm"] == algo


def test_training_sections_order_defaults_and_json_run_the_same(tmp_path, capsys):
    import tomllib

    reordered = """
[workload.parallel]
global_batch = 4
micro_batch = 1
pp = 1
tp = 2
[workload]
granularity = "segment"
tp_comm = "auto"
symmetry = "auto"
check_memory = true
network_detail = "auto"
placement = "packed"
gpu = "h100_sxm"
kind = "training"
[workload.model]
vocab = 1000
seq = 128
heads = 4
hidden = 256
layers = 2
[topology]
gpus_per_node = 2
nodes = 2
kind = "two_tier"
"""
    res = _same_results(capsys, tmp_path, [TRAIN_BASE, 'name = "train"\n' + reordered,
                                           json.dumps(tomllib.loads(TRAIN_BASE))])
    assert res["summary.json"]["step_time_s"] > 0


# =========================================================================== output files
def _check_outputs(out: Path, flows_workload: bool) -> dict:
    """summary.json against flows.csv, links.csv and link_series.csv of the same run."""
    s = json.loads((out / "summary.json").read_text())
    with open(out / "flows.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    with open(out / "links.csv", newline="") as fh:
        links = list(csv.DictReader(fh))
    ends = [float(r["end_us"]) for r in rows if r["end_us"]]
    members = [int(r.get("members") or 1) for r in rows]
    steps = [int(r.get("steps") or 1) for r in rows]
    assert s["transfers"] == len(rows)
    assert s["transfers_finished"] == len(ends)
    assert s["stranded"] == sum(int(r["stranded"]) for r in rows)
    assert s["bytes"] == sum(int(r["bytes"]) * m for r, m in zip(rows, members))
    assert s["transfers_represented"] == sum(m * k for m, k in zip(members, steps))
    assert len(links) == 2 * s["links"]
    # the makespan is the end of the last node: a transfer's for plain flows, else >= it
    if flows_workload:
        assert s["makespan_us"] == max(ends)
    else:
        assert s["makespan_us"] >= max(ends)
    # utilization = busy time over the makespan
    for ln in links:
        assert math.isclose(float(ln["utilization"]), float(ln["busy_us"]) / s["makespan_us"],
                            rel_tol=1e-12, abs_tol=1e-300)
    if s["engine"] == "flow" and (flows_workload or "path" in rows[0]):
        # each link carries the bytes of the transfers whose path lists it (spray: by
        # share); a re-routed transfer's path lists its abandoned segment too, without the
        # bytes it carried there, so links it touched are left out
        along, unknown = {}, set()
        for r, m in zip(rows, members):
            for tok in r["path"].split():
                uv, _, w = tok.partition("*")
                if int(r.get("reroutes") or 0):
                    unknown.add(uv)
                    continue
                along[uv] = along.get(uv, 0.0) + int(r["bytes"]) * m * (float(w) if w else 1.0)
        checked = [ln for ln in links if f"{ln['u']}>{ln['v']}" not in unknown]
        assert len(checked) > len(links) // 4
        for ln in checked:
            want = along.get(f"{ln['u']}>{ln['v']}", 0.0)
            assert math.isclose(float(ln["bytes"]), want, rel_tol=1e-12, abs_tol=1e-6), ln
    if (out / "link_series.csv").exists():
        # the rate series integrates to each link's bytes and busy time
        series = {}
        with open(out / "link_series.csv", newline="") as fh:
            for r in csv.DictReader(fh):
                series.setdefault((r["u"], r["v"]), []).append(
                    (float(r["time_us"]), float(r["rate_Gbps"])))
        for ln in links:
            pts = series.get((ln["u"], ln["v"]), [])
            assert not pts or pts[-1][1] == 0.0  # every link falls idle at the end
            carried = sum(rate * 125.0 * (t2 - t) for (t, rate), (t2, _) in zip(pts, pts[1:]))
            busy = sum(t2 - t for (t, rate), (t2, _) in zip(pts, pts[1:]) if rate > 0)
            assert math.isclose(carried, float(ln["bytes"]), rel_tol=1e-9, abs_tol=1e-3), ln
            assert math.isclose(busy, float(ln["busy_us"]), rel_tol=1e-9, abs_tol=1e-9), ln
    return s


@pytest.mark.parametrize("name, text, argv, flows_workload", [
    ("faults", FLOWS_FAULTS, ("--link-series",), True),
    ("spray", FLOWS_FAULTS.replace('[engine]', '[routing]\npolicy = "spray"\n[engine]')
     .replace('kind = "down"', 'kind = "degrade"\nfactor = 0.25'), ("--link-series",), True),
    ("packet", PACKET_SPRAY, (), True),
    ("stream", TT + '[workload]\nkind = "collective"\nop = "all_reduce"\nalgorithm = "ring"\n'
               'bytes = "4MiB"\n', ("--link-series",), False),
    ("a2a", COLLECTIVES, (), False),
    ("train", TRAIN_PP, (), False),
])
def test_summary_and_tables_of_a_run_agree(tmp_path, capsys, name, text, argv, flows_workload):
    s = _check_outputs(run_out(capsys, tmp_path, text, name, *argv), flows_workload)
    assert s["transfers_finished"] > 0
    if name == "stream":
        assert s["network_detail_used"] == "auto" and s["transfers_represented"] > s["transfers"]


# =========================================================================== collective command
def _collective_scenario(kind, params, op, algo, size, ranks=None):
    top = "\n".join(f"{k} = {json.dumps(v)}" for k, v in params.items())
    return (f'name = "c"\n[topology]\nkind = "{kind}"\n{top}\n[workload]\nkind = "collective"\n'
            f'op = "{op}"\nalgorithm = "{algo}"\nbytes = {size}\n'
            + (f"ranks = {json.dumps(ranks)}\n" if ranks is not None else ""))


def _scenario_makespan(text) -> float:
    import tomllib

    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    return simulate_scenario(Scenario.from_dict(tomllib.loads(text)))[2]["makespan_us"]


COMMAND_CASES = [
    ("fat_tree", {"k": 4}, "all_reduce", "ring"),
    ("fat_tree", {"k": 4}, "all_reduce", "auto"),
    ("fat_tree", {"k": 4}, "all_to_all", "pairwise"),
    ("torus", {"dims": [3, 4]}, "all_reduce", "torus"),
    ("leaf_spine", {"leaves": 3, "hosts_per_leaf": 3, "spines": 2, "oversubscription": 1.5},
     "broadcast", "auto"),
    ("two_tier", {"nodes": 2, "gpus_per_node": 4}, "all_reduce", "hierarchical"),
    ("two_tier", {"nodes": 2, "gpus_per_node": 4}, "all_reduce", "auto"),
    ("two_tier", {"nodes": 2, "gpus_per_node": 4}, "all_to_all", "auto"),
    ("two_tier", {"nodes": 4, "gpus_per_node": 2}, "all_gather", "auto"),
]


@pytest.mark.parametrize("kind, params, op, algo", COMMAND_CASES)
def test_collective_command_equals_the_scenario(tmp_path, capsys, kind, params, op, algo):
    """`netcosim collective --engine flow` prints what `netcosim run` of the same collective
    gives (its CSV at 6 digits; collectives' sweep() for the exact time)."""
    from netcosim.commands.collective import sweep
    from topo.builders import build

    topo = f"{kind}:" + ",".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}"
                                 for k, v in params.items())
    sizes = [65536, 4 << 20]
    rc, _, err = cli(capsys, "collective", "--topo", topo, "--op", op, "--algo", algo,
                     "--sizes", ",".join(map(str, sizes)), "--engine", "flow",
                     "--csv", tmp_path / "c.csv")
    assert rc == 0, err
    with open(tmp_path / "c.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    fabric = build(kind, dict(params))
    for size, row in zip(sizes, table):
        m = _scenario_makespan(_collective_scenario(kind, params, op, algo, size))
        assert row["time_us"] == f"{m:.6g}", (size, row, m)
        exact = sweep(fabric, op, algo, [size], engine="flow")[0]["time_us"]
        assert exact == m, (size, exact, m)


@pytest.mark.parametrize("params, op, ranks", [
    ({"nodes": 2, "gpus_per_node": 4, "reduce_gbps": "line"}, "all_reduce", [0, 1, 2, 3]),
    ({"nodes": 2, "gpus_per_node": 4, "reduce_gbps": "line"}, "all_to_all", [0, 1, 2, 3]),
    ({"nodes": 4, "gpus_per_node": 2}, "all_to_all", [0, 2, 4, 6]),
    ({"nodes": 4, "gpus_per_node": 2}, "all_reduce", [0, 1, 2, 3]),
])
def test_auto_collective_over_some_ranks_is_chosen_for_them(params, op, ranks):
    """The reproduction: a scenario chose over all hosts and ran the pick on its ranks (one
    node of two took NVLS-Tree, 47.3 us for 4 MiB, against the ring's 35.9 us; one GPU per node
    took the hierarchical all-to-all and was refused: 'group_size = None')."""
    from netcosim.commands.collective import sweep
    from topo.builders import build

    fabric = build("two_tier", dict(params))
    for size in (65536, 4 << 20):
        want = sweep(fabric, op, "auto", [size], engine="flow", ranks=ranks)[0]["time_us"]
        got = _scenario_makespan(_collective_scenario("two_tier", params, op, "auto", size,
                                                      ranks))
        assert got == want, (size, got, want)


def test_auto_all_to_all_on_two_tier_runs_the_rail_aligned_pick():
    """The reproduction: `algorithm = "auto"` picks the rail-aligned hierarchical all-to-all
    (docs/collectives.md, "Choosing", rule 2) but the scenario dropped its leader = "rail",
    so the node-leader variant ran under its name: 220.5 us for 4 MiB on 2 nodes of 4 GPUs
    instead of 70.9 us."""
    params = {"nodes": 2, "gpus_per_node": 4}
    auto = _scenario_makespan(_collective_scenario("two_tier", params, "all_to_all", "auto",
                                                   4 << 20))
    rail = _scenario_makespan(_collective_scenario("two_tier", params, "all_to_all",
                                                   "hierarchical", 4 << 20)
                              + 'options = {leader = "rail"}\nprotocol = "ll128"\n')
    node = _scenario_makespan(_collective_scenario("two_tier", params, "all_to_all",
                                                   "hierarchical", 4 << 20)
                              + 'protocol = "ll128"\n')
    assert auto == rail < node / 2


@pytest.mark.parametrize("kind, params, op, ranks", [
    # each node's GPUs listed in reverse: the rail-aligned all-to-all is symmetric in them
    ("two_tier", {"nodes": 2, "gpus_per_node": 4}, "all_to_all", [3, 2, 1, 0, 7, 6, 5, 4]),
    ("two_tier", {"nodes": 2, "gpus_per_node": 4, "reduce_gbps": "scaleup:2400"},
     "all_reduce", [3, 2, 1, 0, 7, 6, 5, 4]),
    # every torus host, out of row-major order: the torus algorithm cannot take them
    ("torus", {"dims": [3, 3]}, "all_reduce", [8, 7, 6, 5, 4, 3, 2, 1, 0]),
])
def test_auto_collective_over_listed_ranks_is_chosen_for_their_order(kind, params, op, ranks):
    """The reproduction: listed ranks run in their order, but `auto` chose in fabric order and
    dropped the pick's options when the orders differed: the two_tier all-to-all with each
    node's GPUs listed in reverse ran the node-leader variant (220.5 against 70.9 us at
    4 MiB), and a torus listed in reverse was refused for want of the torus algorithm's dims.
    Now the choice is made for the listed order, and runs what choose() picks for it."""
    import collectives
    from netcosim.workloads import _chosen
    from topo.builders import build

    fabric = build(kind, dict(params))
    size = 4 << 20
    got = _scenario_makespan(_collective_scenario(kind, params, op, "auto", size, ranks))
    algo, order, opts = _chosen(collectives.choose(fabric, op, size, ranks, keep_order=True))
    assert [int(r) for r in order] == ranks
    table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in opts.items()
                      if k not in ("protocol", "trees"))
    explicit = (_collective_scenario(kind, params, op, algo, size, ranks)
                + f'protocol = "{opts["protocol"]}"\n' + f"options = {{{table}}}\n")
    if "trees" not in opts:  # the trees are arrays a scenario cannot spell: compare the rest
        assert got == _scenario_makespan(explicit), (algo, opts)
    if kind == "two_tier":  # reversing a node's GPUs maps the fabric onto itself
        fabric_order = _scenario_makespan(_collective_scenario(kind, params, op, "auto", size,
                                                               sorted(ranks)))
        assert got == fabric_order


def test_ranks_all_written_out_runs_in_the_choosers_order_as_when_left_out():
    """`ranks = "all"` is the default written out: it must build the schedule that leaving
    `ranks` out builds. It was left in host-id order while the default took the chooser's
    fabric order, (host_group, id). Every built fabric numbers hosts in fabric order, so only
    a fabric whose groups interleave shows it: hosts 0 and 2 on one switch, 1 and 3 on the
    other, grouped so (the ring in id order crosses the switch link four times)."""
    import numpy as np

    from netcosim.workloads import build_collective
    from topo.builders import custom

    fabric = custom(4, 2, [[0, 4, 100, 1], [2, 4, 100, 1], [1, 5, 100, 1], [3, 5, 100, 1],
                           [4, 5, 100, 1]])
    fabric.host_group = np.array([0, 1, 0, 1], dtype=np.int32)
    left_out = build_collective(fabric, {"op": "all_reduce", "bytes": 1 << 20}, "workload", 0)
    written = build_collective(fabric, {"op": "all_reduce", "bytes": 1 << 20, "ranks": "all"},
                               "workload", 0)
    first = left_out.is_transfer
    assert (int(left_out.src[first][0]), int(left_out.dst[first][0])) == (0, 2)  # in-group hop
    for field in ("src", "dst", "size", "kind", "dep_ptr", "dep_idx"):
        assert np.array_equal(getattr(left_out, field), getattr(written, field)), field
    assert left_out.meta == written.meta

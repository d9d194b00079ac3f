"""Reliability leftovers (branch reliability-4): memory estimates before big inputs are read,
validate on very long fabrics, large sweeps that start at once, fuzzing of the sweep and
fault-study files, and the lower layers' byte-size parser.

Every input is generated on the fly and small; what would be large is made to trip a guard
through its injectable budget (NETCOSIM_MEMORY_BUDGET), and the time checks are hang guards.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import FLOWS_BASE, STUDY, cli, refused, write

ROOT = Path(__file__).resolve().parent.parent


# =========================================================================== layering: sizes
def test_collectives_parse_sizes_without_the_scenario_layer():
    # collectives/_plan.py read "1MiB" through netcosim.units: an upper layer
    code = ("import sys, collectives._plan as p\n"
            "assert p.check_nbytes('1.5KiB') == 1536\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('netcosim', 'validation'))\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr


def test_scenario_layer_reuses_the_one_size_parser():
    import netcore.sizes
    import netcosim.units

    assert netcosim.units.parse_bytes is netcore.sizes.parse_bytes
    assert netcosim.units.MAX_BYTES == netcore.sizes.MAX_BYTES
    from topo.errors import InputError

    with pytest.raises(InputError, match=r"workload.bytes = '0.3B': is 0.3 bytes"):
        netcosim.units.parse_bytes("0.3B", "workload.bytes")


# =========================================================================== memory estimates
BUDGET = "NETCOSIM_MEMORY_BUDGET"


def _chain_file(tmp_path, n_hosts, pairs, name="chain.json") -> Path:
    """A custom chain (host i - host i+1) with one flow per (src, dst) pair, written as JSON
    text directly (the shape of a 3,000,000-host chain with 10^7 flows, scaled down)."""
    links = ",".join(f"[{i},{i + 1},100,1.0]" for i in range(n_hosts - 1))
    flows = ",".join(f'{{"src":{s},"dst":{d},"bytes":1000}}' for s, d in pairs)
    p = tmp_path / name
    p.write_text(f'{{"topology": {{"kind": "custom", "hosts": {n_hosts}, "links": [{links}]}}, '
                 f'"workload": {{"kind": "flows", "flows": [{flows}]}}}}')
    return p


def _budget_for(p: Path, flows: int, extra: int) -> str:
    """A budget ``extra`` bytes above what the file check estimates for ``p``."""
    from netcosim import memory_guard as mg

    need = mg.BASE_BYTES + mg.PARSED_BYTES_PER_BYTE * p.stat().st_size + \
        flows * mg.BYTES_PER_TRANSFER
    return str(need + extra)


def test_a_flows_file_beyond_the_budget_is_refused_before_it_is_parsed(tmp_path, capsys,
                                                                        monkeypatch):
    import tomllib

    import netcosim.scenario as scenario

    n = 5_000
    p = _chain_file(tmp_path, 3_000, [(i % 2999, i % 2999 + 1) for i in range(n)])
    monkeypatch.setenv(BUDGET, _budget_for(p, n, -1))

    def parsed(*a, **k):
        raise AssertionError("the file was parsed before the estimate")

    monkeypatch.setattr(scenario, "parse_json", parsed)
    monkeypatch.setattr(tomllib, "loads", parsed)
    out = tmp_path / "o"
    line = refused(capsys, "run", p, "--out", out,
                   has=(f"{p}", f"with about {n:,} flows", "needs, to load and run, about",
                        f"{BUDGET} = ", "split the flows over several scenarios"))
    assert "MiB of memory" in line or "GiB of memory" in line
    assert not out.exists()
    refused(capsys, "validate", p, has=(f"with about {n:,} flows",))


def test_a_flows_file_within_the_budget_runs(tmp_path, capsys, monkeypatch):
    n = 200
    p = _chain_file(tmp_path, 300, [(i % 299, i % 299 + 1) for i in range(n)])
    monkeypatch.setenv(BUDGET, _budget_for(p, n, 1 << 20))
    rc, _, err = cli(capsys, "run", p, "--out", tmp_path / "o")
    assert rc == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["transfers"] == n and summary["stranded"] == 0


def test_flows_whose_paths_cannot_fit_are_refused_before_the_schedule(tmp_path, capsys,
                                                                     monkeypatch):
    # a long chain: flows i -> n-1-i are n-1-2i hops long; the file itself is small
    from netcosim import memory_guard as mg

    n_hosts, k = 3_000, 400
    far = [(i, n_hosts - 1 - i) for i in range(k)]
    p = _chain_file(tmp_path, n_hosts, far)
    true_mean = sum(d - s for s, d in far) / k
    paths = k * (true_mean - mg.HOPS_INCLUDED) * mg.BYTES_PER_HOP
    # room for the file and the transfers, and for half of the paths
    monkeypatch.setenv(BUDGET, _budget_for(p, k, int(paths / 2)))

    import netcore.schedule

    def built(*a, **kw):
        raise AssertionError("the schedule was built before the estimate")

    monkeypatch.setattr(netcore.schedule.Schedule, "from_transfers", built)
    line = refused(capsys, "validate", p, has=(f"workload.flows: {k:,} flows over paths of about",
                                               "hops on average", f"{BUDGET} = ",
                                               "flows between closer hosts"))
    hops = float(line.split("paths of about ")[1].split(" hops")[0].replace(",", ""))
    assert abs(hops - true_mean) < 0.05 * true_mean, (hops, true_mean)
    monkeypatch.undo()
    # the same number of flows between neighbours fits the same budget and runs
    q = _chain_file(tmp_path, n_hosts, [(i, i + 1) for i in range(k)], name="near.json")
    monkeypatch.setenv(BUDGET, _budget_for(q, k, int(paths / 2)))
    rc, _, err = cli(capsys, "run", q, "--out", tmp_path / "o")
    assert rc == 0, err


def test_the_budget_variable_is_checked(tmp_path, capsys, monkeypatch):
    p = _chain_file(tmp_path, 10, [(0, 9)])
    monkeypatch.setenv(BUDGET, "lots")
    refused(capsys, "validate", p, has=(f"{BUDGET} = 'lots'", "expected a size"))


def test_a_large_flows_file_is_refused_in_a_subprocess_without_a_hang(tmp_path):
    # the reported shape (a chain, many flows) end to end: one line, exit 2, no traceback
    n = 20_000
    p = _chain_file(tmp_path, 3_000, [(i % 2999, (i * 7) % 2999 + 1) for i in range(n)])
    env = {**os.environ, "PYTHONPATH": str(ROOT), BUDGET: "420MiB"}  # the file needs ~431
    r = subprocess.run([sys.executable, "-m", "netcosim", "run", str(p), "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=60,
                       env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"with about {n:,} flows" in lines[0] and "420 MiB" in lines[0], lines[0]
    assert not (tmp_path / "o").exists()


# =========================================================================== validate, long chains
def test_validate_on_a_long_chain_checks_reachability_without_walking_paths(tmp_path, capsys,
                                                                           monkeypatch):
    # every far pair of a switchless chain: the check walked each path (300 flows on a
    # 3,000,000-host chain: 9.0 GB, 67 s); a connected fabric whose nodes all forward reaches
    # every pair
    from topo.routing import Routing

    n_hosts = 20_000
    p = _chain_file(tmp_path, n_hosts, [(i, n_hosts - 1 - i) for i in range(300)])

    def walked(*a, **k):
        raise AssertionError("paths were walked to check reachability")

    monkeypatch.setattr(Routing, "paths", walked)
    monkeypatch.setenv(BUDGET, "64GiB")  # the run's paths are not what is checked here
    rc, out, err = cli(capsys, "validate", p)
    assert rc == 0, err
    assert out.startswith("OK ") and "300 transfers" in out


def test_validate_on_a_chain_cut_by_a_fault_names_the_flow(tmp_path, capsys, monkeypatch):
    from topo.routing import Routing

    n_hosts = 2_000
    p = _chain_file(tmp_path, n_hosts, [(0, 10), (5, 1_500), (1_999, 1_998)])
    data = json.loads(p.read_text())
    data["faults"] = [{"link": [1_000, 1_001], "kind": "down", "at_us": 0}]
    p.write_text(json.dumps(data))

    def walked(*a, **k):
        raise AssertionError("paths were walked to check reachability")

    monkeypatch.setattr(Routing, "paths", walked)
    refused(capsys, "validate", p, has=("workload.flows[1]: host 5 cannot reach host 1500",
                                        "down from time 0"))
    # the link comes back later: a run-time stranding, not an input error
    data["faults"].append({"link": [1_000, 1_001], "kind": "up", "at_us": 5})
    p.write_text(json.dumps(data))
    rc, _, err = cli(capsys, "validate", p)
    assert rc == 0, err


# =========================================================================== sweeps of 10^6 points
SWEEP_BASE = FLOWS_BASE + "[sweep]\n"
MILLION = '"seed" = "0..999 +1"\n"workload.flows.0.bytes" = "1..1000 +1"\n'


def test_a_million_point_sweep_starts_checking_without_building_its_points(tmp_path, capsys,
                                                                          monkeypatch):
    # it built every point's scenario table first: no answer in 100 s, 1.7 GB
    import time

    from netcosim.sweep import points, worker
    from topo.errors import InputError

    made = []
    real_point = points._point
    monkeypatch.setattr(points, "_point", lambda *a: made.append(1) or real_point(*a))
    first = []

    def stop(items):
        first.append([i for i, _, _ in items])
        raise InputError("stopped at the first batch")

    monkeypatch.setattr(worker, "check_batch", stop)
    s = write(tmp_path, SWEEP_BASE + MILLION)
    out = tmp_path / "o"
    t0 = time.perf_counter()
    refused(capsys, "sweep", s, "--out", out, "-j", "1", has=("stopped at the first batch",))
    assert time.perf_counter() - t0 < 60  # a hang guard, not a speed target
    assert first == [list(range(200))]  # batches of at most 200, in point order
    assert len(made) < 1000, len(made)  # points are made as batches are asked for
    assert not out.exists()


def test_a_million_point_sweep_whose_first_point_fails_is_refused_at_once(tmp_path):
    # every point names a host that does not exist: the first batch decides (in a
    # subprocess: the real pool, no monkeypatching)
    s = write(tmp_path, SWEEP_BASE + '"workload.flows.0.dst" = "16..1000015 +1"\n')
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "netcosim", "sweep", str(s), "--out", str(out),
                        "-j", "1"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("netcosim: error: sweep point 0 (workload.flows.0.dst=16): "
                               "workload.flows[0].dst = 16: host 16 does not exist"), lines[0]
    assert not out.exists()


def test_the_first_failing_point_is_named_whatever_order_batches_finish_in(tmp_path, capsys):
    # points 1 and 3 fail. Two workers check batches of 2 ([0, 1], [2, 3], ...) in any order:
    # the sweep stops once every batch up to a failing one is checked, and names point 1
    s = write(tmp_path, SWEEP_BASE + '"workload.flows.0.dst" = [1, 99, 2, 77, 3, 4, 6]\n')
    line = refused(capsys, "sweep", s, "--out", tmp_path / "o", "-j", "2",
                   has=("sweep point 1 (workload.flows.0.dst=99): workload.flows[0].dst = 99",))
    assert "point 3" not in line
    # one worker checks batches of 4: both failures of the first are counted
    refused(capsys, "sweep", s, "--out", tmp_path / "o", "-j", "1",
            has=("sweep point 1 (workload.flows.0.dst=99)", "(2 of 4 points checked fail)"))
    assert not (tmp_path / "o").exists()


def test_a_streamed_table_matches_the_rows_whatever_its_row_groups(tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    from netcosim.sweep import table

    monkeypatch.setattr(table, "PARQUET_GROUP", 3)
    rows = [{"point": i, "point_id": f"id{i}", "status": "ok", "x": i, "mixed": [i, "a"][i % 2],
             "big": 2**64 + i, "maybe": None if i < 5 else 0.5, "flag": i % 2 == 0}
            for i in range(8)]
    table.write_table(tmp_path, rows, ["x"])
    t = pq.read_table(tmp_path / "sweep.parquet")
    assert t.num_rows == 8 and pq.ParquetFile(tmp_path / "sweep.parquet").num_row_groups == 3
    d = t.to_pydict()
    assert d["x"] == list(range(8)) and str(t.schema.field("x").type) == "int64"
    assert d["mixed"] == ["0", "a", "2", "a", "4", "a", "6", "a"]  # mixed types: the CSV text
    assert d["big"] == [str(2**64 + i) for i in range(8)]  # beyond int64: text, not a crash
    assert d["maybe"] == [None] * 5 + [0.5] * 3 and d["flag"] == [i % 2 == 0 for i in range(8)]
    cols, back = table.read_table(tmp_path / "sweep.csv")
    assert cols[:4] == ["point", "point_id", "status", "x"] and len(back) == 8
    assert [r["big"] for r in back] == [2**64 + i for i in range(8)]


# =========================================================================== what the fuzzing found


@pytest.mark.parametrize("argv, has", [
    # each built its list of runs first: no answer (trials), MemoryError (n), ValueError
    (["--trials", "1000000000000"], "--trials = 1000000000000: 1 fractions x "
                                    "1,000,000,000,000 trials"),
    (["--set", "faults_study.trials=1000000000000"], "faults_study.trials = 1000000000000"),
    (["--fraction", "0.01..0.5 n1000000000000"], "1,000,000,000,000 values is more than"),
    (["--fraction", "0.01..0.5 +1e-12"], "490,000,000,001 values is more than"),
    (["--fraction", "0.01..0.5 +1e"], "the step must be a number"),
    (["--set", 'faults_study.fraction=["x"]'], "expected a list of fractions"),
])
def test_fault_study_sizes_and_fractions_are_checked_before_any_run(tmp_path, capsys, argv,
                                                                    has):
    import time

    s = write(tmp_path, STUDY)
    out = tmp_path / "o"
    t0 = time.perf_counter()
    refused(capsys, "faults", s, "--out", out, "-j", "1", *argv, has=(has,))
    assert time.perf_counter() - t0 < 60  # a hang guard
    assert not out.exists()


def test_sweep_with_a_workload_kind_that_is_not_a_name_is_refused(tmp_path, capsys):
    # the [[plot]] result-column check hashed it: TypeError, exit 1
    s = write(tmp_path, SWEEP_BASE.replace('kind = "flows"', "kind = []") +
              '"seed" = [0, 1]\n[[plot]]\nx = "seed"\ny = "makespan_us"\n')
    refused(capsys, "sweep", s, "--dry-run", has=("workload.kind = []: expected a string",))


def test_a_fault_study_case_setting_that_cannot_apply_names_the_case(tmp_path, capsys):
    # it was reported as a --set of the command line
    s = write(tmp_path, STUDY + '[[faults_study.case]]\nlabel = "a"\n'
                               '"workload.flows.x.bytes" = 5\n')
    line = refused(capsys, "faults", s, "--out", tmp_path / "o", "-j", "1",
                   has=("faults_study.case[0]: workload.flows.x.bytes: workload.flows has 1 "
                        "entries; 'x' is not an index of it",))
    assert "--set" not in line


# =========================================================================== fuzzing study files
# The pattern of test_reliability.py's CLI fuzz for the two file formats beyond the scenario
# contract: a sweep file ([sweep] axes, ranges, bundles, blocks, [[plot]]) and a fault-study
# file ([faults_study] options and cases), mutated (keys deleted, renamed, added, retyped;
# values replaced by TOML literals, range strings among them) and run in a forked child:
# exit 0 or 2, one line on stderr, no traceback, an answer within 60 s. 20 examples each by
# default; NETCOSIM_FUZZ_EXAMPLES=500 for a longer search.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzz_helpers import HUGE_OK, LITERALS, mutated, run_forked  # noqa: E402

FUZZ_N = max(1, int(os.environ.get("NETCOSIM_FUZZ_EXAMPLES", "40")) // 2)
FUZZ_SETTINGS = settings(max_examples=FUZZ_N, deadline=None, database=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
SMALL_FLOWS = {"kind": "flows", "flows": [{"src": 0, "dst": 1, "bytes": 100000},
                                          {"src": 1, "dst": 0, "bytes": 50000, "deps": [0]}]}
SWEEP_BASES = [
    {"name": "fz", "topology": {"kind": "fat_tree", "k": 4}, "workload": SMALL_FLOWS,
     "sweep": {"seed": [0, 1], "workload.flows.0.bytes": "1KiB..4KiB",
               "topology.link_gbps as bw": [100, 200],
               "fabric": [{"label": "k2", "topology.k": 2}, {"label": "k4", "topology.k": 4}]},
     "plot": [{"x": "bw", "y": "makespan_us", "hue": "fabric"}]},
    {"name": "fz2", "topology": {"kind": "fat_tree", "k": 2}, "workload": SMALL_FLOWS,
     "sweep": [{"mode": "zip", "seed": [0, 1, 2], "workload.flows.1.bytes": [10, 20, 30],
                "columns": {"family": "zip"}},
               {"mode": "sample", "n": 3, "sample_seed": 1, "set": {"routing.policy": "spray"},
                "workload.flows.0.start_us": "0..4 +1", "seed": "1..3"}]},
]
SWEEP_LITERALS = LITERALS + ['"1..4"', '"1..1000000000000 +1"', '"1KiB..1GiB x4"', '"4..1"',
                             '"1..2 x1"', '"1..8 +0"', '"x..y"', '"1..1e300 x2"',
                             '"0.1..0.5 +0.1"', '"grid"', '"zip"', '"sample"', "[1, 2, 3]",
                             '[{label = "a", "topology.k" = 4}]', '"topology.k"',
                             '"makespan_us"', '"heatmap"', '{x = "seed", y = "makespan_us"}',
                             '{"routing.policy" = "ecmp"}']
FAULTS_BASE = {
    "name": "fzf", "seed": 3, "topology": {"kind": "fat_tree", "k": 4},
    "workload": {"kind": "flows", "flows": [{"src": 0, "dst": 5, "bytes": 100000}]},
    "faults_study": {"trials": 2, "fraction": "0.05..0.2 n2", "kind": ["down", "degrade:0.5"],
                     "layer": "core", "max_single": 4, "single_samples": 2,
                     "case": [{"label": "small", "workload.flows.0.bytes": 1000},
                              {"label": "pair", "workload": {"kind": "flows", "flows": [
                                  {"src": 0, "dst": 15, "bytes": 2000}]}}]},
}
FAULTS_LITERALS = LITERALS + ['"0.01..0.5 n3"', '"0.01..0.5 +1e-12"',
                              '"0.01..0.5 n1000000000000"', '"0.5..0.1"', '"degrade:0.5"',
                              '"degrade:2"', '"gpu_slow:0.5"', '"hbm_degrade"', '"core"',
                              '"edge"', '"aggregation"', '"any"', '"bogus"', '["down", "x"]',
                              "[0.1, 0.2]", '["x"]', "0.99", '"down"']
FAULTS_FLAGS = [("--trials", ["0", "1", "3", "1000000000000", "-2"]),
                ("--fraction", ["0.1", "0.5,0.1", "0.01..0.5 n3", "2", "nan", "0.1..0.2 +0"]),
                ("--kind", ["down", "degrade:0.1", "degrade:nan", "gpu_slow", "x:1"]),
                ("--layer", ["core", "any", "edge", "spine"]),
                ("--at-fraction", ["0.5", "1.5", "-0.1"]), ("--at-us", ["10", "-1", "inf"]),
                ("--max-single", ["0", "-1", "1000000"]), ("--single-samples", ["0", "5"]),
                ("--no-single", [])]


def _fuzz_dir(tmp_path) -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(dir=tmp_path))  # one per example (tmp_path is shared)


def _one_line_or_ok(rc, err, argv):
    shown = f"netcosim {' '.join(map(str, argv))}\n{err}"
    assert rc in (0, 2), shown
    assert "Traceback" not in err and "internal error" not in err, shown
    if rc == 2:
        lines = [x for x in err.strip().splitlines() if x.strip()]
        usage = lines[0].startswith("usage: netcosim ") and \
            lines[-1].startswith(f"netcosim {argv[0]}: error: ")  # argparse: flags clash
        assert usage or (len(lines) == 1 and lines[0].startswith("netcosim: error: ")), shown
    return shown


@pytest.fixture(scope="module")
def warm_flow_engine():
    """Compile/load the flow engine here once, so forked children do not each load it."""
    from netcosim.runner import warm_engine

    warm_engine("flow")


@pytest.mark.skipif(sys.platform != "linux", reason="forks the test process")
@FUZZ_SETTINGS
@given(data=st.data())
def test_fuzz_sweep_files_exit_0_or_2_with_one_line(tmp_path, warm_flow_engine, data):
    base = data.draw(st.sampled_from(range(len(SWEEP_BASES))))
    sweep, _ = mutated(SWEEP_BASES[base], data.draw, literals=SWEEP_LITERALS,
                       huge_ok=HUGE_OK | {"bytes", "seed"}, as_sets=False,
                       add_keys=["colour", "mode", "n", "set", "columns", "label", "kind"])
    here = _fuzz_dir(tmp_path)
    f = here / "sweep.json"
    f.write_text(json.dumps(sweep))
    argv = ["sweep", f, "--dry-run"]
    rc, err, out = run_forked(argv, here, with_stdout=True)
    _one_line_or_ok(rc, err, argv)
    if rc != 0:
        return
    n = int(out.split(" points")[0].replace(",", ""))
    assert n >= 1, out
    if n > 12:  # the run itself only for small sweeps (each point is a real run)
        return
    argv = ["sweep", f, "--out", here / "out", "-j", "1", "--no-progress"]
    rc, err = run_forked(argv, here)
    shown = _one_line_or_ok(rc, err, argv)
    assert rc == 0, shown  # every point passed the check: rows, not a refusal
    from netcosim.sweep.table import read_table

    _, rows = read_table(here / "out" / "sweep.csv")
    assert len(rows) == n and all(r["status"] in ("ok", "error", "infeasible")
                                  for r in rows), shown


@pytest.mark.skipif(sys.platform != "linux", reason="forks the test process")
@FUZZ_SETTINGS
@given(data=st.data())
def test_fuzz_fault_study_files_exit_0_or_2_with_one_line(tmp_path, warm_flow_engine, data):
    study, _ = mutated(FAULTS_BASE, data.draw, literals=FAULTS_LITERALS,
                       huge_ok=HUGE_OK | {"trials", "max_single", "single_samples", "fraction"},
                       as_sets=False,
                       add_keys=["colour", "trials", "layer", "case", "label", "kind"])
    flags = []
    for _ in range(data.draw(st.integers(0, 2))):
        flag, values = data.draw(st.sampled_from(FAULTS_FLAGS))
        flags += [flag] + ([data.draw(st.sampled_from(values))] if values else [])
    here = _fuzz_dir(tmp_path)
    f = here / "study.json"
    f.write_text(json.dumps(study))
    out = here / "out"
    argv = ["faults", f, "--out", out, "-j", "1", "--no-progress", *flags]
    rc, err = run_forked(argv, here)
    shown = _one_line_or_ok(rc, err, argv)
    if rc == 2:
        assert not out.exists() or not any(out.iterdir()), shown
    else:
        assert any(out.rglob("fault_summary.csv")), shown

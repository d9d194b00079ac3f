"""Sweep axes that would mislabel the table: a column named like a result, two axes on one
scenario path, a value listed twice; and duplicate points not reported as resumed."""
from __future__ import annotations

import tomllib

import pytest

from cli_helpers import FLOWS_BASE as FLOWS
from cli_helpers import SERVE_HEAD, cli, refused, write
from cli_helpers import TRAIN_BASE as TRAIN
from netcosim.sweep.table import read_table

FT = """
name = "ft"
seed = 1
[topology]
kind = "fat_tree"
k = 4
link_gbps = 100
latency_us = 1.0
[routing]
policy = "ecmp"
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "1MiB"
"""

# a small training step and a small serving run (tests/cli_helpers.py): kinds whose result
# columns only their run knows in full
INFER = SERVE_HEAD + """[workload.requests]
arrival = "poisson"
rate = 8
count = 10
input_tokens = { dist = "uniform", min = 200, max = 800 }
output_tokens = { dist = "uniform", min = 2, max = 20 }
"""


def _sweep(tmp_path, capsys, text, *extra):
    s = write(tmp_path, text)
    out = tmp_path / "o"
    return cli(capsys, "sweep", s, "--out", out, "-j", "1", "--no-progress", *extra), out


# =========================================================================== result columns
def test_axis_renamed_to_a_result_column_is_refused(tmp_path, capsys):
    # before: exit 0 and sweep.csv's makespan_us held 100 and 200, the link rates
    s = write(tmp_path, FT + '[sweep]\n"topology.link_gbps as makespan_us" = [100, 200]\n')
    out = tmp_path / "o"
    refused(capsys, "sweep", s, "--out", out, "-j", "1",
            has=("'topology.link_gbps as makespan_us'", "'makespan_us' is a result column"))
    assert not out.exists()


@pytest.mark.parametrize("base, table, column", [
    (FT, '"topology.k as busbw_GBps" = [4]', "busbw_GBps"),  # a collective's figure
    (FT, '"topology.k as scenario" = [4]', "scenario"),  # the row's own columns
    (FT, '"topology.k as status" = [4]', "status"),
    (FT, 'columns = { makespan_us = 1 }\n"topology.k" = [4]', "makespan_us"),  # a constant
    (FT, '[[sweep.compile_s]]\n"topology.k" = 4', "compile_s"),  # a bundle; a flow engine figure
    (TRAIN, '"seed as mfu" = [1]', "mfu"),
    (TRAIN, '"seed as exposed_tp_s" = [1]', "exposed_tp_s"),
    (TRAIN, '"seed as memory_total_GB" = [1]', "memory_total_GB"),
    (INFER, '"workload.model as model" = ["llama3-8b"]', "model"),
    (INFER, '"workload.requests.rate as ttft_p99_s" = [8]', "ttft_p99_s"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else "")
def test_swept_column_named_like_a_result_is_refused(tmp_path, capsys, base, table, column):
    s = write(tmp_path, base + "[sweep]\n" + table + "\n")
    refused(capsys, "sweep", s, "--dry-run", has=(f"{column!r} is a result column",))


@pytest.mark.parametrize("base, table", [
    (FLOWS, '"seed as busbw_GBps" = [1]'),  # a collective's column: flows rows have none
    (TRAIN, '"workload.parallel.tp as tp" = [2]'),  # tp is a result only of a layout search
    (FT, '"topology.k as memory_gb" = [4]'),  # only the exact memory_<field> names are taken
    (FT, '"seed" = [1, 2]'),  # its own path: the summary's seed is the swept one
], ids=["flows", "training", "collective", "seed"])
def test_a_name_that_is_no_result_of_this_sweep_stays_allowed(tmp_path, capsys, base, table):
    s = write(tmp_path, base + "[sweep]\n" + table + "\n")
    rc, out, err = cli(capsys, "sweep", s, "--dry-run")
    assert rc == 0, err


@pytest.mark.parametrize("base", [TRAIN, INFER], ids=["training", "inference"])
def test_declared_names_cover_what_a_run_writes(tmp_path, base):
    """The static list the names are checked against holds every column a real row of the
    kind has (a new summary figure must be added there, or an axis could shadow it)."""
    from netcosim.sweep import expand, parse_sweep
    from netcosim.sweep.spec import taken_columns
    from netcosim.sweep.worker import run_one

    d = tomllib.loads(base)
    d["sweep"] = {"seed": [1]}
    spec = parse_sweep(d)
    p = expand(spec)[0]
    row = run_one(0, p.id, p.data)
    assert row["status"] == "ok", row["error"]
    missing = set(row) - taken_columns(spec)
    assert not missing, missing


# =========================================================================== one path twice
def test_two_axes_on_one_path_are_refused(tmp_path, capsys):
    # before: exit 0, "4 of 4 points (2 resumed)", and row 2 said 200 with 100 Gb/s's makespan
    text = FT + ('[sweep]\n"topology.link_gbps" = [100, 200]\n'
                 '"topology.link_gbps as bytes" = [100, 200]\n')
    s = write(tmp_path, text)
    out = tmp_path / "o"
    refused(capsys, "sweep", s, "--out", out, "-j", "1",
            has=("topology.link_gbps is swept twice", "'topology.link_gbps'",
                 "'topology.link_gbps as bytes'"))
    assert not out.exists()


def test_a_bundle_setting_a_swept_path_is_refused(tmp_path, capsys):
    s = write(tmp_path, FT + '[sweep]\n"topology.link_gbps" = [100, 200]\n'
                             '[[sweep.fast]]\n"topology.link_gbps" = 400\n')
    refused(capsys, "sweep", s, "--dry-run",
            has=("topology.link_gbps is swept twice", "'topology.link_gbps'", "'fast'"))


def test_a_later_axis_replacing_the_table_of_a_swept_field_is_refused(tmp_path, capsys):
    # the bundle's whole [topology] table would wipe out the swept link rate
    s = write(tmp_path, FT + '[sweep]\n"topology.link_gbps" = [100, 200]\n'
                             '[[sweep.fabric]]\nlabel = "k4"\n'
                             'topology = {kind = "fat_tree", k = 4}\n')
    refused(capsys, "sweep", s, "--dry-run",
            has=("'fabric' sets topology, which replaces topology.link_gbps",
                 "'topology.link_gbps'"))


def test_set_then_axis_and_a_table_then_its_field_stay_allowed(tmp_path, capsys):
    # `set` is applied before the axes, on purpose; a whole table then a field of it refines it
    s = write(tmp_path, FT + '[sweep]\nset = { "topology.link_gbps" = 400 }\n'
                             '"topology.link_gbps" = [100, 200]\n', name="u.toml")
    rc, out, err = cli(capsys, "sweep", s, "--dry-run")
    assert rc == 0, err
    s = write(tmp_path, FT + '[sweep]\n[[sweep.fabric]]\nlabel = "k4"\n'
                             'topology = {kind = "fat_tree", k = 4}\n'
                             '[[sweep.speed]]\nlabel = 100\n"topology.link_gbps" = 100\n'
                             '[[sweep.speed]]\nlabel = 200\n"topology.link_gbps" = 200\n',
              name="v.toml")
    rc, out, err = cli(capsys, "sweep", s, "--dry-run")
    assert rc == 0, err


# =========================================================================== repeated values
@pytest.mark.parametrize("values, shown", [("[100, 100]", "100"), ("[100, 200, 100.0]", "100.0")])
def test_a_value_listed_twice_on_an_axis_is_refused(tmp_path, capsys, values, shown):
    s = write(tmp_path, FT + f'[sweep]\n"topology.link_gbps" = {values}\n')
    out = tmp_path / "o"
    refused(capsys, "sweep", s, "--out", out, "-j", "1",
            has=("'topology.link_gbps'", f"{shown} is listed twice"))
    assert not out.exists()


def test_one_size_written_two_ways_is_refused(tmp_path, capsys):
    # both are 1048576 in the column: two rows no reader could tell apart
    s = write(tmp_path, FT + '[sweep]\n"workload.bytes" = ["1MiB", 1048576]\n')
    refused(capsys, "sweep", s, "--dry-run", has=("'workload.bytes'", "listed twice"))


def test_zip_may_repeat_a_value_but_not_a_point(tmp_path, capsys):
    ok = write(tmp_path, FT + '[sweep]\nmode = "zip"\n"topology.k" = [4, 4]\n'
                              '"topology.link_gbps" = [100, 200]\n')
    rc, out, err = cli(capsys, "sweep", ok, "--dry-run")
    assert rc == 0, err
    bad = write(tmp_path, FT + '[sweep]\nmode = "zip"\n"topology.k" = [4, 4]\n'
                               '"topology.link_gbps" = [100, 100]\n', name="b.toml")
    refused(capsys, "sweep", bad, "--dry-run", has=("point 1", "repeats point 0"))


def test_a_point_shared_by_two_blocks_is_not_reported_resumed(tmp_path, capsys):
    # two blocks may list one scenario (docs/sweeps.md: the union of their points): it runs
    # once and fills both rows, which is no resumption when --resume was not given
    text = FT + ('[[sweep]]\n"topology.link_gbps" = [100, 200]\n'
                 '[[sweep]]\n"topology.link_gbps" = [200]\n')
    (rc, out, err), d = _sweep(tmp_path, capsys, text)
    assert rc == 0, err
    assert "resumed" not in out and "3 of 3 points" in out, out
    _, rows = read_table(d / "sweep.csv")
    assert [r["topology.link_gbps"] for r in rows] == [100, 200, 200]
    assert rows[1]["makespan_us"] == rows[2]["makespan_us"] < rows[0]["makespan_us"]
    # with --resume, every point is resumed (the shared one counted once per row)
    (rc, out, err), _ = _sweep(tmp_path, capsys, text, "--resume")
    assert rc == 0 and "(3 resumed)" in out, (out, err)

"""CLI hunt (docs against the program, scenario fuzzing): each test failed before its fix."""
from __future__ import annotations

import json

import pytest

from cli_helpers import cli
from netcosim.sweep.table import write_table


def _hue_dir(tmp_path, plot):
    """A sweep table of two blocks: the first has a `fabric` column, the second does not."""
    rows, i = [], 0
    for fabric in ("A", None):
        for b in (2**20, 2**22):
            for g in ((None,) if fabric else (100, 200)):
                r = {"point": i, "point_id": f"p{i}", "status": "ok", "workload.bytes": b,
                     "busbw_GBps": b / 1e5 / (g or 150), "scenario": "{}"}
                if fabric:
                    r["fabric"] = fabric
                if g:
                    r["topology.link_gbps"] = g
                rows.append(r)
                i += 1
    params = ["workload.bytes", "fabric", "topology.link_gbps"]
    write_table(tmp_path, rows, params)
    (tmp_path / "sweep_meta.json").write_text(json.dumps(
        {"kind": "sweep", "params": params, "name": "hue", "plots": [plot]}))
    return tmp_path


def test_line_plot_says_it_leaves_out_rows_without_the_hue_column(tmp_path, capsys):
    """A [[plot]] with hue = "fabric" over a table where 4 of 6 rows (another block's) have
    no fabric drew the 2 and said nothing of the 4."""
    pytest.importorskip("matplotlib")
    d = _hue_dir(tmp_path, {"kind": "line", "name": "p", "x": "workload.bytes",
                            "y": ["busbw_GBps"], "hue": "fabric"})
    rc, out, err = cli(capsys, "plot", d)
    assert rc == 0, err
    assert "p_busbw_GBps.png" in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("warning: plot p_busbw_GBps: 4 of 6 rows have no 'fabric'"), err


def test_line_plot_hue_warning_names_its_column_and_count(tmp_path, capsys):
    """hue = topology.link_gbps: the first block's 2 rows have none; without a hue no word."""
    pytest.importorskip("matplotlib")
    d = _hue_dir(tmp_path, {"kind": "line", "name": "p", "x": "workload.bytes",
                            "y": ["busbw_GBps"], "hue": "topology.link_gbps"})
    rc, out, err = cli(capsys, "plot", d)
    assert rc == 0 and "2 of 6 rows have no 'topology.link_gbps'" in err, err
    d2 = tmp_path / "nohue"
    d2.mkdir()
    _hue_dir(d2, {"kind": "line", "name": "p", "x": "workload.bytes", "y": ["busbw_GBps"]})
    rc, out, err = cli(capsys, "plot", d2)
    assert rc == 0 and "warning" not in err, err


def test_heat_map_facet_says_it_leaves_out_rows_without_it(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    d = _hue_dir(tmp_path, {"kind": "heatmap", "name": "h", "x": "workload.bytes",
                            "y": "workload.bytes", "metric": "busbw_GBps",
                            "facet": "fabric"})
    rc, out, err = cli(capsys, "plot", d)
    assert rc == 0, err
    assert "warning: plot h: 4 of 6 rows have no 'fabric'" in err, err


@pytest.mark.parametrize("table,cmd", [("[sweep]\n\"topology.k\" = [4, 6]\n", "netcosim sweep"),
                                       ("[faults_study]\ntrials = 1\n", "netcosim faults")])
@pytest.mark.parametrize("command", ["run", "validate", "topo"])
def test_study_file_given_to_a_scenario_command_names_the_command(tmp_path, capsys, table, cmd,
                                                                  command):
    """`netcosim validate examples/studies/fullflat_vs_two_tier.toml` said "sweep: unknown key
    'sweep' (...); did you mean 'seed'?"; now it names the command that reads the file."""
    from cli_helpers import FLOWS_BASE, refused, write

    p = write(tmp_path, FLOWS_BASE + table)
    extra = ("--out", tmp_path / "o") if command == "run" else ()
    key = table.split("]")[0].strip("[")
    line = refused(capsys, command, p, *extra, has=(f"{key}: ", cmd, str(p)))
    assert "did you mean" not in line
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------- integers beyond the float range
HUGE = 10 ** 400  # TOML and JSON read it as an int; float() of it raises OverflowError


@pytest.mark.parametrize("base,key,value,field", [
    ("flows", "workload.flows.0.start_us", HUGE, "workload.flows[0].start_us"),
    ("flows", "workload.flows.0.start_us", -HUGE, "workload.flows[0].start_us"),
    ("collective", "workload.step_latency_us", HUGE, "workload.step_latency_us"),
    ("collective", "workload.step_latency_us", -HUGE, "workload.step_latency_us"),
    ("collective", "workload.chunks", HUGE, "workload.chunks"),
    ("simple", "workload.chunks", HUGE, "of memory"),  # the memory guard's refusal
], ids=["start_us", "-start_us", "step_latency_us", "-step_latency_us", "chunks",
        "chunks_simple"])
def test_an_integer_beyond_the_float_range_is_refused_naming_its_field(tmp_path, capsys, base,
                                                                       key, value, field):
    """start_us = 10**400 (or step_latency_us) stopped `netcosim run` with "internal error:
    OverflowError: int too large to convert to float" (exit 1), chunks = 10**400 with
    "integer division result too large for a float" from the memory guard's message."""
    from cli_helpers import FLOWS_BASE, refused, write

    text = {"flows": FLOWS_BASE, "collective": COLLECTIVE,
            "simple": COLLECTIVE + 'protocol = "simple"\n'}[base]
    p = write(tmp_path, text)
    line = refused(capsys, "run", p, "--out", tmp_path / "o", "--set", f"{key}={value}",
                   has=(field,))
    assert "internal error" not in line
    assert not (tmp_path / "o").exists()


COLLECTIVE = """
[topology]
kind = "fat_tree"
k = 4
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "1MiB"
"""

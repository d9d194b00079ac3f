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


# ------------------------------------------------------------------- fuzzing the scenario parser
def _leaf_paths(v, prefix=()):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _leaf_paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:2]):
            yield from _leaf_paths(x, prefix + (i,))
    if prefix:
        yield prefix


_FUZZ_BASE = """
[topology]
kind = "fat_tree"
k = 4
[engine]
kind = "flow"
[[faults]]
link = [16, 24]
kind = "degrade"
factor = 0.5
at_us = "10us"
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = "64KiB", start_us = 1},
         {src = 1, dst = 2, bytes = 1000, start_us = "5ns", deps = [0]}]
"""
_NUMS = ["1", "0", "-0", "-1", "1e400", "1e-400", "1.5", "0.3", "nan", "inf", "-inf",
         "9223372036854775808", "1" + "0" * 30, "\uff11", "\u0661", "1_0", "0x10", "+5", ".5",
         "5.", "1e", " 3 "]
_UNITS = ["B", "KiB", "MB", "PiB", "ps", "ns", "us", "ms", "s", "Gbps", "GB/s", "\u00b5s", ""]


def _toml_literal(v):
    import math

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v)
                else repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(_toml_literal(x) for x in v) + "]"


def test_fuzz_scenario_values_exit_0_or_2_with_one_line(tmp_path):
    """A scenario leaf set (with --set) to a value of another type, a number with a unit in
    any spelling, an integer beyond int64 or the float range, NaN, infinity, unicode: `netcosim
    run` ends with 0, or 2 with one line and nothing written; never exit 1."""
    import tomllib

    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from fuzz_helpers import run_clean

    base = tomllib.loads(_FUZZ_BASE)
    paths = list(_leaf_paths(base))
    values = st.one_of(
        st.sampled_from([0, -1, 2, 2 ** 63, 2 ** 64, 10 ** 30, 10 ** 400, -10 ** 400, True]),
        st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -0.0, 5e-324]),
        st.builds(lambda n, u: n + u, st.sampled_from(_NUMS), st.sampled_from(_UNITS)),
        st.text(max_size=6),
        st.sampled_from([[], [1], [0, 0], [-1], [10 ** 400]]),
    )
    f = tmp_path / "s.toml"
    f.write_text(_FUZZ_BASE)
    n = [0]

    @settings(max_examples=60, deadline=None)
    @given(st.sampled_from(paths), values)
    @example(("workload", "flows", 0, "start_us"), 10 ** 400)  # found by it: exit 1 before
    @example(("faults", 0, "at_us"), "1e400us")
    # a fabric rate or an engine time of 10**400: 'internal error: OverflowError', exit 1
    # (topo/builders/_check.as_number, the flow and packet engine options), fixed after
    @example(("topology", "link_gbps"), 10 ** 400)
    @example(("engine", "reroute_delay_us"), 10 ** 400)
    def check(path, value):
        n[0] += 1
        out = tmp_path / f"o{n[0]}"
        run_clean(["run", f, "--out", out, "--set",
                   ".".join(map(str, path)) + "=" + _toml_literal(value)], tmp_path, out)

    check()


@pytest.mark.parametrize("key", ["rate", "count", "input_tokens.mean"])
@pytest.mark.parametrize("sign", [1, -1], ids=["huge", "-huge"])
def test_a_request_stream_figure_beyond_the_float_range_is_refused(tmp_path, capsys, key, sign):
    """[workload.requests] rate = 10**400 (or count = -10**400) stopped `netcosim run` with
    "internal error: OverflowError: int too large to convert to float" (exit 1): the check
    of a positive number called math.isfinite on the int."""
    from cli_helpers import SERVE_HEAD, refused, write

    stream = ('[workload.requests]\narrival = "poisson"\nrate = 4.0\ncount = 20\n'
              'input_tokens = {dist = "normal", mean = 128, std = 8}\noutput_tokens = 16\n')
    p = write(tmp_path, SERVE_HEAD + stream)
    refused(capsys, "run", p, "--out", tmp_path / "o", "--set",
            f"workload.requests.{key}={sign * HUGE}",
            has=(f"workload.requests.{key} = ",))
    assert not (tmp_path / "o").exists()

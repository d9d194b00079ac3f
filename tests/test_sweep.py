"""Sweep files: parsing, ranges, expansion, up-front checks, running, resume, interruption."""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcosim.sweep import Backend, expand, parse_sweep, run_points, run_sweep
from netcosim.sweep.spec import parse_range
from netcosim.sweep.table import JOURNAL, read_journal, read_table
from topo.errors import InputError

BASE = {
    "name": "tiny", "seed": 1,
    "topology": {"kind": "fat_tree", "k": 4, "link_gbps": 100},
    "workload": {"kind": "collective", "op": "all_reduce", "algorithm": "ring",
                 "bytes": "1MiB"},
}


def sweep(**axes) -> dict:
    d = copy.deepcopy(BASE)
    d["sweep"] = axes
    return d


# =========================================================================== ranges
def test_size_range_geometric():
    vals = parse_range("1MiB..1GiB x4", "k")
    assert vals == [2**20 * 4**i for i in range(6)]  # 1 MiB .. 1 GiB by 4: 1,4,...,1024 MiB


def test_numeric_ranges():
    assert parse_range("4..16 +4", "k") == [4, 8, 12, 16]
    assert parse_range("100..800 x2", "k") == [100, 200, 400, 800]
    assert parse_range("1..5", "k") == [1, 2, 3, 4, 5]
    assert parse_range("0.1..0.5 +0.1", "k") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert parse_range("1KiB..4KiB +1KiB", "k") == [1024, 2048, 3072, 4096]


@pytest.mark.parametrize("bad", ["8..4", "1MiB..1KiB x2", "1..8 x1", "0..8 x2", "1..8 +0",
                                 "a..b", "1MiB..2Gib"])
def test_bad_ranges_refused(bad):
    with pytest.raises(InputError, match="k"):
        parse_range(bad, "k")


BIG = str(int(1.7e308))  # 1.7e308 written out: no exponent, so a number, not a size


@pytest.mark.parametrize("text", ["1.." + "1" + "0" * 400, "1.." + "1" + "0" * 400 + ".5 x2",
                                  "1..2 +1" + "0" * 400, f"-{BIG}..{BIG} +1" + "0" * 300])
def test_ranges_beyond_the_float_range_are_refused(text):
    """An end or step beyond 1.8e308, or a span of more values than a sweep holds whose
    hi - lo overflowed: InputError, where math.floor(inf) or an int quotient too large for a
    float stopped the CLI with 'internal error: OverflowError' (exit 1)."""
    with pytest.raises(InputError, match=r"^k = .*(beyond the range of a number|more values)"):
        parse_range(text, "k")


def test_ranges_whose_ratio_or_steps_overflow_are_expanded():
    """hi / lo, step ** i or i * step beyond the float range, every value within it."""
    vals = parse_range(f"0.5..{BIG} x2", "k")  # hi / lo = 3.4e308: inf
    assert len(vals) == 1025 and vals[-1] == float(f"{2.0 ** 1023:.12g}")  # 12 digits
    tiny = "0." + "0" * 299 + "1"  # 1e-300: 10 ** 608 overflows, 1e-300 * 10 ** 608 does not
    vals = parse_range(f"{tiny}..{BIG}.0 x10", "k")
    assert len(vals) == 609 and vals[:2] == [1e-300, 1e-299] and vals[-1] == 1e308
    assert parse_range(f"-{BIG}.0..{BIG}.0 +{BIG}.0", "k") == [-1.7e308, 0.0, 1.7e308]


@pytest.mark.parametrize("text, want", [("1..2.9999999999", [1.0, 2.0]),
                                        ("100..199.99999999999 +50", [100.0, 150.0]),
                                        ("1..999.9999999 x10", [1.0, 10.0, 100.0]),
                                        ("0.1..0.5 +0.1", [0.1, 0.2, 0.3, 0.4, 0.5])])
def test_a_range_never_passes_its_end(text, want):
    """docs/sweeps.md: the end is included when a step lands on it and never exceeded. The
    count's 1e-9 slack for rounding took in one value more when the end was just short of a
    step: "1..2.9999999999" gave [1.0, 2.0, 3.0]."""
    assert parse_range(text, "k") == want


@given(st.integers(-1000, 1000), st.integers(1, 50), st.sampled_from(["1", "0.1", "0.25", "3"]),
       st.integers(6, 14), st.sampled_from(["+", "x"]))
@settings(max_examples=80, deadline=None)
def test_an_end_just_short_of_a_step_is_not_passed(lo, k, step, digits, op):
    from decimal import Decimal

    d, dl = Decimal(step), Decimal(lo)
    if op == "x":
        d, dl = d + 1, abs(dl) + 1  # a factor above 1 from a start above 0
    last = dl * d ** k if op == "x" else dl + k * d
    hi = last - last * Decimal(10) ** -digits if op == "x" else last - Decimal(10) ** -digits
    vals = parse_range(f"{dl}..{hi:f} {op}{d}", "k")
    assert len(vals) == k and vals[-1] <= float(hi)


@given(st.integers(1, 10**6), st.integers(0, 10**9), st.integers(2, 9))
@settings(max_examples=80, deadline=None)
def test_geometric_range_invariants(lo, extra, factor):
    hi = lo + extra
    vals = parse_range(f"{lo}..{hi} x{factor}", "k")
    assert vals[0] == lo and vals[-1] <= hi and vals[-1] * factor > hi
    assert all(b == a * factor for a, b in zip(vals, vals[1:]))


# =========================================================================== expansion
def test_grid_expansion_and_alias():
    spec = parse_sweep(sweep(**{"workload.bytes": "1MiB..4MiB x2",
                                "topology.link_gbps as gbps": [100, 400]}))
    pts = expand(spec)
    assert spec.columns == ["workload.bytes", "gbps"]
    assert len(pts) == 6
    assert [p.params for p in pts[:2]] == [{"workload.bytes": 2**20, "gbps": 100},
                                           {"workload.bytes": 2**20, "gbps": 400}]
    assert pts[1].data["topology"]["link_gbps"] == 400
    assert pts[1].data["workload"]["bytes"] == 2**20
    assert "sweep" not in pts[0].data
    assert len({p.id for p in pts}) == 6


def test_unquoted_dotted_keys_are_axes():
    d = copy.deepcopy(BASE)
    d["sweep"] = {"topology": {"link_gbps": [100, 200]}}
    assert [p.data["topology"]["link_gbps"] for p in expand(parse_sweep(d))] == [100, 200]


def test_zip_and_its_length_check():
    pts = expand(parse_sweep(sweep(mode="zip", **{"topology.link_gbps": [100, 200],
                                                   "workload.bytes": [1024, 2048]})))
    assert [(p.data["topology"]["link_gbps"], p.data["workload"]["bytes"]) for p in pts] == \
        [(100, 1024), (200, 2048)]
    with pytest.raises(InputError, match="equal length"):
        parse_sweep(sweep(mode="zip", **{"topology.link_gbps": [100, 200],
                                         "workload.bytes": [1024]}))


def test_sample_is_seeded_distinct_and_bounded():
    axes = {"topology.link_gbps": list(range(100, 1100, 100)), "workload.bytes": "1KiB..1MiB"}
    a = expand(parse_sweep(sweep(mode="sample", n=15, sample_seed=7, **axes)))
    b = expand(parse_sweep(sweep(mode="sample", n=15, sample_seed=7, **axes)))
    c = expand(parse_sweep(sweep(mode="sample", n=15, sample_seed=8, **axes)))
    assert [p.id for p in a] == [p.id for p in b]
    assert [p.id for p in a] != [p.id for p in c]
    assert len({p.id for p in a}) == 15
    with pytest.raises(InputError, match="n = 500"):
        expand(parse_sweep(sweep(mode="sample", n=500, **axes)))
    with pytest.raises(InputError, match="n"):
        parse_sweep(sweep(mode="sample", **axes))


def test_bundles_set_and_blocks():
    d = copy.deepcopy(BASE)
    d["sweep"] = [
        {"set": {"topology": {"kind": "fullflat", "n_gpus": 16, "planes": 2}},
         "topology.gpu_gbps as scaleup_gbps": [800, 1600]},
        {"fabric": [{"label": "ft100", "topology.link_gbps": 100},
                    {"label": "ft400", "topology.link_gbps": 400}],
         "workload.bytes": [1024, 4096]},
    ]
    pts = expand(parse_sweep(d))
    assert len(pts) == 2 + 4
    assert pts[0].data["topology"] == {"kind": "fullflat", "n_gpus": 16, "planes": 2,
                                       "gpu_gbps": 800}  # `set` replaced the whole table
    assert pts[0].params == {"scaleup_gbps": 800}
    assert pts[2].params == {"fabric": "ft100", "workload.bytes": 1024}
    assert pts[5].data["topology"]["link_gbps"] == 400


@pytest.mark.parametrize("axes, match", [
    ({"topolgy.k": [4, 8]}, "topolgy.k"),
    ({"workload.bytes": []}, "empty"),
    ({"workload.bytes": "8MiB..1MiB"}, "empty"),
    ({"colour": [1, 2]}, "colour"),
    ({"workload.bytes": [1024], "mode": "spiral"}, "mode"),
])
def test_bad_sweep_keys_refused(axes, match):
    with pytest.raises(InputError, match=match):
        expand(parse_sweep(sweep(**axes)))


def test_missing_sweep_table():
    with pytest.raises(InputError, match="sweep"):
        parse_sweep(copy.deepcopy(BASE))


def test_unknown_workload_key_refused_at_expansion():
    with pytest.raises(InputError, match="workload.colour"):
        expand(parse_sweep(sweep(**{"workload.colour": ["red"]})))


# =========================================================================== running


def _run(d, out, **kw):
    spec = parse_sweep(d)
    return run_sweep(spec, out, Backend(jobs=1, progress=False), **kw)


def test_point_failing_validation_refuses_before_writing(tmp_path):
    # topology.k = 5 only fails when the fabric is built: refused up front, nothing written
    d = sweep(**{"topology.k": [4, 5]})
    with pytest.raises(InputError, match=r"point 1 .*topology.k"):
        _run(d, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_sweep_table_rows_rerun_alone(tmp_path):
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    d = sweep(**{"workload.bytes": "64KiB..1MiB x4", "topology.link_gbps": [100, 400]})
    o = _run(d, tmp_path / "out")
    cols, rows = read_table(tmp_path / "out" / "sweep.csv")
    assert len(rows) == 6 and o.ran == 6
    assert cols[:5] == ["point", "point_id", "status", "workload.bytes", "topology.link_gbps"]
    assert all(r["status"] == "ok" for r in rows)
    for r in rows[::2]:
        data = json.loads(r["scenario"])
        assert data["workload"]["bytes"] == r["workload.bytes"]
        _, res, summ = simulate_scenario(Scenario.from_dict(data))
        assert repr(summ["makespan_us"]) == repr(r["makespan_us"])  # CSV floats round-trip
    # more bytes never finish sooner on the same fabric
    for g in (100, 400):
        m = [r["makespan_us"] for r in rows if r["topology.link_gbps"] == g]
        assert m == sorted(m)


def test_parquet_matches_csv(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    _run(sweep(**{"workload.bytes": [1024, 2048]}), tmp_path / "o")
    t = pq.read_table(tmp_path / "o" / "sweep.parquet").to_pydict()
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    assert t["makespan_us"] == [r["makespan_us"] for r in rows]
    assert t["workload.bytes"] == [1024, 2048]


def test_run_time_error_is_recorded_and_sweep_goes_on(tmp_path, monkeypatch):
    import netcosim.runner as runner

    real = runner.simulate_scenario

    def flaky(sc, *a, **kw):
        if sc.workload.get("bytes") == 2048:
            raise RuntimeError("solver exploded")
        return real(sc, *a, **kw)

    monkeypatch.setattr(runner, "simulate_scenario", flaky)
    _run(sweep(**{"workload.bytes": [1024, 2048, 4096]}), tmp_path / "o")
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    assert [r["status"] for r in rows] == ["ok", "error", "ok"]
    assert rows[1]["error"] == "RuntimeError: solver exploded"
    assert rows[1]["makespan_us"] is None and rows[2]["makespan_us"] > 0


def test_resume_runs_failed_points_again(tmp_path, monkeypatch):
    import netcosim.runner as runner

    real = runner.simulate_scenario

    def out_of_memory_once(sc, *a, **kw):
        if sc.workload.get("bytes") == 2048:
            raise MemoryError("Unable to allocate 52.5 MiB")
        return real(sc, *a, **kw)

    d = sweep(**{"workload.bytes": [1024, 2048, 4096]})
    out = tmp_path / "o"
    monkeypatch.setattr(runner, "simulate_scenario", out_of_memory_once)
    _run(d, out)
    _, rows = read_table(out / "sweep.csv")
    assert [r["status"] for r in rows] == ["ok", "error", "ok"]
    monkeypatch.setattr(runner, "simulate_scenario", real)
    o = _run(d, out, resume=True)
    assert (o.ran, o.skipped) == (1, 2)  # only the failed point ran again
    _, rows = read_table(out / "sweep.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"] and rows[1]["makespan_us"] > 0


def test_resume_skips_finished_rows(tmp_path):
    d = sweep(**{"workload.bytes": [1024, 2048, 4096, 8192]})
    out = tmp_path / "o"
    _run(d, out)
    _, first = read_table(out / "sweep.csv")
    lines = (out / JOURNAL).read_text().splitlines()
    (out / JOURNAL).write_text("\n".join(lines[:2]) + "\n{\"cut short")  # crash mid-line
    o = _run(d, out, resume=True)
    assert (o.ran, o.skipped) == (2, 2)
    _, again = read_table(out / "sweep.csv")
    assert [r["makespan_us"] for r in again] == [r["makespan_us"] for r in first]
    # an extended file resumes the points it shares with the earlier one
    d2 = sweep(**{"workload.bytes": [512, 1024, 2048, 4096, 8192]})
    o2 = _run(d2, out, resume=True)
    assert (o2.ran, o2.skipped) == (1, 4)
    _, rows = read_table(out / "sweep.csv")
    assert [r["workload.bytes"] for r in rows] == [512, 1024, 2048, 4096, 8192]
    assert [r["point"] for r in rows] == [0, 1, 2, 3, 4]


def test_ctrl_c_keeps_finished_rows(tmp_path, monkeypatch):
    import netcosim.sweep.worker as worker

    real = worker.run_one
    calls = []

    def interrupt_third(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(worker, "run_one", interrupt_third)
    d = sweep(**{"workload.bytes": [1024, 2048, 4096, 8192]})
    out = tmp_path / "o"
    o = run_sweep(parse_sweep(d), out, Backend(jobs=1, batch_size=1, progress=False))
    assert o.interrupted
    _, rows = read_table(out / "sweep.csv")
    assert [r["workload.bytes"] for r in rows] == [1024, 2048]
    monkeypatch.setattr(worker, "run_one", real)
    o = run_sweep(parse_sweep(d), out, Backend(jobs=1, progress=False), resume=True)
    assert not o.interrupted and (o.ran, o.skipped) == (2, 2)
    assert len(read_journal(out / JOURNAL)) == 4


def test_dask_local_matches_sequential(tmp_path):
    pytest.importorskip("distributed")
    d = sweep(**{"workload.bytes": [1024, 65536], "topology.link_gbps": [100, 200]})
    pts = expand(parse_sweep(d))
    a = run_points(pts, tmp_path / "a", Backend(jobs=1, progress=False))
    b = run_points(pts, tmp_path / "b", Backend(dask_local=1, progress=False))
    assert b.info["backend"] == "dask"
    assert [r["makespan_us"] for r in a.rows] == [r["makespan_us"] for r in b.rows]


def test_cli_sweep(tmp_path):
    from netcosim.cli import main

    f = tmp_path / "s.json"
    f.write_text(json.dumps(sweep(**{"workload.bytes": "1KiB..4KiB"})))
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "-j", "1"]) == 0
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    assert [r["workload.bytes"] for r in rows] == [1024, 2048, 4096]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(sweep(**{"workload.bytes": "4KiB..1KiB"})))
    assert main(["sweep", str(bad), "--out", str(tmp_path / "p")]) == 2


def test_block_columns_and_plot_tables():
    d = copy.deepcopy(BASE)
    d["sweep"] = [{"columns": {"fabric": "ft"}, "topology.link_gbps as bw": [100, 200]}]
    d["plot"] = [{"x": "bw", "y": "busbw_GBps", "hue": "fabric"}]
    spec = parse_sweep(d)
    assert spec.columns == ["bw", "fabric"]
    assert [p.params for p in expand(spec)] == [{"fabric": "ft", "bw": 100},
                                                {"fabric": "ft", "bw": 200}]
    assert spec.plots[0]["y"] == ["busbw_GBps"] and "plot" not in expand(spec)[0].data
    for bad, match in ([{"x": "bw"}], "plot\\[0\\].y"), ([{"x": "a", "y": "b", "colour": 1}],
                                                         "colour"), \
            ([{"kind": "heatmap", "x": "a", "y": "b"}], "metric"):
        d["plot"] = bad
        with pytest.raises(InputError, match=match):
            parse_sweep(d)
    d["plot"] = []
    d["sweep"] = [{"columns": {"bw": 1}, "topology.link_gbps as bw": [100]}]
    with pytest.raises(InputError, match="columns.bw"):
        parse_sweep(d)

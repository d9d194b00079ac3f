"""Metamorphic and consistency properties of fault studies, sweeps and their plots
(docs/sweeps.md); tests/test_metamorphic_cli.py has the sweep-row-equals-its-run, worker-count
and resume relations, these add what it does not cover.

* Fault studies: a fraction's fault sets do not depend on the other fractions of the study
  (nor its figures); a random trial strikes at the study's time, to the bit, and equals the
  single-link run of the same link; the summary's percentiles are those of the trials in
  sweep.csv; a study into a directory another study wrote leaves none of that one's tables.
* Study files: every case's layer (and GPU kind) is checked before the first study runs,
  and a bad `faults_study.fraction` / `kind` is named as the file's field.
* Sweeps: a sampled grid too large for numpy's integers is drawn, not a crash.
* Plots: what is drawn is the table's medians; rows a block lacks a column for do not break
  the figures; the same table drawn twice gives the same files.
"""
from __future__ import annotations

import copy
import json
import tomllib

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cli_helpers import FLOWS_BASE, TRAIN_BASE, cli, refused, write
from netcosim.faults_study import FaultKind, gpu_study_points, study_points
from netcosim.scenario import Scenario
from netcosim.sweep import Backend
from netcosim.sweep.table import read_table

# an all-to-all on a k=4 fat-tree: every aggregation link carries traffic and each run takes
# milliseconds, so a study of dozens of trials runs in a second
A2A = {
    "name": "a2a", "seed": 3,
    "topology": {"kind": "fat_tree", "k": 4, "link_gbps": 100},
    "workload": {"kind": "collective", "op": "all_to_all", "algorithm": "direct",
                 "bytes": "256KiB"},
}
SEQ = Backend(jobs=1, progress=False)


def _scenario(data=A2A) -> Scenario:
    return Scenario.from_dict(copy.deepcopy(data))


def _study(tmp_path, name, fractions, **kw):
    from netcosim.faults_study import run_fault_study

    kw.setdefault("layer", "aggregation")
    return run_fault_study(_scenario(), tmp_path / name, fractions, backend=SEQ, **kw)


# =========================================================================== fault studies
@pytest.mark.parametrize("others", [[0.05], [0.05, 0.6], [0.6]])
def test_a_fractions_fault_sets_do_not_depend_on_the_other_fractions(others):
    """docs/sweeps.md: adding a fraction leaves the sets already drawn unchanged. They were
    seeded by the fraction's position, so adding a smaller one redrew every larger one."""
    sc = _scenario()
    topo = sc.build_topology()
    kind = FaultKind("down")
    alone = study_points(sc, topo, [0.3], kind, "aggregation", 6, 0.0, single=False)
    beside = study_points(sc, topo, sorted(others + [0.3]), kind, "aggregation", 6, 0.0,
                          single=False)
    assert [p.id for p in alone] == [p.id for p in beside if p.params["fraction"] == 0.3]
    # the same for GPU faults (a training step's GPUs, drawn by the same seeds)
    train = Scenario.from_dict(tomllib.loads(TRAIN_BASE))
    gkind = FaultKind("gpu_slow", 0.5)
    g_alone = gpu_study_points(train, range(4), [0.3], gkind, 6, 0.0, False, 256, 64)
    g_beside = gpu_study_points(train, range(4), sorted(others + [0.3]), gkind, 6, 0.0, False,
                                256, 64)
    assert [p.id for p in g_alone] == [p.id for p in g_beside if p.params["fraction"] == 0.3]


def test_a_fractions_figures_do_not_depend_on_the_other_fractions(tmp_path):
    """The same fraction reported 1.4368 alone and 1.4226 beside 0.05 (median slowdown of 5
    trials of aggregation links down, this all-to-all)."""
    alone = _study(tmp_path, "alone", "0.3", trials=5, single=False)
    beside = _study(tmp_path, "beside", "0.05,0.3", trials=5, single=False)
    (a,) = alone["summary"]
    b = [s for s in beside["summary"] if s["fraction"] == 0.3]
    assert b == [a]


@pytest.mark.parametrize("at_us", [0.1, 2.3, 17.9])
def test_a_random_trial_strikes_at_the_studys_time_to_the_bit(at_us):
    """Its records came back from seconds: --at-us 0.1 struck at 0.09999999999999999 us, an
    instant before the single-link run of the same link and the time sweep_meta.json gives."""
    sc = _scenario()
    topo = sc.build_topology()
    pts = study_points(sc, topo, [0.1, 0.5], FaultKind("degrade", 0.5), "any", 3, at_us)
    times = {r["at_us"] for p in pts for r in p.data["faults"]}
    assert times == {at_us}


@pytest.mark.parametrize("kind, at_us", [("down", 0.0), ("degrade:0.3", 0.0), ("down", 20.0),
                                         ("degrade:0.3", 2.3)])
def test_a_one_link_random_trial_is_that_links_single_run(tmp_path, kind, at_us):
    """A random trial that fails one link (two forward records) and the single-link run of
    that link (one record, both directions) are the same fault: the same makespan, to the
    bit, and the same stranding."""
    _study(tmp_path, "s", "0.05", trials=6, kind=kind, at_us=at_us)
    _, rows = read_table(tmp_path / "s" / "sweep.csv")
    single = {frozenset((r["u"], r["v"])): r for r in rows if r["study"] == "single"}
    rand = [r for r in rows if r["study"] == "random"]
    assert rand and all(r["failed_links"] == 1 for r in rand)
    for r in rand:
        (link,) = {frozenset(f["link"]) for f in json.loads(r["scenario"])["faults"]}
        s = single[link]
        assert (r["makespan_us"], r["stranded"], r["slowdown"]) == \
            (s["makespan_us"], s["stranded"], s["slowdown"])


def test_a_study_leaves_none_of_an_earlier_studys_tables(tmp_path, capsys):
    """A GPU study run where a link study had run kept its costliest_links.csv (which
    `netcosim plot` drew under the GPU study's title) and its baseline_tp_modes.json (runs
    priced 'network' that the GPU study did not have)."""
    pytest.importorskip("matplotlib")
    s = write(tmp_path, TRAIN_BASE)
    out = tmp_path / "o"
    common = ("--trials", 1, "--out", out, "-j", 1, "--no-progress")
    rc, _, err = cli(capsys, "faults", s, "--fraction", "0.2", "--max-single", 4,
                     "--single-samples", 3, *common)
    assert rc == 0, err
    # the link study: its tables, a network-priced run among them (a scale-up link faulted)
    assert (out / "costliest_links.csv").exists() and (out / "baseline_tp_modes.json").exists()
    rc, _, err = cli(capsys, "faults", s, "--kind", "gpu_slow:0.5", "--fraction", "0.3",
                     "--plot", *common)
    assert rc == 0, err
    assert (out / "costliest_gpus.csv").exists()
    assert not (out / "costliest_links.csv").exists()
    assert not (out / "baseline_tp_modes.json").exists()  # every run priced TP 'local'
    assert not (out / "costliest_links.png").exists()
    _, rows = read_table(out / "sweep.csv")
    assert {r["tp_comm"] for r in rows} == {"local"}
    # and back: a link study leaves no GPU ranking
    rc, _, err = cli(capsys, "faults", s, "--fraction", "0.2", "--no-single", *common)
    assert rc == 0, err
    assert not (out / "costliest_gpus.csv").exists()



def test_a_million_trial_study_holds_no_trial_until_a_pass_asks(tmp_path):
    """A study may run 1,000,000 trials (docs/sweeps.md); its points were a list of full
    scenario copies, 8.6 KB a trial of one flow (100,000 trials: 1.1 GB peak in the parent
    against 0.7 GB for a sweep of as many points) and 4 MB a trial of 20,000 flows. Now made
    on demand on each pass, like a sweep's: only their ids stay."""
    import tracemalloc

    from netcosim.scenario import Scenario as Sc

    sc = Sc.from_dict(tomllib.loads(FLOWS_BASE))
    topo = sc.build_topology()
    tracemalloc.start()
    try:
        pts = study_points(sc, topo, [0.05, 0.1], FaultKind("down"), "any", 500_000, 0.0)
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(pts) == 1_000_000 + 48  # and the 48 links alone
    assert held < 32 << 20, held  # a list of 10^6 slots for the ids: 8 MB
    first = next(iter(pts))
    again = next(iter(pts))
    assert (first.id, first.params, first.data) == (again.id, again.params, again.data)


def test_a_studys_summary_is_its_tables_trials(tmp_path):
    """fault_summary.csv per fraction: its counts and percentiles are those of the trials'
    rows in sweep.csv (the stranded ones counted and left out of the percentiles), and each
    trial's slowdown is its makespan over the fault-free one."""
    res = _study(tmp_path, "s", "0.05,0.3,0.6", trials=7, layer="any", single=False)
    base = res["baseline"]["makespan_us"]
    _, rows = read_table(tmp_path / "s" / "sweep.csv")
    _, summ = read_table(tmp_path / "s" / "fault_summary.csv")
    assert [s["fraction"] for s in summ] == [0.05, 0.3, 0.6]
    assert sum(s["stranded_runs"] for s in summ) > 0  # edge links down strand a host
    for s in summ:
        rs = [r for r in rows if r["fraction"] == s["fraction"]]
        fin = [r for r in rs if not r["stranded"]]
        assert all(r["slowdown"] == r["makespan_us"] / base for r in fin)
        assert all(r["slowdown"] is None and r["stranded_run"] for r in rs if r["stranded"])
        assert (s["trials"], s["finished"], s["stranded_runs"], s["errors"]) == \
            (len(rs), len(fin), len(rs) - len(fin), 0)
        sl = np.array([r["slowdown"] for r in fin])
        if not sl.size:
            assert s["median"] is None
            continue
        assert (s["median"], s["p90"], s["p99"], s["worst"], s["mean"]) == \
            (float(np.median(sl)), float(np.percentile(sl, 90)), float(np.percentile(sl, 99)),
             float(sl.max()), float(sl.mean()))

# =========================================================================== study files
TWO_CASES = 'name = "cases"\n' + FLOWS_BASE + """
[faults_study]
trials = 1
fraction = 0.1
{options}
[[faults_study.case]]
label = "ft"
seed = 0
[[faults_study.case]]
label = "tt"
topology = { kind = "two_tier", nodes = 2, gpus_per_node = 4 }
"""


@pytest.mark.parametrize("options, argv, has", [
    # the fat-tree case's study ran and wrote ft-down/ before the two_tier case was refused
    ('layer = "core"', [], "faults_study.layer = 'core' (case 'tt'): this fabric's layers "
                           "are scaleup, edge, spine"),
    ("", ["--layer", "aggregation"], "--layer 'aggregation' (case 'tt')"),
    ('kind = "gpu_slow"', [], "faults_study.kind = gpu_slow (case 'ft'): GPU faults need a "
                              "training workload"),
])
def test_every_cases_layer_and_kind_are_checked_before_the_first_study(tmp_path, capsys,
                                                                       options, argv, has):
    s = write(tmp_path, TWO_CASES.replace("{options}", options))
    out = tmp_path / "o"
    refused(capsys, "faults", s, "--out", out, "-j", 1, "--no-progress", *argv, has=(has,))
    assert not out.exists()


@pytest.mark.parametrize("option, has", [
    ("fraction = 1.5", "faults_study.fraction = 1.5: 1.5 is outside (0, 1)"),
    ('fraction = "0.01..0.5 n0"', "faults_study.fraction = '0.01..0.5 n0': n0 must be >= 1"),
    ("fraction = []", "faults_study.fraction = []: no fraction given"),
    ('kind = "degrade:2"', "faults_study.kind = 'degrade:2': the remaining bandwidth"),
    ('kind = ["down", "up"]', "faults_study.kind[1] = 'up': expected down, degrade"),
])
def test_a_study_files_fraction_and_kind_are_named_as_the_files_fields(tmp_path, capsys,
                                                                        option, has):
    """They were named --fraction and --kind, options the command line did not have."""
    s = write(tmp_path, 'name = "f"\n' + FLOWS_BASE + f"[faults_study]\n{option}\n")
    out = tmp_path / "o"
    line = refused(capsys, "faults", s, "--out", out, "-j", 1, has=(has,))
    assert "--" not in line
    assert not out.exists()
    # the same value on the command line is named as the flag
    flag, _, value = option.partition(" = ")
    if not value.startswith("["):
        refused(capsys, "faults", s, f"--{flag}", json.loads(value), "--out", out,
                has=(f"--{flag} ",))
        assert not out.exists()


# =========================================================================== sweeps
HUGE = {"name": "huge", "topology": {"kind": "fat_tree", "k": 4},
        "workload": {"kind": "flows", "flows": [{"src": 0, "dst": 5, "bytes": 1000}]},
        "sweep": {"mode": "sample", "n": 3, "sample_seed": 7,
                  # 10^5 x 10^5 x 10^5 x ~10^5 points: beyond int64 (9.2 x 10^18)
                  "topology.link_gbps": "1..100000", "topology.latency_us": "1..100000",
                  "workload.flows.0.bytes": "1..100000", "seed": "1..99999"}}


@pytest.mark.parametrize("n", [3, 2100])  # 2100: a dry run checks a sample
def test_a_sampled_grid_beyond_int64_is_drawn(tmp_path, capsys, n):
    """mode = "sample" over four axes of 10^5 values: 'internal error: OverflowError:
    Python int too large to convert to C long', exit 1 (numpy drew flat positions as int64).
    Now n distinct points, in grid order, the same on every pass and in a dry run."""
    from netcosim.sweep import expand, parse_sweep
    from netcosim.sweep.points import sample_points

    d = copy.deepcopy(HUGE)
    d["sweep"]["n"] = n
    spec = parse_sweep(d)
    pts = expand(spec)
    keys = [tuple(p.params.values()) for p in pts]
    assert len(set(keys)) == n and keys == sorted(keys)  # distinct, in grid order
    assert [p.id for p in expand(spec)] == [p.id for p in pts]
    for p in pts:
        assert p.data["topology"]["link_gbps"] == p.params["topology.link_gbps"]
        assert 1 <= p.params["seed"] <= 99_999
    # a dry run's sample of the block is points of the same draw
    assert {p.id for p in sample_points(spec, 50)} <= {p.id for p in pts}
    s = write(tmp_path, json.dumps(d), "s.json")
    rc, out, err = cli(capsys, "sweep", s, "--dry-run")
    assert rc == 0 and err == "", err


def test_the_parquet_table_of_large_scenarios_is_written_a_few_rows_at_a_time(tmp_path):
    """Every row carries its scenario: 1.4 MB for 20,000 flows. The Parquet writer held
    65,536 rows before writing a group, so 200 such rows took 1 GB (294 MB of them Python
    text); now a group is written once its text reaches 32 MB. Same table either way."""
    import tracemalloc

    pq = pytest.importorskip("pyarrow.parquet")
    from netcosim.sweep.table import write_table

    cell = json.dumps({"flows": [{"src": 0, "dst": 1, "bytes": 1000}] * 30_000})

    class Rows:  # made afresh on each pass, as the journal's rows are
        def __iter__(self):
            for i in range(160):
                yield {"point": i, "point_id": f"p{i}", "status": "ok", "x": i,
                       "makespan_us": 0.5 * i, "scenario": cell[:-1] + " " * (i % 3) + "}"}

    tracemalloc.start()
    try:
        write_table(tmp_path, Rows(), ["x"])
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # a group's 32 MB and room to write it; all 160 cells are 178 MB
    assert held < 64 << 20, (held, len(cell))
    t = pq.read_table(tmp_path / "sweep.parquet").to_pydict()
    want = list(Rows())
    for c in ("point", "x", "makespan_us", "scenario"):
        assert t[c] == [r[c] for r in want]


def test_the_tables_of_a_large_scenario_plot(tmp_path, capsys):
    """4,500 explicit flows make a 143 KB scenario cell, beyond the csv module's default
    field limit (128 KiB): `sweep --plot` ran its points, then stopped with exit 2, "plot:
    sweep.csv cannot be read (field larger than field limit (131072))"; a fault study's plots
    the same."""
    pytest.importorskip("matplotlib")
    flows = [{"src": i % 16, "dst": (i * 7 + 3) % 16, "bytes": 1000 + i} for i in range(4500)
             if i % 16 != (i * 7 + 3) % 16]
    data = {"name": "many", "topology": {"kind": "fat_tree", "k": 4},
            "workload": {"kind": "flows", "flows": flows}}
    s = write(tmp_path, json.dumps(dict(data, sweep={"topology.link_gbps": [100, 400]})),
              "s.json")
    rc, _, err = cli(capsys, "sweep", s, "--out", tmp_path / "o", "-j", 1, "--plot")
    assert rc == 0, err
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    assert len(rows[0]["scenario"]) > 131072
    assert [json.loads(r["scenario"])["workload"] for r in rows] == [data["workload"]] * 2
    assert (tmp_path / "o" / "line_makespan_us_vs_topology_link_gbps.svg").exists()
    f = write(tmp_path, json.dumps(data), "f.json")
    rc, _, err = cli(capsys, "faults", f, "--fraction", "0.1", "--trials", 2, "--layer", "core",
                     "--max-single", 2, "--single-samples", 2, "--out", tmp_path / "f", "-j", 1,
                     "--plot")
    assert rc == 0, err
    assert (tmp_path / "f" / "slowdown_vs_fraction.svg").exists()


@given(st.integers(1, 10**6), st.integers(0, 10**7), st.sampled_from(["B", "kB", "KiB", "MB"]),
       st.sampled_from(["x1.3", "x1.5", "x2.5", "+0.5", "+1.7", "x3"]))
@example(1, 9, "MiB", "x1.3")  # 1363148.8 bytes: the sweep was refused
@settings(max_examples=80, deadline=None)
def test_a_size_range_is_whole_bytes_from_its_start_to_at_most_its_end(lo, extra, unit, step):
    """docs/sweeps.md: sizes with a unit become integer bytes. A factor or step that is not
    whole made fractions of a byte ("1MiB..10MiB x1.3": 1363148.8, refused as 'a size must
    be a whole number of bytes') or floats ("1KiB..8KiB x1.5": 1536.0)."""
    from netcosim.sweep.spec import parse_range
    from netcosim.units import parse_bytes

    text = f"{lo}{unit}..{lo + extra}{unit} {step}"
    first, last = parse_bytes(f"{lo}{unit}"), parse_bytes(f"{lo + extra}{unit}")
    if step.startswith("+") and (last - first) / float(step[1:]) > 10**5:
        return  # more values than this property needs to look at
    vals = parse_range(text, "k")
    assert all(type(v) is int for v in vals), vals[:5]
    assert vals[0] == first and vals[-1] <= last and vals == sorted(set(vals))
    f = float(step[1:])
    for a, b in zip(vals, vals[1:]):  # each the rounded next value of the progression
        assert (abs(b - a * f) <= f if step[0] == "x" else abs(b - a - f) <= 1), (a, b)


def test_a_sweep_over_a_fine_size_range_runs(tmp_path, capsys):
    s = write(tmp_path, json.dumps(dict(SWEEP, sweep={"workload.bytes": "1MiB..10MiB x1.3"})),
              "s.json")
    rc, _, err = cli(capsys, "sweep", s, "--out", tmp_path / "o", "-j", 1)
    assert rc == 0, err
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    assert len(rows) == 9 and all(r["status"] == "ok" for r in rows)
    for r in rows:  # the column and the scenario that ran hold the same whole bytes
        assert json.loads(r["scenario"])["workload"]["bytes"] == r["workload.bytes"] == \
            r["message_bytes"]

# =========================================================================== plots
def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".png", ".svg")}


SWEEP = {"name": "bw", "seed": 1,
         "topology": {"kind": "fat_tree", "k": 4},
         "workload": {"kind": "collective", "op": "all_reduce", "algorithm": "ring",
                      "bytes": "1MiB"}}


def test_the_same_table_drawn_twice_gives_the_same_files(tmp_path):
    """The SVGs held the time they were drawn and random element ids: every redraw of a
    committed figure (docs/studies/) changed every one of its files."""
    pytest.importorskip("matplotlib")
    from netcosim import plots
    from netcosim.sweep import parse_sweep, run_sweep

    d = dict(SWEEP, sweep={"topology.link_gbps": [100, 200, 400],
                           "workload.bytes": ["64KiB", "256KiB", "1MiB"]})
    run_sweep(parse_sweep(d), tmp_path / "sweep", SEQ)
    _study(tmp_path, "faults", "0.05,0.3", trials=3, layer="core")
    for d in (tmp_path / "sweep", tmp_path / "faults"):
        plots.plot_dir(d)
        first = _files(d)
        assert any(n.endswith(".svg") for n in first) and any(n.endswith(".png") for n in first)
        plots.plot_dir(d)
        again = _files(d)
        assert sorted(again) == sorted(first)
        assert [n for n in first if first[n] != again[n]] == []


class Drawn:
    """What the plots hand matplotlib: every line's points and every heat map's cells, with
    their axes (read after drawing: labels and titles are set after the data)."""

    def __init__(self, monkeypatch):
        from matplotlib.axes import Axes

        self.lines, self.images = [], []
        real_plot, real_imshow = Axes.plot, Axes.imshow

        def plot(ax, *a, **kw):
            if len(a) >= 2:
                self.lines.append((ax, list(a[0]), list(a[1]), kw.get("label")))
            return real_plot(ax, *a, **kw)

        def imshow(ax, grid, *a, **kw):
            self.images.append((ax, np.array(grid, dtype=float)))
            return real_imshow(ax, grid, *a, **kw)

        monkeypatch.setattr(Axes, "plot", plot)
        monkeypatch.setattr(Axes, "imshow", imshow)


TWO_FABRICS = dict(SWEEP, sweep=[
    {"columns": {"fabric": "fat_tree"}, "topology.link_gbps as gbps": [100, 200, 400],
     "workload.bytes": ["64KiB", "1MiB"]},
    # FullFlat has no link_gbps: its rows lack the gbps column
    {"columns": {"fabric": "fullflat"},
     "set": {"topology": {"kind": "fullflat", "n_gpus": 16, "planes": 2}},
     "workload.bytes": ["64KiB", "1MiB"]},
])


@pytest.mark.parametrize("plot", [None, [
    {"name": "hm", "kind": "heatmap", "x": "gbps", "y": "workload.bytes",
     "metric": "busbw_GBps"},
    {"name": "ln", "x": "gbps", "y": "busbw_GBps", "hue": "fabric",
     "facet": "workload.bytes"}]])
def test_plots_of_blocks_that_lack_a_column_draw_the_tables_values(tmp_path, capsys,
                                                                   monkeypatch, plot):
    """A sweep of two fabrics, one without the x column: --plot stopped with exit 2, 'sweep.csv
    does not hold what netcosim writes (ValueError: None is not in list)', after half the
    figures. Every cell and point drawn is the table's (one row each here, so its median is
    the row's value)."""
    pytest.importorskip("matplotlib")
    data = dict(TWO_FABRICS, **({"plot": plot} if plot else {}))
    s = write(tmp_path, json.dumps(data), "s.json")
    out = tmp_path / "o"
    drawn = Drawn(monkeypatch)
    rc, stdout, err = cli(capsys, "sweep", s, "--out", out, "-j", 1, "--plot")
    assert rc == 0, err
    _, rows = read_table(out / "sweep.csv")
    ft = [r for r in rows if r["fabric"] == "fat_tree"]
    assert len(ft) == 6 and all(r["status"] == "ok" for r in rows)
    # the heat map: gbps across, bytes up, every cell the row's busbw
    ((ax, grid),) = drawn.images
    xs, ys = sorted({r["gbps"] for r in ft}), sorted({r["workload.bytes"] for r in ft})
    assert grid.shape == (len(ys), len(xs))
    for r in ft:
        assert grid[ys.index(r["workload.bytes"]), xs.index(r["gbps"])] == r["busbw_GBps"]
    # the busbw lines: fat_tree's points, one panel per size, FullFlat's rows have no gbps
    want = {(r["workload.bytes"], r["gbps"], r["busbw_GBps"]) for r in ft}
    got = set()
    for ax, x, y, lab in drawn.lines:
        if ax.figure.axes[0].get_ylabel() == "bus bandwidth (GB/s)":  # panels share it
            assert lab == "fat_tree"
            size = {r["workload.bytes"] for r in ft
                    if ax.get_title().endswith(f"= {r['workload.bytes']}")}
            (size,) = size
            got |= {(size, a, b) for a, b in zip(x, y)}
    assert got == want


def test_the_default_heat_map_is_over_the_two_columns_with_the_most_values(tmp_path,
                                                                          monkeypatch):
    """docs/sweeps.md: a heat map over the two numeric columns with the most values. Its y
    was the first other numeric column in file order (here latency, 2 values, not the 3
    sizes)."""
    pytest.importorskip("matplotlib")
    from netcosim import plots
    from netcosim.sweep import parse_sweep, run_sweep

    d = dict(SWEEP, sweep={"topology.latency_us": [0.5, 1.0],
                           "topology.link_gbps": [100, 200, 400, 800],
                           "workload.bytes": ["64KiB", "256KiB", "1MiB"]})
    run_sweep(parse_sweep(d), tmp_path, SEQ)
    drawn = Drawn(monkeypatch)
    names = {p.name for p in plots.plot_dir(tmp_path)}
    assert "heatmap_busbw_GBps_topology_link_gbps_workload_bytes.png" in names
    # a panel per latency (the remaining column), each cell that row's busbw
    _, rows = read_table(tmp_path / "sweep.csv")
    gbps, sizes = [100, 200, 400, 800], [65536, 262144, 1048576]
    assert len(drawn.images) == 2
    for ax, grid in drawn.images:
        assert ax.get_xlabel() == "link (Gb/s)" and ax.get_ylabel() == "message size (bytes)"
        lat = float(ax.get_title().rpartition("= ")[2])
        for i, b in enumerate(sizes):
            for j, g in enumerate(gbps):
                (v,) = [r["busbw_GBps"] for r in rows if r["workload.bytes"] == b and
                        r["topology.link_gbps"] == g and r["topology.latency_us"] == lat]
                assert grid[i, j] == v


@given(st.text("0123456789abcdef", min_size=16, max_size=16))
@example("2572518598123321")  # ids of real points (seed 2987 and 1358 of SWEEP's table)
@example("61542395e3329141")
@settings(max_examples=60, deadline=None)
def test_a_point_id_reads_back_as_written(tmp_path_factory, pid):
    """read_table parsed every cell that looks like a number: one point id in about 800 came
    back as an int, or as inf ("61542395e3329141")."""
    from netcosim.sweep.table import write_table

    d = tmp_path_factory.mktemp("t")
    write_table(d, [{"point": 0, "point_id": pid, "status": "ok", "x": 1, "error": "",
                     "scenario": "{}"}], ["x"])
    _, (row,) = read_table(d / "sweep.csv")
    assert (row["point_id"], row["status"], row["x"], row["error"]) == (pid, "ok", 1, None)


def test_a_plot_where_on_a_label_written_as_text_keeps_its_rows(tmp_path, capsys, monkeypatch):
    """Bundle labels "16" and "32" (text) read back from sweep.csv as the numbers 16 and 32,
    so `where = { gpus = "16" }` matched no row and the figure was silently not drawn."""
    pytest.importorskip("matplotlib")
    data = dict(SWEEP, sweep={"gpus": [{"label": "16", "topology.link_gbps": 100},
                                       {"label": "32", "topology.link_gbps": 400}],
                              "workload.bytes": ["64KiB", "256KiB", "1MiB"]},
                plot=[{"name": "w", "x": "workload.bytes", "y": "busbw_GBps",
                       "where": {"gpus": "16"}}])
    s = write(tmp_path, json.dumps(data), "s.json")
    drawn = Drawn(monkeypatch)
    rc, out, err = cli(capsys, "sweep", s, "--out", tmp_path / "o", "-j", 1, "--plot")
    assert rc == 0, err
    assert (tmp_path / "o" / "w_busbw_GBps.svg").exists()
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    want = [(r["workload.bytes"], r["busbw_GBps"]) for r in rows if r["gpus"] == 16]
    ((_, x, y, _),) = drawn.lines
    assert list(zip(x, y)) == want


# =========================================================================== no-op faults
@pytest.mark.parametrize("kind", ["down", "degrade:0.25"])
def test_link_faults_after_the_end_slow_nothing(tmp_path, kind):
    """Faults that strike once every transfer has finished: every trial and every single
    link's slowdown is exactly 1, none strands (even an edge link: its host is done)."""
    res = _study(tmp_path, "s", "0.05,0.3", trials=4, kind=kind, layer="any", at_us=1e6,
                 max_single=8, single_samples=6)
    _, rows = read_table(tmp_path / "s" / "sweep.csv")
    assert len(rows) == 14 and {r["slowdown"] for r in rows} == {1.0}
    assert not any(r["stranded"] for r in rows)
    assert all(s["median"] == s["worst"] == 1.0 for s in res["summary"])


@pytest.mark.parametrize("kind", ["gpu_slow:0.5", "hbm_degrade:0.3"])
def test_gpu_faults_after_the_step_slow_nothing(tmp_path, kind):
    from netcosim.faults_study import run_fault_study

    train = Scenario.from_dict(tomllib.loads(TRAIN_BASE))
    res = run_fault_study(train, tmp_path, "0.3,0.6", kind=kind, trials=3, at_us=1e7,
                          backend=SEQ)
    _, rows = read_table(tmp_path / "sweep.csv")
    assert len(rows) == 6 + 4 and {r["slowdown"] for r in rows} == {1.0}
    assert {r["makespan_us"] for r in rows} == {res["baseline"]["makespan_us"]}


def test_faults_that_change_nothing_give_the_fault_free_run(tmp_path, capsys):
    """Through a sweep, on both engines: a down that comes back up before any transfer
    starts, and a degrade to 1.0 of the link's bandwidth, run exactly as no fault at all."""
    flows = [{"src": 0, "dst": 5, "bytes": 100000, "start_us": 10},
             {"src": 1, "dst": 9, "bytes": 200000, "start_us": 10},
             {"src": 4, "dst": 0, "bytes": 300000, "start_us": 10}]
    base = {"name": "noop", "seed": 1, "topology": {"kind": "fat_tree", "k": 4},
            "workload": {"kind": "flows", "flows": flows}}
    faults = [{"link": [0, 16], "kind": "down", "at_us": 0},
              {"link": [0, 16], "kind": "up", "at_us": 5},
              {"link": [24, 32], "kind": "degrade", "factor": 1.0, "at_us": 0}]
    d = dict(base, faults=faults, sweep={"engine.kind": ["flow", "packet"],
                                         "routing.policy": ["ecmp", "shortest"]})
    s = write(tmp_path, json.dumps(d), "s.json")
    rc, _, err = cli(capsys, "sweep", s, "--out", tmp_path / "o", "-j", 1)
    assert rc == 0, err
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    for r in rows:
        alone = dict(base, engine={"kind": r["engine.kind"]},
                     routing={"policy": r["routing.policy"]})
        f = write(tmp_path, json.dumps(alone), "alone.json")
        rc, _, err = cli(capsys, "run", f, "--out", tmp_path / "r")
        assert rc == 0, err
        summ = json.loads((tmp_path / "r" / "summary.json").read_text())
        assert (r["makespan_us"], r["stranded"]) == (summ["makespan_us"], 0)
        assert r["fault_events"] > 0 == summ["fault_events"]


WALL = {"run_s", "cpu_s", "wall_s", "compile_s", "setup_s", "loop_s", "wall_total_s",
        "events_per_s"}


def _table(path):
    _, rows = read_table(path)
    return [{k: v for k, v in r.items() if k not in WALL} for r in rows]


def test_a_resumed_study_writes_the_tables_of_one_run(tmp_path):
    """Half the journal lost (a crash mid-line), then --resume with 2 workers: the same
    sweep.csv (wall-clock columns aside), fault_summary.csv and costliest_links.csv as one
    uninterrupted run with 1 worker."""
    from netcosim.faults_study import run_fault_study

    kw = dict(kind="degrade:0.5", layer="aggregation", trials=5, max_single=6, single_samples=4)
    run_fault_study(_scenario(), tmp_path / "a", "0.05,0.3", backend=SEQ, **kw)
    run_fault_study(_scenario(), tmp_path / "b", "0.05,0.3", backend=SEQ, **kw)
    journal = tmp_path / "b" / "rows.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[: len(lines) // 2]) + "\n" + lines[-1][:40])
    res = run_fault_study(_scenario(), tmp_path / "b", "0.05,0.3", resume=True,
                          backend=Backend(jobs=2, progress=False), **kw)
    assert (res["outcome"].ran, res["outcome"].skipped) == (len(lines) - len(lines) // 2,
                                                             len(lines) // 2)
    for name in ("sweep.csv", "fault_summary.csv", "costliest_links.csv"):
        assert _table(tmp_path / "b" / name) == _table(tmp_path / "a" / name), name


@pytest.mark.parametrize("spec", [True, False])
def test_a_heat_maps_panels_are_every_facet_value_or_say_they_are_not(tmp_path, capsys,
                                                                      monkeypatch, spec):
    """A [[plot]] heat map with a facet of 5 values drew 4 panels and said nothing; the
    default heat map (a panel per topology) keeps to 4 and now says it shows 4 of 5."""
    pytest.importorskip("matplotlib")
    if spec:
        data = dict(SWEEP, sweep={"topology.latency_us": [0.25, 0.5, 1.0, 2.0, 4.0],
                                  "topology.link_gbps": [100, 200, 400],
                                  "workload.bytes": ["64KiB", "256KiB"]},
                    plot=[{"name": "hm", "kind": "heatmap", "x": "topology.link_gbps",
                           "y": "workload.bytes", "metric": "busbw_GBps",
                           "facet": "topology.latency_us"}])
    else:  # five "fabrics" (told apart by their seed): the heat map's panels
        data = dict(SWEEP, sweep=[{"columns": {"net": n}, "set": {"seed": i},
                                   "topology.link_gbps": [100, 200, 400],
                                   "workload.bytes": ["64KiB", "256KiB"]}
                                  for i, n in enumerate("ABCDE")])
    s = write(tmp_path, json.dumps(data), "s.json")
    drawn = Drawn(monkeypatch)
    rc, _, err = cli(capsys, "sweep", s, "--out", tmp_path / "o", "-j", 1, "--plot")
    assert rc == 0, err
    _, rows = read_table(tmp_path / "o" / "sweep.csv")
    if spec:
        assert len(drawn.images) == 5
        for ax, grid in drawn.images:
            lat = float(ax.get_title().rpartition("= ")[2])
            want = sorted(r["busbw_GBps"] for r in rows if r["topology.latency_us"] == lat)
            assert sorted(grid.ravel().tolist()) == want
    else:
        assert len(drawn.images) == 4
        ax = drawn.images[0][0]
        assert "net: the first 4 of 5" in ax.figure._suptitle.get_text()


def test_a_scenario_passed_as_a_fault_trial_is_still_checked_as_a_sweep_point():
    """A worker's checker remembered a scenario as passed whichever check it had passed: a
    fault trial that cuts a host off passes without the reachability check, and the same
    scenario as a sweep point then passed too (the run failed instead of the sweep being
    refused)."""
    from netcosim.sweep.points import Checker
    from topo.errors import InputError

    data = dict(tomllib.loads(FLOWS_BASE), faults=[{"link": [0, 16], "kind": "down"}])
    checker = Checker()
    checker.check(data, reachable=False)
    with pytest.raises(InputError, match="cannot reach"):
        checker.check(data)

"""Plots drawn from synthetic sweep and fault-study tables (no engine needed)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from netcosim import plots  # noqa: E402
from netcosim.sweep.table import write_table  # noqa: E402


def _sweep_dir(tmp_path):
    rows = []
    i = 0
    for kind in ("fat_tree", "fullflat"):
        for g in (100, 400):
            for b in (2**20, 2**24, 2**28):
                t = b / (g * 1.25e8) * (1.0 if kind == "fullflat" else 1.5) * 1e6
                rows.append({"point": i, "point_id": f"p{i}", "status": "ok",
                             "topology.kind": kind, "topology.link_gbps": g,
                             "workload.bytes": b, "makespan_us": t,
                             "busbw_GBps": b / t / 1e3, "scenario": "{}"})
                i += 1
    rows.append({"point": i, "point_id": "bad", "status": "error", "topology.kind": "fat_tree",
                 "topology.link_gbps": 200, "workload.bytes": 2**20, "error": "boom"})
    params = ["topology.kind", "topology.link_gbps", "workload.bytes"]
    write_table(tmp_path, rows, params)
    (tmp_path / "sweep_meta.json").write_text(json.dumps({"kind": "sweep", "params": params,
                                                          "name": "synthetic"}))
    return tmp_path


def test_sweep_plots(tmp_path):
    paths = plots.plot_dir(_sweep_dir(tmp_path))
    names = {p.name for p in paths}
    assert "line_busbw_GBps_vs_workload_bytes.png" in names
    assert "line_makespan_us_vs_workload_bytes.svg" in names
    assert any(n.startswith("heatmap_") and n.endswith(".png") for n in names)
    for p in paths:
        assert p.stat().st_size > 1000
    svg = (tmp_path / "line_busbw_GBps_vs_workload_bytes.svg").read_text()
    # axis labels with units and one legend entry per topology kind
    for text in ("message size (bytes)", "bus bandwidth (GB/s)", "fat_tree", "fullflat",
                 "1MiB", "256MiB"):
        assert text in svg


def test_sweep_plots_draw_the_four_serving_metrics(tmp_path):
    """Inference rows: throughput per GPU, p99 TTFT, p50 ITL and goodput each get a line plot
    (docs/inference.md says so; goodput was the fourth and was cut off by a cap of three)."""
    rows, i = [], 0
    for kind in ("two_tier", "fullflat"):
        for rate in (4.0, 8.0, 16.0):
            slow = 1.0 if kind == "fullflat" else 1.3
            rows.append({"point": i, "point_id": f"p{i}", "status": "ok", "topology.kind": kind,
                         "workload.requests.rate": rate, "makespan_us": 1e6 * rate,
                         "output_tokens_per_s_per_gpu": 100 * rate / slow,
                         "ttft_p99_s": 0.1 * rate * slow, "itl_p50_s": 0.02 * slow,
                         "goodput_rps": rate / slow, "scenario": "{}"})
            i += 1
    params = ["topology.kind", "workload.requests.rate"]
    write_table(tmp_path, rows, params)
    (tmp_path / "sweep_meta.json").write_text(json.dumps({"kind": "sweep", "params": params,
                                                          "name": "serving"}))
    names = {p.name for p in plots.plot_dir(tmp_path)}
    for m in ("output_tokens_per_s_per_gpu", "ttft_p99_s", "itl_p50_s", "goodput_rps"):
        assert f"line_{m}_vs_workload_requests_rate.png" in names, (m, sorted(names))


def test_fault_plots(tmp_path):
    rows, i = [], 0
    for f in (0.01, 0.05, 0.2):
        for t in range(10):
            stranded = f == 0.2 and t < 3
            rows.append({"point": i, "point_id": f"p{i}", "status": "ok", "study": "random",
                         "fraction": f, "trial": t, "stranded": 5 if stranded else 0,
                         "stranded_run": stranded,
                         "slowdown": None if stranded else 1 + f * (1 + t / 10)})
            i += 1
    write_table(tmp_path, rows, ["study", "fraction", "trial"])
    (tmp_path / "costliest_links.csv").write_text(
        "rank,link,u,v,layer,slowdown,makespan_us,stranded\n"
        "1,3,16,24,core,,,4\n2,5,17,25,core,1.25,10.0,0\n3,9,18,26,core,1.1,9.0,0\n")
    (tmp_path / "sweep_meta.json").write_text(json.dumps(
        {"kind": "faults", "scenario": "synthetic", "fault_kind": "down", "layer": "core"}))
    names = {p.name for p in plots.plot_dir(tmp_path)}
    assert {"slowdown_vs_fraction.png", "slowdown_cdf.svg", "costliest_links.png"} <= names
    svg = (tmp_path / "slowdown_vs_fraction.svg").read_text()
    assert "fraction of links failed" in svg and "3/10 stranded" in svg
    assert "16–24 (core)" in (tmp_path / "costliest_links.svg").read_text()


def test_labels_have_units():
    assert plots.label("topology.link_gbps") == "link (Gb/s)"
    assert plots.label("topology.latency_us") == "latency (µs)"
    assert plots.label("makespan_us") == "completion time (µs)"


def test_plot_refuses_empty_dir(tmp_path):
    from netcosim.cli import main

    assert main(["plot", str(tmp_path)]) == 2


def test_plot_tables_from_the_sweep_file(tmp_path):
    rows, i = [], 0
    for fabric, has_so in (("two-tier", True), ("FullFlat", False)):
        for su in (1800, 7200):
            for so in ((200, 800) if has_so else (None,)):
                r = {"point": i, "point_id": f"p{i}", "status": "ok", "fabric": fabric,
                     "scaleup_gbps": su, "busbw_GBps": su / 100 + (so or 1000) / 100}
                if so:
                    r["scaleout_gbps"] = so
                rows.append(r)
                i += 1
    params = ["fabric", "scaleup_gbps", "scaleout_gbps"]
    write_table(tmp_path, rows, params)
    specs = [{"kind": "line", "name": "bw", "x": "scaleup_gbps", "y": ["busbw_GBps"],
              "hue": "fabric", "facet": "scaleout_gbps", "where": {}},
             {"kind": "heatmap", "name": "hm", "x": "scaleup_gbps", "y": "scaleout_gbps",
              "metric": "busbw_GBps", "where": {"fabric": "two-tier"}}]
    (tmp_path / "sweep_meta.json").write_text(json.dumps(
        {"kind": "sweep", "params": params, "plots": specs, "name": "t"}))
    names = sorted(p.name for p in plots.plot_dir(tmp_path))
    assert names == ["bw_busbw_GBps.png", "bw_busbw_GBps.svg", "hm.png", "hm.svg"]
    svg = (tmp_path / "bw_busbw_GBps.svg").read_text()
    # FullFlat has no scale-out column: it is drawn in both scale-out panels
    assert svg.count("FullFlat") >= 1 and "scale-out bandwidth per GPU (Gb/s) = 200" in svg

"""Units of the figures netcosim writes, checked by hand on tiny cases (times in output files in
microseconds, per-second rates labelled as such)."""
import csv
import json

import pytest

from cli_helpers import cli, refused, write

# four 1 MB flows into one host of a 100 Gb/s star, DCQCN with PFC: the senders' links pause
PFC_INCAST = """
[topology]
kind = "custom"
hosts = 5
switches = 1
links = [[0, 5, 100, 1.0], [1, 5, 100, 1.0], [2, 5, 100, 1.0], [3, 5, 100, 1.0], [4, 5, 100, 1.0]]
[engine]
kind = "packet"
transport = "dcqcn"
buffer_packets = 100
[workload]
kind = "flows"
flows = [{src = 1, dst = 0, bytes = 1000000}, {src = 2, dst = 0, bytes = 1000000},
         {src = 3, dst = 0, bytes = 1000000}, {src = 4, dst = 0, bytes = 1000000}]
"""


def test_links_csv_pause_time_in_microseconds(tmp_path, capsys):
    # links.csv writes times in microseconds (busy_us); the packet engine's PFC pause time was
    # written as pause_s in seconds (0.000231 beside busy_us 80.4), where docs/scenarios.md
    # promises pause_us
    rc, out, err = cli(capsys, "run", write(tmp_path, PFC_INCAST), "--out", tmp_path / "o")
    assert rc == 0, err
    rows = list(csv.DictReader(open(tmp_path / "o" / "links.csv")))
    assert "pause_us" in rows[0] and "pause_s" not in rows[0]
    span = json.load(open(tmp_path / "o" / "summary.json"))["makespan_us"]
    # each sender's link to the switch (rows 2, 4, 6, 8) carries 1 MB in 80.4 us at 100 Gb/s
    # and is paused for a good part of the ~324 us run: microseconds, not seconds
    senders = rows[2::2]
    for r in senders:
        assert float(r["busy_us"]) == pytest.approx(1005152 / 12.5e3, rel=1e-9)  # 12.5 kB/us
        assert 10.0 < float(r["pause_us"]) < span


def test_plot_labels_of_rates_and_per_gpu_figures():
    from netcosim.plots import label

    # a rate is per second: "tokens per (s)" read as a time in seconds
    assert label("tokens_per_s") == "tokens/s"
    assert label("output_tokens_per_s") == "output tokens/s"
    assert label("compute_s_per_gpu") == "compute per GPU (s)"
    assert label("weights_GB_per_gpu") == "weights per GPU (GB)"
    assert label("request_rate_rps") == "request rate (requests/s)"
    assert label("bytes") == "bytes"
    # unchanged
    assert label("makespan_us") == "completion time (µs)"
    assert label("topology.link_gbps") == "link (Gb/s)"
    assert label("busbw_GBps") == "bus bandwidth (GB/s)"


def _captured_labels(monkeypatch, call):
    """x labels, legend titles and titles of every figure ``call`` saves."""
    from netcosim import plots

    seen = []

    def fake_save(fig, stem, tight=True):
        for ax in fig.axes:
            leg = ax.get_legend()
            seen.append((stem.name, ax.get_xlabel(), ax.get_title(),
                         leg.get_title().get_text() if leg else ""))
        import matplotlib.pyplot as plt
        plt.close(fig)
        return []

    monkeypatch.setattr(plots, "_save", fake_save)
    call(plots)
    return seen


def test_gpu_fault_study_plots_say_gpus_not_links(tmp_path, monkeypatch):
    # a study of slowed GPUs draws its fraction of GPUs; the axes said "fraction of links
    # failed" and the CDF's legend "links failed"
    rows = [{"study": "random", "fraction": f, "slowdown": s, "stranded_run": 0}
            for f, s in ((0.25, 1.1), (0.25, 1.3), (0.5, 1.4), (0.5, 1.6))]
    meta = {"scenario": "t", "fault_kind": "gpu_slow", "factor": 0.5}
    seen = _captured_labels(monkeypatch, lambda p: p.fault_plots(tmp_path, rows, meta))
    text = " ".join(" ".join(x) for x in seen)
    assert "link" not in text, seen
    assert any(x[1] == "fraction of GPUs slowed" for x in seen)
    # a link study keeps its labels
    meta = {"scenario": "t", "fault_kind": "down", "layer": "core"}
    seen = _captured_labels(monkeypatch, lambda p: p.fault_plots(tmp_path, rows, meta))
    assert any(x[1] == "fraction of links failed" for x in seen)
    assert any(x[3] == "links failed" for x in seen)


def test_fault_case_plot_titles_gpu_kinds(tmp_path, monkeypatch):
    # a study file with kinds ["down", "gpu_slow:0.5"]: the GPU panel was titled "links
    # degraded to 0.5 of their bandwidth" with a link-layer x label
    (tmp_path / "study_summary.csv").write_text(
        "case,kind,dir,baseline_us,fraction,failed_links,trials,finished,stranded_runs,errors,"
        "median,p90,p99,worst,mean\n"
        "a,down,a-down,10,0.1,1,2,2,0,0,1.2,1.3,1.3,1.3,1.2\n"
        "a,gpu_slow:0.5,a-gpu_slow_0.5,10,0.1,,2,2,0,0,1.5,1.6,1.6,1.6,1.5\n")
    meta = {"kind": "fault_cases", "name": "s", "layer": "any", "dirs": []}
    seen = _captured_labels(monkeypatch, lambda p: p.fault_case_plots(tmp_path, meta))
    by_title = {x[2]: x[1] for x in seen}
    assert by_title == {"links down": "fraction of links failed (any layer)",
                        "GPUs at 0.5 of their FLOP/s": "fraction of GPUs slowed"}, seen


TRAIN_SWEEP = """
[topology]
kind = "custom"
hosts = 2
links = [[0, 1, 100, 1.0]]
[workload]
kind = "training"
gpu = "h100_sxm"
model = { layers = 2, hidden = 256, heads = 4, seq = 128, vocab = 1024 }
[workload.parallel]
tp = 1
pp = 1
dp = 2
micro_batch = 1
global_batch = 4
[sweep]
"topology.links" = [[[0, 1, 100, 1.0]], [[0, 1, 50, 1.0]]]
"""


def test_training_sweep_rows_carry_exposed_comm_and_memory(tmp_path, capsys):
    # a fixed-layout training sweep dropped summary.json's exposed_comm_s and memory tables
    # (nested), so exposed data-parallel time could not be plotted or compared; a layout
    # search's rows had exposed_<kind>_s
    rc, out, err = cli(capsys, "sweep", write(tmp_path, TRAIN_SWEEP), "--out", tmp_path / "o",
                       "-j", "1", "--no-progress")
    assert rc == 0, err
    rows = list(csv.DictReader(open(tmp_path / "o" / "sweep.csv")))
    # by hand: 2 layers x (4h^2 + 4h + 8h^2) + V h = 1,837,056 parameters, fp32 gradients
    # (4 B) all-reduced by a 2-rank ring: 2 steps of S/2 over the link plus 1 us each
    params = 2 * (12 * 256**2 + 4 * 256) + 1024 * 256
    S = 4 * params
    for r, gbps in zip(rows, (100, 50)):
        want = 2 * (S / 2) / (gbps * 1e9 / 8) + 2 * 1e-6
        assert float(r["exposed_dp_s"]) == pytest.approx(want, rel=1e-9)
        assert float(r["exposed_tp_s"]) == 0.0
        # weights 2 B, gradients 4 B, optimizer 12 B per parameter (GB = 1e9 bytes, 3 decimals)
        assert float(r["memory_weights_GB"]) == round(2 * params / 1e9, 3)
        assert float(r["memory_optimizer_GB"]) == round(12 * params / 1e9, 3)
        assert float(r["memory_capacity_GB"]) == 80.0


# one flow of SIZE over one 8 Gb/s link (1 MB takes 1,000 us, plus 1 us of latency)
ONE_FLOW = """
[topology]
kind = "custom"
hosts = 2
links = [[0, 1, 8, 1.0]]
[workload]
kind = "flows"
flows = [{src = 0, dst = 1, bytes = "SIZE"}]
"""


def test_sweep_sizes_listed_with_units_are_bytes_in_the_table(tmp_path, capsys):
    # a list of size strings stayed text in sweep.csv (a range's sizes were bytes), so the
    # column sorted as text and --plot drew no figure; the scenarios keep what was written
    text = ONE_FLOW.replace("SIZE", "1MB") + """[sweep]
"workload.flows.0.bytes" = ["1MB", "4MiB", "2MB"]
[[plot]]
x = "workload.flows.0.bytes"
y = "makespan_us"
"""
    rc, _, err = cli(capsys, "sweep", write(tmp_path, text), "--out", tmp_path / "o", "-j", "1",
                     "--no-progress", "--plot")
    assert rc == 0, err
    rows = list(csv.DictReader(open(tmp_path / "o" / "sweep.csv")))
    assert [r["workload.flows.0.bytes"] for r in rows] == ["1000000", str(4 << 20), "2000000"]
    assert [json.loads(r["scenario"])["workload"]["flows"][0]["bytes"] for r in rows] == \
        ["1MB", "4MiB", "2MB"]
    # 8 Gb/s: 1 MB takes 1,000 us (+1 us latency)
    assert float(rows[0]["makespan_us"]) == pytest.approx(1001.0, rel=1e-6)
    assert list((tmp_path / "o").glob("*.png")), err
    from netcosim.sweep.points import column_value

    assert [column_value(v) for v in ("x7", "ring", "10us", "400", 5, "1.5KB")] == \
        ["x7", "ring", "10us", "400", 5, 1500]  # only sizes with a unit change


def test_fault_times_take_units_as_start_times_do(tmp_path, capsys):
    # a flow's start_us took "2ms" while a fault's at_us = "1ms" was refused as not a time
    base = ONE_FLOW.replace("SIZE", "2MB") + """[[faults]]
link = [0, 1]
kind = "degrade"
factor = 0.5
at_us = AT
"""
    got = {}
    for at in ('"500us"', "500", '"0.5ms"'):
        rc, _, err = cli(capsys, "run", write(tmp_path, base.replace("AT", at)), "--out",
                         tmp_path / f"o{len(got)}")
        assert rc == 0, err
        got[at] = json.loads((tmp_path / f"o{len(got)}" / "summary.json").read_text())
    # 2 MB over 8 Gb/s: 500 us at full rate moves 0.5 MB, the 1.5 MB left at half rate take
    # 3,000 us
    spans = {g["makespan_us"] for g in got.values()}
    assert len(spans) == 1 and spans.pop() == pytest.approx(3501.0, rel=1e-6)
    refused(capsys, "run", write(tmp_path, base.replace("AT", '"-1ms"')), "--out",
            tmp_path / "bad", has=("faults[0].at_us = '-1ms'",))

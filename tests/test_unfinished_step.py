"""A training step some of whose transfers never end (a fault leaves them no path) has no step
time: summary.json writes step_time_s, mfu and tokens_per_s as null and `netcosim run` warns,
instead of reporting the end of the part that ran (a GPU whose NIC went down mid-step gave
the healthy step's time and MFU)."""
import json
import math
from pathlib import Path

import numpy as np

from cli_helpers import TRAIN_BASE, cli, write
from compute.report import format_summary, summarize
from compute.training import build_step
from fabric_helpers import scaleout_link
from netcore.api import simulate
from netcore.schedule import TRANSFER
from topo.builders import build


def test_a_step_cut_off_mid_run_has_no_step_time(tmp_path, capsys):
    fab = build("two_tier", {"nodes": 2, "gpus_per_node": 2})
    healthy = write(tmp_path, TRAIN_BASE, "healthy.toml")
    rc, _, err = cli(capsys, "run", healthy, "--out", tmp_path / "h")
    s = json.loads((tmp_path / "h" / "summary.json").read_text())
    assert rc == 0 and "warning" not in err and s["stranded"] == 0
    assert s["step_time_s"] > 0 and s["mfu"] > 0
    at = s["step_time_s"] * 1e6 / 2  # mid-step, for good: no later `up`
    link = scaleout_link(fab, 0)
    cut = write(tmp_path, TRAIN_BASE + f'[[faults]]\nlink = {link}\nkind = "down"\n'
                                       f'at_us = {at}\n', "cut.toml")
    rc, out, err = cli(capsys, "run", cut, "--out", tmp_path / "c")
    s = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert rc == 0 and s["stranded"] > 0 and s["unfinished_nodes"] > 0
    assert s["step_time_s"] is None and s["mfu"] is None and s["tokens_per_s"] is None
    assert s["makespan_us"] > 0  # the end of the last node that finished, as documented
    assert "stranded" in out and "did not finish" in err and "step_time_s" not in out


def test_summarize_gives_nan_for_a_step_that_never_ends():
    fab = build("two_tier", {"nodes": 2, "gpus_per_node": 2})
    model = dict(layers=2, hidden=256, heads=4, seq=128, vocab=1000)
    s = build_step(model, dict(tp=2, pp=1, global_batch=4), "h100_sxm", fab)
    r = simulate(fab, s, "ecmp")
    whole = summarize(s, r.start, r.end)
    end = r.end.copy()
    end[np.flatnonzero(s.kind == TRANSFER)[-1]] = np.nan  # one transfer never ends
    part = summarize(s, r.start, end)
    assert "unfinished_nodes" not in whole and whole["step_time_s"] > 0
    assert part["unfinished_nodes"] == 1
    assert all(math.isnan(part[k]) for k in ("step_time_s", "mfu", "hfu", "tokens_per_s"))
    assert "never ended" in format_summary(part) and "never ended" not in format_summary(whole)


def test_a_chakra_trace_cut_off_mid_run_has_no_step_time(tmp_path, capsys):
    trace = Path(__file__).resolve().parents[1] / "examples" / "chakra" / "ring_allreduce_8"
    text = ('[topology]\nkind = "leaf_spine"\nleaves = 2\nhosts_per_leaf = 4\nspines = 2\n'
            f'[workload]\nkind = "chakra"\npath = "{trace.as_posix()}"\n')
    rc, _, _ = cli(capsys, "run", write(tmp_path, text, "whole.toml"), "--out", tmp_path / "w")
    whole = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert rc == 0 and whole["step_time_s"] > 0
    cut = text + f'[[faults]]\nlink = [0, 8]\nkind = "down"\nat_us = {whole["makespan_us"] / 2}\n'
    rc, _, err = cli(capsys, "run", write(tmp_path, cut, "cut.toml"), "--out", tmp_path / "c")
    s = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert rc == 0 and s["stranded"] > 0 and s["step_time_s"] is None
    assert "did not finish" in err

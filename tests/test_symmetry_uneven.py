"""Folding replicas onto a representative where routing treats them differently (session 42).

A folded pipeline send stands for that send of every replica, and the representative waits for
its slowest copy. Under ECMP with several leaves per rail the copies meet different spine
collisions, and the folded step differs from the one with every replica simulated (+3.1% on
GPT-3 175B over 2,048 GPUs). A run counts such sends (``symmetry_uneven_sends``) and warns, and
a fault study compares trials that simulated every replica with a baseline simulated so.
"""
from __future__ import annotations

import json

import pytest

from cli_helpers import cli, write

SMALL = """
name = "small"
seed = 1
[topology]
kind = "two_tier"
nodes = 16
gpus_per_node = 2
nodes_per_leaf = {npl}
nic_gbps = 100
[routing]
policy = "ecmp"
[workload]
kind = "training"
gpu = "h100_sxm"
granularity = "coarse"
network_detail = "{detail}"
symmetry = "{sym}"
model = {{ layers = 4, hidden = 4096, heads = 32, seq = 2048, vocab = 32000 }}
[workload.parallel]
tp = 2
pp = 2
micro_batch = 1
global_batch = 64
"""


def _run(tmp_path, capsys, npl=2, detail="auto", sym="auto"):
    s = write(tmp_path, SMALL.format(npl=npl, detail=detail, sym=sym),
              f"s_{npl}_{detail}_{sym}.toml")
    out = tmp_path / f"o_{npl}_{detail}_{sym}"
    rc, _, err = cli(capsys, "run", s, "--out", out)
    assert rc == 0, err
    return json.loads((out / "summary.json").read_text()), err


@pytest.mark.parametrize("detail", ["auto", "full"])
def test_uneven_folded_sends_are_counted_and_warned(tmp_path, capsys, detail):
    folded, err = _run(tmp_path, capsys, detail=detail)
    assert folded["folded_replicas"] == 7
    assert folded["symmetry_uneven_sends"] > 0
    assert "warning: symmetry:" in err and "pipeline sends" in err
    alone, err = _run(tmp_path, capsys, detail=detail, sym="none")
    assert alone["folded_replicas"] == 0 and alone["symmetry_uneven_sends"] == 0
    assert "warning: symmetry" not in err


def test_one_leaf_per_rail_folds_without_a_warning(tmp_path, capsys):
    """The default two_tier layout, scalable form: the copies of a send meet alike."""
    s, err = _run(tmp_path, capsys, npl=16)
    assert s["folded_replicas"] == 7 and s["symmetry_uneven_sends"] == 0
    assert "warning" not in err


def test_fault_study_compares_unfolded_trials_with_an_unfolded_baseline(tmp_path, capsys):
    """network_detail = "full" with a link fault simulates every replica, the fault-free step
    folds them: 0.21231 s folded against 0.21499 s, so a slowdown was taken against the wrong
    step. The rows now carry the unfolded step as their baseline."""
    alone, _ = _run(tmp_path, capsys, detail="full", sym="none")
    s = write(tmp_path, SMALL.format(npl=2, detail="full", sym="auto"), "study.toml")
    out = tmp_path / "fs"
    rc, o, err = cli(capsys, "faults", s, "--fraction", "0.1", "--trials", "2", "--kind",
                     "degrade:0.999", "--layer", "spine", "--no-single", "-j", "1",
                     "--out", out)
    assert rc == 0, err
    assert "every replica simulated" in o
    base = json.loads((out / "baseline.json").read_text())
    unfolded = base["unfolded_makespan_us"]
    assert list(unfolded.values()) == [pytest.approx(alone["makespan_us"], rel=1e-12)]
    assert base["makespan_us"] != pytest.approx(alone["makespan_us"], rel=1e-6)
    import csv

    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert rows and all(float(r["baseline_us"]) == pytest.approx(alone["makespan_us"])
                        for r in rows if r["status"] == "ok")

"""The FullFlat co-design study at scale (examples/studies/fullflat_codesign_at_scale.toml,
docs/codesign_study.md): the models it trains and its sweep file."""
from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

import pytest

from compute import layouts
from compute.model import get_model
from netcosim.cli import main
from netcosim.plan import to_toml
from netcosim.sweep import expand, load_sweep

STUDY = Path(__file__).resolve().parents[1] / "examples" / "studies" / \
    "fullflat_codesign_at_scale.toml"


def test_1t_preset_is_the_megatron_1t_model_and_fits_on_1024_b200():
    """Narayanan et al. 2021 (SC'21), Table 1, last row: 1,008.0 B parameters, 160 attention
    heads, hidden size 25,600, 128 layers (sequence 2,048, vocabulary 51,200)."""
    m = get_model("1t")
    assert (m.layers, m.hidden, m.heads, m.seq, m.vocab) == (128, 25600, 160, 2048, 51200)
    assert m.params == pytest.approx(1008.0e9, rel=1e-3)
    e = layouts.enumerate_layouts("1t", "b200", 1024, {"global_batch": 2048},
                                  {"sp": True, "dist_opt": True, "recompute": "selective"})
    assert e.candidates, e.reasons_text()
    assert all(c.memory_bytes <= 180e9 for c in e.candidates)


def test_study_sweep_file_expands_as_the_write_up_says():
    spec = load_sweep(STUDY)
    points = expand(spec)
    studies = Counter(p.params["study"] for p in points)
    assert studies == {"scale": 36, "domain": 18, "scaleout": 33, "innet": 27}
    # points shared between sections (the 4,096-GPU two-tier and FullFlat points, the
    # 1,024-GPU points without in-network reduction) are the same scenario: run once
    assert len({p.id for p in points}) == 87
    for p in points:
        wl = p.data["workload"]
        assert wl["parallel"] == "best" and wl["plan"]["top"] == 2
        t = p.data["topology"]
        gpus = t["n_gpus"] if t["kind"] == "fullflat" else t["nodes"] * t["gpus_per_node"]
        if "gpus" in p.params:
            assert gpus == p.params["gpus"]
        if t["kind"] == "two_tier":
            assert wl["gpu"]["scaleup_domain"] == t["gpus_per_node"] and t["spines"] == 1
        if wl["model"] == "gpt4-1.8t-moe":
            assert wl["plan"]["cp"] == 1
        # 2,048 tokens per GPU at 1,024 GPUs ... 1,024 at 32,768 (4M to 32M tokens a step)
        tokens = wl["plan"]["global_batch"] * get_model(wl["model"]).seq
        assert tokens == {1024: 4, 4096: 8, 16384: 16, 32768: 32}[gpus] * 2 ** 20
    for plot in spec.plots:
        for c in [plot.get("x"), plot.get("hue"), plot.get("facet"), *plot.get("where", {})]:
            assert c is None or c in spec.columns, (plot["name"], c)


def test_study_sweep_file_passes_the_dry_run(tmp_path, capsys):
    """``netcosim sweep --dry-run`` checks every point serially (each point enumerates and
    bounds its layouts and builds a small step); the whole study takes minutes, so the dry
    run here takes the 1,024-GPU GPT-3 points of the in-network section on all three
    fabrics, with ring and with SHARP all-reduces (the settings no other section uses)."""
    data = tomllib.loads(STUDY.read_text())
    blocks = [b for b in data["sweep"]
              if b["columns"]["study"] == "innet" and "setting" in b]
    assert len(blocks) == 3
    for b in blocks:
        b["model"] = [m for m in b["model"] if m["label"] == "GPT-3 175B"]
    data["sweep"] = blocks
    data["plot"] = [p for p in data["plot"] if p["name"] == "mfu_innet"]
    path = tmp_path / "innet.toml"
    path.write_text(to_toml(data))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    assert "6 points" in capsys.readouterr().out


def test_committed_results_hold_what_the_write_up_says():
    """docs/codesign_study.md reads its tables from the committed sweep.csv: every point ran,
    the two SHARP MoE points refused for memory from session 34 to 36 too ("Re-run (session
    37)"), at their session-13 MFU, and FullFlat leads two-tier NVL8 at every model and GPU
    count of section 1."""
    import csv

    path = STUDY.parents[2] / "docs" / "studies" / "fullflat_codesign_at_scale" / "sweep.csv"
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 114
    assert [r["point"] for r in rows if r["status"] != "ok"] == []
    sharp_moe = {r["fabric"]: float(r["mfu"]) for r in rows
                 if r["model"] == "1.8T MoE" and r["setting"] == "no dist. opt., SHARP"}
    assert round(sharp_moe["two-tier NVL64"], 3) == 0.519
    assert round(sharp_moe["FullFlat"], 3) == 0.530
    mfu = {(r["model"], r["fabric"], r["gpus"]): float(r["mfu"])
           for r in rows if r["study"] == "scale"}
    for (model, fabric, gpus), v in mfu.items():
        if fabric == "FullFlat":
            assert v > mfu[(model, "two-tier NVL8", gpus)], (model, gpus)

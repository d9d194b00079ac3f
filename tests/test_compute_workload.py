import json

import pytest

from netcosim.cli import main

SCENARIO = {
    "name": "train-tiny", "seed": 1,
    "topology": {"kind": "two_tier", "nodes": 2, "gpus_per_node": 4, "nic_gbps": 200},
    "routing": {"policy": "ecmp"}, "engine": {"kind": "flow"},
    "workload": {"kind": "training", "gpu": "H100-SXM",
                 "model": {"layers": 4, "hidden": 256, "heads": 4, "seq": 128, "vocab": 512},
                 "parallel": {"tp": 4, "pp": 2, "global_batch": 4, "sp": True,
                              "recompute": "selective"}},
}


def write(tmp_path, sc):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(sc))
    return str(p)


def test_run_reports_step_time_and_mfu(tmp_path):
    out = tmp_path / "out"
    assert main(["run", write(tmp_path, SCENARIO), "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["step_time_s"] == pytest.approx(s["makespan_us"] * 1e-6)
    assert 0 < s["mfu"] < 1 and s["tokens_per_s"] == pytest.approx(4 * 128 / s["step_time_s"])
    assert "tp" in s["exposed_comm_s"] and s["memory"]["fits"]


def test_train_command_writes_a_trace(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["train", write(tmp_path, SCENARIO), "--trace", str(trace),
                 "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "MFU" in text and "symmetry" in text
    ev = json.loads(trace.read_text())["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    assert xs and all(e["dur"] >= 0 for e in xs)
    # transfers on their own tracks never overlap on one track
    by_track = {}
    for e in xs:
        if e["tid"] >= 2:
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["step_time_s"] > 0


@pytest.mark.parametrize("patch,msg", [
    ({"parallel": {"tp": 8, "global_batch": 4}}, "workload.parallel.tp = 8: does not divide model.heads"),
    ({"gpu": "Q1"}, "workload.gpu = 'Q1'"),
    ({"model": {"layers": 4, "heads": 4}}, "workload.model.hidden: missing"),
    ({"colour": 1}, "colour"),
])
def test_bad_training_workloads_exit_2(tmp_path, capsys, patch, msg):
    sc = json.loads(json.dumps(SCENARIO))
    sc["workload"].update(patch)
    assert main(["run", write(tmp_path, sc), "--out", str(tmp_path / "o")]) == 2
    assert msg in capsys.readouterr().err


def test_faults_switch_off_the_symmetry_shortcut():
    """A faulted fabric is not symmetric: the scenario's faults reach the training builder."""
    from netcosim.scenario import Scenario

    clean = Scenario.from_dict(SCENARIO).prepare()
    assert clean.schedule.meta["symmetry"] != "none (every GPU simulated)"
    faulted = dict(SCENARIO, faults=[{"link": [0, 8], "kind": "degrade", "factor": 0.5}])
    prepared = Scenario.from_dict(faulted).prepare()
    assert prepared.schedule.meta["symmetry"] == "none (every GPU simulated)"

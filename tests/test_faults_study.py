"""Link-failure sensitivity: fraction parsing, seeded fault sets, slowdown statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from netcosim.faults_study import FaultKind, parse_fractions, study_points
from netcosim.scenario import Scenario
from topo.errors import InputError

BASE = {
    "name": "tiny-a2a", "seed": 3,
    "topology": {"kind": "fat_tree", "k": 4, "link_gbps": 100},
    "workload": {"kind": "collective", "op": "all_to_all", "algorithm": "direct",
                 "bytes": "256KiB"},
}


def test_parse_fractions():
    v = parse_fractions("0.001..0.05")
    assert len(v) == 6 and v[0] == 0.001 and v[-1] == 0.05
    ratios = np.diff(np.log(v))
    assert np.allclose(ratios, ratios[0], rtol=1e-3)  # evenly spaced in log scale
    assert parse_fractions("0.01..0.05 +0.01") == [0.01, 0.02, 0.03, 0.04, 0.05]
    assert len(parse_fractions("0.001..0.05 n8")) == 8
    assert parse_fractions("0.05,0.01") == [0.01, 0.05]


@pytest.mark.parametrize("bad", ["0", "1", "1.5", "-0.1", "0..0.5", "0.1..1", "0.5..0.1", "x",
                                 "0.1..0.2 n0"])
def test_fraction_outside_unit_interval_refused(bad):
    with pytest.raises(InputError, match="--fraction"):
        parse_fractions(bad)


def test_fault_kind():
    assert FaultKind.parse("down") == FaultKind("down", 0.0)
    assert FaultKind.parse("degrade:0.5") == FaultKind("degrade", 0.5)
    assert FaultKind.parse("degrade") == FaultKind("degrade", 0.25)
    for bad in ("up", "degrade:2", "degrade:x", "down:0.5"):
        with pytest.raises(InputError, match="--kind"):
            FaultKind.parse(bad)


def _topo(sc):
    return sc.build_topology()


def test_points_are_seeded_and_respect_the_layer():
    sc = Scenario.from_dict(dict(BASE))
    topo = _topo(sc)
    core = np.flatnonzero(topo.link_layer == topo.layer_id("core"))
    a = study_points(sc, topo, [0.1, 0.5], FaultKind("down"), "core", 5, 0.0)
    b = study_points(sc, topo, [0.1, 0.5], FaultKind("down"), "core", 5, 0.0)
    assert [p.id for p in a] == [p.id for p in b]
    rand = [p for p in a if p.params["study"] == "random"]
    single = [p for p in a if p.params["study"] == "single"]
    assert len(rand) == 10 and len(single) == core.size  # 16 core links: all of them
    core_pairs = {tuple(sorted((int(topo.dlink_src[2 * l]), int(topo.dlink_dst[2 * l]))))
                  for l in core}
    for p in rand:
        want = max(1, round(p.params["fraction"] * core.size))
        recs = p.data["faults"]
        assert p.params["failed_links"] == want and len(recs) == 2 * want  # both directions
        assert all(tuple(sorted(r["link"])) in core_pairs for r in recs)
    # different trials draw different sets (16 choose 8 makes a repeat unlikely)
    sets = {tuple(sorted(tuple(r["link"]) for r in p.data["faults"]))
            for p in rand if p.params["fraction"] == 0.5}
    assert len(sets) > 1
    # degrade and a mid-run time are carried into every record
    c = study_points(sc, topo, [0.1], FaultKind("degrade", 0.5), "core", 2, 12.5, single=False)
    assert all(r["kind"] == "degrade" and r["factor"] == 0.5 and r["at_us"] == pytest.approx(12.5, rel=1e-12)
               for p in c for r in p.data["faults"])


def test_single_link_sample_when_layer_is_large():
    sc = Scenario.from_dict(dict(BASE))
    topo = _topo(sc)
    pts = study_points(sc, topo, [0.1], FaultKind("down"), "any", 1, 0.0, max_single=10,
                       single_samples=7)
    assert sum(p.params["study"] == "single" for p in pts) == 7


def test_bad_layer_and_trials():
    sc = Scenario.from_dict(dict(BASE))
    topo = _topo(sc)
    with pytest.raises(InputError, match="--layer"):
        study_points(sc, topo, [0.1], FaultKind("down"), "spine", 1, 0.0)
    with pytest.raises(InputError, match="--trials"):
        study_points(sc, topo, [0.1], FaultKind("down"), "core", 0, 0.0)


def test_study_statistics(tmp_path):
    from netcosim.faults_study import run_fault_study
    from netcosim.sweep import Backend
    from netcosim.sweep.table import read_table

    sc = Scenario.from_dict(dict(BASE))
    res = run_fault_study(sc, tmp_path, "0.1,0.3", kind="degrade:0.25", layer="core", trials=4,
                          backend=Backend(jobs=1, progress=False))
    base = res["baseline"]["makespan_us"]
    _, rows = read_table(tmp_path / "sweep.csv")
    for f, s in zip((0.1, 0.3), res["summary"]):
        sl = [r["makespan_us"] / base for r in rows if r["fraction"] == f]
        assert s["trials"] == 4 and s["stranded_runs"] == 0
        assert math.isclose(s["median"], float(np.median(sl)), rel_tol=1e-12)
        assert math.isclose(s["worst"], max(sl), rel_tol=1e-12)
        assert s["median"] <= s["p90"] <= s["p99"] <= s["worst"]
    costly = res["costliest"]
    assert len(costly) == 16
    sl = [c["slowdown"] for c in costly]
    assert sl == sorted(sl, reverse=True)
    _, ranked = read_table(tmp_path / "costliest_links.csv")
    assert [r["slowdown"] for r in ranked] == sl


def test_cut_off_hosts_count_as_stranded(tmp_path):
    from netcosim.faults_study import run_fault_study
    from netcosim.sweep import Backend

    sc = Scenario.from_dict(dict(BASE))
    # an edge link of a fat-tree is a host's only link: its failure strands the all-to-all
    res = run_fault_study(sc, tmp_path, "0.05", layer="edge", trials=3, single=False,
                          backend=Backend(jobs=1, progress=False))
    (s,) = res["summary"]
    assert s["stranded_runs"] == 3 and s["finished"] == 0 and "median" not in s


@pytest.mark.parametrize("transport", ["fluid", "tcp"])
def test_links_that_come_back_slow_the_run_down_instead_of_stranding_it(tmp_path, transport):
    """--recover-after-us: the failed links come back (a flap), so the cut-off hosts finish
    (flow engine: they wait for the link, docs/flow_engine.md "Faults in time"): fluid,
    from the instant it is back; tcp (datacenter timers), the transfers under way at the
    first timeout after it (5 ms, then 10 ms later) and the ones that became ready during
    the outage at their first SYN timeout (1 s), which decides."""
    import json

    from netcosim.faults_study import run_fault_study
    from netcosim.sweep import Backend

    data = dict(BASE, engine={"kind": "flow", "transport": transport, **(
        {"tcp_timers": "datacenter"} if transport == "tcp" else {})})
    sc = Scenario.from_dict(data)
    at, back = 10.0, 2000.0
    res = run_fault_study(sc, tmp_path, "0.05", layer="edge", trials=3, at_us=at,
                          recover_after_us=back, single=False,
                          backend=Backend(jobs=1, progress=False))
    (s,) = res["summary"]
    assert s["stranded_runs"] == 0 and s["finished"] == 3
    base = res["baseline"]["makespan_us"]
    resumed = at + back if transport == "fluid" else 1e6
    assert resumed / base < s["median"] <= s["worst"] < (resumed + 2 * base) / base
    meta = json.loads((tmp_path / "sweep_meta.json").read_text())
    assert meta["recover_after_us"] == back
    # every failed link's `up` is in the trial's scenario, so the trial re-runs alone
    from netcosim.sweep.table import read_table

    _, rows = read_table(tmp_path / "sweep.csv")
    faults = json.loads(rows[0]["scenario"])["faults"]
    downs = [f for f in faults if f["kind"] == "down"]
    ups = [f for f in faults if f["kind"] == "up"]
    assert [f["link"] for f in ups] == [f["link"] for f in downs]
    assert all(f["at_us"] == at + back for f in ups)


def test_recover_after_us_is_checked(tmp_path):
    import json

    from netcosim.cli import main
    from netcosim.faults_study import run_fault_study
    from netcosim.sweep import Backend

    f = tmp_path / "s.json"
    f.write_text(json.dumps(BASE))
    for bad in ("0", "-5", "nan"):
        assert main(["faults", str(f), "--recover-after-us", bad, "--out",
                     str(tmp_path / "o")]) == 2
    f.write_text(json.dumps(dict(BASE, faults_study={"recover_after_us": "1ms"})))
    assert main(["faults", str(f), "--out", str(tmp_path / "o2")]) == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "o2").exists()
    training = Scenario.from_dict(dict(BASE))
    with pytest.raises(InputError, match="--recover-after-us"):
        run_fault_study(training, tmp_path / "g", "0.1", kind="gpu_slow:0.5",
                        recover_after_us=100.0, backend=Backend(jobs=1, progress=False))


def test_cli_faults_refuses_bad_fraction(tmp_path):
    import json

    from netcosim.cli import main

    f = tmp_path / "s.json"
    f.write_text(json.dumps(BASE))
    assert main(["faults", str(f), "--fraction", "1.5", "--out", str(tmp_path / "o")]) == 2


def test_study_file_cases_and_options():
    from netcosim.faults_study import split_study

    d = dict(BASE, faults_study={"kind": ["down", "degrade:0.5"], "trials": 3, "case": [
        {"label": "ring", "workload.algorithm": "ring"},
        {"label": "a2a", "workload": {"kind": "collective", "op": "all_to_all",
                                      "algorithm": "direct", "bytes": 1024}}]})
    base, opts, cases = split_study(d)
    assert "faults_study" not in base and opts == {"kind": ["down", "degrade:0.5"], "trials": 3}
    assert [c[0] for c in cases] == ["ring", "a2a"]
    assert cases[1][1] == [(["workload"], d["faults_study"]["case"][1]["workload"])]
    with pytest.raises(InputError, match="faults_study.colour"):
        split_study(dict(BASE, faults_study={"colour": 1}))


def test_a_packet_tcp_study_records_and_prints_its_timers(tmp_path):
    """With loss, the TCP timers can decide a study's answer: it says which it ran with."""
    import json
    import subprocess
    import sys

    from netcosim.faults_study import tcp_timers

    packet = dict(BASE, engine={"kind": "packet", "transport": "tcp", "tcp_timers": "linux",
                                "min_rto_s": 0.01})
    t = tcp_timers(Scenario.from_dict(packet))
    assert t["preset"] == "linux" and t["min_rto_s"] == 0.01 and t["conn_timeout_s"] == 1.0
    assert tcp_timers(Scenario.from_dict(dict(BASE))) is None  # fluid flow engine: no timers
    flow = tcp_timers(Scenario.from_dict(dict(BASE, engine={"kind": "flow", "transport": "tcp",
                                                            "tcp_timers": "datacenter"})))
    assert flow == {"preset": "datacenter", "min_rto_s": 5e-3, "max_rto_s": 120.0,
                    "clock_granularity_s": 1e-6, "conn_timeout_s": 1.0}  # no initial RTO
    f = tmp_path / "s.json"
    f.write_text(json.dumps(packet))
    r = subprocess.run([sys.executable, "-m", "netcosim", "faults", str(f), "--fraction",
                        "0.1", "--trials", "1", "--layer", "core", "--no-single",
                        "--no-progress", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "TCP timers 'linux': minimum RTO 10 ms" in r.stdout
    meta = json.loads((tmp_path / "o" / "sweep_meta.json").read_text())
    assert meta["tcp_timers"]["min_rto_s"] == 0.01


def test_a_stranding_trial_re_runs_alone_with_allow_stranded(tmp_path, capsys):
    """docs/sweeps.md: every trial re-runs alone from its `scenario` cell. A trial whose
    faults cut hosts apart was refused by `netcosim run` (unreachable) with no way round it;
    `--allow-stranded` runs it as the study did, and the refusal names the flag."""
    import csv
    import json

    from cli_helpers import TRAIN_BASE, cli, refused, write

    path = write(tmp_path, TRAIN_BASE)
    rc, _, err = cli(capsys, "faults", path, "--fraction", "0.05", "--trials", 1, "--layer",
                     "edge", "--out", tmp_path / "study")
    assert rc == 0, err
    rows = list(csv.DictReader(open(tmp_path / "study" / "sweep.csv")))
    cut = [r for r in rows if r["stranded"] not in ("", "0")]
    assert cut, "a two_tier edge link down strands its GPU's transfers"
    trial = write(tmp_path, cut[0]["scenario"], name="trial.json")
    refused(capsys, "run", trial, "--out", tmp_path / "r1", has=("cannot reach",
                                                                 "--allow-stranded"))
    assert not (tmp_path / "r1").exists()
    rc, _, err = cli(capsys, "run", trial, "--allow-stranded", "--out", tmp_path / "r2")
    assert rc == 0, err
    alone = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert alone["stranded"] == int(cut[0]["stranded"])
    assert alone["makespan_us"] == float(cut[0]["makespan_us"])

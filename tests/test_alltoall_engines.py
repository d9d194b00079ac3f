"""The all-to-all engine-vs-engine harness (validation/alltoall_engines.py): one tiny case
through its functions; the table's rows, the error's definition and the case split."""
import csv
import math

import pytest

from validation import alltoall_cases as cases
from validation import alltoall_engines as harness

TINY = cases.Case("tiny_ft4_16K", "ft4", 16 * cases.KIB)


@pytest.fixture(scope="module")
def rows():
    return harness.run_case(TINY, log=lambda s: None)


def test_rows_structure(rows):
    assert [r["transport"] for r in rows] == list(cases.TRANSPORTS)
    for r in rows:
        assert set(r) == set(harness.COLUMNS)
        assert r["case"] == TINY.name and r["set"] == "dev" and r["fabric"] == "ft4"
        assert r["transfers"] == 16 * 15  # direct all-to-all over the 16 hosts of k=4
        assert r["packet_makespan_us"] > 0 and r["packet_stranded"] == 0
        assert r["fluid_makespan_us"] > 0 and r["fluid_wall_s"] >= 0
    # the flow engine's tcp model is compared with the packet engine's tcp only
    tcp, dcqcn = rows
    assert tcp["flowtcp_makespan_us"] > 0 and dcqcn["flowtcp_makespan_us"] is None
    # the flow runs are made once per case: both rows carry the same fluid figure
    assert tcp["fluid_makespan_us"] == dcqcn["fluid_makespan_us"]


def test_error_is_flow_minus_packet_over_packet(rows):
    for r in rows:
        for name, _ in cases.FLOW_RUNS:
            if r[f"{name}_err"] is None:
                continue
            want = (r[f"{name}_makespan_us"] - r["packet_makespan_us"]) / r["packet_makespan_us"]
            assert r[f"{name}_err"] == pytest.approx(want, rel=1e-12)
    assert harness.rel_err(90.0, 100.0) == pytest.approx(-0.1)
    assert harness.rel_err(110.0, 100.0) == pytest.approx(0.1)
    assert math.isnan(harness.rel_err(1.0, 0.0))


def test_written_table(rows, tmp_path):
    harness.write_results(rows, tmp_path, "cmd")
    with open(tmp_path / f"{harness.STEM}.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert len(got) == len(rows) and list(got[0]) == list(harness.COLUMNS)
    assert float(got[0]["fluid_err"]) == pytest.approx(rows[0]["fluid_err"])
    assert got[1]["flowtcp_err"] == ""  # dcqcn row: no tcp model figure
    md = (tmp_path / f"{harness.STEM}.md").read_text()
    assert md.count(f"| {TINY.name} |") == len(rows)
    s = harness.summary(rows)
    assert s[("fluid", "tcp", "all")]["worst"] == pytest.approx(rows[0]["fluid_err"])
    assert ("fluid", "tcp", "held-out") not in s  # no held-out row here


def test_case_split_and_selection():
    held = {n for n, c in cases.CASES.items() if c.held_out}
    dev = set(cases.CASES) - held
    assert held == cases.HELD_OUT and dev
    # every fabric is represented on the development side
    assert {cases.CASES[n].fabric for n in dev} >= {"ft4", "ft8", "ls1", "ls2", "tt"}
    quick = harness.select(quick=True)
    assert quick and all(c.per_pair <= cases.MIB and c.fabric != "ft8" for c in quick)
    assert [c.name for c in harness.select(["ls2_direct_1M"])] == ["ls2_direct_1M"]
    with pytest.raises(SystemExit):
        harness.select(["no_such_case"])


def test_zipf_matrix_is_skewed_with_the_mean_pair():
    n, mean = 8, 1000
    m = cases.zipf_matrix(n, mean)
    col = [sum(row[j] for row in m) for j in range(n)]
    assert all(abs(sum(row) - n * mean) <= n for row in m)  # rounding only
    assert col[0] > 2 * col[-1] and col == sorted(col, reverse=True)


def test_scenario_is_what_a_user_writes():
    sc = cases.scenario(cases.CASES["tt_hier_1M"], "packet", cases.TCP_DEEP)
    wl = sc["workload"]
    assert wl["protocol"] == "simple" and wl["step_latency_us"] == 0
    assert wl["algorithm"] == "hierarchical" and wl["bytes"] == 32 * cases.MIB
    assert sc["engine"] == {"kind": "packet", **cases.TCP_DEEP}
    assert sc["routing"] == {"policy": "ecmp"}


def test_unfinished_packet_run_has_no_error():
    # dcqcn's PFC on the torus ring under dor has a cyclic buffer dependency: at 1 MiB per
    # pair the run deadlocks (its timers would run forever); the guard stops it and the row
    # carries no makespan and no error instead of a wrong one
    (row,) = harness.run_case(cases.CASES["torus_direct_1M"], transports=("dcqcn",),
                              log=lambda s: None)
    assert row["packet_stranded"] > 0 and row["packet_makespan_us"] is None
    assert row["fluid_makespan_us"] > 0 and row["fluid_err"] is None
    assert row["fluid_speedup"] is None and "deadlock" in row["note"]
    assert harness.summary([row]) == {}

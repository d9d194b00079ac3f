"""Metamorphic and round-trip tests of the Chakra / ASTRA-sim interop (docs/interop.md).

* Export then import: a scenario written by `netcosim export --chakra` and run back as a
  `kind = "chakra"` workload gives the same makespan and the same transfers (endpoints, bytes,
  start, end, path) on the flow engine, bit for bit.
"""
from __future__ import annotations

import csv
import json

import pytest

from cli_helpers import cli, write

LEAF_SPINE = """
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 3
spines = 2
link_gbps = 100
latency_us = 1.0
"""
SHORTEST = """
[routing]
policy = "shortest"
"""


# =========================================================================== helpers
def _run(capsys, tmp_path, text: str, name: str):
    """(summary, sorted transfer rows) of `netcosim run` on ``text``."""
    rc, _, err = cli(capsys, "run", write(tmp_path, text, f"{name}.toml"), "--out",
                     tmp_path / name)
    assert rc == 0, err
    summary = json.loads((tmp_path / name / "summary.json").read_text())
    with open(tmp_path / name / "flows.csv", newline="") as f:
        # what a transfer is, without the node id and label (the trace numbers and names
        # its nodes its own way)
        rows = sorted((r["src"], r["dst"], r["bytes"], r["start_us"], r["end_us"], r["path"])
                      for r in csv.DictReader(f))
    return summary, rows


def _exported_run(capsys, tmp_path, fabric: str, workload: str, p2p: str):
    """Export fabric + workload as a Chakra trace, run it back with ``p2p``."""
    src = write(tmp_path, fabric + workload, "orig.toml")
    trace = tmp_path / "trace"
    if not trace.exists():
        rc, _, err = cli(capsys, "export", src, "--chakra", trace)
        assert rc == 0, err
    back = fabric + f'[workload]\nkind = "chakra"\npath = "trace"\np2p = "{p2p}"\n'
    return _run(capsys, tmp_path, back, f"back_{p2p}")


# =========================================================================== export round trip
ROUND_TRIP = {
    # a flow with an earliest start: the writer dropped start_us (94.05 us ran as 90.55 us)
    "flows_start": (LEAF_SPINE + SHORTEST, """[workload]
kind = "flows"
flows = [{src = 0, dst = 4, bytes = 100000, start_us = 50},
         {src = 4, dst = 1, bytes = 1000, deps = [0]},
         {src = 2, dst = 5, bytes = "1MiB", start_us = "3.5us"}]
"""),
}


@pytest.mark.parametrize("case", sorted(ROUND_TRIP))
@pytest.mark.parametrize("p2p", ["rendezvous", "eager"])
def test_export_then_import_is_bit_exact(capsys, tmp_path, case, p2p):
    fabric, workload = ROUND_TRIP[case]
    want, want_rows = _run(capsys, tmp_path, fabric + workload, "orig")
    got, got_rows = _exported_run(capsys, tmp_path, fabric, workload, p2p)
    assert got["makespan_us"] == want["makespan_us"]
    assert (got["transfers"], got["bytes"]) == (want["transfers"], want["bytes"])
    assert got_rows == want_rows

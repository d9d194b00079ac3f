"""Units of the figures netcosim writes, checked by hand on tiny cases (times in output files in
microseconds, per-second rates labelled as such)."""
import csv
import json

import pytest

from cli_helpers import cli, write

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

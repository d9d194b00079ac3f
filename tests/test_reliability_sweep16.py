"""Reliability sweep 16: four refusals found by fuzzing, each now exit 2 with one line naming
the field the user wrote, as they wrote it: a start time read back after a unit conversion,
an oversubscription blamed for a huge link rate, a packet-engine size with no work bound, and
advice naming a scenario key on the collective command, which has none.
"""
import pytest

from cli_helpers import FLOWS_BASE, cli, refused, write

PACKET = FLOWS_BASE.replace("[workload]", "[engine]\nkind = \"packet\"\n[workload]")


# ======================================================================= times as written
@pytest.mark.parametrize("engine", ["flow", "packet"])
@pytest.mark.parametrize("start,shown", [
    ("1e308", "start_us = 1e+308:"),        # was 9.999999999999998e+307, read back from seconds
    ("4.7e12", "start_us = 4700000000000.0:"),
    ('"5e7s"', "start_us = '5e7s':"),       # a unit: shown as written, not in us
])
def test_a_start_beyond_the_clock_is_shown_as_written(tmp_path, capsys, engine, start, shown):
    p = write(tmp_path, PACKET)
    line = refused(capsys, "run", p, "--engine", engine, "--set",
                   f"workload.flows.0.start_us={start}", "--out", tmp_path / "o",
                   has=(f"workload.flows[0].{shown}", f"{engine} engine's clock"))
    assert "9.99999" not in line
    assert not (tmp_path / "o").exists()


def test_a_fault_time_with_a_unit_names_its_record(tmp_path, capsys):
    p = write(tmp_path, PACKET + "[[faults]]\nlink = [16, 24]\nat_us = 1.0\n")
    # "5e7s" is 5e13 us: the record was not found (its time is a string) and the message
    # said only "faults: ..."
    refused(capsys, "run", p, "--set", 'faults.0.at_us="5e7s"', "--out", tmp_path / "o",
            has=("faults[0].at_us = '5e7s':", "packet engine's clock"))
    refused(capsys, "run", p, "--set", "faults.0.at_us=1e308", "--out", tmp_path / "o",
            has=("faults[0].at_us = 1e+308:",))
    # a start or fault just inside the clock still runs
    rc, out, err = cli(capsys, "run", p, "--set", "faults.0.at_us=1e12", "--set",
                       "workload.flows.0.start_us=1e12", "--out", tmp_path / "ok")
    assert rc == 0, err

"""Input hunt of session 42 (a hostile user's inputs): each test failed before its fix."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cli_helpers import FLOWS_BASE, TRAIN_BASE, cli, refused, write
from netcosim.scenario import Scenario
from topo.errors import InputError


# ----------------------------------------------------------------------- silently wrong numbers
@pytest.mark.parametrize("ms, has", [("nan", "expected a time >= 0"),
                                     ("inf", "expected a time >= 0"),
                                     ("1e300", "beyond the clock"),
                                     ("1e-300", "below ns-3's resolution of one picosecond")])
def test_ns3_horizon_outside_the_clock_is_refused(tmp_path, capsys, ms, has):
    """--horizon-ms 1e300 (and inf, 1e-300) stopped ns-3 at 0 and wrote a makespan of 0 us
    with exit 0; nan ran as if no horizon was given."""
    s = write(tmp_path, FLOWS_BASE)
    refused(capsys, "ns3", s, "--out", tmp_path / "o", "--horizon-ms", ms,
            has=(f"--horizon-ms {float(ms)!r}", has))
    assert not (tmp_path / "o").exists()


def test_packet_max_time_below_a_picosecond_is_refused():
    """max_time_s = 4e-13 rounded to 0 ps, the core's "no limit": the run went to the end."""
    from netcore.packet.options import check_options

    with pytest.raises(InputError, match=r"max_time_s = 4e-13: below the packet engine's "
                                         r"resolution of one picosecond"):
        check_options({"max_time_s": 4e-13})
    assert check_options({"max_time_s": 6e-13})["max_time_s"] == 6e-13  # 1 ps: a limit


@pytest.mark.parametrize("text, values", [
    ("1e0..3e0 +0.5", [1.0, 1.5, 2.0, 2.5, 3.0]),       # was 1, 2, 3 (byte counts)
    ("1e2..4e2 x1.5", [100.0, 150.0, 225.0, 337.5]),    # was 338 for 337.5
    ("1.5e0..3 +0.5", [1.5, 2.0, 2.5, 3.0]),            # was "1.5 bytes, not a whole number"
    ("1e-1..5e-1 +1e-1", [0.1, 0.2, 0.3, 0.4, 0.5]),
    ("1KiB..4KiB +1KiB", [1024, 2048, 3072, 4096]),     # units still make sizes
    ("1..2KiB x2", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]),
])
def test_sweep_range_exponent_is_not_a_unit(text, values):
    from netcosim.sweep.spec import parse_range

    assert parse_range(text, "a") == values


def test_sweep_range_of_times_names_the_rule():
    from netcosim.sweep.spec import parse_range

    with pytest.raises(InputError, match=r"take size units only.*plain numbers"):
        parse_range("1us..4us x2", "topology.latency_us")


def test_gpu_listed_twice_in_one_fault_is_refused(tmp_path, capsys):
    """gpus = [0, 0] applied the factor twice (step 2.964 s against 1.652 s for [0])."""
    s = write(tmp_path, TRAIN_BASE.replace(
        'kind = "training"', 'kind = "training"\n'
        'gpu_faults = [{ gpus = [1, 0, 1], kind = "slow", factor = 0.5 }]'))
    refused(capsys, "validate", s,
            has=("gpu_faults[0].gpus[2] = 1: host 1 is listed twice (first at gpus[0])",))


# ------------------------------------------------------------------- outputs over the input
def test_export_onto_its_scenario_is_refused(tmp_path, capsys):
    """`export S.toml --json S.toml` replaced the scenario with the fabric, exit 0."""
    s = write(tmp_path, FLOWS_BASE)
    before = s.read_text()
    for flag in ("--json", "--graphml"):
        refused(capsys, "export", s, flag, s, has=("is the input file",))
    assert s.read_text() == before


def test_run_output_directory_holding_its_scenario_is_refused(tmp_path, capsys):
    """A JSON scenario named summary.json in the --out directory would be overwritten."""
    import tomllib

    d = tmp_path / "d"
    d.mkdir()
    s = d / "summary.json"
    s.write_text(json.dumps(tomllib.loads(FLOWS_BASE)))
    before = s.read_text()
    refused(capsys, "run", s, "--out", d, has=("summary.json' is the input file",))
    assert s.read_text() == before


def test_train_trace_onto_its_scenario_is_refused(tmp_path, capsys):
    s = write(tmp_path, TRAIN_BASE)
    refused(capsys, "train", s, "--trace", s, has=("--trace", "is the input file"))


def test_plan_best_onto_its_input_is_refused(tmp_path, capsys):
    """`plan pl/best.toml --out pl` rewrote the scenario it was searching from."""
    d = tmp_path / "pl"
    d.mkdir()
    s = write(d, TRAIN_BASE, "best.toml")
    refused(capsys, "plan", s, "--out", d, has=("best.toml' is the input file",))


def test_an_output_elsewhere_is_still_written(tmp_path, capsys):
    s = write(tmp_path, FLOWS_BASE)
    rc, out, err = cli(capsys, "export", s, "--json", tmp_path / "fabric.json")
    assert rc == 0, err
    assert json.loads((tmp_path / "fabric.json").read_text())


# ------------------------------------------------------------------- options that did nothing
@pytest.mark.parametrize("opt", ["engine.init_cwnd=1", "engine.handshake=false"])
def test_flow_tcp_start_options_need_tcp(tmp_path, capsys, opt):
    """With the fluid transport both were accepted and changed nothing."""
    s = write(tmp_path, FLOWS_BASE)
    refused(capsys, "validate", s, "--set", opt,
            has=(f"{opt.split('=')[0]} = ", "only transport = 'tcp' has a start-up"))
    rc, out, err = cli(capsys, "validate", s, "--set", opt, "--set", 'engine.transport="tcp"')
    assert rc == 0, err


# ------------------------------------------------------------------- one-way faults, packet engine
ONE_WAY = """
name = "one-way"
[topology]
kind = "fat_tree"
k = 4
link_gbps = 100
[engine]
kind = "packet"
[workload]
kind = "flows"
flows = [{ src = 0, dst = 15, bytes = 1000000 }]
"""


def _run(data):
    from netcosim.runner import simulate_scenario

    _, result, summary = simulate_scenario(Scenario.from_dict(data))
    return result, summary


@pytest.mark.parametrize("link", [[25, 16], [23, 31], [35, 25], [31, 35]])
def test_one_way_fault_on_the_ack_direction_is_routed_around(link):
    """Each of these links carries the flow's ACKs (its data goes the other way). With the
    direction that carries them down, the connection kept its path, lost every ACK and gave
    up: makespan 0, one transfer stranded. The fabric has other paths, and a path now needs
    its links alive both ways: the result is the one with the link down both ways."""
    import tomllib

    base = tomllib.loads(ONE_WAY)
    one = dict(base, faults=[{"link": link, "kind": "down", "direction": "forward"}])
    both = dict(base, faults=[{"link": link, "kind": "down"}])
    r1, s1 = _run(one)
    r2, s2 = _run(both)
    assert not s1.get("tcp_gave_up") and s1["stranded"] == 0
    assert s1["makespan_us"] == s2["makespan_us"] > 0
    np.testing.assert_array_equal(r1.end, r2.end)


def test_one_way_cut_with_no_path_back_is_refused(tmp_path, capsys):
    """Host 0's only link, down from switch 16 to host 0: the data reaches host 15, the ACKs
    can never come back. The run went ahead and every connection gave up (exit 0)."""
    s = write(tmp_path, ONE_WAY + '[[faults]]\nlink = [16, 0]\nkind = "down"\n'
                                  'direction = "forward"\n')
    refused(capsys, "run", s, "--out", tmp_path / "o",
            has=("host 0 cannot reach host 15 and back", "alive both ways"))
    refused(capsys, "run", s, "--out", tmp_path / "o", "--set", 'routing.policy="spray"',
            has=("and back", "each on its own route"))
    rc, out, err = cli(capsys, "run", s, "--out", tmp_path / "o", "--engine", "flow")
    assert rc == 0, err  # the fluid flow engine sends nothing back

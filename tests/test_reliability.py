"""Issue 19, reliability: bad input stops with one line naming the field and value, exit
status 2, nothing half-written, no traceback, no hang, no silently wrong number.

Every reproducer is generated in tmp_path and is small: the command either refuses it (exit
2, one line, no traceback) or finishes it correctly.
"""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from netcosim.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def write(tmp_path, text, name="s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, *argv, has=()):
    """Runs the CLI and asserts exit 2 with one line on stderr containing every `has`."""
    rc, out, err = cli(capsys, *argv)
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("netcosim: error: "), err
    for h in has:
        assert h in lines[0], (h, lines[0])
    return lines[0]


# =========================================================================== packet engine ranges
PACKET_FLOWS = """
name = "pk"
[topology]
kind = "fat_tree"
k = 4
[engine]
kind = "packet"
[workload]
kind = "flows"
flows = [{{src = 0, dst = 5, bytes = {bytes}, start_us = {start}}}]
"""


def _packet(tmp_path, bytes=100000, start=0, extra=""):
    return write(tmp_path, PACKET_FLOWS.format(bytes=bytes, start=start) + extra)


@pytest.mark.parametrize("nbytes", [38_431_367_454_088, 10**14, 10**15])
def test_packet_huge_transfer_refused_with_the_limit(tmp_path, capsys, nbytes):
    # 38,431,367,454,088 bytes is 2^32 + 10 segments of 8948: it used to wrap to 10 segments
    # and "finish" in microseconds; 1e14 wrapped negative and was stranded at t = 0
    s = _packet(tmp_path, bytes=nbytes)
    out = tmp_path / "out"
    line = refused(capsys, "run", s, "--out", out,
                   has=(f"workload.flows[0].bytes = {nbytes}", "2147483646 segments"))
    assert "flow engine" in line
    assert not out.exists()


def test_packet_huge_collective_names_workload_bytes(tmp_path, capsys):
    s = write(tmp_path, """
[topology]
kind = "fat_tree"
k = 4
[engine]
kind = "packet"
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = 1000000000000000
""")
    refused(capsys, "validate", s, has=("workload.bytes = 1000000000000000", "segments"))


def test_packet_warm_connection_sums_its_transfers(tmp_path, capsys):
    s = write(tmp_path, """
[topology]
kind = "fat_tree"
k = 4
[engine]
kind = "packet"
warm_connections = true
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 12000000000000}, {src = 0, dst = 5, bytes = 12000000000000}]
""")
    refused(capsys, "validate", s, has=("workload.flows[1]", "warm_connections", "segments"))


def test_packet_large_transfer_below_the_limit_is_exact(tmp_path, capsys):
    # 5 GB at 100 Gbps: 0.4 s, in both engines (the packet engine adds headers and slow start)
    s = _packet(tmp_path, bytes=5_000_000_000)
    rc, _, err = cli(capsys, "run", s, "--out", tmp_path / "o")
    assert rc == 0, err
    t = json.loads((tmp_path / "o" / "summary.json").read_text())["makespan_us"]
    assert 400_000 < t < 410_000


def test_packet_fault_beyond_the_clock_refused(tmp_path, capsys):
    # 1e13 us = 1e19 ps overflows int64: the fault used to strike at t = 0
    s = _packet(tmp_path, extra="[[faults]]\nlink = [0, 16]\nat_us = 1e13\n")
    refused(capsys, "run", s, "--out", tmp_path / "o",
            has=("faults[0].at_us = 10000000000000.0", "2^62 ps"))
    # the flow engine represents it: the fault comes after the transfer ended
    rc, _, err = cli(capsys, "run", s, "--engine", "flow", "--out", tmp_path / "f")
    assert rc == 0 and "stranded" not in err


def test_packet_start_beyond_the_clock_refused(tmp_path, capsys):
    s = _packet(tmp_path, start="1e15")
    refused(capsys, "run", s, "--out", tmp_path / "o",
            has=("workload.flows[0].start_us = 1000000000000000.0", "2^62 ps"))
    rc, _, err = cli(capsys, "run", s, "--engine", "flow", "--out", tmp_path / "f")
    assert rc == 0, err
    t = json.loads((tmp_path / "f" / "summary.json").read_text())["makespan_us"]
    assert t > 1e15


@pytest.mark.parametrize("option", ["max_rto_s=1e300", "max_time_s=1e10",
                                    "reroute_delay_us=1e19", "sample_queues_us=1e13"])
def test_packet_time_options_beyond_the_clock_refused(tmp_path, capsys, option):
    s = _packet(tmp_path)
    refused(capsys, "validate", s, "--set", f"engine.{option}",
            has=(f"engine.{option.split('=')[0]} = ", "2^60 ps"))


def test_packet_clock_passing_its_end_stops_with_one_line(tmp_path, capsys):
    # 1 GB over a 1 kbit/s link takes 93 days: the clock would pass 2^62 ps while running
    s = write(tmp_path, """
[topology]
kind = "custom"
hosts = 2
links = [[0, 1, 1e-6, 1.0]]
[engine]
kind = "packet"
transport = "ideal"
[workload]
kind = "flows"
flows = [{src = 0, dst = 1, bytes = 1000000000}]
""")
    out = tmp_path / "o"
    refused(capsys, "run", s, "--out", out, has=("2^62 ps",))
    assert not out.exists()
    # a tenth of it (9 days) is exact
    rc, _, err = cli(capsys, "run", s, "--set", "workload.flows.0.bytes=100000000", "--out", out)
    assert rc == 0, err
    t = json.loads((out / "summary.json").read_text())["makespan_us"]
    assert t == pytest.approx(8e11, rel=0.01)


def test_packet_link_too_slow_for_one_frame_refused(tmp_path, capsys):
    s = write(tmp_path, """
[topology]
kind = "custom"
hosts = 2
links = [[0, 1, 1e-12, 1.0]]
[engine]
kind = "packet"
[workload]
kind = "flows"
flows = [{src = 0, dst = 1, bytes = 1000}]
""")
    refused(capsys, "validate", s, has=("link 0-1", "2^60 ps"))


def test_packet_api_refuses_what_it_cannot_represent():
    import netcore
    from netcore.packet.limits import PacketLimit
    from netcore.schedule import Schedule
    from topo.builders import fat_tree

    fabric = fat_tree(4)
    sched = Schedule.from_transfers([0], [5], [38_431_367_454_088])
    with pytest.raises(PacketLimit, match="segments"):
        netcore.simulate(fabric, sched, engine="packet")
    sched = Schedule.from_transfers([0], [5], [1000], start=np.array([1e10]))
    with pytest.raises(PacketLimit, match="2\\^62 ps"):
        netcore.simulate(fabric, sched, engine="packet")


def test_packet_incremental_refuses_what_it_cannot_represent():
    from netcore.packet import PacketIncremental
    from netcore.packet.limits import PacketLimit
    from topo.builders import fat_tree
    from topo.routing import Routing

    fabric = fat_tree(4)
    inc = PacketIncremental(fabric, Routing(fabric, "ecmp"))
    with pytest.raises(PacketLimit, match="segments"):
        inc.add_transfers([0], [5], [38_431_367_454_088])
    with pytest.raises(PacketLimit, match="2\\^62 ps"):
        inc.add_transfers([0], [5], [1000], start_s=1e10)
    inc.add_transfers([0], [5], [1000])
    t, done = inc.advance(float("inf"))
    assert done.tolist() == [0] and 0 < t < 1e-3


# =========================================================================== Chakra
def _comp_trace(tmp_path, **attr):
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_reader import frame

    d = tmp_path / "trace"
    d.mkdir()
    attrs = []
    for name, v in attr.items():
        attrs.append(pb.AttributeProto(name=name, double_val=v) if isinstance(v, float)
                     else pb.AttributeProto(name=name, int64_val=v))
    for r in (0, 1):
        node = pb.Node(id=1, name="gemm", type=pb.COMP_NODE, attr=attrs if r == 0 else [])
        (d / f"t.{r}.et").write_bytes(frame([pb.GlobalMetadata(version="0.0.4"), node]))
    return d


CHAKRA = """
[topology]
kind = "fat_tree"
k = 2
[workload]
kind = "chakra"
path = "trace"
"""


@pytest.mark.parametrize("value", [float("nan"), -1.0, float("inf")])
def test_chakra_comp_duration_must_be_finite_and_not_negative(tmp_path, capsys, value):
    _comp_trace(tmp_path, duration_s=value)
    s = write(tmp_path, CHAKRA)
    refused(capsys, "run", s, "--out", tmp_path / "o", has=("node id 1", "duration_s = "))
    assert not (tmp_path / "o").exists()


def test_chakra_comp_duration_is_exact_when_valid(tmp_path, capsys):
    _comp_trace(tmp_path, duration_s=2.5e-3)
    s = write(tmp_path, CHAKRA)
    rc, _, err = cli(capsys, "run", s, "--out", tmp_path / "o")
    assert rc == 0, err
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["makespan_us"] == 2500.0


def test_chakra_comp_num_ops_nan_refused(tmp_path, capsys):
    _comp_trace(tmp_path, num_ops=float("nan"))
    s = write(tmp_path, CHAKRA + 'gpu = "h100_sxm"\n')
    refused(capsys, "validate", s, has=("num_ops = nan",))


@pytest.mark.parametrize("extra, has", [
    ('algorithms = {bogus_op = "ring"}', "workload.algorithms.bogus_op = 'ring'"),
    ('algorithms = {all_reduce = "bogus"}', "workload.algorithms.all_reduce = 'bogus'"),
    ('precision = "fp3"', "workload.precision = 'fp3'"),
])
def test_chakra_options_are_checked(tmp_path, capsys, extra, has):
    _comp_trace(tmp_path, duration_s=1e-3)
    s = write(tmp_path, CHAKRA + extra + "\n")
    refused(capsys, "validate", s, has=(has,))


# =========================================================================== fault studies
STUDY = """
name = "study"
[topology]
kind = "fat_tree"
k = 4
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 100000}]
[faults_study]
trials = 1
fraction = 0.1
"""


def test_fault_study_case_labels_that_share_a_directory_are_refused(tmp_path, capsys):
    s = write(tmp_path, STUDY + """
[[faults_study.case]]
label = "a b"
"topology.k" = 4
[[faults_study.case]]
label = "a/b"
"topology.k" = 6
""")
    out = tmp_path / "o"
    refused(capsys, "faults", s, "--out", out, "-j", "1",
            has=("'a b'", "'a/b'", "a_b-down"))
    assert not out.exists()


def test_fault_study_case_without_label_is_refused(tmp_path, capsys):
    s = write(tmp_path, STUDY + """
[[faults_study.case]]
"topology.k" = 4
""")
    refused(capsys, "faults", s, "--out", tmp_path / "o", "-j", "1",
            has=("faults_study.case[0].label: missing",))


@pytest.mark.parametrize("argv, has", [
    (["--single-samples", "0"], "--single-samples = 0"),
    (["--max-single", "-1"], "--max-single = -1"),
    (["--trials", "0"], "--trials = 0"),
    (["--at-fraction", "1.5"], "--at-fraction = 1.5"),
    (["--set", "faults_study.single_samples=0"], "faults_study.single_samples = 0"),
    (["--set", "faults_study.single=1"], "faults_study.single = 1"),
])
def test_fault_study_options_are_checked_before_running(tmp_path, capsys, argv, has):
    s = write(tmp_path, STUDY)
    out = tmp_path / "o"
    refused(capsys, "faults", s, "--out", out, "-j", "1", *argv, has=(has,))
    assert not out.exists()

"""Inputs past what an engine or a layout can represent: refused with exit 2 naming the field,
where they gave a silently wrong number (durations of 0 past float64's resolution, a link rate
that underflowed to 0), an internal error (OverflowError, TypeError from the C++ config) or a
memory kill."""
from __future__ import annotations

import numpy as np
import pytest

from cli_helpers import FLOWS_BASE, cli, refused, write

COLLECTIVE = """
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "1MiB"
"""


def test_collective_ranks_range_checked_before_it_is_expanded(capsys):
    # 10^20 ranks used to be listed first (OverflowError / MemoryError, exit 1)
    refused(capsys, "collective", "--topo", "fat_tree:k=4", "--op", "all_reduce", "--sizes",
            "1MiB", "--ranks", "0..99999999999999999999",
            has=("--ranks", "host 99999999999999999999 does not exist", "0..15"))
    refused(capsys, "collective", "--topo", "fat_tree:k=4", "--op", "all_reduce", "--sizes",
            "1MiB", "--ranks", "0,5,16", has=("--ranks", "host 16"))


def test_flow_engine_clock_ends_where_float64_stops_resolving(tmp_path, capsys):
    p = write(tmp_path, FLOWS_BASE)
    # at 1e300 us the flow's end equalled its start: it took no time
    refused(capsys, "run", p, "--set", "workload.flows.0.start_us=1e300", "--out",
            tmp_path / "o", has=("workload.flows[0].start_us = 1e+300", "flow engine's clock"))
    assert not (tmp_path / "o").exists()
    rc, out, err = cli(capsys, "run", p, "--set", "workload.flows.0.start_us=1e12", "--out",
                       tmp_path / "ok")
    assert rc == 0, err


def test_engine_integer_options_within_their_fields(tmp_path, capsys):
    p = write(tmp_path, FLOWS_BASE)
    refused(capsys, "run", p, "--set", "engine.mtu=100000000000000000000", "--out",
            tmp_path / "o", has=("engine.mtu", "at most 1048576"))
    for key, value, width in (("init_cwnd", 2**31, "32-bit"), ("data_retries", 2**31, "32-bit"),
                              ("buffer_bytes", 10**20, "64-bit")):
        refused(capsys, "run", p, "--engine", "packet", "--set", f"engine.{key}={value}",
                "--out", tmp_path / "o", has=(f"engine.{key} = {value}", width))
    refused(capsys, "run", p, "--engine", "packet", "--set", "engine.init_rto_s=200",
            "--set", "engine.max_rto_s=60", "--out", tmp_path / "o",
            has=("engine.init_rto_s = 200", "engine.max_rto_s = 60"))


def test_oversubscription_that_underflows_the_uplinks(tmp_path, capsys):
    p = write(tmp_path, """
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 4
spines = 2
link_gbps = 1e-15
oversubscription = 1e300
""" + COLLECTIVE)
    # uplinks of 2e-315 Gb/s: a "stranded" transfer and null bandwidths, exit 0
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("topology.oversubscription = 1e+300", "leaf-spine links"))
    refused(capsys, "run", p, "--set", "topology.link_gbps=100", "--set",
            "topology.oversubscription=1e308", "--out", tmp_path / "o",
            has=("topology.oversubscription = 1e+308",))
    p2 = write(tmp_path, """
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 4
oversubscription = 1e300
""" + COLLECTIVE, "t.toml")
    refused(capsys, "run", p2, "--out", tmp_path / "o", has=("topology.oversubscription",))


def test_rail_layout_bounded(tmp_path, capsys, monkeypatch):
    """A rail layout is m rings of n ranks: past MAX_RAIL_POSITIONS it is refused (a scale-up
    domain of 3 million GPUs asked for 1.8e13 positions: MemoryError, exit 1)."""
    from collectives import rail

    monkeypatch.setattr(rail, "MAX_RAIL_POSITIONS", 100)
    p = write(tmp_path, """
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 8
""" + COLLECTIVE)
    refused(capsys, "validate", p, has=("8 rail rings of 16 ranks", "128 positions",
                                        "topology.gpus_per_node"))
    monkeypatch.setattr(rail, "MAX_RAIL_POSITIONS", 128)
    assert rail.rail_rings(_two_tier(2, 8), np.arange(16)).shape == (8, 16)


def _two_tier(nodes, gpus):
    from topo.builders import build

    return build("two_tier", {"nodes": nodes, "gpus_per_node": gpus})


def test_import_astra_keeps_to_the_fabric_limit(tmp_path, capsys):
    net = tmp_path / "net.yml"
    net.write_text("topology: [FullyConnected]\nnpus_count: [10000]\nbandwidth: [100.0]\n"
                   "latency: [500.0]\n")
    # 5e7 links used to be written out (minutes, gigabytes) though no scenario can load them
    refused(capsys, "import-astra", net, "--toml", tmp_path / "o.toml",
            has=("49,995,000 links", "20,000,000"))
    assert not (tmp_path / "o.toml").exists()


@pytest.mark.parametrize("gbps", [1e-15, 1e299])
def test_range_ends_still_accepted(gbps):
    from topo.builders._check import check_derived_gbps

    rate = gbps * 1e9 / 8
    assert check_derived_gbps(rate, "f", 1, "links") == rate

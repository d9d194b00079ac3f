"""A ring stream whose own connections share a link is not exact (netcosim/stream_sharing.py):
network_detail = "auto" runs the full form then, or says so when the full form is too big."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_helpers import cli, write
from netcosim import workloads
from netcosim.stream_sharing import self_shared_links
from topo.builders import fat_tree, fullflat, torus, two_tier
from topo.routing import Routing

RING = """
[topology]
kind = "{kind}"
{fabric}
[routing]
policy = "{policy}"
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "{algorithm}"
bytes = "{size}"
network_detail = "{detail}"
{extra}
"""
TORUS = dict(kind="torus", policy="ecmp",
             fabric="dims = [2, 2, 3]\nlink_gbps = 400\nlatency_us = 0.5",
             algorithm="ring", extra="")


def summary(tmp_path, capsys, name, **fields):
    path = write(tmp_path, RING.format(**fields), f"{name}.toml")
    rc, out, err = cli(capsys, "run", path, "--out", tmp_path / name)
    assert rc == 0, err
    return json.loads((tmp_path / name / "summary.json").read_text())


def test_the_row_major_ring_on_a_2x2x3_torus_shares_links_as_a_stream():
    # the stream form itself: two of the ring's 12 connections cross one link under ECMP (the
    # tests below would pass trivially if nothing were found), none under dimension order
    from collectives.streams import ring_stream, stream_schedule

    t = torus((2, 2, 3))
    st = ring_stream("all_reduce", "ring", 12, 1 << 20)
    sched = stream_schedule(list(range(12)), st, "all_reduce")
    assert self_shared_links(sched, Routing(t, "ecmp")) >= 1
    assert self_shared_links(sched, Routing(t, "dor")) == 0


@pytest.mark.parametrize("size", ["1MiB", "64MiB"])
def test_auto_runs_the_full_form_where_the_ring_shares_links(tmp_path, capsys, size):
    auto = summary(tmp_path, capsys, "auto", size=size, detail="auto", **TORUS)
    full = summary(tmp_path, capsys, "full", size=size, detail="full", **TORUS)
    assert auto["network_detail_used"] == "full"
    assert auto["makespan_us"] == full["makespan_us"]
    assert auto["stream_shared_links"] == 0


def test_a_ring_with_its_links_to_itself_stays_a_stream(tmp_path, capsys):
    fields = dict(TORUS, policy="dor")
    auto = summary(tmp_path, capsys, "auto", size="1MiB", detail="auto", **fields)
    full = summary(tmp_path, capsys, "full", size="1MiB", detail="full", **fields)
    assert auto["network_detail_used"] == "auto" and auto["stream_shared_links"] == 0
    assert auto["makespan_us"] == pytest.approx(full["makespan_us"], rel=1e-9)


def test_past_the_budget_the_stream_runs_and_says_its_rings_share_links(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.setattr(workloads, "FULL_INSTEAD_MAX_NODES", 0)
    auto = summary(tmp_path, capsys, "auto", size="1MiB", detail="auto", **TORUS)
    full = summary(tmp_path, capsys, "full", size="1MiB", detail="full", **TORUS)
    assert auto["network_detail_used"] == "auto"
    assert auto["stream_shared_links"] >= 1
    # lock step over a shared link is an upper bound on the time
    assert auto["makespan_us"] > full["makespan_us"] * 1.05


def test_hierarchical_phases_with_groups_across_nodes_run_in_full(tmp_path, capsys):
    # group_size 4 on nodes of 8: the stream form's rings share links; auto equals full
    fields = dict(kind="two_tier", fabric="nodes = 4", policy="ecmp", algorithm="hierarchical",
                  extra="[workload.options]\ngroup_size = 4")
    auto = summary(tmp_path, capsys, "auto", size="1MiB", detail="auto", **fields)
    full = summary(tmp_path, capsys, "full", size="1MiB", detail="full", **fields)
    assert auto["network_detail_used"] == "full"
    assert auto["makespan_us"] == full["makespan_us"]


def test_the_collective_command_runs_the_full_form_too():
    # `netcosim collective --engine flow` takes the same decision as `netcosim run`
    from collectives.report import run as run_full
    from netcosim.commands.collective import _simulated_point

    t = torus((2, 2, 3))
    opts = {"protocol": "simple"}
    got = _simulated_point(t, "all_reduce", "ring", list(range(12)), 1 << 20, "flow", "ecmp",
                           opts)
    ref = run_full(t, "all_reduce", "ring", list(range(12)), 1 << 20, engine="flow",
                   routing="ecmp", **opts)
    assert got["time_s"] == ref["time_s"]


FABRICS = {
    "fat_tree": lambda: fat_tree(4),
    "torus": lambda: torus((4, 3)),
    "two_tier": lambda: two_tier(2, 4),
    "fullflat": lambda: fullflat(16, planes=2, switch_radix=8),
}


@settings(max_examples=25, deadline=None)
@given(fabric=st.sampled_from(sorted(FABRICS)), data=st.data(),
       op=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
       policy=st.sampled_from(["ecmp", "spray", "shortest"]),
       size=st.sampled_from([4096, 1 << 20]), protocol=st.sampled_from(["simple", "ll128"]))
def test_auto_equals_full_for_rings_in_any_order(fabric, data, op, policy, size, protocol):
    # rings over random subsets in random order share links in many ways; the stream form
    # (where it runs) and the full form agree up to the shards' byte rounding
    from collectives.report import run as run_full
    from netcosim.commands.collective import _simulated_point

    t = FABRICS[fabric]()
    ranks = data.draw(st.permutations(range(t.n_hosts)), label="order")
    ranks = ranks[:data.draw(st.integers(3, t.n_hosts), label="ranks")]
    opts = {"protocol": protocol}
    auto = _simulated_point(t, op, "ring", ranks, size, "flow", policy, dict(opts))["time_s"]
    full = run_full(t, op, "ring", ranks, size, engine="flow", routing=policy, **opts)["time_s"]
    assert auto == pytest.approx(full, rel=1e-5)

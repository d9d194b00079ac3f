"""A lossless fabric that deadlocks (PFC pauses in a cycle) stops with a report instead of
running DCQCN's timers forever (docs/packet_engine.md, "Deadlock")."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_helpers import cli, write
from netcore import Schedule, simulate
from topo.builders.fat_tree import fat_tree
from topo.builders.torus import torus


def _all_to_all(n, per_pair):
    src, dst = zip(*[(s, d) for s in range(n) for d in range(n) if s != d])
    return Schedule.from_transfers(list(src), list(dst), [per_pair] * len(src))


@pytest.mark.parametrize("dims", [[4, 4], [8]])
def test_pfc_deadlock_on_a_torus_stops_and_says_so(dims):
    """Dimension-order routing on wrap-around rings has a cyclic buffer dependency: a 1 MiB
    all-to-all under DCQCN + PFC freezes (the all-to-all harness saw it run on for 20x the
    fluid makespan until its guard stopped it; without a guard it never ended)."""
    topo = torus(dims, link_gbps=100, latency_us=1.0)
    sched = _all_to_all(topo.n_hosts, 1 << 20)
    r = simulate(topo, sched, "dor", engine="packet", transport="dcqcn")
    at = r.info["deadlock_at_s"]
    assert at is not None and r.info["deadlocked_ports"] > 0
    assert r.stranded.any() and not r.stranded.all()
    # it stopped at the freeze: nothing finished after it, and the clock did not run on
    assert np.nanmax(r.end) <= at
    assert r.info["end_time_s"] == pytest.approx(at)
    assert at < 0.01


@pytest.mark.parametrize("transport", ["dcqcn", "tcp"])
def test_no_deadlock_is_reported_where_none_happens(transport):
    """The same all-to-all on a fat-tree (no cycle) finishes, deadlock_at_s stays None; a TCP
    run that waits out a long retransmission timeout with nothing queued is not a deadlock."""
    topo = fat_tree(4, link_gbps=100)
    r = simulate(topo, _all_to_all(16, 256 << 10), "ecmp", engine="packet",
                 transport=transport, buffer_packets=20)
    assert r.info["deadlock_at_s"] is None and r.info["deadlocked_ports"] == 0
    assert not r.stranded.any()
    if transport == "tcp":
        assert r.info["drops"] > 0 and r.makespan > 0.5  # it sat through a 1 s minimum RTO


def test_cli_warns_and_reports_no_bandwidth(tmp_path, capsys):
    p = write(tmp_path, """
name = "frozen"
[topology]
kind = "torus"
dims = [4, 4]
link_gbps = 100
[routing]
policy = "dor"
[engine]
kind = "packet"
transport = "dcqcn"
[workload]
kind = "collective"
op = "all_to_all"
algorithm = "direct"
bytes = "16MiB"
""")
    rc, out, err = cli(capsys, "run", p, "--out", tmp_path / "o")
    assert rc == 0
    assert "deadlocked at" in err and "are stranded" in err and "Traceback" not in err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["deadlock_at_s"] > 0 and s["unfinished"] > 0
    # an all-to-all that never completed has no bus bandwidth
    assert s["algbw_GBps"] is None and s["busbw_GBps"] is None


def test_co_simulation_driver_ends_after_a_deadlock():
    """A caller that advances while transfers are pending (the co-simulation loop) must not
    spin forever on a frozen fabric: the stuck transfers are stranded, `pending()` drops to
    zero, and a transfer added afterwards on links the freeze does not hold still runs."""
    from netcore.packet.incremental import PacketIncremental
    from topo.routing import Routing

    topo = torus([4, 4], link_gbps=100, latency_us=1.0)
    inc = PacketIncremental(topo, Routing(topo, "dor"), None, transport="dcqcn")
    n = topo.n_hosts
    src, dst = zip(*[(s, d) for s in range(n) for d in range(n) if s != d])
    inc.add_transfers(list(src), list(dst), [1 << 20] * len(src))
    steps = 0
    while inc.pending():
        inc.advance()
        steps += 1
        assert steps < 10_000
    res_mid = inc.now()
    # one more transfer, after the freeze: host 0 to its neighbour, over a link the frozen
    # packets may or may not hold; either it finishes or it is stranded by a second check,
    # and the loop ends both ways
    inc.add_transfers([0], [1], [4096])
    while inc.pending():
        inc.advance()
        steps += 1
        assert steps < 10_000
    r = inc.result()
    assert r.info["deadlock_at_s"] is not None and r.info["deadlock_at_s"] <= res_mid
    assert r.stranded[: len(src)].any()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([[4], [6], [3, 3], [4, 4]]))
def test_fuzz_every_unfinished_dcqcn_run_on_a_torus_is_a_reported_deadlock(seed, dims):
    """Random transfer sets on torus rings under dcqcn: a run either finishes everything or
    reports the deadlock that stranded the rest. The time guard (far beyond any makespan
    here) only catches a freeze the detector missed, which then fails the test."""
    rng = np.random.default_rng(seed)
    topo = torus(dims, link_gbps=100, latency_us=1.0)
    n = topo.n_hosts
    m = int(rng.integers(2 * n, 8 * n))  # on [6] and [4, 4] about a quarter / two thirds
    src = rng.integers(0, n, m)          # of the draws deadlock; [4] and [3, 3] never do
    dst = (src + rng.integers(1, n, m)) % n
    size = rng.integers(1 << 16, 1 << 22, m)
    start = rng.random(m) * 20e-6 * rng.integers(0, 2, m)
    sched = Schedule.from_transfers(src, dst, size, start=start)
    r = simulate(topo, sched, "dor", engine="packet", transport="dcqcn", max_time_s=0.5)
    if r.stranded.any():
        assert r.info["deadlock_at_s"] is not None and r.info["deadlocked_ports"] > 0
        assert r.info["end_time_s"] < 0.5
    else:
        assert r.info["deadlock_at_s"] is None


GIVE_UP = """
[topology]
kind = "fat_tree"
k = 4
[engine]
kind = "packet"
transport = "tcp"
loss_rate = 0.95
tcp_timers = "datacenter"
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 100000}, {src = 1, dst = 6, bytes = 100000}]
"""


def test_tcp_that_gives_up_is_counted_and_named(tmp_path, capsys):
    """Connections that exhaust their retries strand their transfers although a path exists:
    summary.json counts them (tcp_gave_up) and netcosim run says why they are stranded."""
    import json

    rc, _, err = cli(capsys, "run", write(tmp_path, GIVE_UP), "--out", tmp_path / "o")
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["tcp_gave_up"] >= 1 and s["stranded"] >= s["tcp_gave_up"]
    assert f"warning: {s['tcp_gave_up']} TCP connections gave up" in err
    rc, _, err = cli(capsys, "run", write(tmp_path, GIVE_UP.replace("0.95", "0.0"), "ok.toml"),
                     "--out", tmp_path / "p")
    s = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert rc == 0 and s["tcp_gave_up"] == 0 and s["stranded"] == 0 and "gave up" not in err

"""The flow engine's transfers cut off by a link failure with no other path, or ready while
they have none: they wait for a path (fluid: re-routed after each link that comes back; tcp:
at their retransmission or SYN timeouts, ns-3's rules) instead of being stranded at once (netcore/flow/recovery.py,
docs/flow_engine.md "Faults in time"). The fluid closed forms of single flows are in
tests/test_metamorphic_flow_faults.py."""
import numpy as np
import pytest

from netcore import Schedule, simulate
from netcore.flow.incremental import FlowIncremental
from netcore.flow.options import check_options
from netcore.tcp_timers import TIMER_PRESETS
from topo.builders import fat_tree
from topo.errors import InputError
from topo.faults import DOWN, UP, LinkFaults
from topo.routing import Routing

FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)
GB = 12.5e9
S = 100_000_000  # 8 ms alone at 100 Gb/s


def last_hop(src: int, dst: int) -> int:
    """The directed link into dst of the transfer's path: dst's only link, no other path."""
    p = Routing(FT4, "ecmp").paths([src], [dst], flow_id=[0])
    return int(p.link[p.ptr[1] - 1])


def cut(link: int, down: float, up: float | None = None) -> LinkFaults:
    """Both directions of ``link`` down at ``down`` (and back at ``up``)."""
    ev = [(down, DOWN, 0.0)] + ([(up, UP, 1.0)] if up is not None else [])
    rows = [(t, d, k, f) for t, k, f in ev for d in (link, link ^ 1)]
    t, d, k, f = zip(*rows)
    return LinkFaults(np.array(t), np.array(d), np.array(k), np.array(f))


def resumed_at(r, link: int, after: float) -> float:
    """First instant after ``after`` at which ``link`` carries bytes again (link series)."""
    le = r.link_extra
    a, b = le["series_ptr"][link], le["series_ptr"][link + 1]
    t, rate = le["series_t"][a:b], le["series_rate"][a:b]
    return float(t[(t > after) & (rate > 0)][0])


def run(faults, **opts):
    return simulate(FT4, Schedule.from_transfers([0, 1], [1, 2], [S, S // 10],
                                                 deps=[[], [0]]),
                    "ecmp", faults, engine="flow", link_series=True, **opts)


def test_fluid_waits_for_the_link_and_so_does_its_child():
    link = last_hop(0, 1)
    tc, tu, d = 0.5e-3, 3e-3, 20e-6
    r = run(cut(link, tc, tu), reroute_delay_us=d * 1e6)
    assert r.finished.all() and r.info["stranded"] == 0
    lat = 2e-6
    want = tu + d + (S - GB * tc) / GB + lat  # re-routed the delay after the link is back
    assert r.end[0] == pytest.approx(want, rel=1e-12)
    assert r.start[1] == r.end[0]  # the dependent transfer starts when it ends
    assert r.node_extra["reroutes"][0] == 2  # the failed re-route at tc + d, then tu + d


@pytest.mark.parametrize("preset, k", [("datacenter", 2), ("linux", 1)])
def test_tcp_resumes_at_the_first_timeout_after_the_link_is_back(preset, k):
    """Timeouts at tc + rto (2^j - 1), j = 1, 2, ...: with the link back at 12 ms, the
    datacenter timers (5 ms) find it at 15.5 ms (the second), Linux's (200 ms) at 200.5 ms
    (the first)."""
    link = last_hop(0, 1)
    tc, tu = 0.5e-3, 12e-3
    r = run(cut(link, tc, tu), transport="tcp", tcp_timers=preset)
    rto = TIMER_PRESETS[preset]["min_rto_s"]  # above RTT + granularity here
    first = Routing(FT4, "ecmp").paths([0], [1], flow_id=[0])
    src_link = int(first.link[0])
    t_back = resumed_at(r, src_link, tc)
    assert t_back == pytest.approx(tc + rto * (2 ** k - 1), rel=1e-12)
    # one segment per RTT at first (the window after a timeout), doubling each round
    le = r.link_extra
    a = le["series_ptr"][src_link]
    i = int(np.flatnonzero(le["series_t"][a:] == t_back)[0]) + a
    rates = le["series_rate"][i:i + 3]
    assert rates[1] == pytest.approx(2 * rates[0], rel=1e-12)
    rtt = 2 * 2e-6 + 2 * (9002 + 54) / GB  # docs/flow_engine.md "TCP start-up"
    assert rates[0] == pytest.approx(9002 / rtt, rel=1e-12)
    assert r.finished.all() and r.info["gave_up_no_path"] == 0


def test_tcp_end_matches_the_packet_engine():
    """Same cut and timers in both engines: the packet engine's timer runs from its last ACK,
    the flow engine's from the cut, a few microseconds apart on 23 ms."""
    link = last_hop(0, 1)
    f = cut(link, 0.5e-3, 12e-3)
    sched = Schedule.from_transfers([0], [1], [S])
    flow = simulate(FT4, sched, "ecmp", f, engine="flow", transport="tcp",
                    tcp_timers="datacenter")
    packet = simulate(FT4, sched, "ecmp", f, engine="packet", transport="tcp",
                      tcp_timers="datacenter")
    assert flow.end[0] == pytest.approx(packet.end[0], rel=2e-3)
    assert flow.end[0] > 15.5e-3 + (S - GB * 0.5e-3) / GB


def test_tcp_gives_up_after_data_retries_timeouts():
    link = last_hop(0, 1)
    # datacenter timers: timeouts at 5.5, 15.5, 35.5 ms; with 2 retries the third gives up
    r = run(cut(link, 0.5e-3, 30e-3), transport="tcp", tcp_timers="datacenter",
            data_retries=2)
    assert r.stranded.tolist() == [True, True]
    assert r.node_extra["stranded_no_path"].tolist() == [True, False]
    assert r.node_extra["blocked"].tolist() == [False, True]
    assert r.info["gave_up_no_path"] == 1
    # with the default 6 it is found at 35.5 ms
    ok = run(cut(link, 0.5e-3, 30e-3), transport="tcp", tcp_timers="datacenter")
    assert ok.finished.all() and ok.info["gave_up_no_path"] == 0


@pytest.mark.parametrize("preset, wait", [("ns3", 3.0), ("datacenter", 1.0)])
def test_tcp_ready_without_a_path_starts_at_its_first_syn_timeout_after_the_link(preset, wait):
    """A transfer that becomes ready while its only link is down sends its SYN into the void:
    it starts (handshake, then data) at the SYN timeout that finds the link back (ns-3
    ConnTimeout 3 s; Linux 1 s), or gives up after syn_retries."""
    link = last_hop(0, 1)
    t0 = 0.2e-3
    sched = Schedule.from_transfers([0], [1], [S], start=[t0])
    f = cut(link, 0.1e-3, 12e-3)
    r = simulate(FT4, sched, "ecmp", f, engine="flow", transport="tcp", tcp_timers=preset)
    assert r.finished.all() and r.start[0] == pytest.approx(t0 + wait, rel=1e-12)
    assert r.end[0] > t0 + wait + S / GB
    # the link back after the first SYN timeout: found by the second, 2 x later
    late = cut(link, 0.1e-3, t0 + 1.5 * wait)
    r = simulate(FT4, sched, "ecmp", late, engine="flow", transport="tcp", tcp_timers=preset)
    assert r.start[0] == pytest.approx(t0 + 3 * wait, rel=1e-12)
    r = simulate(FT4, sched, "ecmp", late, engine="flow", transport="tcp", tcp_timers=preset,
                 syn_retries=1)
    assert r.stranded.all() and r.info["gave_up_no_path"] == 1


@pytest.mark.parametrize("transport", ["fluid", "tcp"])
def test_no_link_due_back_strands_at_once(transport):
    link = last_hop(0, 1)
    r = run(cut(link, 0.5e-3), transport=transport)
    assert r.stranded.all() and r.node_extra["stranded_no_path"][0]
    assert r.info["gave_up_no_path"] == 0  # stranded for want of a path, not by its timers


@pytest.mark.parametrize("transport", ["fluid", "tcp"])
def test_session_equals_the_batch_run_and_ends(transport):
    link = last_hop(0, 1)
    for f in (cut(link, 0.5e-3, 12e-3), cut(link, 0.5e-3)):
        batch = simulate(FT4, Schedule.from_transfers([0], [1], [S]), "ecmp", f,
                         engine="flow", transport=transport)
        inc = FlowIncremental(FT4, "ecmp", f, transport=transport)
        inc.add_transfers([0], [1], [S])
        steps = 0
        while inc.pending() and steps < 100:  # a transfer that waits must not hang here
            inc.advance()
            steps += 1
        res = inc.result()
        assert inc.pending() == 0 and steps < 100
        np.testing.assert_array_equal(res.end, batch.end)
        assert res.stranded.tolist() == batch.stranded.tolist()


def test_timer_options_are_checked():
    o = check_options({"transport": "tcp", "tcp_timers": "linux", "min_rto_s": 0.05})
    assert o["min_rto_s"] == 0.05 and o["max_rto_s"] == TIMER_PRESETS["linux"]["max_rto_s"]
    assert check_options(o) == o  # checked options pass again unchanged
    bad = [({"transport": "tcp", "tcp_timers": "fast"}, "engine.tcp_timers"),
           ({"transport": "tcp", "min_rto_s": 0}, "engine.min_rto_s"),
           ({"transport": "tcp", "min_rto_s": 100.0}, "engine.min_rto_s"),
           ({"transport": "tcp", "clock_granularity_s": -1e-3}, "engine.clock_granularity_s"),
           ({"transport": "tcp", "data_retries": 1.5}, "engine.data_retries"),
           ({"tcp_timers": "linux"}, "engine.tcp_timers"),  # fluid has no timers
           ({"data_retries": 3}, "engine.data_retries"),
           ({"transport": "tcp", "syn_retries": -1}, "engine.syn_retries"),
           ({"transport": "tcp", "conn_timeout_s": 0.0}, "engine.conn_timeout_s")]
    for opts, field in bad:
        with pytest.raises(InputError, match=field):
            check_options(opts)

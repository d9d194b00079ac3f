"""Packet engine: exact timing, incast, congestion control, faults, determinism, bad input."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from netcore.packet import check_options, run
from netcore.schedule import Schedule, ScheduleBuilder
from topo.errors import InputError
from topo.faults import LinkFaults
from topo.routing import Routing
from topo.topology import Topology, gbps, us

NONE = LinkFaults.none()


def line(bw_gbps, lat_us):
    """host0 - s2 - s3 - ... - host1: a chain of switches, one link per (bw, lat)."""
    h = len(bw_gbps)
    n_sw = h - 1
    nodes = [0] + [2 + i for i in range(n_sw)] + [1]
    return Topology("custom", 2, n_sw, nodes[:-1], nodes[1:], [gbps(b) for b in bw_gbps],
                    [us(x) for x in lat_us], [0] * h)


def star(n_hosts, bw=100, lat=1.0):
    """n hosts around one switch (node n)."""
    return Topology("custom", n_hosts, 1, list(range(n_hosts)), [n_hosts] * n_hosts,
                    [gbps(bw)] * n_hosts, [us(lat)] * n_hosts, [0] * n_hosts)


def pipeline_ps(sizes, hops):
    """Independent reference: store-and-forward of packets (wire bytes, in order) over idle
    hops [(bytes/s, latency s)]: each hop serialises a packet once it has arrived and the
    previous packet has left; serialisation rounded to the picosecond per packet."""
    arrive = [0] * len(sizes)
    for bw, lat in hops:
        free = 0
        lat_ps = round(lat * 1e12)
        for i, b in enumerate(sizes):
            start = max(arrive[i], free)
            free = start + round(b * 1e12 / bw)
            arrive[i] = free + lat_ps
    return arrive


def wire_sizes(nbytes, mtu, hdr=52, l2=2):
    mss = mtu - hdr
    n = -(-nbytes // mss)
    return [mss + hdr + l2] * (n - 1) + [nbytes - (n - 1) * mss + hdr + l2]


def ps(x):
    return int(round(float(x) * 1e12))


# ---------------------------------------------------------------- exact timing
@pytest.mark.parametrize("bws,lats,nbytes,mtu", [
    ([100, 100, 100], [1.0, 1.0, 1.0], 1_000_000, 9000),
    ([100, 40, 400], [0.5, 2.0, 0.1], 333_333, 1500),
    ([3200, 3200], [0.3, 0.7], 2_000_000, 4096),   # 2.5 ps per byte: not an integer
    ([25], [5.0], 1, 9000),
])
def test_single_flow_idle_path_is_exact(bws, lats, nbytes, mtu):
    t = line(bws, lats)
    s = Schedule.from_transfers([0], [1], [nbytes])
    res = run(t, s, Routing(t, "shortest"), NONE, transport="ideal", mtu=mtu)
    hops = [(gbps(b), us(x)) for b, x in zip(bws, lats)]
    expect = pipeline_ps(wire_sizes(nbytes, mtu), hops)[-1]
    assert ps(res.end[0]) == expect
    assert res.link_bytes[0::2].tolist() == [sum(wire_sizes(nbytes, mtu))] * len(bws)


@pytest.mark.parametrize("ns3_ties", [False, True])
def test_tcp_handshake_then_one_segment_is_exact(ns3_ties):
    bws, lats = [100, 40], [1.0, 3.0]
    t = line(bws, lats)
    s = Schedule.from_transfers([0], [1], [1000])
    res = run(t, s, Routing(t, "shortest"), NONE, transport="tcp", ns3_ties=ns3_ties)
    hops = [(gbps(b), us(x)) for b, x in zip(bws, lats)]
    # SYN: IPv4 20 + TCP 20 + options 16 (wscale 3, SACK-perm 2, timestamps 10, pad 1) + PPP 2
    syn_wire = 20 + 20 + (3 + 2 + 10 + 1) + 2
    syn = pipeline_ps([syn_wire], hops)[-1]
    synack = syn + pipeline_ps([syn_wire], hops[::-1])[-1]  # SYN-ACK back
    # then the handshake ACK (54 bytes) and the data segment leave back to back
    data = synack + pipeline_ps([54, 1000 + 54], hops)[-1]
    assert ps(res.end[0]) == data
    assert ps(res.start[0]) == 0


SYN_WIRE = 20 + 20 + (3 + 2 + 10 + 1) + 2  # IPv4 + TCP + wscale/SACK-perm/TS/pad + PPP


def test_tcp_syn_and_synack_are_58_bytes_on_the_wire():
    t = line([100], [1.0])
    s = Schedule.from_transfers([0], [1], [1000])
    res = run(t, s, Routing(t, "shortest"), NONE, transport="tcp")
    # forward: SYN, handshake ACK, one data segment; reverse: SYN-ACK, one ACK
    assert res.link_bytes.tolist() == [SYN_WIRE + 54 + (1000 + 54), SYN_WIRE + 54]


@pytest.mark.parametrize("ns3_ties", [False, True])
def test_tcp_first_flight_is_capped_at_65535_bytes(ns3_ties):
    """The SYN-ACK's window is never scaled (RFC 7323 2.2): 7 segments of MSS 8948 fit in
    65,535 bytes, so an 8th waits for the first ACK, one round trip, although cwnd is 10."""
    bws, lats = [100, 100], [5.0, 5.0]  # RTT >> 7 serialisations: the path is idle again
    t = line(bws, lats)
    hops = [(gbps(b), us(x)) for b, x in zip(bws, lats)]
    mss = 9000 - 52
    assert 7 * mss <= 65535 < 8 * mss
    ends = {}
    for n in (7, 8):
        s = Schedule.from_transfers([0], [1], [n * mss])
        res = run(t, s, Routing(t, "shortest"), NONE, transport="tcp", ns3_ties=ns3_ties)
        ends[n] = ps(res.end[0])
    synack = 2 * pipeline_ps([SYN_WIRE], hops)[-1]
    flight = pipeline_ps([54] + [mss + 54] * 7, hops)  # handshake ACK, then 7 segments
    assert ends[7] == synack + flight[-1]
    # the ACK of the first segment (one per segment) returns; the 8th segment leaves then
    ack1 = synack + flight[1] + pipeline_ps([54], hops[::-1])[-1]
    assert ends[8] == ack1 + pipeline_ps([mss + 54], hops)[-1]
    # uncapped, the 8th would end one serialisation (0.72 us) after the 7th; capped, it ends
    # a round trip after the 1st (less the 6 serialisations between the 1st and the 7th)
    ser = round((mss + 54) * 1e12 / gbps(100))
    assert ends[8] - ends[7] >= round(2 * sum(us(x) for x in lats) * 1e12) - 6 * ser


@pytest.mark.parametrize("ns3_ties", [False, True])
def test_in_flight_packets_follow_the_new_path_after_a_reroute(ns3_ties):
    """ns-3 forwards hop by hop: a packet sent before a reroute takes the new path from the
    first node of it that it reaches. host0 -5us- s2 -(10ns)- s3 - host1, detour s2 - s4 - s3;
    s2-s3 fails mid-flow: only what is on s2<->s3 (queue ~1, wire ~1 each way) is lost; the
    packets on host0's long link and in its NIC queue turn at s2 onto the detour."""
    t = Topology("custom", 2, 3, [0, 2, 3, 2, 4], [2, 3, 1, 4, 3], [gbps(100)] * 5,
                 [us(5.0), us(0.01), us(1.0), us(1.0), us(1.0)], [0] * 5)
    s = Schedule.from_transfers([0], [1], [4_000_000])
    f = LinkFaults.from_records(t, [{"link": [2, 3], "kind": "down", "at_us": 100.0}])
    res = run(t, s, Routing(t, "shortest"), f, transport="tcp", ns3_ties=ns3_ties)
    assert res.finished.all() and res.info["reroutes"] == 1
    on_long_link = us(5.0) * gbps(100) / 9002  # data packets on host0 -> s2 at any time
    assert on_long_link > 6
    assert 0 < res.info["drops"] <= 4
    assert res.link_extra["drops"][[2, 3]].sum() == res.info["drops"]  # all on s2<->s3
    assert res.link_bytes[6] > 0 and res.link_bytes[8] > 0  # the detour carried data


@pytest.mark.parametrize("transport", ["tcp", "dctcp"])
def test_ns3_ties_change_only_the_order_of_ties(transport):
    """Eager ports and ns-3's numbering differ only at equal picoseconds: on an incast whose
    latencies and rates are all distinct (no ties), with drops, every time is the same."""
    n = 5
    t = Topology("custom", n, 1, list(range(n)), [n] * n,
                 [gbps(100 + 7 * i) for i in range(n)], [us(1.0 + 0.013 * i) for i in range(n)],
                 [0] * n)
    s = Schedule.from_transfers(list(range(1, n)), [0] * (n - 1), [300_000 + 977 * i for i in range(n - 1)])
    r = Routing(t, "shortest")
    o = {"transport": transport, "buffer_packets": 12, "ecn_k": 6}
    a = run(t, s, r, NONE, **o, ns3_ties=False)
    b = run(t, s, r, NONE, **o)  # the default: ns-3's order
    assert a.info["drops"] > 0  # losses and recoveries: a tie broken differently would show
    np.testing.assert_array_equal(a.end, b.end)
    np.testing.assert_array_equal(a.link_bytes, b.link_bytes)
    assert b.info["events"] > a.info["events"]  # one end-of-serialisation event per queued packet


def test_dependencies_compute_and_start_times_are_exact():
    t = line([100], [1.0])
    b = ScheduleBuilder()
    a = b.add_transfers([0], [1], [50_000])
    c = b.add_compute([1], [3e-6], parents=[a])
    d = b.add_transfers([1], [0], [50_000], parents=[c], start=[1e-3])
    s = b.build()
    res = run(t, s, Routing(t, "shortest"), NONE, transport="ideal")
    one = pipeline_ps(wire_sizes(50_000, 9000), [(gbps(100), us(1))])[-1]
    assert ps(res.end[a[0]]) == one
    assert ps(res.end[c[0]]) == one + 3_000_000
    assert ps(res.start[d[0]]) == 1_000_000_000  # its start time is later than its parent
    assert ps(res.end[d[0]]) == 1_000_000_000 + one


# ---------------------------------------------------------------- incast
N, S = 8, 500_000


def incast(transport, **opts):
    t = star(N + 1)
    s = Schedule.from_transfers(list(range(1, N + 1)), [0] * N, [S] * N)
    return t, run(t, s, Routing(t, "shortest"), NONE, transport=transport, **opts)


def test_incast_ideal_is_lossless_at_line_rate():
    t, res = incast("ideal", buffer_packets=100)
    assert res.finished.all()
    assert res.info["drops"] == 0 and res.info["retransmissions"] == 0
    bound = N * S / gbps(100)
    assert bound <= res.makespan <= 1.03 * bound


# DCQCN incast, published parameters (docs/packet_engine.md). Mechanism of the long tail (real
# DCQCN behaviour, not a bug): the NP sends a CNP at most every cnp_interval = 50 us while
# marked packets arrive, and that is shorter than the rate-increase timer (55 us), which every
# CNP restarts; so while the PFC-fed egress queue stays above Kmin, a flow is halved every
# 50 us (alpha starts at 1 and g = 1/256 keeps it near 1) without a single recovery step in
# between. Afterwards fast recovery only climbs back to R_T, the rate before the last cut
# (at most 2x), in 55 us steps; additive increase adds 40 Mb/s per 55 us (0.7 Gb/s per ms at
# 100 Gb/s) and hyper increase needs F = 5 byte-counter stages of 10 MB, far beyond S. Flows
# cut more often than the others end alone, below the line rate, and the run has a tail.
# Checked below: spacing the CNPs out past the run (one cut per flow) removes the tail.
def _dcqcn_incast(**opts):
    t, res = incast("dcqcn", buffer_packets=100, **opts)
    assert res.finished.all()
    assert res.info["drops"] == 0 and res.info["retransmissions"] == 0
    assert res.info["headroom_violations"] == 0
    assert res.link_extra["pause_s"].sum() > 0  # PFC did the work
    assert res.link_extra["ecn_marks"].sum() > 0
    return res


def test_incast_dcqcn_one_cut_per_flow_runs_at_line_rate():
    # With one CNP per flow the rate falls at most to C(1 - alpha/2) >= C/2 >= C/N (the fair
    # share, N = 8), so no flow ever sends below its share: PFC alone divides the bottleneck,
    # which stays busy as with `ideal`, and the same 3% (store-and-forward, headers) applies.
    res = _dcqcn_incast(cnp_interval_us=10_000.0)
    bound = N * S / gbps(100)
    assert bound <= res.makespan <= 1.03 * bound


def test_incast_dcqcn_published_parameters_lossless_with_recovery_tail():
    res = _dcqcn_incast()
    once = _dcqcn_incast(cnp_interval_us=10_000.0)
    bound = N * S / gbps(100)
    assert res.makespan > once.makespan  # the tail comes from repeated cuts (see above)
    # Upper bound from the model: the bottleneck is saturated while its queue is above Kmin,
    # so marking (and cutting) can last at most N*S/C; within it a flow gets at most
    # k = 1 + (N*S/C) / cnp_interval CNPs, each at most halving its rate, with no increase in
    # between (cnp_interval < rate timer). After that it sends at >= C / 2^k, and it has at
    # most S left. This floor is loose (the recovery steps make it far better in practice),
    # but it is what the parameters guarantee, unlike a factor fitted to one run.
    k = 1 + int(bound / 50e-6)
    assert bound <= res.makespan <= bound + S / (gbps(100) / 2 ** k)


def test_incast_tcp_small_buffer_drops_and_recovers():
    t, res = incast("tcp", buffer_packets=8)
    assert res.finished.all()
    assert res.info["drops"] > 0
    assert res.node_extra["retransmissions"].sum() > 0
    into_receiver = t.dlink_id(N + 1, 0)
    assert res.link_extra["drops"][into_receiver] == res.info["drops"]
    assert res.link_extra["queue_max_packets"][into_receiver] <= 8


def test_dctcp_holds_the_bottleneck_queue_near_k():
    k = 20
    t = star(5)
    s = Schedule.from_transfers([1, 2, 3, 4], [0] * 4, [20_000_000] * 4)
    res = run(t, s, Routing(t, "shortest"), NONE, transport="dctcp", ecn_k=k,
              buffer_packets=200, mtu=1500)
    link = t.dlink_id(5, 0)
    assert res.finished.all()
    assert res.info["drops"] == 0
    assert res.link_extra["ecn_marks"][link] > 0
    mean = res.link_extra["queue_mean_packets"][link]
    assert 0.3 * k <= mean <= 1.5 * k
    assert res.link_extra["queue_max_packets"][link] < 4 * k
    # and the link stays busy: within 5% of line rate for the 80 MB
    assert res.makespan <= 1.05 * 80e6 * (1500 + 2) / (1500 - 52) / gbps(100) + 1e-4
    # plain TCP fills the buffer to the brim and drops (in ns-3's order, the default, one of
    # the four symmetric senders then loses its tail and waits 1 s for its RTO, as in ns-3, so
    # the mean over the run says little: its maximum is the test)
    tcp = run(t, s, Routing(t, "shortest"), NONE, transport="tcp", buffer_packets=200, mtu=1500)
    assert tcp.link_extra["queue_max_packets"][link] == 200 and tcp.info["drops"] > 0


def test_dcqcn_with_pfc_never_drops_in_a_two_level_incast():
    t = star(13)
    src = list(range(1, 13))
    s = Schedule.from_transfers(src, [0] * 6 + [1] * 6, [300_000] * 12)
    res = run(t, s, Routing(t, "shortest"), NONE, transport="dcqcn", buffer_packets=40)
    assert res.finished.all()
    assert res.info["drops"] == 0 and res.info["headroom_violations"] == 0
    assert res.link_extra["pause_s"].sum() > 0


# ---------------------------------------------------------------- agreement with fluid model
# Plain TCP with several flows overshoots any buffer smaller than the data in slow start and
# NewReno then repairs one hole per (queue-inflated) RTT: 13-15% slower here, which is TCP,
# not a modelling error; DCQCN with its published (40 Gb/s era) increase steps recovers slowly
# at 100 Gb/s (3-30% slower, docs/packet_engine.md). The fair-sharing comparison uses the
# transports that neither lose nor overreact.
@pytest.mark.parametrize("transport,n_flows", [("ideal", 1), ("ideal", 3), ("tcp", 1),
                                               ("dctcp", 3)])
def test_long_flows_agree_with_max_min_within_2_percent(transport, n_flows):
    size = 30_000_000
    t = star(n_flows + 1)
    s = Schedule.from_transfers(list(range(1, n_flows + 1)), [0] * n_flows, [size] * n_flows)
    res = run(t, s, Routing(t, "shortest"), NONE, transport=transport)
    exact = n_flows * size / gbps(100)  # fair share of the receiver's link
    assert res.finished.all()
    assert abs(res.makespan - exact) <= 0.02 * exact
    try:
        from netcore.flow.engine import run as flow_run
    except ImportError:
        return
    fl = flow_run(t, s, Routing(t, "shortest"), NONE)
    assert abs(res.makespan - fl.makespan) <= 0.02 * fl.makespan


# ---------------------------------------------------------------- faults
def _fat_tree_case(transport, at_us):
    from topo.builders import fat_tree

    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    r = Routing(t, "ecmp")
    s = Schedule.from_transfers([0], [15], [3_000_000])
    p = r.paths([0], [15], flow_id=[0])
    core = [int(l) for l in p.link if t.dlink_src[l] >= t.n_hosts and t.dlink_dst[l] >= t.n_hosts]
    mid = core[len(core) // 2]  # a switch-to-switch link in the middle of its path
    f = LinkFaults.from_records(t, [{"link": [int(t.dlink_src[mid]), int(t.dlink_dst[mid])],
                                     "kind": "down", "at_us": at_us}])
    return t, s, r, f


@pytest.mark.parametrize("transport", ["ideal", "tcp", "dctcp", "dcqcn"])
def test_link_down_with_alternative_path_finishes(transport):
    t, s, r, f = _fat_tree_case(transport, at_us=120.0)
    res = run(t, s, r, f, transport=transport, reroute_delay_us=5.0)
    assert res.finished.all() and not res.stranded.any()
    assert res.info["reroutes"] == 1
    assert res.info["drops"] > 0
    assert res.node_extra["retransmissions"][0] > 0
    clean = run(t, s, r, NONE, transport=transport)
    assert res.makespan > clean.makespan


@pytest.mark.parametrize("sample_us", [0.0, 10.0])  # the queue sampler must not keep it alive
@pytest.mark.parametrize("transport", ["ideal", "tcp", "dcqcn"])
def test_link_down_without_alternative_is_stranded_and_run_ends(transport, sample_us):
    t = line([100, 100], [1.0, 1.0])
    b = ScheduleBuilder()
    a = b.add_transfers([0], [1], [5_000_000])
    c = b.add_compute([1], [1e-6], parents=[a])
    other = b.add_transfers([1], [0], [10_000])  # the reverse direction stays up
    s = b.build()
    f = LinkFaults.from_records(t, [{"link": [2, 1], "kind": "down", "at_us": 50.0,
                                     "direction": "forward"}])
    res = run(t, s, Routing(t, "shortest"), f, transport=transport, sample_queues_us=sample_us)
    assert res.stranded[a[0]] and res.stranded[c[0]]
    assert not res.stranded[other[0]] and np.isfinite(res.end[other[0]])
    assert np.isnan(res.end[a[0]])


def test_degrade_slows_serialisation_exactly():
    t = line([100], [1.0])
    s = Schedule.from_transfers([0], [1], [90_000])
    f = LinkFaults.from_records(t, [{"link": [0, 1], "kind": "degrade", "factor": 0.25}])
    res = run(t, s, Routing(t, "shortest"), f, transport="ideal")
    expect = pipeline_ps(wire_sizes(90_000, 9000), [(gbps(25), us(1))])[-1]
    assert ps(res.end[0]) == expect


def test_random_loss_is_recovered_and_seeded():
    t = line([100, 100], [1.0, 1.0])
    s = Schedule.from_transfers([0, 1], [1, 0], [2_000_000, 1_000_000])
    for tr in ("ideal", "tcp"):
        a = run(t, s, Routing(t, "shortest"), NONE, transport=tr, loss_rate=0.01, seed=3,
                min_rto_s=0.001)
        assert a.finished.all()
        assert a.info["drops"] > 0 and a.node_extra["retransmissions"].sum() > 0


# ---------------------------------------------------------------- determinism
def _same(a, b):
    for name in ("start", "end", "link_bytes", "link_busy"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for k in a.link_extra:
        np.testing.assert_array_equal(a.link_extra[k], b.link_extra[k])
    assert a.events == b.events


@pytest.mark.parametrize("transport,policy", [("tcp", "spray"), ("dcqcn", "adaptive"),
                                              ("dctcp", "ecmp")])
def test_same_seed_same_result_bit_for_bit(transport, policy):
    from topo.builders import fat_tree

    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    rng = np.random.default_rng(0)
    src = rng.integers(0, 16, 40)
    dst = (src + rng.integers(1, 16, 40)) % 16
    s = Schedule.from_transfers(src, dst, rng.integers(1, 400_000, 40))
    opts = dict(transport=transport, loss_rate=0.001, buffer_packets=30, ecn_k=10,
                min_rto_s=0.0002)
    a = run(t, s, Routing(t, policy, seed=5), NONE, seed=5, **opts)
    b = run(t, s, Routing(t, policy, seed=5), NONE, seed=5, **opts)
    assert a.finished.all()
    _same(a, b)
    c = run(t, s, Routing(t, policy, seed=5), NONE, seed=6, **opts)
    assert not np.array_equal(a.end, c.end)


# ---------------------------------------------------------------- invariants
@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5), st.integers(0, 200_000)),
                min_size=1, max_size=8),
       st.sampled_from(["ideal", "tcp", "dcqcn"]), st.sampled_from(["ecmp", "spray", "adaptive"]))
def test_everything_finishes_and_bytes_are_conserved(flows, transport, policy):
    t = star(6)
    src = [a for a, _, _ in flows]
    dst = [(a + d) % 6 for a, d, _ in flows]
    size = [z for _, _, z in flows]
    s = Schedule.from_transfers(src, dst, size)
    res = run(t, s, Routing(t, policy), NONE, transport=transport, buffer_packets=20, ecn_k=5)
    assert res.finished.all()
    for i in range(len(flows)):
        lower = size[i] / gbps(100)
        assert res.end[i] - res.start[i] >= lower - 1e-15
    up = np.array([t.dlink_id(h, 6) for h in range(6)])
    down = np.array([t.dlink_id(6, h) for h in range(6)])
    if res.info["drops"] == 0:  # what enters the switch leaves it
        assert res.link_bytes[up].sum() == res.link_bytes[down].sum()


# ---------------------------------------------------------------- API and bad input
def test_simulate_dispatches_to_the_packet_engine():
    from netcore import simulate

    t = star(3)
    s = Schedule.from_transfers([0, 1], [2, 2], [100_000, 100_000])
    res = simulate(t, s, "ecmp", engine="packet", transport="ideal")
    assert res.engine == "packet" and res.finished.all()
    assert res.info["events"] == res.events > 0 and res.info["events_per_s"] > 0


@pytest.mark.parametrize("opts,key", [
    ({"mtu": 40}, "engine.mtu"),
    ({"mtu": 52}, "engine.mtu"),
    ({"transport": "dcqcn", "mtu": 44}, "engine.mtu"),
    ({"buffer_packets": 0}, "engine.buffer_packets"),
    ({"transport": "dctcp", "ecn_k": 1000}, "engine.ecn_k"),
    ({"transport": "dctcp", "ecn_k": 50, "buffer_packets": 40}, "engine.ecn_k"),
    ({"ecn_k": -1}, "engine.ecn_k"),
    ({"transport": "udp"}, "engine.transport"),
    ({"loss_rate": 1.0}, "engine.loss_rate"),
    ({"transport": "dcqcn", "pfc_xon_bytes": 10**9}, "engine.pfc_xon_bytes"),
    ({"transport": "dcqcn", "pfc_xoff_bytes": 10**12}, "engine.pfc_xoff_bytes"),
    ({"pfc_xoff_bytes": "x"}, "engine.pfc_xoff_bytes"),
    ({"buffer_bytes": 100}, "engine.buffer_bytes"),
    ({"delayed_ack": "yes"}, "engine.delayed_ack"),
    ({"ns3_ties": 1}, "engine.ns3_ties"),
    ({"sack": "on"}, "engine.sack"),
    ({"bogus": 1}, "engine.bogus"),
])
def test_bad_parameters_name_the_field(opts, key):
    with pytest.raises(InputError, match=key.replace(".", r"\.")):
        check_options(opts)
    t = star(2)
    with pytest.raises(InputError, match=key.replace(".", r"\.")):
        run(t, Schedule.from_transfers([0], [1], [10]), Routing(t, "ecmp"), NONE, **opts)


def test_defaults_are_the_ns3_ones():
    o = check_options({})
    assert o["init_cwnd"] == 10 and o["min_rto_s"] == 1.0 and o["dupack_threshold"] == 3
    assert o["delack_timeout_s"] == 0.2 and o["delack_count"] == 2 and o["l2_header_bytes"] == 2
    assert o["sack"] is True  # TcpSocketBase::Sack
    assert math.isclose(o["dctcp_g"], 1 / 16) and math.isclose(o["dcqcn_g"], 1 / 256)

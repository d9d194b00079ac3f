"""Single-path policies on fullflat stripe over the planes (topo/routing.py, "Plane striping"):
each (src, dst) is routed once per plane by the policy's own rule, weight 1/planes per plane;
a plane cut by faults hands its share to the others; other fabrics route as before."""
import importlib.util
import json

import numpy as np
import pytest

from cli_helpers import FULLFLAT_RING, cli, write
from netcore import Schedule, simulate
from netcosim import routing_notice
from topo.builders import fat_tree, fullflat, two_tier
from topo.builders.fullflat import dlink_planes
from topo.faults import DOWN, LinkFaults
from topo.routing import STRIPED, Routing

FF = fullflat(16, planes=4, switch_radix=16, gpu_gbps=400, latency_us=1.0)  # 100 Gbps a plane
FF2 = fullflat(40, planes=2, switch_radix=16)  # leaf/spine planes: 5 leaves, 8 spines each
PLANE_BPS = 100e9 / 8


def all_pairs(n):
    s, d = np.divmod(np.arange(n * n), n)
    keep = s != d
    return s[keep], d[keep]


def per_plane(t, p, i):
    """Flow i's links grouped by plane, each in the order listed."""
    links = p.link[p.ptr[i]:p.ptr[i + 1]]
    planes = dlink_planes(t)[links]
    return {int(q): links[planes == q] for q in np.unique(planes)}


def is_walk(t, links, src, dst):
    a, b = t.dlink_src[links], t.dlink_dst[links]
    return a[0] == src and b[-1] == dst and (b[:-1] == a[1:]).all()


@pytest.mark.parametrize("policy", STRIPED)
def test_every_pair_uses_every_plane_at_one_over_planes(policy):
    for t in (FF, FF2):
        planes = t.params["planes"]
        s, d = all_pairs(t.n_hosts)
        p = Routing(t, policy, seed=5).paths(s, d)
        assert p.reachable.all()
        assert (p.weight == 1.0 / planes).all()
        for i in range(len(s)):
            got = per_plane(t, p, i)
            assert sorted(got) == list(range(planes))
            for links in got.values():
                assert is_walk(t, links, s[i], d[i])
                if t is FF:  # single-switch planes: every path is GPU -> switch -> GPU
                    assert len(links) == 2
        if policy != "valiant":
            assert set(p.hops.tolist()) <= {2, 4}
            # the weights of a flow add up to its hop count (each plane path: hops links)
            tot = np.add.reduceat(p.weight, p.ptr[:-1])
            assert np.allclose(tot, p.hops)


def test_the_plane_choice_is_the_policy_s_own():
    """In a leaf/spine plane, dmodk's spine depends on the destination only, ecmp's on a
    per-flow hash: striping keeps each rule inside every plane."""
    s = np.zeros(39, dtype=np.int64)
    d = np.arange(1, 40)
    far = FF2.host_group[d] != FF2.host_group[0]
    spines = {}
    for policy in ("dmodk", "ecmp"):
        p = Routing(FF2, policy, seed=1).paths(s[far], d[far], flow_id=np.arange(far.sum()))
        # the spine of each plane path is the node after its second link
        picks = np.array([[int(FF2.dlink_dst[lk[1]]) for lk in per_plane(FF2, p, i).values()]
                          for i in range(int(far.sum()))])
        spines[policy] = picks
    # dmodk: spine index dst mod 8 (relative to the plane's first spine)
    base = FF2.n_hosts + np.arange(2) * 13 + 5
    assert ((spines["dmodk"] - base) == (d[far] % 8)[:, None]).all()
    # ecmp: the hash spreads flows with the same destination class over spines
    assert len(np.unique(spines["ecmp"][:, 0])) > 4


def test_deterministic():
    s, d = all_pairs(16)
    for policy in STRIPED:
        a = Routing(FF, policy, seed=7).paths(s, d, flow_id=s * 31 + d)
        b = Routing(FF, policy, seed=7).paths(s, d, flow_id=s * 31 + d)
        for f in ("ptr", "link", "weight", "reachable", "latency", "hops"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), (policy, f)


def test_a_cut_plane_hands_its_share_to_the_others():
    cut = FF.dlink_id(0, FF.n_hosts + 1)  # GPU 0 into plane 1 (a single switch)
    alive = np.ones(FF.n_dlinks, bool)
    alive[[cut, cut ^ 1]] = False
    r = Routing(FF, "ecmp")
    p = r.paths([0, 5, 3], [5, 0, 5], alive=alive)
    assert p.reachable.all()
    for i in (0, 1):  # to and from GPU 0: planes 0, 2, 3 at a third each
        assert sorted(per_plane(FF, p, i)) == [0, 2, 3]
        assert np.allclose(p.weight[p.ptr[i]:p.ptr[i + 1]], 1 / 3)
    assert sorted(per_plane(FF, p, 2)) == [0, 1, 2, 3]  # a pair the cut does not touch
    assert (p.weight[p.ptr[2]:p.ptr[3]] == 0.25).all()
    # every plane cut: unreachable, nothing listed
    for q in range(4):
        lk = FF.dlink_id(0, FF.n_hosts + q)
        alive[[lk, lk ^ 1]] = False
    p = r.paths([0], [5], alive=alive)
    assert not p.reachable[0] and p.ptr[-1] == 0 and p.hops[0] == -1


def test_flow_engine_moves_the_share_when_a_plane_link_fails():
    """0 -> 5 at 4 planes x 12.5 GB/s; at tf GPU 0's plane-1 link fails: after the reroute
    delay the rest goes at 3 planes; nothing is stranded and plane 1 carried only what it had
    sent before tf."""
    S, tf, delay = 10_000_000, 0.1e-3, 5e-6
    cut = FF.dlink_id(0, FF.n_hosts + 1)
    faults = LinkFaults(np.array([tf, tf]), np.array([cut, cut ^ 1]), np.array([DOWN, DOWN]),
                        np.array([0.0, 0.0]))
    r = simulate(FF, Schedule.from_transfers([0], [5], [S]), "ecmp", faults,
                 reroute_delay_us=delay * 1e6)
    assert r.finished.all() and not r.stranded.any()
    left = S - 4 * PLANE_BPS * tf
    assert r.end[0] == pytest.approx(tf + delay + left / (3 * PLANE_BPS) + 2e-6, rel=1e-9)
    assert r.link_bytes[cut] == pytest.approx(PLANE_BPS * tf, rel=1e-9)
    for q in (0, 2, 3):
        assert r.link_bytes[FF.dlink_id(0, FF.n_hosts + q)] == \
            pytest.approx(PLANE_BPS * tf + left / 3, rel=1e-9)


def test_other_fabrics_route_as_before():
    ft = fat_tree(4)
    s, d = all_pairs(ft.n_hosts)
    for t in (ft, two_tier(2), fullflat(16, planes=1, switch_radix=16)):
        for policy in STRIPED:
            r = Routing(t, policy, seed=3)
            assert not r.striped and r.unstriped() is r
            a = r.paths(s[s < t.n_hosts], d[s < t.n_hosts]) if t is ft else \
                r.paths(*all_pairs(t.n_hosts))
            assert (a.weight == 1.0).all()
            assert (np.diff(a.ptr) == a.hops).all()  # one path each, in hop order
    # spray on fullflat is the spray it was: all shortest paths, no striping of its own
    r = Routing(FF, "spray")
    assert not r.striped
    b = Routing(FF, "ecmp", stripe=False).paths(*all_pairs(16))
    assert (b.weight == 1.0).all() and (np.diff(b.ptr) == 2).all()


def test_unstriped_is_the_old_single_plane_routing():
    s, d = all_pairs(16)
    a = Routing(FF, "ecmp", seed=2).unstriped().paths(s, d)
    b = Routing(FF, "ecmp", seed=2, stripe=False).paths(s, d)
    assert np.array_equal(a.link, b.link) and (a.weight == 1.0).all()
    assert len(np.unique(dlink_planes(FF)[a.link])) == 4  # the hash spreads flows over planes
    assert (np.diff(a.ptr) == 2).all()


T4 = fullflat(4, planes=2, switch_radix=4, gpu_gbps=200)  # 12.5 GB/s a plane


def test_packet_engine_splits_a_transfer_into_a_connection_per_plane():
    """Each transfer becomes one connection per plane (netcore/packet/plane_split.py): a chain
    of three runs in about the flow engine's time, half the unstriped one; the caller gets
    its own three nodes back."""
    sched = Schedule.from_transfers([0, 1, 2], [1, 2, 3], [2_000_000, 1_000_000, 3_000_000],
                                    deps=[[], [0], [1]])
    flow = simulate(T4, sched, "ecmp")
    for transport in ("ideal", "dcqcn"):
        a = simulate(T4, sched, Routing(T4, "ecmp"), engine="packet", transport=transport)
        one = simulate(T4, sched, Routing(T4, "ecmp", stripe=False), engine="packet",
                       transport=transport)
        assert len(a.end) == 3 and not a.stranded.any() and a.info["plane_pieces"] == 3
        assert a.end == pytest.approx(flow.end, rel=0.03)
        assert one.end[-1] > 1.9 * a.end[-1]
        # both planes carry half of every transfer out of GPU 0 (and the unstriped one plane)
        up = [a.link_bytes[T4.dlink_id(0, T4.n_hosts + q)] for q in (0, 1)]
        assert up[0] == pytest.approx(up[1], rel=0.01)
        assert sorted(one.link_bytes[T4.dlink_id(0, T4.n_hosts + q)] > 0 for q in (0, 1)) == \
            [False, True]


def test_packet_engine_warm_connections_keep_one_plane():
    sched = Schedule.from_transfers([0], [1], [1_000_000])
    a = simulate(T4, sched, Routing(T4, "ecmp"), engine="packet", transport="ideal",
                 warm_connections=True)
    b = simulate(T4, sched, Routing(T4, "ecmp", stripe=False), engine="packet",
                 transport="ideal", warm_connections=True)
    assert np.array_equal(a.end, b.end) and np.array_equal(a.link_bytes, b.link_bytes)
    assert "plane_pieces" not in a.info
    assert routing_notice.plane_notice(T4, "ecmp", "packet", warm_connections=True)
    assert routing_notice.plane_notice(T4, "ecmp", "packet") is None


def test_packet_engine_moves_a_cut_plane_s_piece():
    """GPU 0's plane-1 link fails mid-transfer: the plane-1 piece is re-routed over plane 0
    and the transfer ends about when the flow engine says; nothing is stranded."""
    S, tf = 4_000_000, 50e-6
    cut = T4.dlink_id(0, T4.n_hosts + 1)
    faults = LinkFaults(np.array([tf, tf]), np.array([cut, cut ^ 1]), np.array([DOWN, DOWN]),
                        np.array([0.0, 0.0]))
    sched = Schedule.from_transfers([0], [1], [S])
    flow = simulate(T4, sched, "ecmp", faults, reroute_delay_us=5)
    # both planes until tf, plane 0 alone after the reroute delay (+ 2 us of latency)
    assert flow.end[0] == pytest.approx(tf + 5e-6 + (S - 2 * PLANE_BPS * tf) / PLANE_BPS + 2e-6,
                                        rel=1e-9)
    for transport in ("ideal", "dcqcn"):
        r = simulate(T4, sched, "ecmp", faults, engine="packet", transport=transport,
                     reroute_delay_us=5)
        assert not r.stranded.any() and r.info["reroutes"] == 1
        assert r.info["plane_pieces"] == 1
        assert r.end[0] == pytest.approx(flow.end[0], rel=0.03)
        # plane 1 carried (about) what left before tf; plane 0 the rest
        assert r.link_bytes[cut] == pytest.approx(PLANE_BPS * tf, rel=0.05)
        assert r.link_bytes[T4.dlink_id(0, T4.n_hosts)] > 0.8 * S


def test_ring_all_reduce_on_the_packet_engine_uses_every_plane():
    """A 32 MiB ring all-reduce over 16 GPUs on 4 planes (DCQCN): striped ecmp within a few %
    of the flow engine (where ecmp and spray agree), the unstriped route 3x slower or worse."""
    import collectives as co

    t = fullflat(16, planes=4, switch_radix=16, gpu_gbps=1600)
    sched = co.ring_all_reduce(list(range(16)), 32 << 20)
    flow = np.nanmax(simulate(t, sched, "spray").end)
    assert np.nanmax(simulate(t, sched, "ecmp").end) == pytest.approx(flow, rel=1e-9)
    striped = np.nanmax(simulate(t, sched, Routing(t, "ecmp"), engine="packet",
                                 transport="dcqcn").end)
    one = np.nanmax(simulate(t, sched, Routing(t, "ecmp", stripe=False), engine="packet",
                             transport="dcqcn").end)
    assert striped == pytest.approx(flow, rel=0.03)
    assert one > 3 * striped


RING = FULLFLAT_RING


def test_ring_all_reduce_single_path_matches_spray_on_the_flow_engine(tmp_path, capsys):
    busbw = {}
    for policy in ("ecmp", "dmodk", "spray"):
        out = tmp_path / policy
        text = RING.format(policy=policy, engine="flow", warm="", size="256MiB")
        rc, _, err = cli(capsys, "run", write(tmp_path, text,
                                              f"{policy}.toml"), "--out", out)
        assert rc == 0, err
        assert "warning" not in err  # the flow engine uses every plane
        busbw[policy] = json.loads((out / "summary.json").read_text())["busbw_GBps"]
    for policy in ("ecmp", "dmodk"):
        assert busbw[policy] == pytest.approx(busbw["spray"], rel=0.03)


@pytest.mark.ns3
@pytest.mark.skipif(importlib.util.find_spec("ns") is None, reason="ns-3 not installed")
def test_ns3_runs_the_same_per_plane_connections_as_the_packet_engine():
    """validation/ns3/runner.py splits a striped schedule exactly as the packet engine does
    (a connection per plane, routed in its plane): TCP in both ends at the same time."""
    from validation.ns3 import run_ns3

    sched = Schedule.from_transfers([0, 1, 2], [1, 2, 0], [2 << 20, 1 << 20, 3 << 20],
                                    deps=[[], [0], []])
    r = Routing(T4, "ecmp")
    ns3 = run_ns3(T4, sched, r, mtu=9000, buffer_packets=1000)
    pk = simulate(T4, sched, r, engine="packet", transport="tcp", mtu=9000, buffer_packets=1000)
    assert len(ns3.end) == 3 and not ns3.stranded.any() and ns3.info["plane_pieces"] == 3
    assert ns3.end == pytest.approx(pk.end, rel=0.01)
    one = run_ns3(T4, sched, Routing(T4, "ecmp", stripe=False), mtu=9000, buffer_packets=1000)
    assert one.makespan > 1.8 * ns3.makespan


@pytest.mark.parametrize("policy", ["spray", "adaptive"])
def test_per_packet_routing_with_the_ideal_transport_finishes_on_several_planes(policy):
    """A GPU with one link per plane under spray/adaptive and `transport = "ideal"`: a
    packet could go straight onto an idle first link whose empty queue never served the
    sender waiting on it, and every transfer was stranded after a few packets (a 64 MiB
    ring all-reduce on examples/fullflat_alltoall.toml: 8,064 of 8,064 stranded, makespan
    18 us)."""
    from netcore.api import simulate
    from netcore.schedule import Schedule
    from topo.builders import build

    t = build("fullflat", {"n_gpus": 8, "planes": 2, "switch_radix": 8, "gpu_gbps": 800})
    S = 1 << 20
    r = simulate(t, Schedule.from_transfers([0], [5], [S]), routing=policy, engine="packet",
                 transport="ideal")
    assert r.n_stranded == 0
    assert S / (800e9 / 8) < r.makespan < 2 * S / (800e9 / 8)  # both planes carry it

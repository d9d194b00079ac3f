"""`adaptive` (and `spray`) between two GPUs of one scale-up domain on two_tier, rails = false.

There a node's GPUs share their top-of-rack leaf, so GPU -> leaf -> GPU is as short as
GPU -> NVSwitch -> GPU. Commit 74df378 made ``Routing.paths`` route such pairs over the
scale-up links only (``_inside_domain`` / ``_scaleup_first``), which covers every policy at
flow level, ``adaptive`` included (first test).

The packet engine's per-hop policies (``spray``, ``adaptive``) pick at every hop among the
neighbours one hop closer in ``Routing.distances``' row of the destination. In that row the
NVSwitch and the leaf are both 1 hop from the destination GPU, and the leaf must stay at 1
(every GPU of another node reaches the destination through it), so no row can keep the node's
own GPUs off the leaf (second test). The packet engine therefore gives such pairs their
``Routing.paths`` path (``Routing.scaleup_pairs``, netcore/packet/engine.py ``per_hop_paths``)
and its core follows a path it is given under a per-hop policy. Measured before, a ring
all-reduce over the 8 GPUs of one node: 1 MiB 36.5 us under ecmp and behind rails, 95.0 us
under adaptive and 147.4 us under spray; 4 MiB 64.0 against 370.0 and 596.3 us.
"""
from __future__ import annotations

import numpy as np
import pytest

import collectives as co
from netcore.api import simulate
from topo.builders import build
from topo.routing import Routing


def _node(rails, nodes=1, **kw):
    return build("two_tier", dict(nodes=nodes, rails=rails, **kw))


def _nic_dlinks(t):
    return np.repeat(t.link_layer == t.layer_names.index("edge"), 2)


@pytest.mark.parametrize("nodes_per_leaf", [1, 2])
def test_adaptive_paths_inside_a_node_use_no_nic_link(nodes_per_leaf):
    t = _node(False, nodes=2, gpus_per_node=4, nodes_per_leaf=nodes_per_leaf)
    g = 4
    src, dst = np.array([(a, b) for n in range(2) for a in range(n * g, n * g + g)
                         for b in range(n * g, n * g + g) if a != b]).T
    p = Routing(t, "adaptive").paths(src, dst)
    nic = _nic_dlinks(t)
    assert p.reachable.all()
    assert not nic[p.link].any()
    assert (p.hops == 2).all()
    # and a pair across nodes still leaves through the NICs
    q = Routing(t, "adaptive").paths(np.array([0]), np.array([g]))
    assert nic[q.link].any()


def test_the_distance_row_has_both_switches_one_hop_from_a_gpu():
    # why the per-hop choice is not fixed in the rows: from GPU 1, the NVSwitch and the
    # leaf are both one hop closer to GPU 0, and the leaf must be (GPU 8 of the next node,
    # under the same leaf, reaches GPU 0 only through it)
    t = _node(False, nodes=2, gpus_per_node=8, nodes_per_leaf=2)
    row = Routing(t, "adaptive").distances([0])[0]
    nvswitch, leaf = t.n_hosts, t.n_hosts + 2  # node switches first, then the leaves
    assert row[1] == 2 and row[nvswitch] == 1 and row[leaf] == 1
    assert row[8] == 2


@pytest.mark.parametrize("policy", ["adaptive", "spray"])
def test_packet_per_hop_policies_keep_a_nodes_ring_on_nvlink(policy):
    size = 1 << 20
    got = {}
    for rails in (True, False):
        t = _node(rails)
        s = co.build("all_reduce", "ring", range(8), size, fabric=t).with_connections()
        res = simulate(t, s, routing=policy, engine="packet")
        got[rails] = res.makespan
        if not rails:  # no byte of the node's own traffic crossed a NIC link
            assert res.link_bytes[_nic_dlinks(t)].sum() == 0
    assert got[False] == pytest.approx(got[True], rel=0.01)


@pytest.mark.parametrize("policy", ["adaptive", "spray"])
def test_pairs_across_nodes_still_route_per_packet(policy):
    """Only pairs inside a node get a path: two nodes under one leaf, a ring over all 16
    GPUs, crosses the NICs and, under spray, uses both of the leaf's spines' worth of
    paths as before (the ring's makespan equals ecmp's or beats it)."""
    t = _node(False, nodes=2, nodes_per_leaf=1)
    s = co.build("all_reduce", "ring", range(16), 1 << 20, fabric=t).with_connections()
    res = simulate(t, s, routing=policy, engine="packet")
    assert res.n_stranded == 0
    assert res.link_bytes[_nic_dlinks(t)].sum() > 0


def test_session_and_batch_agree_on_scale_up_pairs():
    """The incremental packet engine (session) routes the same way as a batch run."""
    from netcore.session import Session

    t = _node(False)
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    size = 1 << 20
    from netcore.schedule import Schedule

    batch = simulate(t, Schedule.from_transfers(src, dst, np.full(4, size)),
                     routing="adaptive", engine="packet")
    ses = Session(t, engine="packet", routing="adaptive")
    for a, b in zip(src, dst):
        ses.send(int(a), int(b), size)
    ses.run()
    res = ses.result()
    np.testing.assert_array_equal(res.end, batch.end)
    assert res.link_bytes[_nic_dlinks(t)].sum() == 0


def test_a_cut_scale_up_link_sends_the_pair_through_the_fabric():
    """A pair whose scale-up path is down is routed per packet over the fabric (not stranded
    on a dead path): GPU 1's NVLink down, a transfer 0 -> 1 still arrives."""
    from topo.faults import LinkFaults

    t = _node(False)
    nvswitch = t.n_hosts
    faults = LinkFaults.from_records(t, [{"link": [1, nvswitch], "kind": "down"}])
    from netcore.schedule import Schedule

    s = Schedule.from_transfers([0], [1], [1 << 20])
    res = simulate(t, s, routing="adaptive", engine="packet", faults=faults)
    assert res.n_stranded == 0
    assert res.link_bytes[_nic_dlinks(t)].sum() > 0


def test_per_hop_paths_with_an_unreachable_pair_last():
    """GPU 1 cut off (its NVLink and its NIC down): the pair 2 -> 1 has no path and comes
    after a routed pair; per_hop_paths counted links per pair with np.add.reduceat, which
    raised IndexError on a trailing empty path."""
    from netcore.packet.engine import per_hop_paths

    t = _node(False)
    alive = np.ones(t.n_dlinks, dtype=bool)
    nvswitch, leaf = t.n_hosts, t.n_hosts + 1
    for v in (nvswitch, leaf):
        d = t.dlink_id(1, v)
        alive[d] = alive[d ^ 1] = False
    ptr, links, reach = per_hop_paths(Routing(t, "adaptive"), t, np.array([0, 2]),
                                      np.array([2, 1]), np.array([0, 1]), alive,
                                      np.array([True, False]))
    assert ptr.tolist() == [0, 2, 2]  # 0 -> NVSwitch -> 2; none for 2 -> 1
    assert not _nic_dlinks(t)[links].any()
    assert reach.tolist() == [True, False]

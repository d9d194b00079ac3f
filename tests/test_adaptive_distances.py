"""`adaptive` (and `spray`) between two GPUs of one scale-up domain on two_tier, rails = false.

There a node's GPUs share their top-of-rack leaf, so GPU -> leaf -> GPU is as short as
GPU -> NVSwitch -> GPU. Commit 74df378 made ``Routing.paths`` route such pairs over the
scale-up links only (``_inside_domain`` / ``_scaleup_first``), which covers every policy at
flow level, ``adaptive`` included (first test).

The packet engine's per-hop policies (``spray``, ``adaptive``) do not take paths: at every hop
the core picks among the neighbours one hop closer in ``Routing.distances``' row of the
destination. In that row the NVSwitch and the leaf are both 1 hop from the destination GPU,
and the leaf must stay at 1 (every GPU of another node reaches the destination through it),
so no row can keep the node's own GPUs off the leaf: the fix is not in ``Routing.distances``
but in the packet engine, which would give such pairs their ``Routing.paths`` path
(netcore/packet/engine.py ``_Router.push`` and netcore/packet/incremental.py ``_paths``) and
follow it: its compiled core drops every path under a per-hop policy (``Sim::set_paths`` in
netcore/_packet_cpp/sim_core.cpp). Measured, a ring all-reduce over
the 8 GPUs of one node: 1 MiB 36.5 us under ecmp and behind rails, 95.0 us under adaptive
and 147.4 us under spray; 4 MiB 64.0 against 370.0 and 596.3 us. Kept as a strict xfail
until that fix.
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
    # why the per-hop choice cannot be fixed in the rows: from GPU 1, the NVSwitch and the
    # leaf are both one hop closer to GPU 0, and the leaf must be (GPU 8 of the next node,
    # under the same leaf, reaches GPU 0 only through it)
    t = _node(False, nodes=2, gpus_per_node=8, nodes_per_leaf=2)
    row = Routing(t, "adaptive").distances([0])[0]
    nvswitch, leaf = t.n_hosts, t.n_hosts + 2  # node switches first, then the leaves
    assert row[1] == 2 and row[nvswitch] == 1 and row[leaf] == 1
    assert row[8] == 2


@pytest.mark.xfail(strict=True, reason="the packet engine's per-hop policies choose among "
                   "Routing.distances' candidates, where the ToR leaf is as close as the "
                   "NVSwitch; fix in the packet engine: give scale-up pairs their "
                   "Routing.paths path (netcore/packet/engine.py _Router.push, incremental.py "
                   "_paths) and follow it (netcore/_packet_cpp Sim::set_paths drops paths "
                   "under per_hop)")
@pytest.mark.parametrize("policy", ["adaptive", "spray"])
def test_packet_per_hop_policies_keep_a_nodes_ring_on_nvlink(policy):
    size = 1 << 20
    got = {}
    for rails in (True, False):
        t = _node(rails)
        s = co.build("all_reduce", "ring", range(8), size, fabric=t).with_connections()
        got[rails] = simulate(t, s, routing=policy, engine="packet").makespan
    assert got[False] == pytest.approx(got[True], rel=0.01)

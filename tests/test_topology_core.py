"""The Topology container: checks, directed view, adjacency."""
import numpy as np
import pytest

from topo.topology import HOST, SWITCH, Topology, TopologyError, gbps


def star(n_hosts=3, bw=100):
    return Topology("custom", n_hosts, 1, list(range(n_hosts)), [n_hosts] * n_hosts,
                    [gbps(bw)] * n_hosts, [1e-6] * n_hosts, [0] * n_hosts)


def test_directed_links_pair_up():
    t = star()
    assert t.n_dlinks == 6
    assert (t.dlink_src[0::2] == t.link_u).all() and (t.dlink_dst[0::2] == t.link_v).all()
    assert (t.dlink_src[1::2] == t.link_v).all() and (t.dlink_dst[1::2] == t.link_u).all()
    assert t.dlink_id(0, 3) == 0 and t.dlink_id(3, 0) == 1 and t.dlink_id(0, 1) == -1
    assert t.dlink_ids([0, 3, 0], [3, 2, 1]).tolist() == [0, 5, -1]
    assert t.node_kind.tolist() == [HOST, HOST, HOST, SWITCH]
    assert t.hosts_forward is False


def test_adjacency_sorted_by_neighbour():
    t = star(4)
    ptr, nbr, dl = t.adjacency
    assert nbr[ptr[4]:ptr[5]].tolist() == [0, 1, 2, 3]
    for u in range(t.n_nodes):
        for j in range(ptr[u], ptr[u + 1]):
            assert t.dlink_src[dl[j]] == u and t.dlink_dst[dl[j]] == nbr[j]


@pytest.mark.parametrize("kw, match", [
    (dict(link_v=[3, 9, 3]), r"links\[1\]: node 9 does not exist"),
    (dict(link_bw=[1.0, -1.0, 1.0]), r"links\[1\]: bandwidth"),
    (dict(link_lat=[0.0, float("nan"), 0.0]), r"links\[1\]: latency"),
    (dict(link_u=[0, 1, 0]), r"duplicate link between nodes 0 and 3"),
    (dict(link_u=[0, 3, 2]), r"links\[1\]: a link from node 3 to itself"),
])
def test_bad_links_are_named(kw, match):
    args = dict(link_u=[0, 1, 2], link_v=[3, 3, 3], link_bw=[1.0] * 3, link_lat=[0.0] * 3,
                link_layer=[0] * 3)
    args.update(kw)
    with pytest.raises(TopologyError, match=match):
        Topology("custom", 3, 1, **args)


def test_disconnected_fabric_refused():
    with pytest.raises(TopologyError, match="disconnected"):
        Topology("custom", 4, 0, [0, 2], [1, 3], [1.0, 1.0], [0.0, 0.0], [0, 0])


def test_switchless_fabric_lets_hosts_forward():
    t = Topology("custom", 3, 0, [0, 1], [1, 2], [1.0, 1.0], [0.0, 0.0], [0, 0])
    assert t.hosts_forward is True
    assert np.isclose(t.dlink_bw, 1.0).all()

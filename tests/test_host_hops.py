"""topo.hops.host_hops against networkx's shortest paths with the relay rule, on random
connected graphs where hosts may be wired to each other (a host behind another is unreachable
unless hosts relay)."""
import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.builders import two_tier
from topo.hops import host_hops
from topo.topology import Topology


def reference(t, hosts):
    g = t.graph
    out = np.full((len(hosts), len(hosts)), -1)
    for i, s in enumerate(hosts):
        for j, d in enumerate(hosts):
            keep = [x for x in range(t.n_nodes) if x >= t.n_hosts or t.hosts_forward
                    or x in (s, d)]
            try:
                out[i, j] = nx.shortest_path_length(g.subgraph(keep), int(s), int(d))
            except nx.NetworkXNoPath:
                out[i, j] = -1
    return out


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_hops_equal_networkx(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    n_h = data.draw(st.integers(1, 8), label="hosts")
    n_sw = data.draw(st.integers(0, 6), label="switches")
    n = n_h + n_sw
    if n < 2:
        return
    # connected (a fabric must be), yet a host may be reachable only through another host
    order = rng.permutation(n)
    edges = {tuple(sorted((int(order[i]), int(order[rng.integers(0, i)])))) for i in range(1, n)}
    for _ in range(data.draw(st.integers(0, 2 * n), label="extra")):
        a, b = rng.integers(0, n, 2)
        if a != b:
            edges.add((int(min(a, b)), int(max(a, b))))
    u, v = zip(*sorted(edges))
    t = Topology("custom", n_h, n_sw, u, v, np.ones(len(u)), np.zeros(len(u)),
                 np.zeros(len(u)), hosts_forward=data.draw(st.booleans(), label="forward"))
    hosts = rng.integers(0, n_h, data.draw(st.integers(1, 10), label="listed"))  # repeats too
    got = host_hops(t, hosts)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, reference(t, hosts))


def test_two_tier_groups():
    t = two_tier(nodes=6, gpus_per_node=4, nic_gbps=100)
    hosts = np.array([3, 0, 7, 12, 13, 22, 3])
    np.testing.assert_array_equal(host_hops(t, hosts), reference(t, hosts))

"""Fabric figures: bisection bandwidth and host-to-host diameter.

Both prefer the closed form a builder put in ``topology.params`` (``bisection_Bps``,
``diameter_hops``); otherwise they compute it from the graph:

* bisection: the minimum cut (networkx max-flow) between the lower half of the host ids
  (``n_hosts // 2`` hosts) and the rest. For the builders' families this halving is the
  textbook worst case; for an arbitrary fabric it is one balanced cut, an upper bound on the
  true bisection (finding the minimum over all halvings is NP-hard).
* diameter: the largest hop count between two hosts along shortest paths, honouring
  ``hosts_forward`` (a host that does not forward is never an intermediate hop). All-sources
  BFS with 64 sources per machine word (bit-parallel), compiled with numba: O(n_hosts/64 *
  levels * links), well under a second for 10^4 nodes.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from topo.topology import Topology


def bisection_bandwidth(topology: Topology) -> float:
    """Bandwidth (bytes/s, one direction) across the bisection of the hosts."""
    if "bisection_Bps" in topology.params:
        return float(topology.params["bisection_Bps"])
    return min_cut_halving(topology)


def min_cut_halving(topology: Topology, side_a=None) -> float:
    """Minimum cut (bytes/s) separating host set ``side_a`` (default: the lower half of the
    host ids) from the other hosts; switches may fall on either side.

    Forwarding rules do not change the value: flow entering an intermediate host of the
    source side could as well be injected there (the source feeds every such host without
    limit), and symmetrically on the sink side."""
    import networkx as nx

    n_h = topology.n_hosts
    if n_h < 2:
        return 0.0
    a = np.zeros(n_h, bool)
    if side_a is None:
        a[: n_h // 2] = True
    else:
        a[np.asarray(side_a, dtype=np.int64)] = True
    g = nx.DiGraph()
    cap = topology.link_bw.tolist()
    for u, v, c in zip(topology.link_u.tolist(), topology.link_v.tolist(), cap):
        g.add_edge(u, v, capacity=c)
        g.add_edge(v, u, capacity=c)
    src, dst = -1, -2
    for h in range(n_h):  # edges without a capacity attribute are unbounded
        if a[h]:
            g.add_edge(src, h)
        else:
            g.add_edge(h, dst)
    return float(nx.maximum_flow_value(g, src, dst))


def diameter_hops(topology: Topology) -> int:
    """Largest shortest-path hop count between two hosts; -1 when some pair of hosts cannot
    reach each other (possible when hosts do not forward and only a host joins two parts)."""
    if "diameter_hops" in topology.params:
        return int(topology.params["diameter_hops"])
    return host_diameter_bfs(topology)


def host_diameter_bfs(topology: Topology) -> int:
    """Diameter by bit-parallel BFS from every host (ignores ``params``)."""
    if topology.n_hosts < 2:
        return 0
    ptr, nbr, _ = topology.adjacency
    return int(_diameter_kernel(ptr.astype(np.int64), nbr.astype(np.int64),
                                topology.n_hosts, bool(topology.hosts_forward)))


@njit(cache=True)
def _diameter_kernel(ptr, nbr, n_hosts, hosts_forward):
    n = len(ptr) - 1
    one = np.uint64(1)
    zero = np.uint64(0)
    diam = 0
    for c0 in range(0, n_hosts, 64):
        c1 = min(c0 + 64, n_hosts)
        full = np.uint64(0)
        selfbit = np.zeros(n, np.uint64)  # bit of u when u is a source of this chunk
        for s in range(c0, c1):
            b = one << np.uint64(s - c0)
            selfbit[s] = b
            full |= b
        visited = selfbit.copy()
        frontier = selfbit.copy()
        level = 0
        active = True
        while active:
            level += 1
            new = np.zeros(n, np.uint64)
            for u in range(n):
                f = frontier[u]
                if f == zero:
                    continue
                if u < n_hosts and not hosts_forward:
                    f &= selfbit[u]  # a host only sends its own traffic, never relays
                    if f == zero:
                        continue
                for j in range(ptr[u], ptr[u + 1]):
                    new[nbr[j]] |= f
            active = False
            for v in range(n):
                nv = new[v] & ~visited[v]
                frontier[v] = nv
                if nv != zero:
                    active = True
                    visited[v] |= nv
                    if v < n_hosts:
                        diam = level
        for h in range(n_hosts):
            if visited[h] & full != full:
                return -1
    return diam

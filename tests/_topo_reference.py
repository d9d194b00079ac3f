"""Slow, independent reference figures for small fabrics (networkx only, no topo.metrics):
min cut over a host halving and host-to-host diameter honouring hosts_forward."""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np


def nx_min_cut(topo, side_a) -> float:
    """Min cut (bytes/s) separating host set side_a from the other hosts."""
    a = set(int(x) for x in side_a)
    if not a or len(a) == topo.n_hosts:
        return 0.0
    g = nx.DiGraph()
    for u, v, c in zip(topo.link_u.tolist(), topo.link_v.tolist(), topo.link_bw.tolist()):
        g.add_edge(u, v, capacity=c)
        g.add_edge(v, u, capacity=c)
    for h in range(topo.n_hosts):
        if h in a:
            g.add_edge("S", h, capacity=float("inf"))
        else:
            g.add_edge(h, "T", capacity=float("inf"))
    value, _ = nx.minimum_cut(g, "S", "T", flow_func=nx.algorithms.flow.edmonds_karp)
    return value


def nx_diameter(topo) -> int:
    """Max over host pairs of the shortest hop count; hosts that do not forward are split into
    a send node and a receive node so no path can pass through them."""
    g = nx.DiGraph()
    H = topo.n_hosts

    def out(x):
        return ("out", x) if (x < H and not topo.hosts_forward) else x

    def inn(x):
        return ("in", x) if (x < H and not topo.hosts_forward) else x

    for u, v in zip(topo.link_u.tolist(), topo.link_v.tolist()):
        g.add_edge(out(u), inn(v))
        g.add_edge(out(v), inn(u))
    best = 0
    for h in range(H):
        dist = nx.single_source_shortest_path_length(g, out(h)) if out(h) in g else {}
        for t in range(H):
            if t == h:
                continue
            d = dist.get(inn(t))
            if d is None:
                return -1
            best = max(best, d)
    return best


def degrees(topo) -> np.ndarray:
    return np.bincount(np.concatenate([topo.link_u, topo.link_v]), minlength=topo.n_nodes)


def brute_bisection(t) -> float:
    """Least max-flow cut over every balanced split of the hosts (networkx, no topo.metrics
    shortcut): host 0 on the smaller side, both sizes when the host count is odd."""
    n = t.n_hosts
    g = nx.DiGraph()
    for u, v, c in zip(t.link_u.tolist(), t.link_v.tolist(), t.link_bw.tolist()):
        g.add_edge(u, v, capacity=c)
        g.add_edge(v, u, capacity=c)
    best = np.inf
    for k in sorted({n // 2, n - n // 2}):
        for comb in itertools.combinations(range(1, n), k - 1):
            a = {0, *comb}
            h = g.copy()
            for x in range(n):
                h.add_edge("S", x) if x in a else h.add_edge(x, "T")
            best = min(best, nx.maximum_flow_value(h, "S", "T"))
    return float(best)

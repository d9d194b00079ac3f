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

Both are bounded (``bisection``, ``diameter`` return the method with the figure): a fabric
beyond MAX_CUT_LINKS links gets an upper bound on the bisection, and one whose exact diameter
search would exceed MAX_DIAMETER_WORK steps (a chain of 30,000 hosts: ~10^13 for the
bit-parallel search) a double-sweep BFS lower bound, exact on trees and paths.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from topo.topology import Topology


# Work bounds of the computed figures (docs/topologies.md, "Figures of large fabrics"): beyond
# them `netcosim topo` states a bound and its method instead of running for minutes.
MAX_CUT_LINKS = 200_000  # networkx max-flow: ~1 s per 10^4 links on a chain
MAX_DIAMETER_WORK = 300_000_000  # node + link visits of the exact all-hosts search
# fabrics whose hosts each hang off one switch (one link, all at one rate) and that have at
# most this many switches get the exact bisection: every split of the switches is tried
# (2^(S-1) Gray-code steps, ~0.1 s at 24)
MAX_EXACT_SWITCHES = 24


def bisection_bandwidth(topology: Topology) -> float:
    """Bandwidth (bytes/s, one direction) across the bisection of the hosts."""
    return bisection(topology)[0]


def bisection(topology: Topology) -> tuple[float, str]:
    """(bytes/s, method): the builder's closed form, the minimum cut of the id halving, or on a
    fabric with more than MAX_CUT_LINKS links an upper bound: the host links of the lower id
    half (a cut that always separates the halves)."""
    if "bisection_Bps" in topology.params:
        return float(topology.params["bisection_Bps"]), "closed form of the builder"
    exact = exact_bisection(topology)
    if exact is not None:
        return exact, (f"exact: the least cut over every split of the {topology.n_switches} "
                       f"switches with the hosts balanced")
    if topology.n_links <= MAX_CUT_LINKS:
        return min_cut_halving(topology), "minimum cut between the id halves of the hosts"
    n_h = topology.n_hosts
    half = np.arange(n_h) < n_h // 2
    u, v = topology.link_u, topology.link_v
    # links with exactly one end a lower-half host, counted once: cutting them all separates
    # the lower half from everything else, so the minimum cut is at most their sum
    hu = (u < n_h) & half[np.minimum(u, n_h - 1)]
    hv = (v < n_h) & half[np.minimum(v, n_h - 1)]
    bound = float(topology.link_bw[hu ^ hv].sum())
    return bound, (f"upper bound: the links of the lower half of the hosts (the exact minimum "
                   f"cut is skipped above {MAX_CUT_LINKS:,} links)")


def exact_bisection(topology: Topology) -> float | None:
    """The exact bisection (bytes/s) of a fabric whose hosts each hang off one switch by one
    link, all host links at one rate, with at most MAX_EXACT_SWITCHES switches; None for any
    other fabric.

    Given the side of every switch, the cheapest balanced split leaves every host with its
    switch except the fewest needed to balance the halves (each costs its link), so the
    bisection is the least, over the 2^(S-1) splits of the switches (one switch held on one
    side; the halves may trade sizes), of the switch links cut plus that many host links."""
    t = topology
    n_h, n_s = t.n_hosts, t.n_switches
    if n_h < 2 or not 1 <= n_s <= MAX_EXACT_SWITCHES:
        return None
    u, v = t.link_u.astype(np.int64), t.link_v.astype(np.int64)
    host_link = (u < n_h) | (v < n_h)
    if ((u < n_h) & (v < n_h)).any():
        return None
    host = np.where(u < n_h, u, v)[host_link]
    if len(host) != n_h or len(np.unique(host)) != n_h:
        return None  # a host with no link or several
    bw = t.link_bw[host_link]
    if (bw != bw[0]).any():
        return None
    sw_of = np.where(u < n_h, v, u)[host_link] - n_h
    hosts_on = np.bincount(sw_of, minlength=n_s).astype(np.int64)
    ptr, nbr, dlink = t.adjacency
    w = np.ascontiguousarray(t.dlink_bw[dlink], dtype=np.float64)
    return float(_switch_split_kernel(ptr, nbr.astype(np.int64), w, hosts_on, n_h,
                                      float(bw[0])))


@njit(cache=True)
def _switch_split_kernel(ptr, nbr, w, hosts_on, n_hosts, host_bw):
    """Least cut over the splits of the switches (switch 0 held on side B) in Gray-code order:
    switch-link cut plus host_bw per host moved off its switch's side to balance the halves.
    ``ptr, nbr, w``: the fabric's adjacency (Topology.adjacency, every node; host neighbours
    are skipped) with each directed link's rate."""
    n_s = len(hosts_on)
    lo = n_hosts // 2
    hi = n_hosts - lo
    side = np.zeros(n_s, np.uint8)
    cut = 0.0
    on_a = 0
    best = lo * host_bw  # every switch on B: lo hosts cross to A
    for i in range(1, 1 << (n_s - 1)):
        j = 1
        x = i
        while x & 1 == 0:
            x >>= 1
            j += 1
        s = side[j]
        for e in range(ptr[j + n_hosts], ptr[j + n_hosts + 1]):
            o = nbr[e] - n_hosts
            if o < 0:
                continue  # a host link: counted by the balance term
            if side[o] == s:
                cut += w[e]
            else:
                cut -= w[e]
        side[j] = 1 - s
        on_a += hosts_on[j] if s == 0 else -hosts_on[j]
        d = min(abs(on_a - lo), abs(on_a - hi))
        val = cut + d * host_bw
        if val < best:
            best = val
    return best


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
    return diameter(topology)[0]


def diameter(topology: Topology) -> tuple[int, str]:
    """(hops, method): the builder's closed form; else the exact all-hosts search when its work
    is within MAX_DIAMETER_WORK; else a lower bound by repeated double-sweep BFS (exact on
    trees and paths), with the upper bound the same sweeps give (twice an eccentricity)."""
    if "diameter_hops" in topology.params:
        return int(topology.params["diameter_hops"]), "closed form of the builder"
    n_h = topology.n_hosts
    if n_h < 2:
        return 0, "exact"
    ptr, nbr, _ = topology.adjacency
    ptr = ptr.astype(np.int64)
    nbr = nbr.astype(np.int64)
    fwd = bool(topology.hosts_forward)
    size = len(ptr) - 1 + len(nbr)
    d0 = _bfs_kernel(ptr, nbr, n_h, fwd, 0)
    if (d0[:n_h] < 0).any():
        return -1, "exact (some hosts cannot reach each other)"
    ecc0 = int(d0[:n_h].max())
    # the bit-parallel search runs about (levels x nodes + links) per 64 hosts, the queue
    # search (nodes + links) per host: the cheaper of the two, when within budget
    bitpar = -(-n_h // 64) * (2 * ecc0 + 1) * size
    queue = n_h * size
    if min(bitpar, queue) <= MAX_DIAMETER_WORK:
        if bitpar <= queue:
            return host_diameter_bfs(topology), "exact (all hosts, bit-parallel BFS)"
        return int(_all_hosts_kernel(ptr, nbr, n_h, fwd)), "exact (BFS from every host)"
    lo, far = ecc0, int(np.argmax(d0[:n_h]))
    hi = 2 * ecc0
    # a tree (connected: every node was reached from host 0 when all nodes relay) whose hosts
    # relay or are leaves: distances are a tree metric, and two sweeps give the diameter
    deg = np.diff(ptr)
    tree = (topology.n_links == topology.n_nodes - 1 and (d0 >= 0).all()
            and (fwd or (deg[:n_h] <= 1).all()))
    if tree:
        d = _bfs_kernel(ptr, nbr, n_h, fwd, far)
        return int(d[:n_h].max()), "exact (double-sweep BFS on a tree)"
    for _ in range(4):  # double sweeps from the farthest host found so far
        d = _bfs_kernel(ptr, nbr, n_h, fwd, far)
        e = int(d[:n_h].max())
        hi = min(hi, 2 * e)
        if e <= lo:
            break
        lo, far = e, int(np.argmax(d[:n_h]))
    if lo == hi:
        return lo, "exact (double-sweep BFS bounds meet)"
    return lo, (f"lower bound by double-sweep BFS (exact on trees; at most {hi}); the exact "
                f"search of {min(bitpar, queue):,} steps is skipped above "
                f"{MAX_DIAMETER_WORK:,}")


@njit(cache=True)
def _bfs_kernel(ptr, nbr, n_hosts, hosts_forward, src):
    """Hops from ``src`` to every node (-1 unreachable); hosts other than ``src`` relay only
    when ``hosts_forward``."""
    n = len(ptr) - 1
    dist = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int64)
    dist[src] = 0
    queue[0] = src
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        if u < n_hosts and u != src and not hosts_forward:
            continue
        du = dist[u] + 1
        for j in range(ptr[u], ptr[u + 1]):
            v = nbr[j]
            if dist[v] < 0:
                dist[v] = du
                queue[tail] = v
                tail += 1
    return dist


@njit(cache=True)
def _all_hosts_kernel(ptr, nbr, n_hosts, hosts_forward):
    diam = 0
    for s in range(n_hosts):
        d = _bfs_kernel(ptr, nbr, n_hosts, hosts_forward, s)
        for h in range(n_hosts):
            if d[h] < 0:
                return -1
            if d[h] > diam:
                diam = d[h]
    return diam


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

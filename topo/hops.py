"""Hop counts between hosts along shortest paths (hosts relay only where ``hosts_forward``)."""
from __future__ import annotations

import numpy as np

from topo.metrics import _bfs_kernel
from topo.routing import spans
from topo.topology import Topology


def _groups(of: np.ndarray, n: int):
    """Positions holding each value 0..n-1 of ``of``, value after value."""
    order = np.argsort(of, kind="stable")
    cut = np.searchsorted(of[order], np.arange(n + 1))
    return (order[cut[k]:cut[k + 1]] for k in range(n))


def pair_hops(topology: Topology, src, dst) -> np.ndarray:
    """int64 per pair: hops from host ``src[p]`` to host ``dst[p]`` (-1 where unreachable).

    Where hosts do not relay, a path into host d enters it from the source itself or from one
    of d's switches, and its switches are relays only: hops = 1 + the least distance from the
    source to a switch next to d. One compiled BFS per distinct such switch
    (topo.metrics._bfs_kernel) instead of one per host: the 4,096 hosts of a pipeline stage of
    a 65,536-GPU two-tier fabric need about 520 (their NVSwitches and the 8 rail leaves).
    Where hosts relay, one BFS per distinct source."""
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    ptr, nbr, _ = topology.adjacency
    ptr, nbr = ptr.astype(np.int64), nbr.astype(np.int64)
    nh = topology.n_hosts
    out = np.full(len(src), -1, dtype=np.int64)
    if topology.hosts_forward:
        us, s_of = np.unique(src, return_inverse=True)
        for s, p in zip(us.tolist(), _groups(s_of, len(us))):
            out[p] = _bfs_kernel(ptr, nbr, nh, True, s)[dst[p]]
        return out
    ud, d_of = np.unique(dst, return_inverse=True)
    deg = ptr[ud + 1] - ptr[ud]
    nb = nbr[spans(ptr[ud], deg)]
    # (pair, neighbour of its destination) incidences
    cnt = deg[d_of]
    pair = np.repeat(np.arange(len(src)), cnt)
    via = nb[spans((np.cumsum(deg) - deg)[d_of], cnt)]
    far = np.iinfo(np.int64).max
    best = np.full(len(src), far, dtype=np.int64)
    # through a switch next to the destination: one BFS per switch, read at the pairs' sources
    sw = via >= nh
    anchors, a_of = np.unique(via[sw], return_inverse=True)
    sw_pair = pair[sw]
    for a, at in zip(anchors.tolist(), _groups(a_of, len(anchors))):
        p = sw_pair[at]
        d = _bfs_kernel(ptr, nbr, nh, False, a)[src[p]]
        d[d < 0] = far
        best[p] = np.minimum(best[p], d)
    reach = best < far
    out[reach] = best[reach] + 1
    out[pair[~sw][via[~sw] == src[pair[~sw]]]] = 1  # a source wired to its destination
    out[src == dst] = 0
    return out


def host_hops(topology: Topology, hosts) -> np.ndarray:
    """(g, g) int64: hops from ``hosts[i]`` to ``hosts[j]`` (-1 where unreachable)."""
    hosts = np.asarray(hosts, dtype=np.int64).ravel()
    g = len(hosts)
    return pair_hops(topology, np.repeat(hosts, g), np.tile(hosts, g)).reshape(g, g)

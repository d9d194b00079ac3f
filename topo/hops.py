"""Hop counts between hosts along shortest paths (hosts relay only where ``hosts_forward``)."""
from __future__ import annotations

import numpy as np

from topo.metrics import _bfs_kernel
from topo.topology import Topology


def host_hops(topology: Topology, hosts) -> np.ndarray:
    """(g, g) int64: hops from ``hosts[i]`` to ``hosts[j]`` (-1 where unreachable). One BFS per
    distinct host, compiled (topo.metrics._bfs_kernel)."""
    hosts = np.asarray(hosts, dtype=np.int64).ravel()
    ptr, nbr, _ = topology.adjacency
    ptr, nbr = ptr.astype(np.int64), nbr.astype(np.int64)
    fwd = bool(topology.hosts_forward)
    out = np.empty((len(hosts), len(hosts)), dtype=np.int64)
    rows: dict[int, np.ndarray] = {}
    for i, h in enumerate(hosts.tolist()):
        if h not in rows:
            rows[h] = _bfs_kernel(ptr, nbr, topology.n_hosts, fwd, h)[hosts]
        out[i] = rows[h]
    return out

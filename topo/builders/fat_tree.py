"""Classic three-tier k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008).

k pods; each pod has k/2 edge and k/2 aggregation switches; every edge switch serves k/2
hosts and links to every aggregation switch of its pod; aggregation switch a of every pod
links to the k/2 core switches a*k/2 .. a*k/2 + k/2 - 1. All links have the same speed.

Counts: k^3/4 hosts, 5k^2/4 switches (k^2/2 edge, k^2/2 aggregation, k^2/4 core), 3k^3/4
links (k^3/4 per tier). Full bisection: k^3/8 links of the common speed. Diameter 6 hops
(host, edge, aggregation, core, aggregation, edge, host).

Node order: hosts (pod-major, then edge switch), edge switches (pod-major), aggregation
switches (pod-major), core switches. ``host_group`` is the edge switch index.
"""
from __future__ import annotations

import numpy as np

from topo.builders._check import as_gbps, as_int, as_latency_us, check_size
from topo.errors import InputError
from topo.topology import Topology, us

LAYERS = ("edge", "aggregation", "core")


def fat_tree(k, link_gbps=100.0, latency_us=1.0, *, where: str = "topology") -> Topology:
    k = as_int(k, f"{where}.k", lo=2)
    if k % 2:
        raise InputError(f"{where}.k = {k}: a k-ary fat-tree needs an even k")
    bw = as_gbps(link_gbps, f"{where}.link_gbps")
    lat = us(as_latency_us(latency_us, f"{where}.latency_us"))
    half = k // 2
    n_hosts = k ** 3 // 4
    n_edge = n_agg = k * half
    n_core = half * half
    check_size(n_hosts + n_edge + n_agg + n_core, 3 * n_hosts, f"{where}.k", k)
    e0 = n_hosts
    a0 = e0 + n_edge
    c0 = a0 + n_agg

    h = np.arange(n_hosts, dtype=np.int64)
    host_u, host_v = h, e0 + h // half  # k/2 consecutive hosts per edge switch

    # edge (p, e) <-> aggregation (p, a) for every pod p; index p*half + e is pod-major
    p, e, a = (x.ravel() for x in np.meshgrid(np.arange(k), np.arange(half), np.arange(half),
                                               indexing="ij"))
    ea_u, ea_v = e0 + p * half + e, a0 + p * half + a
    # aggregation (p, a) <-> core a*half + c: the a-th aggregation switch of every pod owns
    # the same group of k/2 core switches, so every pod reaches every core switch once.
    p, a, c = (x.ravel() for x in np.meshgrid(np.arange(k), np.arange(half), np.arange(half),
                                               indexing="ij"))
    ac_u, ac_v = a0 + p * half + a, c0 + a * half + c

    link_u = np.concatenate([host_u, ea_u, ac_u])
    link_v = np.concatenate([host_v, ea_v, ac_v])
    layer = np.repeat(np.arange(3, dtype=np.int8), n_hosts)
    L = len(link_u)
    params = {
        "k": k, "link_gbps": float(link_gbps), "latency_us": float(latency_us),
        "pods": k, "edge_switches": n_edge, "aggregation_switches": n_agg,
        "core_switches": n_core,
        "bisection_Bps": (n_hosts // 2) * bw,
        "diameter_hops": 6,
    }
    return Topology("fat_tree", n_hosts, n_edge + n_agg + n_core, link_u, link_v,
                    np.full(L, bw), np.full(L, lat), layer, LAYERS,
                    host_group=(h // half).astype(np.int32), params=params,
                    hosts_forward=False)

"""A fabric given link by link, exactly as the scenario contract (docs/DESIGN.md) says:

    hosts = 16, switches = 6, links = [[u, v, gbps, latency_us], ...]

Node ids 0..hosts-1 are hosts, hosts..hosts+switches-1 switches; every link is full duplex
with ``gbps`` in each direction. ``hosts_forward`` (optional) says whether hosts may relay
traffic (default: only when there are no switches). Errors name ``topology.links[i]``.
Layers: "edge" (host-switch), "fabric" (switch-switch), "direct" (host-host).
No closed-form figures: ``topo.metrics`` computes bisection and diameter from the graph.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from topo.builders._check import as_bool, as_gbps, as_int, as_latency_us, check_size
from topo.errors import InputError
from topo.topology import Topology, TopologyError, us

LAYERS = ("edge", "fabric", "direct")


def custom(hosts, switches=0, links=(), hosts_forward=None, *,
           where: str = "topology") -> Topology:
    n_hosts = as_int(hosts, f"{where}.hosts", lo=1)
    n_sw = as_int(switches, f"{where}.switches", lo=0)
    if hosts_forward is not None:
        hosts_forward = as_bool(hosts_forward, f"{where}.hosts_forward")
    if isinstance(links, np.ndarray):
        links = links.tolist()
    if isinstance(links, (str, bytes)) or not isinstance(links, Sequence):
        raise InputError(f"{where}.links = {links!r}: expected a list of [u, v, gbps, latency_us]")
    n = n_hosts + n_sw
    check_size(n, len(links), f"{where}.hosts", n_hosts)
    L = len(links)
    u = np.empty(L, np.int64)
    v = np.empty(L, np.int64)
    bw = np.empty(L)
    lat = np.empty(L)
    seen: dict[tuple[int, int], int] = {}
    for i, rec in enumerate(links):
        f = f"{where}.links[{i}]"
        if isinstance(rec, np.ndarray):
            rec = rec.tolist()
        if isinstance(rec, (str, bytes)) or not isinstance(rec, Sequence) or len(rec) != 4:
            raise InputError(f"{f} = {rec!r}: expected [u, v, gbps, latency_us]")
        a = as_int(rec[0], f"{f}[0]")
        b = as_int(rec[1], f"{f}[1]")
        for end in (a, b):
            if not 0 <= end < n:
                raise InputError(f"{f} = {list(rec)!r}: node {end} does not exist "
                                 f"(nodes are 0..{n - 1}: {n_hosts} hosts then {n_sw} switches)")
        if a == b:
            raise InputError(f"{f} = {list(rec)!r}: a link from node {a} to itself")
        key = (min(a, b), max(a, b))
        if key in seen:
            raise InputError(f"{f} = {list(rec)!r}: duplicate of {where}.links[{seen[key]}] "
                             f"(merge them into one link with the summed bandwidth)")
        seen[key] = i
        u[i], v[i] = a, b
        bw[i] = as_gbps(rec[2], f"{f}[2] (gbps)")
        lat[i] = us(as_latency_us(rec[3], f"{f}[3] (latency_us)"))
    # layer from the endpoint kinds: host-switch "edge", switch-switch "fabric", host-host "direct"
    host_ends = (u < n_hosts).astype(np.int8) + (v < n_hosts)
    layer = np.choose(host_ends, [1, 0, 2]).astype(np.int8)
    try:
        return Topology("custom", n_hosts, n_sw, u, v, bw, lat, layer, LAYERS, params={"hosts": n_hosts, "switches": n_sw},
                        hosts_forward=hosts_forward)
    except TopologyError as e:  # what is left: a disconnected fabric
        raise InputError(f"{where}.links: {e}") from None

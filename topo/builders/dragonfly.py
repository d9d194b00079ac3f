"""Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008): groups of routers, all-to-all inside a
group, global links between groups.

``groups`` (g) groups of ``routers_per_group`` (a) routers; each router serves
``hosts_per_router`` (p) hosts and owns ``global_links`` (h) global ports. Routers of a group
are fully connected by local links. Every pair of groups gets the same number
m = a*h / (g-1) of global links, which requires a*h to be a multiple of g-1 (refused
otherwise, naming ``global_links``), and h <= a*(g-1): a router has only a*(g-1) routers of
other groups to link to (more would be parallel links; refused with the numbers).

Global wiring ("palmtree"-style, deterministic): port k of group i (on router k // h) goes to
group (i - (k mod (g-1)) - 1) mod g, arriving on port (k div (g-1))*(g-1) + (g-2 - k mod (g-1))
there; this pairing is an involution, so every port is used exactly once. When two global
channels land on the same router pair (only for small fabrics with h >= g-1) they are merged
into one link of the summed bandwidth (a Topology holds no parallel links);
``params["global_channels"]`` keeps the channel count g*a*h/2.

Node order: hosts (group, router, host), routers (group-major). ``host_group`` is the router.
Layers: "edge" (host-router), "local", "global". Local and host links run at ``link_gbps``,
global links at ``global_gbps`` (default ``link_gbps``), with ``global_latency_us``
(default ``latency_us``).

Bisection: g = 1 with a even: min(n/2 * link, (a/2)^2 * link). Every other shape is left to
``topo.metrics`` (exact up to its MAX_EXACT_SWITCHES routers): with several groups, halving
the groups is not always the least balanced cut.
Diameter: 2 + router diameter, the latter 1 for a = 1 or g = 1, otherwise 3 when some
pair of groups leaves a router on each side without a direct global link between them, else 2.
"""
from __future__ import annotations

import numpy as np

from topo.builders._check import (as_gbps, as_int, as_latency_us, check_derived_gbps,
                                   check_size, largest)
from topo.errors import InputError
from topo.topology import Topology, us
from topo.arrays import unique

LAYERS = ("edge", "local", "global")


def dragonfly(groups, routers_per_group, hosts_per_router, global_links, link_gbps=100.0,
              global_gbps=None, latency_us=1.0, global_latency_us=None, *,
              where: str = "topology") -> Topology:
    g = as_int(groups, f"{where}.groups", lo=1)
    a = as_int(routers_per_group, f"{where}.routers_per_group", lo=1)
    p = as_int(hosts_per_router, f"{where}.hosts_per_router", lo=1)
    h = as_int(global_links, f"{where}.global_links", lo=0)
    bw = as_gbps(link_gbps, f"{where}.link_gbps")
    gbw = bw if global_gbps is None else as_gbps(global_gbps, f"{where}.global_gbps")
    lat = us(as_latency_us(latency_us, f"{where}.latency_us"))
    glat = lat if global_latency_us is None else us(
        as_latency_us(global_latency_us, f"{where}.global_latency_us"))
    if g == 1 and h:
        raise InputError(f"{where}.global_links = {h}: a single group has no other group to "
                         f"link to (use 0)")
    if g > 1:
        if h == 0 or (a * h) % (g - 1):
            raise InputError(
                f"{where}.global_links = {h}: routers_per_group * global_links = {a * h} global "
                f"ports per group must be a positive multiple of groups - 1 = {g - 1}, so that "
                f"every pair of groups gets the same number of global links")
        if h > a * (g - 1):
            raise InputError(
                f"{where}.global_links = {h}: a router can place at most one global link to "
                f"each of the routers_per_group * (groups - 1) = {a} * {g - 1} = {a * (g - 1)} "
                f"routers of other groups, so {h} global links per router would need "
                f"parallel links (use at most {a * (g - 1)}, or more groups or routers)")
    m = a * h // (g - 1) if g > 1 else 0
    n_routers = g * a
    n_hosts = n_routers * p
    n_channels = g * a * h // 2
    check_size(n_hosts + n_routers, n_hosts + g * a * (a - 1) // 2 + n_channels,
               *((f"{where}.global_links", h) if n_channels > n_hosts + g * a * (a - 1) // 2
                 else largest(where, groups=g, routers_per_group=a, hosts_per_router=p)))
    r0 = n_hosts

    hid = np.arange(n_hosts, dtype=np.int64)
    host_u, host_v = hid, r0 + hid // p
    x, y = np.triu_indices(a, k=1)
    grp = np.repeat(np.arange(g, dtype=np.int64), len(x))
    loc_u = r0 + grp * a + np.tile(x, g)
    loc_v = r0 + grp * a + np.tile(y, g)
    if g > 1:
        i = np.repeat(np.arange(g, dtype=np.int64), a * h)
        k = np.tile(np.arange(a * h, dtype=np.int64), g)
        r = k % (g - 1)
        j = (i - r - 1) % g
        k2 = (k // (g - 1)) * (g - 1) + (g - 2 - r)
        keep = i < j  # each channel is seen from both ends; keep one
        gu = r0 + i[keep] * a + k[keep] // h
        gv = r0 + j[keep] * a + k2[keep] // h
        key = np.minimum(gu, gv) * (r0 + n_routers) + np.maximum(gu, gv)
        uniq, first, mult = np.unique(key, return_index=True, return_counts=True)
        gu, gv = gu[first], gv[first]
        g_bw = mult * gbw
        # merged channels sum their rates: in range like every link (in Gb/s, where 1e299
        # Gb/s x 2 is finite), naming the rate the global links took
        k = int(mult.max())
        key, given = ("global_gbps", global_gbps) if global_gbps is not None else \
            ("link_gbps", link_gbps)
        check_derived_gbps(k * gbw, f"{where}.{key}", given, "global links",
                           gbps=k * float(given),
                           how=f" ({k} global channels merged between two routers x "
                               f"{given!r} Gb/s)")
    else:
        gu = gv = np.zeros(0, np.int64)
        g_bw = np.zeros(0)
    link_u = np.concatenate([host_u, loc_u, gu])
    link_v = np.concatenate([host_v, loc_v, gv])
    nl, ng = len(loc_u), len(gu)
    link_bw = np.concatenate([np.full(n_hosts + nl, bw), g_bw])
    link_lat = np.concatenate([np.full(n_hosts + nl, lat), np.full(ng, glat)])
    layer = np.concatenate([np.zeros(n_hosts, np.int8), np.ones(nl, np.int8),
                            np.full(ng, 2, np.int8)])

    params = {
        "groups": g, "routers_per_group": a, "hosts_per_router": p, "global_links": h,
        "link_gbps": float(link_gbps), "global_gbps": gbw * 8 / 1e9,
        "latency_us": float(latency_us), "global_latency_us": glat * 1e6,
        "links_per_group_pair": m, "global_channels": n_channels,
        "diameter_hops": _diameter(g, a, h, m, n_hosts),
    }
    # no closed form with several groups: halving the groups, min(n/2 * link, m * (g/2)^2 *
    # global), is one balanced cut, and often not the least (2 groups of 2 routers with 2
    # global links per router: router r of each group links only to router r of the other,
    # so cutting the two local links, 200 Gb/s, splits the hosts in half where the group
    # halving cuts 400); topo.metrics computes the figure
    if n_hosts == 1:
        params["bisection_Bps"] = 0.0
    elif g == 1 and a % 2 == 0:
        params["bisection_Bps"] = min(n_hosts / 2 * bw, (a // 2) ** 2 * bw)
    return Topology("dragonfly", n_hosts, n_routers, link_u, link_v, link_bw, link_lat, layer,
                    LAYERS, host_group=(hid // p).astype(np.int32), params=params,
                    hosts_forward=False)


def _diameter(g: int, a: int, h: int, m: int, n_hosts: int) -> int:
    if n_hosts == 1:
        return 0
    if g * a == 1:
        return 2
    if g == 1 or a == 1:
        return 3
    # Between groups i and j = i - r - 1 the channels leave i from routers
    # (r + c(g-1)) // h and arrive in j on routers (g-2-r + c(g-1)) // h, c < m. A router pair
    # is 3 router hops apart iff neither router owns a channel towards the other group.
    c = np.arange(m) * (g - 1)
    for r in range(g - 1):
        src = unique((r + c) // h)
        dst = unique((g - 2 - r + c) // h)
        if len(src) < a and len(dst) < a:
            return 5
    return 4

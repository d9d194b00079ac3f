"""Leaf-spine (folded Clos) fabrics, two tiers or three (pods under super-spines).

Two tiers (``tiers=2``): ``leaves`` leaf switches with ``hosts_per_leaf`` hosts each; every
leaf links once to each of ``spines`` spine switches. Host links run at ``link_gbps``; the
leaf-spine links run at ``hosts_per_leaf * link_gbps / (spines * oversubscription)`` so that a
leaf's downlink/uplink capacity ratio equals ``oversubscription`` (1 = non-blocking).

Three tiers (``tiers=3``): ``pods`` copies of the two-tier fabric (``leaves``, ``spines``
count per pod) under ``super_spines`` super-spine switches arranged in ``spines`` planes of
``super_spines / spines`` each; spine j of every pod links once to every super-spine of plane
j (the pod/plane wiring of Facebook's data-centre fabric and of a k-ary fat-tree). Spine
uplinks run at ``leaves * leaf_uplink / (super_spines/spines * spine_oversubscription)``.

Node order: hosts (pod, leaf), leaves (pod-major), spines (pod-major), super-spines
(plane-major). ``host_group`` is the global leaf index. Layers: "edge" (host-leaf),
"spine" (leaf-spine), "super_spine" (spine-super-spine).

Bisection (worst balanced cut; derivation in docs/topologies.md): with the hosts split on pod
(3 tiers) or leaf (2 tiers) boundaries, n/2 * link * min(1, 1/o1[, 1/(o1*o2)]); a single
leaf gives floor(n/2) * link. Other shapes (odd leaf or pod counts) leave it to
``topo.metrics`` (max-flow over the host-id halving).
"""
from __future__ import annotations

import numpy as np

from topo.builders._check import (as_gbps, as_int, as_latency_us, as_number,
                                   check_derived_gbps, check_size, largest)
from topo.errors import InputError
from topo.topology import Topology, us

LAYERS = ("edge", "spine", "super_spine")


def leaf_spine(leaves, hosts_per_leaf, spines, oversubscription=1.0, tiers=2,
               link_gbps=100.0, latency_us=1.0, pods=1, super_spines=None,
               spine_oversubscription=1.0, *, where: str = "topology") -> Topology:
    leaves = as_int(leaves, f"{where}.leaves", lo=1)
    hpl = as_int(hosts_per_leaf, f"{where}.hosts_per_leaf", lo=1)
    spines = as_int(spines, f"{where}.spines", lo=1)
    os1 = as_number(oversubscription, f"{where}.oversubscription")
    tiers = as_int(tiers, f"{where}.tiers")
    if tiers not in (2, 3):
        raise InputError(f"{where}.tiers = {tiers}: expected 2 or 3")
    bw = as_gbps(link_gbps, f"{where}.link_gbps")
    lat = us(as_latency_us(latency_us, f"{where}.latency_us"))
    pods = as_int(pods, f"{where}.pods", lo=1)
    os2 = as_number(spine_oversubscription, f"{where}.spine_oversubscription")
    if tiers == 2:
        if pods != 1:
            raise InputError(f"{where}.pods = {pods}: pods need tiers = 3")
        if super_spines is not None:
            raise InputError(f"{where}.super_spines = {super_spines!r}: super-spines need tiers = 3")
        if os2 != 1.0:
            raise InputError(f"{where}.spine_oversubscription = {spine_oversubscription!r}: "
                             f"needs tiers = 3")
        n_super = 0
    else:
        n_super = spines if super_spines is None else as_int(super_spines,
                                                             f"{where}.super_spines", lo=1)
        if n_super % spines:
            raise InputError(f"{where}.super_spines = {n_super}: must be a multiple of "
                             f"spines = {spines} (spine j of every pod joins plane j)")
    per_plane = n_super // spines if tiers == 3 else 0

    n_leaves = pods * leaves
    n_spines = pods * spines
    n_hosts = n_leaves * hpl
    n_links = n_hosts + n_leaves * spines + n_spines * per_plane
    check_size(n_hosts + n_leaves + n_spines + n_super, n_links,
               *largest(where, leaves=leaves, hosts_per_leaf=hpl, spines=spines, pods=pods,
                        **({"super_spines": n_super} if tiers == 3 else {})))
    l0 = n_hosts
    s0 = l0 + n_leaves
    ss0 = s0 + n_spines

    # Gb/s without and with the oversubscription (Gb/s: bytes/s of 1e299 Gb/s overflow): out
    # of range without it, it is link_gbps that is wrong, whatever the oversubscription
    given = float(link_gbps) * hpl / spines
    rate = f"{hpl} hosts per leaf x {link_gbps!r} Gb/s"
    link = (f"{where}.link_gbps", link_gbps, given, f" ({rate} / {spines} spines)")
    up1 = check_derived_gbps(hpl * bw / (spines * os1), f"{where}.oversubscription",
                             oversubscription, "leaf-spine links", before=(link,),
                             gbps=given / os1,
                             how=f" ({rate} / ({spines} spines x {oversubscription!r}))")
    h = np.arange(n_hosts, dtype=np.int64)
    us_, vs_, bws, layers = [h], [l0 + h // hpl], [np.full(n_hosts, bw)], [np.zeros(n_hosts)]
    # leaf (pod, l) <-> every spine of the same pod
    p, l, s = (x.ravel() for x in np.meshgrid(np.arange(pods), np.arange(leaves),
                                               np.arange(spines), indexing="ij"))
    us_.append(l0 + p * leaves + l)
    vs_.append(s0 + p * spines + s)
    bws.append(np.full(len(p), up1))
    layers.append(np.ones(len(p)))
    if tiers == 3:
        # as above, a spine's downlinks over its uplinks (leaves / per_plane) times more
        k = leaves / per_plane
        rate = f"{leaves} leaves x {rate}"
        down = f"{spines} spines x {per_plane} super-spines per spine"
        link = (link[0], link_gbps, given * k, f" ({rate} / ({down}))")
        leaf = (f"{where}.oversubscription", oversubscription, given / os1 * k,
                f" ({rate} / ({down} x {oversubscription!r}))")
        up2 = check_derived_gbps(leaves * up1 / (per_plane * os2),
                                 f"{where}.spine_oversubscription", spine_oversubscription,
                                 "spine-super-spine links", before=(link, leaf),
                                 gbps=given / os1 * k / os2,
                                 how=f" ({rate} / ({down} x {oversubscription!r} x "
                                     f"{spine_oversubscription!r}))")
        p, s, j = (x.ravel() for x in np.meshgrid(np.arange(pods), np.arange(spines),
                                                   np.arange(per_plane), indexing="ij"))
        us_.append(s0 + p * spines + s)
        vs_.append(ss0 + s * per_plane + j)
        bws.append(np.full(len(p), up2))
        layers.append(np.full(len(p), 2))
    link_u = np.concatenate(us_)
    link_v = np.concatenate(vs_)
    link_bw = np.concatenate(bws)

    # Bisection: only where the closed form is exact (see module docstring).
    if n_hosts == 1:
        bis = 0.0
    elif n_leaves == 1:
        bis = (n_hosts // 2) * bw
    elif tiers == 3 and pods >= 2:
        bis = n_hosts / 2 * bw * min(1.0, 1.0 / os1, 1.0 / (os1 * os2)) if pods % 2 == 0 else None
    else:
        bis = n_hosts / 2 * bw * min(1.0, 1.0 / os1) if leaves % 2 == 0 else None
    if n_hosts == 1:
        diam = 0
    elif n_leaves == 1:
        diam = 2
    else:
        diam = 6 if (tiers == 3 and pods >= 2) else 4
    params = {
        "leaves": leaves, "hosts_per_leaf": hpl, "spines": spines,
        "oversubscription": os1, "tiers": tiers, "link_gbps": float(link_gbps),
        "latency_us": float(latency_us), "leaf_uplink_gbps": up1 * 8 / 1e9,
        "diameter_hops": diam,
    }
    if tiers == 3:
        params.update(pods=pods, super_spines=n_super, spine_oversubscription=os2,
                      spine_uplink_gbps=up2 * 8 / 1e9)
    if bis is not None:
        params["bisection_Bps"] = bis
    return Topology("leaf_spine", n_hosts, n_leaves + n_spines + n_super, link_u, link_v,
                    link_bw, np.full(len(link_u), lat), np.concatenate(layers),
                    LAYERS if tiers == 3 else LAYERS[:2],
                    host_group=(h // hpl).astype(np.int32), params=params,
                    hosts_forward=False)

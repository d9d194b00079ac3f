"""FullFlat: every GPU attached by optics to every plane of a flat switch fabric.

After Tithi, Wu, Abuhatzera and Petrini, "Scaling Intelligence: Designing Data Centers for
Next-Gen Language Models" (arXiv:2506.15006, 2025), who compare a conventional two-tier
design (scale-up domain + scale-out network, see ``two_tier``) with "FullFlat" optical
fabrics that give every GPU uniform high-bandwidth, low-latency connectivity to all others.

Model: ``planes`` independent planes; every GPU has one link into each plane at
``gpu_gbps / planes`` (so its total bandwidth is ``gpu_gbps``, the scale-up figure).
- While ``n_gpus <= switch_radix`` a plane is one switch: any two GPUs are one switch hop
  (two links) apart.
- Beyond, a plane is a non-blocking leaf/spine: leaves use radix/2 ports down and radix/2
  up, ceil(n / (radix/2)) leaves, radix/2 spines each linked once to every leaf (so a
  spine uses one port per leaf: at most ``radix`` leaves, i.e. n <= radix^2 / 2).

Node order: GPUs, then plane 0 switches (leaves then spines), plane 1, ... ``host_group`` is
the leaf index (the same in every plane), all 0 for single-switch planes. Layers: "edge"
(GPU-switch), "spine" (leaf-spine). Bisection: floor(n/2) * gpu_gbps (non-blocking planes).
"""
from __future__ import annotations

import numpy as np

from topo.builders._check import (as_gbps, as_int, as_latency_us, check_derived_gbps,
                                   check_size)
from topo.errors import InputError
from topo.topology import Topology, us

LAYERS = ("edge", "spine")


def fullflat(n_gpus, planes=8, switch_radix=64, gpu_gbps=7200.0, latency_us=1.0, *,
             where: str = "topology") -> Topology:
    n = as_int(n_gpus, f"{where}.n_gpus", lo=1)
    planes = as_int(planes, f"{where}.planes", lo=1)
    radix = as_int(switch_radix, f"{where}.switch_radix", lo=2)
    gpu_bw = as_gbps(gpu_gbps, f"{where}.gpu_gbps")
    lat = us(as_latency_us(latency_us, f"{where}.latency_us"))
    # a plane's links carry 1/planes of the GPU's rate: in range like every link, naming the
    # rate (planes is a count, bounded by the fabric's size)
    bw = check_derived_gbps(gpu_bw / planes, f"{where}.gpu_gbps", gpu_gbps, "plane links",
                            gbps=float(gpu_gbps) / planes,
                            how=f" ({gpu_gbps!r} Gb/s / {planes} planes)")
    single = n <= radix
    if single:
        n_leaves, n_spines = 1, 0
        down = n
    else:
        if radix % 2:
            raise InputError(f"{where}.switch_radix = {radix}: n_gpus = {n} > radix needs a "
                             f"two-tier plane, which splits the radix in half: use an even radix")
        down = radix // 2
        n_leaves = -(-n // down)
        n_spines = down
        if n_leaves > radix:
            raise InputError(f"{where}.n_gpus = {n}: a two-tier plane of radix-{radix} switches "
                             f"holds at most radix^2/2 = {radix * radix // 2} GPUs")
    per_plane_sw = n_leaves + n_spines
    per_plane_links = n + n_leaves * n_spines
    # the field to blame: n_gpus when one plane is already too big, else the planes that
    # multiply it (planes = 10**8 on 16 GPUs used to blame n_gpus = 16)
    check_size(n + per_plane_sw, per_plane_links, f"{where}.n_gpus", n)
    check_size(n + planes * per_plane_sw, planes * per_plane_links, f"{where}.planes", planes)

    g = np.arange(n, dtype=np.int64)
    leaf_of = g // down if not single else np.zeros(n, np.int64)
    l_idx, s_idx = (x.ravel() for x in np.meshgrid(np.arange(n_leaves), np.arange(n_spines),
                                                   indexing="ij"))
    us_, vs_, layer = [], [], []
    for p in range(planes):
        base = n + p * per_plane_sw
        us_ += [g, base + l_idx]
        vs_ += [base + leaf_of, base + n_leaves + s_idx]
        layer += [np.zeros(n, np.int8), np.ones(len(l_idx), np.int8)]
    link_u = np.concatenate(us_)
    link_v = np.concatenate(vs_)
    params = {
        "n_gpus": n, "planes": planes, "switch_radix": radix, "gpu_gbps": float(gpu_gbps),
        "latency_us": float(latency_us), "plane_link_gbps": bw * 8 / 1e9,
        "plane": "single_switch" if single else "leaf_spine",
        "leaves_per_plane": n_leaves if not single else 0, "spines_per_plane": n_spines,
        "bisection_Bps": (n // 2) * gpu_bw,
        "diameter_hops": 0 if n == 1 else (2 if n_leaves == 1 else 4),
    }
    return Topology("fullflat", n, planes * per_plane_sw, link_u, link_v,
                    np.full(len(link_u), bw), np.full(len(link_u), lat),
                    np.concatenate(layer), LAYERS if not single else LAYERS[:1],
                    host_group=leaf_of.astype(np.int32), params=params, hosts_forward=False)


def dlink_planes(topology) -> np.ndarray | None:
    """int32 plane of every directed link of a ``fullflat`` fabric with 2+ planes, else None.

    Read from the node layout above (GPUs, then each plane's switches in turn): every link
    has a switch end, and a link's plane is that switch's. None as well when the fabric does
    not follow the layout (switches not a multiple of ``planes``), so callers fall back to
    routing it as an ordinary graph."""
    params = getattr(topology, "params", None) or {}
    planes = int(params.get("planes", 1) or 1)
    if getattr(topology, "kind", None) != "fullflat" or planes < 2:
        return None
    nh, ns = topology.n_hosts, topology.n_switches
    if ns == 0 or ns % planes:
        return None
    sw = np.maximum(topology.dlink_src, topology.dlink_dst).astype(np.int64)
    if (sw < nh).any():  # a host-to-host link: not the layout
        return None
    return ((sw - nh) // (ns // planes)).astype(np.int32)

"""Two-tier GPU cluster: an NVLink-style scale-up switch per node plus a rail-optimized
scale-out leaf/spine network (the design FullFlat is compared against in Tithi et al.,
arXiv:2506.15006, and the shape of NVIDIA DGX SuperPOD reference architectures).

- Hosts are GPUs, id = node * gpus_per_node + local index; they do not forward traffic.
- Scale-up: one switch per node, each of its GPUs linked at ``scaleup_gbps`` /
  ``scaleup_latency_us`` (layer "scaleup"). Like every link rate here, ``scaleup_gbps`` is per
  direction. The default 7200 Gbps = 900 GB/s per direction is NVLink 5 (B200/GB200: 1.8 TB/s
  per GPU, both directions together; NVIDIA DGX B200 datasheet,
  https://www.nvidia.com/en-us/data-center/dgx-b200/), i.e. 8 x ``scaleup_GBps`` of
  compute/specs/b200.toml. For H100 SXM (NVLink 4, 900 GB/s both directions = 450 GB/s per
  direction) use 3600; for A100 (NVLink 3, 600 GB/s) 2400. A training workload prices
  tensor-parallel collectives at min(GPU ``scaleup_GBps``, these links); see docs/compute.md.
- Scale-out, ``rails=True``: GPU i of every node joins a leaf of rail i; a rail has
  ceil(nodes / nodes_per_leaf) leaves (default: one leaf per rail holding all nodes).
  ``rails=False``: a top-of-rack leaf per ``nodes_per_leaf`` nodes (default 1) holding all
  their GPUs. NIC links run at ``nic_gbps`` (layer "edge"). ``nic_port_gbps`` (default
  ``nic_gbps``) is the NICs' port speed as NCCL's topology detection reports it: only NCCL's
  tuner model reads it (collectives/nccl_tuner.py, when `choose` picks an all-reduce across
  nodes); set it where ``nic_gbps`` is an achieved rate rather than the port's.
- Every leaf links once to each of ``spines`` spines (default: as many as a full leaf has
  GPUs, like a fat-tree) at ``gpus_per_full_leaf * nic_gbps / (spines * oversubscription)``
  (layer "spine"); oversubscription 1 is non-blocking. Cross-rail traffic between nodes
  therefore climbs to the spines.

Node order: GPUs, node switches, leaves (rail-major when rails=True), spines.
``host_group`` is the node (the scale-up domain).

Bisection (cut between the lower and upper half of the nodes, nodes even): n/2 * nic when
every leaf spans both halves (a single leaf; one leaf per rail where
``_node_halving_is_least`` proves no rail split is cheaper); n/2 * nic * min(1, 1/o) when
every leaf lies within one half; other shapes are left to ``topo.metrics``.
"""
from __future__ import annotations

import numpy as np

from topo.builders._check import (as_bool, as_gbps, as_int, as_latency_us, as_number,
                                   check_derived_gbps, check_size, largest)
from topo.topology import Topology, us

LAYERS = ("scaleup", "edge", "spine")


def two_tier(nodes, gpus_per_node=8, scaleup_gbps=7200.0, nic_gbps=400.0,
             scaleup_latency_us=0.25, latency_us=1.0, rails=True, spines=None,
             nodes_per_leaf=None, oversubscription=1.0, nic_port_gbps=None, *,
             where: str = "topology") -> Topology:
    nodes = as_int(nodes, f"{where}.nodes", lo=1)
    G = as_int(gpus_per_node, f"{where}.gpus_per_node", lo=1)
    su_bw = as_gbps(scaleup_gbps, f"{where}.scaleup_gbps")
    nic_bw = as_gbps(nic_gbps, f"{where}.nic_gbps")
    su_lat = us(as_latency_us(scaleup_latency_us, f"{where}.scaleup_latency_us"))
    lat = us(as_latency_us(latency_us, f"{where}.latency_us"))
    rails = as_bool(rails, f"{where}.rails")
    if nic_port_gbps is not None:
        as_gbps(nic_port_gbps, f"{where}.nic_port_gbps")  # a rate like nic_gbps (in Gb/s)
    port = nic_gbps if nic_port_gbps is None else float(nic_port_gbps)
    os_ = as_number(oversubscription, f"{where}.oversubscription")
    if nodes_per_leaf is None:
        npl = nodes if rails else 1
    else:
        npl = as_int(nodes_per_leaf, f"{where}.nodes_per_leaf", lo=1)
    npl = min(npl, nodes)
    leaves_per_rail = -(-nodes // npl)
    n_leaves = G * leaves_per_rail if rails else leaves_per_rail
    gpus_per_leaf = npl if rails else npl * G
    n_spines = gpus_per_leaf if spines is None else as_int(spines, f"{where}.spines", lo=1)
    n_hosts = nodes * G
    n_links = 2 * n_hosts + n_leaves * n_spines
    check_size(n_hosts + nodes + n_leaves + n_spines, n_links,
               *largest(where, nodes=nodes, gpus_per_node=G,
                        **({} if spines is None else {"spines": n_spines})))
    ns0 = n_hosts
    l0 = ns0 + nodes
    s0 = l0 + n_leaves

    h = np.arange(n_hosts, dtype=np.int64)
    node, local = h // G, h % G
    leaf = local * leaves_per_rail + node // npl if rails else node // npl
    # Gb/s without and with the oversubscription (Gb/s: bytes/s of 1e299 Gb/s overflow): out
    # of range without it, it is nic_gbps that is wrong, whatever the oversubscription
    given = float(nic_gbps) * gpus_per_leaf / n_spines
    rate = f"{gpus_per_leaf} GPUs per leaf x {nic_gbps!r} Gb/s"
    nic = (f"{where}.nic_gbps", nic_gbps, given, f" ({rate} / {n_spines} spines)")
    up = check_derived_gbps(gpus_per_leaf * nic_bw / (n_spines * os_),
                            f"{where}.oversubscription", oversubscription, "leaf-spine links",
                            before=(nic,), gbps=given / os_,
                            how=f" ({rate} / ({n_spines} spines x {oversubscription!r}))")
    l_idx, s_idx = (x.ravel() for x in np.meshgrid(np.arange(n_leaves), np.arange(n_spines),
                                                   indexing="ij"))
    link_u = np.concatenate([h, h, l0 + l_idx])
    link_v = np.concatenate([ns0 + node, l0 + leaf, s0 + s_idx])
    link_bw = np.concatenate([np.full(n_hosts, su_bw), np.full(n_hosts, nic_bw),
                              np.full(len(l_idx), up)])
    link_lat = np.concatenate([np.full(n_hosts, su_lat), np.full(n_hosts + len(l_idx), lat)])
    layer = np.concatenate([np.zeros(n_hosts, np.int8), np.ones(n_hosts, np.int8),
                            np.full(len(l_idx), 2, np.int8)])

    if n_hosts == 1:
        bis, diam = 0.0, 0
    else:
        bis = None
        if nodes % 2 == 0:
            if npl == nodes:  # every leaf holds GPUs of both halves
                if n_leaves == 1 or _node_halving_is_least(nodes, G, su_bw, nic_bw,
                                                           nodes * nic_bw / os_):
                    bis = n_hosts / 2 * nic_bw
            elif nodes % npl == 0 and (nodes // npl) % 2 == 0:  # leaves split evenly
                bis = n_hosts / 2 * nic_bw * min(1.0, 1.0 / os_)
        # two GPUs on different nodes and different leaves need leaf-spine-leaf
        diam = 4 if (nodes >= 2 and n_leaves >= 2) else 2
    params = {
        "nodes": nodes, "gpus_per_node": G, "scaleup_gbps": float(scaleup_gbps),
        "nic_gbps": float(nic_gbps), "nic_port_gbps": float(port),
        "scaleup_latency_us": float(scaleup_latency_us),
        "latency_us": float(latency_us), "rails": rails, "spines": n_spines,
        "nodes_per_leaf": npl, "oversubscription": os_, "leaves": n_leaves,
        "leaf_uplink_gbps": up * 8 / 1e9, "diameter_hops": diam,
    }
    if bis is not None:
        params["bisection_Bps"] = bis
    return Topology("two_tier", n_hosts, nodes + n_leaves + n_spines, link_u, link_v, link_bw,
                    link_lat, layer, LAYERS, host_group=node.astype(np.int32), params=params,
                    hosts_forward=False)


def _node_halving_is_least(N: int, G: int, su: float, nic: float, uplink: float) -> bool:
    """Whether the node halving's n/2 NIC links are the least balanced cut of a fabric with
    one leaf per rail (G >= 2 rails of N nodes each; ``uplink``: a leaf's total uplink rate).

    A cut puts x of the G leaves on side A (by symmetry x <= G/2) and a_k GPUs of node k on
    A (sum a_k = n/2). Given those, it costs exactly, at best: nic * |a_k - x| per node (its
    GPUs away from their rail leaf's side), su * min(a_k, G - a_k) per node switch, and
    uplink * x at the spines. x = 0 is the node halving (at least n/2 NICs). For x >= 1 the
    per-node cost f(a) at the mean a = G/2 is bounded below by f's lower convex envelope
    (mixing nodes over the values a); when N * envelope + uplink * x reaches n/2 * nic for
    every x, no cut beats the node halving. Otherwise it may be beaten: a scale-up slower
    than the NICs (scaleup 50, nic 100, 2 nodes of 4 GPUs, oversubscription 4: the rail
    halving cuts 300 Gb/s, not 400) or an odd rail count behind heavily oversubscribed
    leaves (4 nodes of 3 GPUs, scale-up = nic = 100, oversubscription 100: 504, not 600),
    and the figure is left to topo.metrics."""
    half = G / 2
    target = N * half * nic
    lo, hi = int(half), -(-G // 2)
    for x in range(1, G // 2 + 1):
        f = [nic * abs(a - x) + su * min(a, G - a) for a in range(G + 1)]
        env = min(f[a1] if a1 == a2 else
                  (f[a1] * (a2 - half) + f[a2] * (half - a1)) / (a2 - a1)
                  for a1 in range(lo + 1) for a2 in range(hi, G + 1))
        if N * env + uplink * x < target * (1 - 1e-12):
            return False
    return True

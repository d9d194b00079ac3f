"""NCCL's own choice of algorithm and protocol for collectives across whole two_tier nodes
(all-reduce; all-gather and reduce-scatter, which NCCL runs as the ring there).

NCCL does not run the fastest algorithm; it runs the one its tuner *predicts* to be fastest:
time = latency + bytes / bandwidth per (algorithm, protocol) (src/graph/tuning.cc,
``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``), with bandwidths read off the channel
graphs its topology search finds (src/graph/search.cc). On nodes of 8 H100 with 8 x 400 Gb/s
NICs that prediction is far from what the algorithms measure at mid sizes (its
``treeCorrectionFactor`` says as much), so a model that picks by its own estimate runs
something NCCL does not. `choose` therefore picks the algorithm here, by NCCL's formula, and
the engines price what was picked (docs/collectives.md, "NCCL's choice on two_tier").

What is evaluated (NCCL 2.24-2.27: the published tables of validation/nccl_tests_data ran
2.24.3 and 2.26.2 where they say, the others date from before 2.28; Hopper rows; Intel hosts; InfiniBand, whose plugin reports no
extra network latency):

* Ring, Tree (NCCL's double binary trees: ``double_binary_tree``, laid as rail trees) and,
  where the node's switch reduces, NVLS-Tree (``nvls_tree``), each with the protocols NCCL
  allows it. NVLS alone needs CollNet across nodes and CollNet a plugin: both stay out.
* The channel graphs, by NCCL's search rules in short: a ring or tree channel enters and
  leaves a node through one NIC and passes every GPU once, so with k channels per NIC its
  per-channel rate is the largest of NCCL's Hopper speeds (``sm90SpeedArrayInter``) at most
  NIC / k, and the channels together must fit one GPU's NVLink; the most bandwidth wins,
  fewer channels on a tie. Channels of at least 25 GB/s are then doubled at half the rate
  (``ncclTopoDupChannels``) unless there are more than four of them below 50 GB/s. Trees get
  the rings' figure (NCCL searches both for the same channel count). NVLS has one head per
  NIC-attached GPU: its intra-node rate is the largest speed of which heads + 1 fit one
  GPU's NVLink (a head's channel crosses its own NVLink twice), its network rate the largest
  speed at most the NIC and at most twice the intra rate.
* The NIC figure is the port's speed as NCCL's topology detection reports it (two_tier's
  ``nic_port_gbps``, default ``nic_gbps``), and NVLink the fabric's scale-up rate.

Nothing here is fitted. The published tables' out-of-place connection spikes (NCCL connects
an algorithm on its first use) place NCCL's switches at 1 -> 2 MiB on 4 nodes and 4 -> 8 MiB
on 8 nodes; this model puts them at the same sizes (docs/collectives.md says by how little).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from topo.errors import InputError

# NCCL 2.24-2.27, src/graph/tuning.cc (Hopper, Intel hosts), latencies in us, GB/s; the
# engines price steps with the same figures (protocols.FAMILY_LATENCY).
PROTOS = ("ll", "ll128", "simple")
BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls_tree": (0.0, 0.0, 0.0)}
NVLINK_US = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls_tree": (0.0, 0.0, 25.0)}
NET_US = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "nvls_tree": (0.0, 0.0, 14.0)}
NET_OVERHEAD_US = 1.0  # getNetOverhead, Intel hosts; x3 for Simple
LL_MAX = (141.0, 39.0, 20.4)  # llMaxBws: one Hopper node; Intel hosts, 2 nodes / more
PER_CH_TREE = (38.7, 41.4, 36.0)  # perChMaxTreeBws, Hopper (1 / 2 / more nodes)
PER_CH_TREE_LL128 = (36.7, 36.7, 29.0)
PER_CH_RING_LL128 = 36.7
RING_PLATEAU = 1.4  # Simple ring latency from 64 bytes per channel and rank, compute cap >= 8
# treeCorrectionFactor, indexed by log2(bytes / 64) from 0 (64 B) to 22 (256 MiB)
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9)}
# src/graph/search.cc: per-channel speeds tried on Hopper with a network; the ring graph's
# channel limit (MAXCHANNELS / 2) and NVLS's head limit (NCCL_MAX_NVLS_ARITY)
SPEEDS = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
          1.2, 0.24, 0.12)
MAX_CHANNELS = 32
MAX_NVLS_HEADS = 32
# the collectives modelled (all-gather and reduce-scatter: the ring, as NCCL runs them on
# several nodes of several GPUs)
OPS = ("all_reduce", "all_gather", "reduce_scatter")
# NCCL's names -> ours
ALGORITHMS = {"ring": "ring", "tree": "double_binary_tree", "nvls_tree": "nvls_tree"}


@dataclass(frozen=True)
class Graph:
    channels: int
    bw_intra: float  # GB/s per channel
    bw_inter: float


@dataclass(frozen=True)
class View:
    """What NCCL's tuner knows of the job: nodes, GPUs per node, per-GPU NVLink and NIC
    rates in GB/s, one NIC per GPU (two_tier), and whether the node's switch reduces."""
    nodes: int
    per_node: int
    nvlink_GBps: float
    nic_GBps: float
    nvls: bool


def view(topology, ranks) -> View:
    """NCCL's view of ``ranks``: m consecutive ranks on each of two or more two_tier nodes
    (collectives.rail.per_node, the rule `choose` groups them by); InputError else."""
    import numpy as np

    from collectives.rail import per_node

    m = per_node(topology, ranks)
    if m is None:
        raise InputError("NCCL's tuner model covers ranks on two or more two_tier nodes, the "
                         "same number of each, each node's consecutive")
    p = topology.params
    nodes = np.unique(np.asarray(topology.host_group)[np.asarray(ranks, dtype=np.int64)])
    bw = getattr(topology, "reduce_bw", None)  # per node; node switches follow the GPUs
    nvls = bw is not None and bool((np.asarray(bw)[topology.n_hosts + nodes] > 0).all())
    port = p.get("nic_port_gbps") or p["nic_gbps"]
    return View(len(nodes), m, p["scaleup_gbps"] / 8, port / 8, nvls)


def _largest_speed(limit: float) -> float:
    return next((s for s in SPEEDS if s <= limit + 1e-9), 0.0)


def ring_graph(v: View) -> Graph:
    """Channels and per-channel rate of NCCL's ring (and tree) graph."""
    best_bw, ch, s = 0.0, 0, 0.0
    for speed in SPEEDS:
        if s and speed / s <= .49:  # the search stops lowering the speed here
            break
        per_nic = int(v.nic_GBps / speed + 1e-9)  # channels one NIC carries at this speed
        n = min(per_nic * v.per_node, int(v.nvlink_GBps / speed + 1e-9), MAX_CHANNELS)
        if n > 0 and n * speed > best_bw + 1e-9:
            best_bw, ch, s = n * speed, n, speed
    if ch == 0:  # below NCCL's slowest speed: its fallback, one channel of 0.1 GB/s
        return Graph(1, 0.1, 0.1)
    if s >= 25.0 and not (s < 50.0 and ch > 4):
        dup = min(2 * ch, MAX_CHANNELS)
        s, ch = s / math.ceil(dup / ch), dup
    return Graph(ch, s, s)


def nvls_graph(v: View) -> Graph:
    """Heads and rates of NCCL's NVLS graph (one head per NIC-attached GPU). Every head's
    channel takes its rate on every GPU's NVLink and twice on its head's
    (``ncclTopoSearchTryNvls``), so a GPU carries heads + 1 of them; the search keeps the most
    heads, then raises the network side alone while it stays within the NIC and twice the
    intra-node rate."""
    heads = min(v.per_node, MAX_NVLS_HEADS)
    intra = _largest_speed(v.nvlink_GBps / (heads + 1))
    inter = _largest_speed(min(v.nic_GBps, 2 * intra))
    return Graph(heads, intra, inter)


def _table(v: View, rg: Graph, ng: Graph, op: str = "all_reduce") -> dict:
    """{(algorithm, protocol): (latency us, bandwidth GB/s)} for ``op`` (all-reduce, or the
    ring's all-gather and reduce-scatter: NCCL's PAT needs one GPU per node and its NVLS
    gather one node) on the ring (and tree) graph ``rg`` and the NVLS graph ``ng``, as
    ncclTopoTuneModel fills it."""
    n = v.nodes * v.per_node
    ar = op == "all_reduce"
    nsteps = 2 * (n - 1) if ar else n - 1
    i2 = 0 if v.nodes == 1 else (1 if v.nodes == 2 else 2)
    log_nodes = int(math.log2(v.nodes))
    out = {}
    for a in ("ring", "tree", "nvls_tree") if ar else ("ring",):
        if a == "nvls_tree" and not (v.nvls and v.nodes > 1 and ng.channels >= 2):
            continue
        for k, p in enumerate(PROTOS):
            if a == "nvls_tree" and p != "simple":
                continue
            g = ng if a == "nvls_tree" else rg
            if a == "nvls_tree":
                bw = min(g.bw_intra, g.bw_inter if v.nodes <= 2 else g.bw_inter / 2)
            else:
                bw = g.bw_intra if v.nodes <= 2 else g.bw_inter
            bus = g.channels * bw
            if a == "ring" and p == "ll":
                bus = min(LL_MAX[i2], bus * .5)
            if a == "ring" and p == "ll128":
                bus = min(bus * .92, g.channels * PER_CH_RING_LL128)
            if a == "tree":
                bus = min(bus * .92, g.channels * PER_CH_TREE[i2])
                if p == "ll":
                    bus = min(bus / 3.8, LL_MAX[i2])
                if p == "ll128":
                    bus = min(bus * (7 / 9 if v.nodes == 1 else 120 / 128),
                              g.channels * PER_CH_TREE_LL128[i2])
            alg = bus * (n / nsteps if a == "ring" else 5 / 6 if a == "nvls_tree" else .5)
            intra, inter = NVLINK_US[a][k], NET_US[a][k]
            lat = BASE_US[a][k]
            if a == "ring":
                if v.nodes > 1:
                    intra = max(intra, NET_OVERHEAD_US * (3 if p == "simple" else 1))
                inter_steps = (2 if ar else 1) * (v.nodes - 1)
                lat += (nsteps - inter_steps) * intra + inter_steps * inter
            elif a == "tree":
                lat += 2 * ((v.per_node - 1) * intra + log_nodes * inter)
            else:
                lat += intra + 2 * log_nodes * inter
            out[(a, p)] = (lat, alg)
    return out


def times_us(v: View, nbytes: int, protocol: str | None = None,
             op: str = "all_reduce") -> dict:
    """{(NCCL algorithm, protocol): predicted microseconds} for ``op`` of ``nbytes`` (NCCL's
    nBytes: an all-reduce's buffer, an all-gather's output, a reduce-scatter's input;
    ``protocol``: only that one, as NCCL_PROTO would)."""
    if op not in OPS:
        raise InputError(f"op = {op!r}: NCCL's tuner model covers {', '.join(OPS)}")
    rg = ring_graph(v)
    n = v.nodes * v.per_node
    log = int(math.log2(nbytes >> 6)) if nbytes >= 64 else -1  # treeCorrectionFactor's index
    out = {}
    for (a, p), (lat, bw) in _table(v, rg, nvls_graph(v), op).items():
        if (protocol is not None and p != protocol) or not bw > 0:
            continue  # NCCL likewise skips an algorithm of no bandwidth
        if a == "tree" and 0 <= log < len(TREE_CORRECTION[p]):
            bw *= TREE_CORRECTION[p][log]
        # comm->nChannels: the ring graph's channels, doubled when NCCL connects them
        if op == "all_reduce" and a == "ring" and p == "simple" and v.nodes > 1 and \
                nbytes // (2 * rg.channels * n) >= 64:
            lat *= RING_PLATEAU
        out[(a, p)] = lat + nbytes / (1e3 * bw)
    return out


def pick(v: View, nbytes: int, protocol: str | None = None,
         op: str = "all_reduce") -> tuple[str, str, float]:
    """(our algorithm name, protocol, NCCL's predicted us) of NCCL's choice for ``op``."""
    t = times_us(v, int(nbytes), protocol, op)
    if not t:
        raise InputError(f"protocol = {protocol!r}: none of NCCL's all-reduce algorithms "
                         f"runs with it here")
    a, p = min(t, key=lambda key: (t[key], key))
    return ALGORITHMS[a], p, t[(a, p)]

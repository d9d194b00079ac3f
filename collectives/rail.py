"""Rings through every NIC of a node: how NCCL lays its ring channels on a two-tier fabric.

On ``two_tier`` every GPU of a node has its own NIC, one per rail. A single ring over the
ranks of several nodes leaves each node through one GPU, hence one NIC: it moves 1/g of what
the node's g NICs carry (4 nodes of 8 H100: 22 GB/s of bus bandwidth for a 1 GiB
reduce-scatter against about 350 over all eight rails). NCCL builds one ring channel per NIC
(or two) instead, each entering and leaving a node through a different GPU, and splits the
buffer over them, so every NIC and every NVLink port carries an equal share.

``rail_rings`` gives g such rings over whole nodes: ring r runs through the GPUs of node 0
from local index r upwards (r, r+1, ... mod g), leaves through GPU r-1, enters node 1 on the
same rail (GPU r-1), runs through node 1 downwards and leaves through GPU r, which enters
node 2 on rail r again, and so on. Every crossing stays on one rail; with an even number of
nodes the ring closes on a rail too (an odd number closes through the spine once). Across
the g rings each NIC sends once and receives once, and a GPU's intra-node successor is the
same in g - 1 of them.
"""
from __future__ import annotations

import numpy as np

from topo.arrays import unique


def rail_rings(topology, ranks) -> np.ndarray | None:
    """(g, n) positions into ``ranks``: ring r's members in ring order; None unless
    ``topology`` is two_tier and ``ranks`` (host ids, in order) are two or more whole nodes of
    g > 1 ranks each, every node's ranks consecutive in the list (choose.ordered_ranks lays
    them so). Local index j of a node is its j-th rank in the list (its rail, in fabric order)."""
    if topology is None or getattr(topology, "kind", None) != "two_tier":
        return None
    r = np.asarray(ranks, dtype=np.int64).reshape(-1)
    n = len(r)
    if n < 4 or r.max() >= topology.n_hosts:
        return None
    node = np.asarray(topology.host_group)[r]
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    if len(starts) < 2 or len(unique(node)) != len(starts):
        return None  # one node, or a node's ranks not consecutive
    g = n // len(starts)
    if g < 2 or g * len(starts) != n or (np.diff(np.r_[starts, n]) != g).any():
        return None
    if (np.bincount(node)[unique(node)] != g).any():
        return None  # only part of some node
    G = n // g
    ring = np.arange(g)[:, None]
    j = np.arange(g)[None, :]
    up = (ring + j) % g  # even nodes: r, r+1, ..., r-1
    down = (ring - 1 - j) % g  # odd nodes: r-1, r-2, ..., r
    a = np.arange(G)
    local = np.where((a % 2 == 0)[None, :, None], up[:, None, :], down[:, None, :])  # (g, G, g)
    return (a[None, :, None] * g + local).reshape(g, n)


def ring_bytes(nbytes: int, g: int, n: int) -> np.ndarray:
    """Payload of each of g rail rings for one chunk of ``nbytes``: the builders cut it into
    g * n blocks (split) and give ring r the blocks r*n .. r*n + n - 1."""
    from collectives._plan import split

    return split(int(nbytes), g * n).reshape(g, n).sum(axis=1)


def stream_schedule(ranks, rails: np.ndarray, op: str, nbytes: int, step_latency_s: float,
                    wire, launch_s: float, rate_cap: float):
    """Rail rings in stream form (collectives.streams): one stream per ring, all g side by
    side, each over its ring's ranks with its share of the buffer. One chunk only (the
    builders' default for rings): a chunked layout splits the shares otherwise."""
    from collectives.streams import ring_stream, stream_schedule as one
    from netcore.schedule import Schedule

    ranks = np.asarray(ranks, dtype=np.int64)
    g, n = rails.shape
    parts = []
    for r, b in enumerate(ring_bytes(nbytes, g, n).tolist()):
        st = ring_stream(op, "ring", n, b, 1, step_latency_s, wire, launch_s, rate_cap)
        if st is None:
            return None
        parts.append(one(ranks[rails[r]], st, op))
    return Schedule.concat(parts)


def ring_layout(fabric, ranks, chunks: int):
    """(members (R, n), lo (R, n, C)) for collectives._ring.ring_phases: the g rail rings
    where ``rail_rings`` finds them (R = g), else the one ring in list order (R = 1). Ring r's
    shard at position p, chunk c, is block c*R*n + r*n + i for the rank index i there, so
    block % n names the rank that ends with it (reduce-scatter's owner)."""
    from collectives._plan import check_ranks

    n = len(check_ranks(ranks))
    rails = rail_rings(fabric, ranks)
    members = np.arange(n, dtype=np.int64)[None, :] if rails is None else rails
    R = members.shape[0]
    c = np.arange(chunks, dtype=np.int64)
    lo = c[None, None, :] * (R * n) + np.arange(R)[:, None, None] * n + members[:, :, None]
    return members, lo


def rings_of(fabric, ranks) -> int:
    """How many rings ``ring_layout`` lays: g on whole two_tier nodes, else 1."""
    rails = rail_rings(fabric, ranks)
    return 1 if rails is None else rails.shape[0]


def rail_chains(fabric, ranks, root: int, towards_root: bool) -> np.ndarray | None:
    """(g, n) positions into ``ranks``: the rail rings opened at the root, as the chains of a
    pipelined broadcast (root first) or reduce (root last, ``towards_root``); None where
    ``rail_rings`` finds no rails. NCCL's ring broadcast and reduce run one chain per ring
    channel, so the buffer crosses every NIC of a node, not one."""
    rails = rail_rings(fabric, ranks)
    if rails is None:
        return None
    at = np.argmax(rails == root, axis=1)  # the root's place in each ring
    shift = at + (1 if towards_root else 0)
    idx = (shift[:, None] + np.arange(rails.shape[1])[None, :]) % rails.shape[1]
    return np.take_along_axis(rails, idx, axis=1)

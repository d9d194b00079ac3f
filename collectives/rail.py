"""Rings through every NIC of a node: how NCCL lays its ring channels on a two-tier fabric.

On ``two_tier`` every GPU of a node has its own NIC, one per rail. A single ring over the
ranks of several nodes leaves each node through one GPU, hence one NIC: it moves 1/g of what
the node's g NICs carry (4 nodes of 8 H100: 22 GB/s of bus bandwidth for a 1 GiB
reduce-scatter against about 350 over all eight rails). NCCL builds one ring channel per NIC
(or two) instead, each entering and leaving a node through a different GPU, and splits the
buffer over them, so every NIC and every NVLink port carries an equal share.

``rail_rings`` gives m such rings where the ranks hold m GPUs of each of several nodes (all
g of them, or fewer: a data-parallel group beside tensor parallelism): ring r runs through
the node's ranks from local index r upwards (r, r+1, ... mod m), leaves through the rank at
r-1, enters node 1 on the same local index, runs through node 1 downwards and leaves through
local index r, which enters node 2 on index r again, and so on. Every crossing stays on one
local index (one rail, where the ranks' local indices are the same GPUs in every node); with
an even number of nodes the ring closes on one too (an odd number closes across once). Across
the m rings each rank's NIC sends once and receives once, and a rank's successor in its node
is the same in m - 1 of them. Training steps lay their rings the same way (compute/comm.py).
"""
from __future__ import annotations

import numpy as np

from topo.arrays import unique
from topo.errors import InputError

# positions of a rail layout (m rings x n ranks) built at most: it and the schedule made from
# it hold several (m, n) arrays, about 6 GB at this size; a scale-up domain of thousands of
# GPUs asked for a layout of m * n = millions x thousands and a memory kill instead
MAX_RAIL_POSITIONS = 1 << 26


def per_node(topology, ranks) -> int | None:
    """How many of ``ranks`` (host ids, in order) each two_tier node holds, when they are two
    or more nodes' worth of m > 1 each, every node's ranks consecutive in the list
    (choose.ordered_ranks lays them so); None otherwise (another fabric, one node, uneven or
    interleaved nodes). A node need not be whole: a data-parallel group beside tensor
    parallelism 2 holds 4 GPUs of each node of 8 (each with its own NIC)."""
    if topology is None or getattr(topology, "kind", None) != "two_tier":
        return None
    r = np.asarray(ranks, dtype=np.int64).reshape(-1)
    n = len(r)
    if n < 4 or r.min() < 0 or r.max() >= topology.n_hosts:
        return None
    node = np.asarray(topology.host_group)[r]
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    if len(starts) < 2 or len(unique(node)) != len(starts):
        return None  # one node, or a node's ranks not consecutive
    m = n // len(starts)
    if m < 2 or m * len(starts) != n or (np.diff(np.r_[starts, n]) != m).any():
        return None
    return m


def rail_layout(m: int, n: int) -> np.ndarray:
    """(m, n) positions 0..n-1 of the m rail rings over n ranks, m consecutive ones per node
    (module docstring): ring r runs up through node 0 from local index r, down through node
    1, and so on, each crossing between nodes on one local index."""
    G = n // m
    ring = np.arange(m)[:, None]
    j = np.arange(m)[None, :]
    up = (ring + j) % m  # even nodes: r, r+1, ..., r-1
    down = (ring - 1 - j) % m  # odd nodes: r-1, r-2, ..., r
    a = np.arange(G)
    local = np.where((a % 2 == 0)[None, :, None], up[:, None, :], down[:, None, :])  # (m, G, m)
    return (a[None, :, None] * m + local).reshape(m, n)


def rail_rings(topology, ranks) -> np.ndarray | None:
    """(m, n) positions into ``ranks``: ring r's members in ring order, where ``per_node``
    finds m ranks on each of two or more two_tier nodes; None otherwise. Local index j of a
    node is its j-th rank in the list (its rail, in fabric order)."""
    m = per_node(topology, ranks)
    if m is None:
        return None
    n = len(np.asarray(ranks).reshape(-1))
    if m * n > MAX_RAIL_POSITIONS:
        raise InputError(f"ranks: {n:,} ranks with {m:,} on each node make {m:,} rail rings of "
                         f"{n:,} ranks ({m * n:,} positions, at most {MAX_RAIL_POSITIONS:,}); "
                         f"use fewer GPUs per node (topology.gpus_per_node) or another "
                         f"algorithm")
    return rail_layout(m, n)


def rail_phase(rails: np.ndarray, op: str, nbytes: int, wire=(1, 1), rate_cap: float = 0.0):
    """Rail rings in stream form (collectives.streams.ring_phase): one stream per ring, side
    by side, each carrying its ring's shards as the builders cut them (block r*n + i is rank
    i's shard of ring r, ``ring_members``), so the streams' bytes are the full schedule's."""
    from collectives._plan import split
    from collectives.streams import ring_phase

    m, n = rails.shape
    shard = np.take_along_axis(split(int(nbytes), m * n).reshape(m, n), rails, axis=1)
    return ring_phase(rails, shard, op != "all_gather", op != "reduce_scatter", op, wire,
                      rate_cap)


def stream_schedule(ranks, rails: np.ndarray, op: str, nbytes: int, step_latency_s: float,
                    wire, launch_s: float, rate_cap: float):
    """Rail rings in stream form over host ids ``ranks`` (one chunk, the builders' default
    for rings: a chunked layout splits the shares otherwise), each ring's steps at
    ``step_latency_s`` and the launch once."""
    from collectives.streams import phased_schedule, with_latency

    ph = rail_phase(rails, op, nbytes, wire, rate_cap)
    return phased_schedule(ranks, [with_latency(ph, step_latency_s, launch_s)], op)


def _share(fabric, ranks, given=None) -> int | None:
    """Ranks per node: ``per_node``'s finding on the fabric, or ``given`` (templates over
    local ranks, no fabric) where it makes two or more nodes of m > 1 each; else None."""
    if given is None:
        return per_node(fabric, ranks)
    n = len(np.asarray(ranks).reshape(-1))
    m = int(given)
    return None if m < 2 or n % m or n // m < 2 else m


def _rails(fabric, ranks, per_node=None):
    """``rail_rings``, or with ``per_node`` given (templates over local ranks, no fabric) the
    rail layout of that many consecutive ranks per node."""
    m = _share(fabric, ranks, per_node)
    return None if m is None else rail_layout(m, len(np.asarray(ranks).reshape(-1)))


def ring_members(fabric, ranks, per_node=None) -> np.ndarray:
    """(R, n) positions into ``ranks`` of every ring a ring collective lays: the m rail rings
    where ``rail_rings`` finds them (or ``per_node`` is given), else the one ring in list
    order (R = 1)."""
    from collectives._plan import check_ranks

    r = check_ranks(ranks)  # a list, an array or a count n (ranks 0..n-1)
    rails = _rails(fabric, r, per_node)
    return np.arange(len(r), dtype=np.int64)[None, :] if rails is None else rails


def ring_blocks(members: np.ndarray, chunks: int) -> np.ndarray:
    """lo (R, n, C) for collectives._ring.ring_phases over ``members`` (ring_members): ring
    r's shard at position p, chunk c, is block c*R*n + r*n + i for the rank index i there, so
    block % n names the rank that ends with it (reduce-scatter's owner)."""
    R, n = members.shape
    c = np.arange(chunks, dtype=np.int64)
    return c[None, None, :] * (R * n) + np.arange(R)[:, None, None] * n + members[:, :, None]


def rings_of(fabric, ranks, per_node=None) -> int:
    """How many rings ``ring_members`` lays: m with m ranks on each of several two_tier nodes
    (or ``per_node`` given), else 1."""
    return len(ring_members(fabric, ranks, per_node))


def rail_chains(fabric, ranks, root: int, towards_root: bool) -> np.ndarray | None:
    """(g, n) positions into ``ranks``: the rail rings opened at the root, as the chains of a
    pipelined broadcast (root first) or reduce (root last, ``towards_root``); None where
    ``rail_rings`` finds no rails. NCCL's ring broadcast and reduce run one chain per ring
    channel, so the buffer crosses every NIC of a node, not one."""
    from collectives._plan import check_ranks

    rails = rail_rings(fabric, check_ranks(ranks))
    if rails is None:
        return None
    at = np.argmax(rails == root, axis=1)  # the root's place in each ring
    shift = at + (1 if towards_root else 0)
    idx = (shift[:, None] + np.arange(rails.shape[1])[None, :]) % rails.shape[1]
    return np.take_along_axis(rails, idx, axis=1)


def rail_trees(fabric, ranks, per_node=None) -> np.ndarray | None:
    """(2m, n) parents (positions into ``ranks``, -1 at the roots) of NCCL's Tree on m ranks
    of each of G >= 2 two_tier nodes (``per_node``'s rule), or None where there are no rails.

    NCCL's tree channels on such a machine are a chain through each node's GPUs and a double
    binary tree across the nodes (NCCL's INFO lines ``Trees [c] child/child/child->rank->
    parent``: a rank's one intra-node child and its parent, the node's head also linked to
    up to two other nodes), and its channels use every NIC. Tree pair r (trees 2r and 2r+1)
    enters each node at local index r: the chain runs r <- r+1 <- ... <- r-1 (each rank's
    parent is the one before it), and node a's head (local r) takes as parent the head of
    node ``double_binary_trees(G)[t][a]``, so every crossing stays on rail r and each NIC
    serves one pair of complementary trees."""
    from collectives._trees import double_binary_trees

    m = _share(fabric, ranks, per_node)
    if m is None:
        return None
    n = len(np.asarray(ranks).reshape(-1))
    G = n // m
    node_par = double_binary_trees(G)  # (2, G)
    r = np.arange(m)[:, None, None]  # tree pair (rail)
    a = np.arange(G)[None, :, None]  # node
    k = np.arange(m)[None, None, :]  # local index
    chain_pos = (k - r) % m  # 0 at the head
    out = np.empty((2 * m, n), dtype=np.int64)
    for t in range(2):
        pa = node_par[t][a]  # (1, G, 1)
        head_par = np.where(pa >= 0, pa * m + r, -1)
        par = np.where(chain_pos == 0, head_par, a * m + (k - 1) % m)
        out[t::2] = np.broadcast_to(par, (m, G, m)).reshape(m, n)
    return out


def side_by_side(fabric, op: str, algorithm: str, ranks) -> int:
    """How many copies of an algorithm's one-ring (or one-tree-pair) schedule its builder lays
    side by side, each cutting every chunk: the rail rings of ``ring``, the rail tree pairs of
    ``double_binary_tree`` all-reduce, else 1 (for transfer counts and default chunks)."""
    if algorithm == "ring":
        return rings_of(fabric, ranks)
    if algorithm == "double_binary_tree" and op == "all_reduce":
        return _share(fabric, ranks) or 1
    return 1

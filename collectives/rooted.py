"""Broadcast and reduce (one root, ``root`` = index into ``ranks``, default 0).

``nbytes`` = S, the buffer size (the root's input for broadcast, every rank's input for
reduce). Chunk c is block c; C chunks pipeline down a chain or tree.
"""
from __future__ import annotations

import numpy as np

from collectives._plan import check_root
from collectives._trees import binomial_parent
from collectives.all_reduce import _setup
from collectives.rail import rail_chains


def _chain(ranks, nbytes, chunks, step_latency_s, root, op, protocol, fabric):
    from collectives._plan import check_ranks

    n = len(check_ranks(ranks))
    root = check_root(root, n)
    bcast = op == "broadcast"
    # on whole two_tier nodes one chain per rail, each with 1/g of every chunk (block c*R + r)
    chains = rail_chains(fabric, ranks, root, towards_root=not bcast)
    R = 1 if chains is None else chains.shape[0]
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, R, "ring", op=op,
                           protocol=protocol, fabric=fabric, per_chunk=lambda n: R * (n - 1),
                           lanes=R)
    if chains is None:
        # broadcast: root first; reduce: root last, so data flows towards it
        chains = ((root + np.arange(n) + (0 if bcast else 1)) % n)[None, :]
    h = np.arange(n - 1)
    # ids[c, r, h]: hop h of chain r carrying chunk c
    ids = plan.transfers(chains[:, h][None], chains[:, h + 1][None],
                         np.arange(C)[:, None, None] * R + np.arange(R)[None, :, None],
                         reduce=not bcast,
                         label="chain_broadcast" if bcast else "chain_reduce",
                         tag=h[None, None, :])
    plan.deps(ids[:, :, 1:], ids[:, :, :-1])  # hop h forwards what hop h-1 delivered
    plan.order(ids[1:], ids[:-1])  # one chunk after another on each hop
    plan.meta["root"] = root
    return plan.build()


def ring_broadcast(ranks, nbytes, chunks=None, step_latency_s=None, root=0, protocol=None,
                   fabric=None):
    """Pipelined chain root -> root+1 -> ... (NCCL's ring broadcast): (n-1+C-1) chunk times.
    On whole two_tier nodes, one chain per rail (collectives/rail.py)."""
    return _chain(ranks, nbytes, chunks, step_latency_s, root, "broadcast", protocol, fabric)


def ring_reduce(ranks, nbytes, chunks=None, step_latency_s=None, root=0, protocol=None,
                fabric=None):
    """Pipelined chain root+1 -> root+2 -> ... -> root, each hop adding its own buffer."""
    return _chain(ranks, nbytes, chunks, step_latency_s, root, "reduce", protocol, fabric)


def tree_broadcast(ranks, nbytes, chunks=None, step_latency_s=None, root=0, protocol=None,
                   fabric=None):
    """Binomial tree (MPI's classic): in round r every rank v < 2^r that has the chunk sends it
    to v + 2^r (v relative to the root); ceil(log2 n) rounds per chunk, a rank's sends in
    sequence (largest subtree first)."""
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, 1, "tree", op="broadcast",
                           protocol=protocol, fabric=fabric, per_chunk=lambda n: n - 1)
    root = check_root(root, n)
    rank_of = (np.arange(n) + root) % n
    recv = np.full((C, n), -1, dtype=np.int64)
    prev = np.full(n, -1, dtype=np.int64)
    rounds = max(1, (n - 1).bit_length())
    for c in range(C):
        for r in range(rounds):
            v = np.arange(min(1 << r, n - (1 << r)))
            ids = plan.transfers(rank_of[v], rank_of[v + (1 << r)], c, reduce=False,
                                 label="tree_broadcast", tag=r)
            plan.deps(ids, recv[c, v])
            plan.order(ids, prev[v])
            prev[v] = ids
            recv[c, v + (1 << r)] = ids
    plan.meta["root"] = root
    return plan.build()


def tree_reduce(ranks, nbytes, chunks=None, step_latency_s=None, root=0, protocol=None,
                fabric=None):
    """Binomial tree reduce: the mirror of tree_broadcast; rank v sends its partial sum to
    v minus its highest bit once all its children's sums arrived."""
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, 1, "tree", op="reduce",
                           protocol=protocol, fabric=fabric, per_chunk=lambda n: n - 1)
    root = check_root(root, n)
    rank_of = (np.arange(n) + root) % n
    par = binomial_parent(n)
    send = np.full((C, n), -1, dtype=np.int64)
    for c in range(C):
        for r in reversed(range(max(1, (n - 1).bit_length()))):
            w = np.arange(1 << r, min(1 << (r + 1), n))
            send[c, w] = plan.transfers(rank_of[w], rank_of[par[w]], c, reduce=True,
                                        label="tree_reduce", tag=r)
    v = np.arange(1, n)
    inner = par[v] > 0
    plan.deps(send[:, par[v][inner]], send[:, v[inner]])  # after the children's sums
    plan.order(send[1:, 1:], send[:-1, 1:])
    plan.meta["root"] = root
    return plan.build()

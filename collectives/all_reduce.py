"""All-reduce: every rank ends with the sum of all ranks' buffers.

``nbytes`` is the buffer size on each rank (input = output = S), as NCCL-tests counts it.
All algorithms cut the buffer chunk-major: block ``c*P + q`` is piece q of chunk c.
"""
from __future__ import annotations

import numpy as np

from collectives._plan import (Plan, check_chunks, check_latency, check_nbytes, check_ranks,
                               chunked_layout)
from collectives._ring import ring_phases
from collectives.rail import rail_trees, ring_blocks, ring_members
from collectives._trees import depths, double_binary_trees
from topo.errors import InputError


def _setup(ranks, nbytes, chunks, step_latency_s, parts_per_chunk, algorithm, op="all_reduce",
           protocol=None, fabric=None, per_chunk=None, n_groups=1, lanes=1):
    """Checked arguments and the Plan. ``chunks`` None: the protocol's default
    (collectives.protocols.default_chunks; ``per_chunk(n)``: transfers per chunk, for its
    bound); ``protocol`` None: no protocol costs (payload on the wire, ``step_latency_s``
    or no latency); ``lanes``: rings, chains or trees laid side by side (their sends share
    LL's cap: collectives.protocols.channels)."""
    from collectives import protocols

    ranks = check_ranks(ranks)
    nbytes = check_nbytes(nbytes)
    n = len(ranks)
    P = parts_per_chunk(n) if callable(parts_per_chunk) else parts_per_chunk
    proto = protocols.check_for(algorithm, protocol)
    if proto == protocols.AUTO:
        raise InputError("protocol = 'auto': the schedule builders take a protocol name; "
                         "collectives.choose or collectives.protocols.best picks one")
    if chunks is None:
        C = protocols.default_chunks(op, algorithm, nbytes, P, proto,
                                     per_chunk(n) if per_chunk else 0, n_groups)
    else:
        C = check_chunks(chunks, nbytes, P, f"{algorithm} {op} over {n} ranks")
    lat = check_latency(step_latency_s, allow_none=True)
    costs = protocols.costs(proto, lat, fabric, algorithm)
    plan = Plan(op, algorithm, ranks, nbytes, C, costs, chunked_layout(nbytes, C, P))
    plan.channels = protocols.channels(algorithm, n, lanes)
    return plan, n, C, P


def ring_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                    fabric=None, per_node=None):
    """Ring: reduce-scatter then all-gather around ``ranks`` in list order, 2(n-1) steps of
    S/n bytes per rank. Bandwidth-optimal: each rank sends 2(n-1)/n * S. On whole nodes of a
    two_tier ``fabric``: one ring per rail, each with 1/g of the buffer, as NCCL lays its ring
    channels through every NIC (collectives/rail.py); ``per_node``: the same over ranks
    0..n-1 taken as that many consecutive ranks per node (templates, without a fabric)."""
    members = ring_members(fabric, ranks, per_node)
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: members.size, "ring",
                           protocol=protocol, fabric=fabric, lanes=len(members))
    ring_phases(plan, members, ring_blocks(members, C), 1, rs=True, ag=True)
    return plan.build()


def bidirectional_ring_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None,
                                  protocol=None, fabric=None):
    """Two rings in opposite directions, each all-reducing half the buffer. Helps where a
    rank's links to its two ring neighbours are distinct (a torus/ring fabric); on a switched
    fabric both halves share the rank's one NIC and it equals the ring."""
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: 2 * n,
                           "bidirectional_ring", protocol=protocol, fabric=fabric, lanes=2)
    members = np.stack([np.arange(n), np.arange(n)[::-1]])
    lo = (np.arange(C)[None, None, :] * 2 * n + np.arange(2)[:, None, None] * n +
          np.arange(n)[None, :, None])
    ring_phases(plan, members, lo, 1, rs=True, ag=True)
    return plan.build()


def tree_parents(fabric, ranks, per_node=None) -> np.ndarray:
    """(T, n) parents of the trees ``double_binary_tree`` lays: NCCL's rail trees on ranks
    of several two_tier nodes (collectives.rail.rail_trees, T = 2 per rail), else the double
    binary tree over the list (T = 2)."""
    trees = rail_trees(fabric, ranks, per_node)
    return double_binary_trees(len(ranks)) if trees is None else trees


def double_binary_tree_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None,
                                  protocol=None, fabric=None, per_node=None):
    """NCCL's double binary tree: half the buffer is reduced up tree 0 and broadcast back down,
    the other half on tree 1 (a leaf of one tree is an inner node of the other, so every
    rank sends and receives about the same). Chunks pipeline: chunk c moves up (and then down)
    while chunk c+1 follows; each tree edge carries one chunk at a time per direction. On
    ranks of several two_tier nodes, NCCL's Tree channels instead: per rail a pair of such
    trees across the nodes, chained through each node's GPUs, each with 1/(2m) of every chunk
    (collectives.rail.rail_trees); ``per_node`` as for the ring."""
    ranks = check_ranks(ranks)
    parents = tree_parents(fabric, ranks, per_node)
    T = len(parents)
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, T, "double_binary_tree",
                           protocol=protocol, fabric=fabric,
                           per_chunk=lambda n: 2 * T * (n - 1), lanes=T)
    up_ids = np.full((C, T, n), -1, dtype=np.int64)
    down_ids = np.full((C, T, n), -1, dtype=np.int64)  # edge parent(y) -> y, indexed by y
    orders = []
    for t in range(T):
        par = parents[t]
        d = depths(par)
        nonroot = np.flatnonzero(par >= 0)
        orders.append((par, nonroot[np.argsort(-d[nonroot], kind="stable")],
                       nonroot[np.argsort(d[nonroot], kind="stable")], d))
    # reduce up: chunk-major, deepest first, so children precede parents
    for c in range(C):
        for t in range(T):
            par, up_order, _, d = orders[t]
            up_ids[c, t, up_order] = plan.transfers(up_order, par[up_order], c * T + t,
                                                    reduce=True, label="tree_reduce",
                                                    tag=d[up_order])
    for c in range(C):
        for t in range(T):
            par, _, down_order, d = orders[t]
            down_ids[c, t, down_order] = plan.transfers(par[down_order], down_order, c * T + t,
                                                        reduce=False, label="tree_broadcast",
                                                        tag=d.max() + d[down_order])
    for t in range(T):
        par, up_order, down_order, d = orders[t]
        root = int(np.flatnonzero(par < 0)[0])
        y = up_order
        # up: a node sends after all its children's sends arrived (same chunk)
        has_par = par[y] >= 0
        plan.deps(up_ids[:, t, par[y]][:, has_par & (par[y] != root)],
                  up_ids[:, t, y][:, has_par & (par[y] != root)])
        plan.order(up_ids[1:, t, y], up_ids[:-1, t, y])  # one chunk at a time per edge
        # down: from the root once its children's chunk arrived, else after receiving it
        y = down_order
        from_root = par[y] == root
        kids_of_root = y[from_root]
        plan.deps(down_ids[:, t, kids_of_root][:, :, None],
                  up_ids[:, t, kids_of_root][:, None, :])
        inner = y[~from_root]
        plan.deps(down_ids[:, t, inner], down_ids[:, t, par[inner]])
        plan.order(down_ids[1:, t, y], down_ids[:-1, t, y])
    plan.meta["trees"] = parents
    return plan.build()


def _pow2_floor(n: int) -> int:
    return 1 << (int(n).bit_length() - 1)


def recursive_halving_doubling_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None,
                                          protocol=None, fabric=None):
    """Rabenseifner: reduce-scatter by recursive halving (partners at distance p/2, p/4, ...,
    1, exchanging half of the current range each step) then all-gather by recursive doubling.
    log2(p) steps each way; each rank sends 2(p-1)/p * S. For n not a power of two, with
    p = 2^floor(log2 n) and r = n - p: first rank 2i sends its whole buffer to 2i+1 (i < r),
    which reduces it and takes part; at the end 2i+1 sends the result back (the simple fix-up
    of Rabenseifner 2004 / Thakur et al. 2005: 2 extra full-buffer steps for 2r ranks)."""
    ranks_arr = check_ranks(ranks)
    n = len(ranks_arr)
    p = _pow2_floor(n)
    plan, n, C, P = _setup(ranks_arr, nbytes, chunks, step_latency_s, p,
                           "recursive_halving_doubling", protocol=protocol, fabric=fabric)
    r = n - p
    L = p.bit_length() - 1
    v = np.arange(p)
    rank_of_v = np.where(v < r, 2 * v + 1, v + r)
    c = np.arange(C)
    recv_into = np.full((p, C), -1, dtype=np.int64)  # last receive into virtual rank v
    last_send = np.full(p, -1, dtype=np.int64)
    if r:
        i = np.arange(r)
        pre = plan.transfers(2 * i[:, None], 2 * i[:, None] + 1, c[None, :] * p, n=p,
                             reduce=True, label="fixup_in", tag=0)
        plan.order(pre[:, 1:], pre[:, :-1])
        recv_into[:r] = pre
    tag = 1

    def step(d, lo_of, reduce, label):
        nonlocal recv_into, last_send, tag
        partner = v ^ d
        ids = plan.transfers(rank_of_v[:, None], rank_of_v[partner][:, None],
                             c[None, :] * p + lo_of(v, d)[:, None], n=d, reduce=reduce,
                             label=label, tag=tag)
        tag += 1
        # MPI sendrecv: the exchange of step k starts when both partners finished step k-1
        plan.deps(ids, recv_into)
        plan.deps(ids, recv_into[partner])
        plan.order(ids[:, 1:], ids[:, :-1])
        plan.order(ids[:, 0], last_send)
        last_send = ids[:, -1].copy()
        recv_into = ids[partner].copy()
        return ids

    for k in range(L):  # halving: keep own half (bit d of v), send the partner's half
        step(p >> (k + 1), lambda v, d: (v ^ d) & ~(d - 1), True, "reduce_scatter")
    for k in range(L):  # doubling: send everything held so far
        step(1 << k, lambda v, d: v & ~(d - 1), False, "all_gather")
    if r:
        i = np.arange(r)
        post = plan.transfers(2 * i[:, None] + 1, 2 * i[:, None], c[None, :] * p, n=p,
                              reduce=False, label="fixup_out", tag=tag)
        plan.deps(post, recv_into[:r])
        plan.order(post[:, 1:], post[:, :-1])
        plan.order(post[:, 0], last_send[:r])
    return plan.build()


def direct_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                      fabric=None):
    """Reduce-scatter then all-gather with every peer at once: rank i sends piece j of its
    buffer to rank j (which sums the n pieces), then j sends the reduced piece to every rank.
    Two steps, n(n-1) transfers each; each rank sends 2(n-1)/n * S, like the ring."""
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: n, "direct",
                           protocol=protocol, fabric=fabric)
    i, j = np.nonzero(~np.eye(n, dtype=bool))  # ordered pairs i != j
    c = np.arange(C)[:, None]
    rs = plan.transfers(i[None, :], j[None, :], c * n + j[None, :], reduce=True,
                        label="reduce_scatter", tag=0)  # (C, pairs)
    plan.order(rs[1:], rs[:-1])
    join = plan.joins(np.broadcast_to(np.arange(n), (C, n)), label="reduced")
    plan.deps(join[np.broadcast_to(c, rs.shape), np.broadcast_to(j, rs.shape)], rs)
    ag = plan.transfers(j[None, :], i[None, :], c * n + j[None, :], reduce=False,
                        label="all_gather", tag=1)
    plan.deps(ag, join[np.broadcast_to(c, ag.shape), np.broadcast_to(j, ag.shape)])
    plan.order(ag[1:], ag[:-1])
    return plan.build()

"""Topology-shaped all-reduce: two-level (scale-up + scale-out) and torus dimension-order.

Both are compositions of ring phases (collectives/_ring.py) whose shards nest: a later phase
splits the shard an earlier phase left on each rank, so every phase's shard is a contiguous
range of blocks and a rank's readiness carries over from one phase to the next per chunk.
"""
from __future__ import annotations

import math

import numpy as np

from collectives._plan import check_int
from collectives._ring import ring_phases
from collectives.all_reduce import _setup
from topo.errors import InputError


def _check_groups(n: int, group_size) -> int:
    if group_size is None:
        raise InputError("group_size = None: hierarchical collectives need the ranks per group "
                         "(e.g. GPUs per node); ranks are grouped in list order")
    g = check_int(group_size, "group_size")
    if n % g:
        raise InputError(f"group_size = {g}: {n} ranks do not split into equal groups of {g}")
    return g


def hierarchical_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, group_size=None,
                            protocol=None, fabric=None):
    """Groups of ``group_size`` consecutive ranks (one scale-up domain each). Phase 1: ring
    reduce-scatter inside each group, so local rank q holds shard q of its group's sum.
    Phase 2: ring all-reduce of shard q among the G ranks with local index q (one per group:
    the scale-out "rail"). Phase 3: ring all-gather inside each group. Scale-out traffic per
    rank is 2(G-1)/G * S/g instead of the flat ring's 2(n-1)/n * S."""
    from collectives._plan import check_ranks

    n = len(check_ranks(ranks))
    g = _check_groups(n, group_size)
    G = n // g
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: n, "hierarchical",
                           protocol=protocol, fabric=fabric,
                           per_chunk=lambda n: 2 * n * (g - 1) + 2 * n * (G - 1), n_groups=G)
    c = np.arange(C)
    groups = np.arange(n).reshape(G, g)  # groups[a, q]: rank of local index q in group a
    # block c*n + q*G + j: chunk c, intra shard q, inter piece j
    lo_intra = np.broadcast_to(c[None, None, :] * n + np.arange(g)[None, :, None] * G, (G, g, C))
    one = ring_phases(plan, groups, lo_intra, G, rs=True, ag=False,
                      labels=("intra_reduce_scatter", ""))
    rails = groups.T  # rails[q, a]
    lo_inter = (c[None, None, :] * n + np.arange(g)[:, None, None] * G +
                np.arange(G)[None, :, None])
    two = ring_phases(plan, rails, lo_inter, 1, rs=True, ag=True,
                      ready=one["last_recv"].transpose(1, 0, 2),
                      prev_send=one["last_send"].T,
                      labels=("inter_reduce_scatter", "inter_all_gather"), tag0=g - 1)
    ring_phases(plan, groups, lo_intra, G, rs=False, ag=True,
                ready=two["last_recv"].transpose(1, 0, 2), prev_send=two["last_send"].T,
                labels=("", "intra_all_gather"), tag0=g - 1 + 2 * (G - 1))
    plan.meta["group_size"] = g
    return plan.build()


def torus_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, dims=None, protocol=None,
                     fabric=None):
    """Dimension-order all-reduce on a torus: ranks are the torus nodes in row-major order of
    ``dims`` (last dimension fastest, as topo.builders.torus numbers them). Reduce-scatter
    along dimension 0 (a ring per line), then along dimension 1 on the shard left by
    dimension 0, ...; then all-gather in reverse order. Every ring is a physical ring of
    neighbours, and each phase's data shrinks by its dimension size."""
    from collectives._plan import check_ranks

    n = len(check_ranks(ranks))
    if dims is None:
        raise InputError("dims = None: torus all-reduce needs the torus dimensions, "
                         "e.g. dims=(4, 4)")
    try:
        dims = tuple(check_int(d, f"dims[{i}]") for i, d in enumerate(dims))
    except TypeError:
        raise InputError(f"dims = {dims!r}: expected a list of sizes") from None
    if not dims or math.prod(dims) != n:
        raise InputError(f"dims = {list(dims)}: the product {math.prod(dims)} must equal the "
                         f"number of ranks ({n})")
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: n, "torus",
                           protocol=protocol, fabric=fabric,
                           per_chunk=lambda n: 2 * n * sum(d - 1 for d in dims))
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    strides = np.array([math.prod(dims[j + 1:]) for j in range(len(dims))], dtype=np.int64)
    c = np.arange(C)
    ready = np.full((n, C), -1, dtype=np.int64)  # per rank: its data for the next phase
    last_send = np.full(n, -1, dtype=np.int64)
    active = [j for j, d in enumerate(dims) if d > 1]
    tag = 0

    def phase(j, rs):
        nonlocal ready, last_send, tag
        d, st = dims[j], strides[j]
        base = np.flatnonzero(coords[:, j] == 0)  # one ring per line along dimension j
        members = base[:, None] + np.arange(d)[None, :] * st  # (R, d)
        # shard q of a line = blocks whose leading coordinates (dims < j) match the line's and
        # whose coordinate j is q: a contiguous range of `st` blocks
        prefix = (coords[base][:, :j] * strides[:j]).sum(axis=1) if j else np.zeros(len(base),
                                                                                      np.int64)
        lo = (c[None, None, :] * n + prefix[:, None, None] + np.arange(d)[None, :, None] * st)
        out = ring_phases(plan, members, lo, st, rs=rs, ag=not rs,
                          ready=ready[members], prev_send=last_send[members],
                          labels=(f"dim{j}_reduce_scatter", f"dim{j}_all_gather"), tag0=tag)
        tag += d - 1
        ready = ready.copy()
        last_send = last_send.copy()
        ready[members] = out["last_recv"]
        last_send[members] = out["last_send"]

    for j in active:
        phase(j, True)
    for j in reversed(active):
        phase(j, False)
    plan.meta["dims"] = dims
    return plan.build()

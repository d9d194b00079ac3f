"""All-to-all and all-to-all-v: rank i sends a distinct piece to every rank j.

``nbytes`` = S, each rank's send buffer (n pieces of S/n, the piece for itself included), as
NCCL-tests counts it. All-to-all-v takes an (n, n) byte matrix ``M[i, j]`` (bytes rank i sends
to rank j) in place of nbytes. Block ``(i*n + j)*C + c`` is chunk c of the piece i -> j.
"""
from __future__ import annotations

import numpy as np

from collectives._plan import (Plan, check_chunks, check_int, check_latency, check_nbytes,
                               check_ranks, split)
from collectives.hierarchical import _check_groups
from netcore.sizes import MAX_BYTES
from topo.errors import InputError


def _matrix(ranks, nbytes, chunks, step_latency_s, algorithm, op, protocol=None, fabric=None):
    from collectives import protocols

    ranks = check_ranks(ranks)
    n = len(ranks)
    lat = protocols.costs(_protocol(algorithm, protocol),
                          check_latency(step_latency_s, allow_none=True), fabric, algorithm)
    chunks = 1 if chunks is None else chunks  # all pairs at once: nothing to pipeline
    if op == "all_to_all_v":
        M = _check_matrix(nbytes, n)
        C = check_chunks_v(chunks, M)
        total = _row_max(M)
    else:
        total = check_nbytes(nbytes)
        C = check_chunks(chunks, total, n, f"{algorithm} all_to_all over {n} ranks")
        M = np.broadcast_to(split(total, n), (n, n)).copy()
    plan = Plan(op, algorithm, ranks, total, C, lat, split(M, C).reshape(-1))
    plan.channels = protocols.channels(algorithm, n)
    plan.meta["layout"] = "pairs"  # block (i*n + j)*C + c: from i to j
    if op == "all_to_all_v":
        plan.meta["matrix"] = M
    return plan, n, C


def _protocol(algorithm, protocol):
    from collectives import protocols

    p = protocols.check_for(algorithm, protocol)
    if p == protocols.AUTO:
        raise InputError("protocol = 'auto': the schedule builders take a protocol name; "
                         "collectives.choose or collectives.protocols.best picks one")
    return p


def _check_matrix(M, n):
    try:
        A = np.asarray(M)
    except Exception:
        raise InputError("nbytes: all_to_all_v needs an (n, n) byte matrix") from None
    if A.shape != (n, n):
        raise InputError(f"nbytes: all_to_all_v needs a {n}x{n} byte matrix (one row per "
                         f"rank), got shape {A.shape}")
    if not (np.issubdtype(A.dtype, np.integer) or
            (np.issubdtype(A.dtype, np.floating) and np.all(np.mod(A, 1) == 0))):
        raise InputError("nbytes: the all_to_all_v matrix must hold whole numbers of bytes")
    # before the cast, which wraps (uint64) or is undefined (floats) past int64
    over = A >= 2**63 if np.issubdtype(A.dtype, np.integer) else ~(A < 2.0**63)
    if over.any():
        i, j = np.argwhere(over)[0]
        raise InputError(f"nbytes[{i}][{j}] = {A[i, j].item()!r}: larger than the "
                         f"{MAX_BYTES} bytes an int64 holds")
    A = A.astype(np.int64)
    if (A < 0).any():
        i, j = np.argwhere(A < 0)[0]
        raise InputError(f"nbytes[{i}][{j}] = {int(A[i, j])}: bytes must be >= 0")
    off = A[~np.eye(n, dtype=bool)]
    if not (off > 0).any():  # not off.sum() <= 0: the sum wraps past int64
        raise InputError("nbytes: the all_to_all_v matrix moves no bytes between ranks")
    return A


def check_chunks_v(chunks, M: np.ndarray) -> int:
    """Chunks of an all-to-all-v: at most the largest piece a rank sends (an entry off the
    diagonal), so that some piece gives every chunk a byte. Smaller pieces may leave their
    last chunks empty, as a zero entry sends an empty message; past the largest every chunk
    beyond it would be empty for every pair. Unchecked, chunks = 2**70 died in the block
    layout with an OverflowError (and the estimate priced 4.7e15 s), and a million chunks over
    a 10-byte matrix laid a million empty transfers per pair."""
    C = check_int(chunks, "chunks")
    if C > 1:
        off = np.where(np.eye(len(M), dtype=bool), 0, M)
        i, j = (int(x) for x in np.unravel_index(int(np.argmax(off)), off.shape))
        most = int(off[i, j])
        if C > most:
            raise InputError(f"chunks = {C}: the largest all_to_all_v piece, nbytes[{i}][{j}], "
                             f"is {most} bytes, too few for {C} non-empty chunks (at most "
                             f"{most})")
    return C


def _row_max(M) -> int:
    """The most bytes a rank sends (a row's sum), exact: in Python integers when the int64
    sums could wrap; beyond int64 an InputError naming the row."""
    if float(M.astype(np.float64).sum(axis=1).max()) < 2.0**62:
        return int(M.sum(axis=1).max())
    rows = [sum(r) for r in M.tolist()]
    i = max(range(len(rows)), key=rows.__getitem__)
    if rows[i] > MAX_BYTES:
        raise InputError(f"nbytes[{i}]: rank {i} sends {rows[i]:,} bytes in all, beyond the "
                         f"{MAX_BYTES:,} an int64 holds")
    return rows[i]


def _pairs(n):
    return np.nonzero(~np.eye(n, dtype=bool))


def direct_all_to_all(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                      fabric=None, *, _op="all_to_all"):
    """Every rank sends every piece at once: n(n-1) concurrent transfers (per chunk)."""
    plan, n, C = _matrix(ranks, nbytes, chunks, step_latency_s, "direct", _op, protocol,
                         fabric)
    i, j = _pairs(n)
    c = np.arange(C)[:, None]
    ids = plan.transfers(i[None, :], j[None, :], (i * n + j)[None, :] * C + c, reduce=False,
                         label="all_to_all", tag=0)
    plan.order(ids[1:], ids[:-1])
    return plan.build()


def pairwise_all_to_all(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                        fabric=None, *, _op="all_to_all"):
    """Shift exchange (MPI's pairwise algorithm for any n): in round k = 1..n-1 rank i sends to
    i+k and receives from i-k; a round starts when the rank's previous send and receive are
    done, so at most one piece per rank is in flight."""
    plan, n, C = _matrix(ranks, nbytes, chunks, step_latency_s, "pairwise", _op, protocol,
                         fabric)
    i = np.arange(n)
    ids = np.empty((n - 1, n, C), dtype=np.int64)
    for k in range(1, n):
        j = (i + k) % n
        ids[k - 1] = plan.transfers(i[:, None], j[:, None],
                                    (i * n + j)[:, None] * C + np.arange(C)[None, :],
                                    reduce=False, label="all_to_all", tag=k)
    plan.order(ids[:, :, 1:], ids[:, :, :-1])
    plan.order(ids[1:, :, 0], ids[:-1, :, -1])  # own previous send
    recv_prev = np.stack([ids[k - 1][(i - k) % n, -1] for k in range(1, n)])  # into i, round k
    plan.deps(ids[1:, :, 0], recv_prev[:-1])
    return plan.build()


def hierarchical_all_to_all(ranks, nbytes, chunks=None, step_latency_s=None, group_size=None,
                            leader="node", protocol=None, fabric=None, *, _op="all_to_all"):
    """Groups of ``group_size`` consecutive ranks (one node each).

    ``leader="node"`` (one scale-out port per node, MPI-style): pieces within a node go
    directly; every rank gathers its off-node pieces at local rank 0 (intra-node gather), the
    node leaders exchange one aggregated message per node pair (inter-node exchange), and each
    leader scatters what it received to its local ranks (intra-node scatter).

    ``leader="rail"`` (one NIC per GPU on rail-optimised fabrics, as NCCL's PXN does): rank
    (a, l) first hands local rank l' everything destined to local index l' on any node
    (intra-node step, which also delivers on-node pieces); then (a, l') sends one aggregated
    message to each (b, l') over its own rail. Data lands at its destination, so no scatter.
    """
    plan, n, C = _matrix(ranks, nbytes, chunks, step_latency_s, "hierarchical", _op,
                         protocol, fabric)
    g = _check_groups(n, group_size)
    if leader not in ("node", "rail"):
        raise InputError(f"leader = {leader!r}: expected 'node' or 'rail'")
    G = n // g
    c = np.arange(C)
    a_of = np.arange(n) // g
    l_of = np.arange(n) % g
    plan.meta.update(group_size=g, leader=leader)
    if leader == "rail":
        li, lj = _pairs(g)  # local pairs l != l'
        a = np.repeat(np.arange(G), len(li))
        src = a * g + np.tile(li, G)
        dst = a * g + np.tile(lj, G)
        one = plan.transfers(src[:, None], dst[:, None],
                             (src * n + l_of[dst])[:, None] * C + c[None, :], n=G, s=g * C,
                             reduce=False, label="intra_rail_gather", tag=0)
        plan.order(one[:, 1:], one[:, :-1])
        join = plan.joins(np.broadcast_to(np.arange(n)[:, None], (n, C)), label="gathered")
        plan.deps(join[dst[:, None], c[None, :]], one)
        ai, bi = _pairs(G)
        l = np.arange(g)
        src = (ai[:, None] * g + l[None, :]).reshape(-1)
        dst = (bi[:, None] * g + l[None, :]).reshape(-1)
        lo = ((a_of[src] * g) * n + dst)[:, None] * C + c[None, :]
        two = plan.transfers(src[:, None], dst[:, None], lo, n=g, s=n * C, reduce=False,
                             label="inter_rail_exchange", tag=1)
        plan.deps(two, join[src])
        plan.order(two[:, 1:], two[:, :-1])
        return plan.build()

    # leader = "node"
    li, lj = _pairs(g)
    a = np.repeat(np.arange(G), len(li))
    src = a * g + np.tile(li, G)
    dst = a * g + np.tile(lj, G)
    direct = plan.transfers(src[:, None], dst[:, None], (src * n + dst)[:, None] * C + c[None, :],
                            reduce=False, label="intra_direct", tag=0)
    plan.order(direct[:, 1:], direct[:, :-1])
    leaders = np.arange(G) * g
    gather_parts = []
    nonlead = np.flatnonzero(l_of > 0)
    # for each non-leader rank, the off-node rank ranges before / after its own node: the
    # destinations it gathers to its leader, and later the sources its leader scatters to it
    off_node = []
    for part in (0, 1):
        start = np.where(part == 0, 0, (a_of[nonlead] + 1) * g)
        count = np.where(part == 0, a_of[nonlead] * g, n - (a_of[nonlead] + 1) * g)
        off_node.append((start, count, count > 0))
    for start, count, sel in off_node:
        s_ = nonlead[sel]
        if not s_.size:
            continue
        ids = plan.transfers(s_[:, None], (a_of[s_] * g)[:, None],
                             (s_ * n + start[sel])[:, None] * C + c[None, :],
                             n=count[sel][:, None], s=C, reduce=False, label="intra_gather",
                             tag=1)
        plan.order(ids[:, 1:], ids[:, :-1])
        gather_parts.append((a_of[s_], ids))
    gathered = plan.joins(np.broadcast_to(np.arange(G)[:, None], (G, C)) * g, label="gathered")
    for a_s, ids in gather_parts:
        plan.deps(gathered[a_s[:, None], c[None, :]], ids)
    ai, bi = _pairs(G)
    lo = ((ai * g) * n + bi * g)[:, None] * C + c[None, :]
    exch = plan.transfers(leaders[ai][:, None], leaders[bi][:, None], lo, n=g, s=C, n2=g,
                          s2=n * C, reduce=False, label="inter_exchange", tag=2)
    plan.deps(exch, gathered[ai])
    plan.order(exch[:, 1:], exch[:, :-1])
    received = plan.joins(np.broadcast_to(leaders[:, None], (G, C)), label="exchanged")
    plan.deps(received[bi], exch)
    for start, count, sel in off_node:
        d_ = nonlead[sel]
        if not d_.size:
            continue
        ids = plan.transfers((a_of[d_] * g)[:, None], d_[:, None],
                             (start[sel] * n + d_)[:, None] * C + c[None, :],
                             n=count[sel][:, None], s=n * C, reduce=False,
                             label="intra_scatter", tag=3)
        plan.deps(ids, received[a_of[d_]])
        plan.order(ids[:, 1:], ids[:, :-1])
    return plan.build()


def direct_all_to_all_v(ranks, matrix, chunks=None, step_latency_s=None, protocol=None,
                        fabric=None):
    """All-to-all-v, direct: ``matrix[i][j]`` bytes from rank i to rank j, all at once (the
    diagonal stays local). Zero entries still exchange an empty message, as MPI does."""
    return direct_all_to_all(ranks, matrix, chunks, step_latency_s, protocol, fabric,
                             _op="all_to_all_v")


def pairwise_all_to_all_v(ranks, matrix, chunks=None, step_latency_s=None, protocol=None,
                          fabric=None):
    """All-to-all-v with the shift exchange (n-1 rounds)."""
    return pairwise_all_to_all(ranks, matrix, chunks, step_latency_s, protocol, fabric,
                               _op="all_to_all_v")


def hierarchical_all_to_all_v(ranks, matrix, chunks=None, step_latency_s=None, group_size=None,
                              leader="node", protocol=None, fabric=None):
    """All-to-all-v through node leaders or rails (see hierarchical_all_to_all)."""
    return hierarchical_all_to_all(ranks, matrix, chunks, step_latency_s, group_size, leader,
                                   protocol, fabric, _op="all_to_all_v")

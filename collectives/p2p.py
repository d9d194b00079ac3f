"""Point-to-point send/recv, e.g. activations between pipeline-parallel stages.

``nbytes`` = S, the message size of every pair. By default rank k sends to rank k+1 for
k = 0..n-2 (a pipeline's stage boundaries, all at once); ``pairs`` lists (src, dst) rank
indices instead. Block ``p*C + c`` is chunk c of pair p; chunks of a pair go in sequence.
"""
from __future__ import annotations

import numpy as np

from collectives._plan import (Plan, check_chunks, check_latency, check_nbytes, check_ranks,
                               chunked_layout)
from topo.errors import InputError


def _check_pairs(pairs, n):
    if pairs is None:
        return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    try:
        A = np.asarray(pairs)
    except (TypeError, ValueError):
        raise InputError(f"pairs = {pairs!r}: expected a list of (src, dst) rank indices") from None
    if A.ndim != 2 or A.shape[1] != 2 or not len(A):
        raise InputError(f"pairs = {pairs!r}: expected a non-empty list of (src, dst) pairs")
    # whole numbers only: the int64 cast truncated (0.5, 1) to (0, 1) and took True for 1
    whole = np.issubdtype(A.dtype, np.integer) or (
        np.issubdtype(A.dtype, np.floating) and np.isfinite(A).all() and
        (np.mod(A, 1) == 0).all())
    if not whole:
        bad = 0
        if np.issubdtype(A.dtype, np.floating):
            ok = np.isfinite(A) & (np.mod(np.nan_to_num(A), 1) == 0)
            bad = int(np.flatnonzero((~ok).any(axis=1))[0])
        raise InputError(f"pairs[{bad}] = {A[bad].tolist()}: expected (src, dst) rank indices "
                         f"(whole numbers)")
    P = A.astype(np.int64)
    bad = np.flatnonzero(((P < 0) | (P >= n)).any(axis=1))
    if bad.size:
        raise InputError(f"pairs[{int(bad[0])}] = {P[bad[0]].tolist()}: rank indices must be "
                         f"in 0..{n - 1}")
    bad = np.flatnonzero(P[:, 0] == P[:, 1])
    if bad.size:
        raise InputError(f"pairs[{int(bad[0])}] = {P[bad[0]].tolist()}: a rank cannot send "
                         f"to itself")
    return P


def send_recv(ranks, nbytes, chunks=None, step_latency_s=None, pairs=None, protocol=None,
              fabric=None):
    """One message of ``nbytes`` per pair, all pairs concurrently."""
    from collectives import protocols
    from collectives.all_to_all import _protocol

    ranks = check_ranks(ranks)
    nbytes = check_nbytes(nbytes)
    P = _check_pairs(pairs, len(ranks))
    C = check_chunks(1 if chunks is None else chunks, nbytes, 1, "send_recv")
    lat = protocols.costs(_protocol("direct", protocol),
                          check_latency(step_latency_s, allow_none=True), fabric)
    plan = Plan("send_recv", "direct", ranks, nbytes, C, lat,
                np.tile(chunked_layout(nbytes, C, 1), len(P)))
    c = np.arange(C)[None, :]
    ids = plan.transfers(P[:, 0:1], P[:, 1:2], np.arange(len(P))[:, None] * C + c,
                         reduce=False, label="send_recv", tag=0)
    plan.order(ids[:, 1:], ids[:, :-1])
    plan.meta["pairs"] = P
    return plan.build()

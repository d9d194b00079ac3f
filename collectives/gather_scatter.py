"""Reduce-scatter and all-gather.

``nbytes`` is NCCL-tests' S: the *total* array, n shards of S/n. Reduce-scatter: every rank
inputs S bytes and ends with its shard (S/n) of the sum. All-gather: every rank inputs its
shard of S/n bytes and ends with all S bytes. Shard q of chunk c is block ``c*n + q`` and
belongs to rank index q (``meta['block_owner']``).
"""
from __future__ import annotations

import numpy as np

from collectives._ring import ring_phases
from collectives.all_reduce import _setup
from collectives.rail import ring_blocks, ring_members


def _owner(plan, n):
    plan.meta["block_owner"] = np.arange(len(plan.block_bytes), dtype=np.int64) % n


def ring_reduce_scatter(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                        fabric=None, per_node=None):
    """n-1 ring steps; rank p sends shard p-k-1 at step k and ends owning shard p. On whole
    two_tier nodes, one ring per rail (collectives/rail.py), as for all-reduce."""
    members = ring_members(fabric, ranks, per_node)
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: members.size,
                           "ring", op="reduce_scatter", protocol=protocol, fabric=fabric,
                           lanes=len(members))
    ring_phases(plan, members, ring_blocks(members, C), 1, rs=True, ag=False)
    _owner(plan, n)
    return plan.build()


def direct_reduce_scatter(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                        fabric=None):
    """Every rank sends shard j of its input to rank j at once; one step of n(n-1) transfers."""
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: n, "direct",
                           op="reduce_scatter", protocol=protocol,
                           fabric=fabric)
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    c = np.arange(C)[:, None]
    ids = plan.transfers(i[None, :], j[None, :], c * n + j[None, :], reduce=True,
                         label="reduce_scatter", tag=0)
    plan.order(ids[1:], ids[:-1])
    _owner(plan, n)
    return plan.build()


def ring_all_gather(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                        fabric=None, per_node=None):
    """n-1 ring steps; rank p forwards shard p-k at step k. On whole two_tier nodes, one ring
    per rail (collectives/rail.py)."""
    members = ring_members(fabric, ranks, per_node)
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: members.size,
                           "ring", op="all_gather", protocol=protocol, fabric=fabric,
                           lanes=len(members))
    ring_phases(plan, members, ring_blocks(members, C), 1, rs=False, ag=True)
    _owner(plan, n)
    return plan.build()


def direct_all_gather(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
                        fabric=None):
    """Every rank sends its shard to every other rank at once."""
    plan, n, C, P = _setup(ranks, nbytes, chunks, step_latency_s, lambda n: n, "direct",
                           op="all_gather", protocol=protocol,
                           fabric=fabric)
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    c = np.arange(C)[:, None]
    ids = plan.transfers(j[None, :], i[None, :], c * n + j[None, :], reduce=False,
                         label="all_gather", tag=0)
    plan.order(ids[1:], ids[:-1])
    _owner(plan, n)
    return plan.build()

"""Plane striping on the packet engine: a transfer becomes one connection per plane.

On a fabric a single-path policy stripes over (``Routing.planes``: fullflat), the flow engine
splits each flow's rate evenly over its per-plane paths (``topo.routing``, "Plane striping").
The packet engine's connections send their packets along one path, so it stripes the way NCCL
does with one NIC per plane: every host-to-host transfer of at least ``planes`` bytes becomes
``planes`` transfers of (nearly) equal bytes, piece j routed inside plane j
(``Routing.plane_paths``), each its own connection with its own congestion control, as NCCL's
channels run one queue pair per NIC. Per-packet round-robin over the plane paths inside one
connection would instead reorder a TCP stream whenever the planes' queues differ, and give
DCQCN one rate for links that congest independently.

The pieces wait for the transfer's parents and its children wait for every piece; after the
run a transfer started with its first piece and ended with its last (``fold_back``), so callers
see their own schedule. Faults: a piece whose plane is cut for its pair is re-routed over the
surviving planes (the policy's choice there, ``Routing.unstriped``); its bytes move, nothing
is stranded while any plane connects the pair.
"""
from __future__ import annotations

import numpy as np

from netcore.schedule import TRANSFER, Schedule, with_pieces
from topo.routing import _merge


def split(schedule: Schedule, n_hosts: int, planes: int):
    """(schedule with every stripable transfer split into ``planes`` pieces, ``origin``: the
    original node of every node, ``plane``: the plane of every node, -1 for nodes not split
    and for the joins that wait for a split transfer's pieces); None when nothing is split."""
    n = schedule.n
    size = schedule.size
    cut = np.flatnonzero((schedule.kind == TRANSFER) & (schedule.src < n_hosts) &
                         (schedule.dst < n_hosts) & (schedule.src != schedule.dst) &
                         (size >= planes))
    if planes < 2 or not len(cut):
        return None
    # the transfer itself keeps plane 0; bytes: S // planes each, the first S % planes
    # pieces one more
    mask = np.zeros(n, dtype=bool)
    mask[cut] = True
    new_size, orig, piece_plane, piece_size = pieces_of(size, planes, mask)
    c = len(orig)
    # the pieces wait for their original's parents; a split transfer's children wait for its
    # join, which waits for every piece (netcore.schedule.piece_edges)
    out, origin = with_pieces(schedule, orig, size=np.concatenate([new_size, piece_size]))
    plane = np.full(out.n, -1, dtype=np.int64)
    plane[cut] = 0
    plane[n:n + c] = piece_plane
    return out, origin, plane


def paths(routing, src, dst, keys, plane, alive):
    """Paths of transfers (the core's single paths): a piece inside its plane, or, where that
    plane is cut for its pair and for nodes not split, the unstriped route."""
    whole = routing.unstriped()
    parts = []
    rest = np.flatnonzero(plane < 0)
    for p in range(routing.planes):
        idx = np.flatnonzero(plane == p)
        if not len(idx):
            continue
        got = routing.plane_paths(src[idx], dst[idx], p, flow_id=keys[idx], alive=alive)
        ok = np.asarray(got.reachable, dtype=bool)
        parts.append((idx[ok], got.take(ok)))
        rest = np.concatenate([rest, idx[~ok]])
    if len(rest):
        parts.append((rest, whole.paths(src[rest], dst[rest], flow_id=keys[rest], alive=alive)))
    return _merge(len(src), parts)


def fold_back(res, origin: np.ndarray, n: int, plane: np.ndarray | None = None):
    """Result of the split schedule -> result of the ``n`` original transfers, piece i of
    ``origin[i]`` (netcore.result.fold_onto: a transfer started with its earliest piece and
    ended with its latest); also for incremental runs, whose pieces follow each call's.
    ``plane``: ``split``'s, which tells the pieces (plane > 0) from the joins."""
    from netcore.result import fold_onto

    res = fold_onto(res, origin, n)
    # the pieces beyond the transfers themselves (not the joins that wait for them)
    res.info["plane_pieces"] = int(len(origin) - n if plane is None else
                                   np.count_nonzero(plane[n:] > 0))
    return res


def pieces_of(size: np.ndarray, planes: int, cut: np.ndarray):
    """For transfers of ``size`` bytes split where ``cut``: (the bytes the transfer itself
    keeps, as plane 0; index of the transfer of every further piece; its plane; its bytes),
    the same cut as ``split``."""
    size = np.asarray(size, dtype=np.int64)
    idx = np.flatnonzero(cut)
    k = planes - 1
    base, rem = size[idx] // planes, size[idx] % planes
    keep = size.copy()
    keep[idx] = base + (rem > 0)
    orig = np.repeat(idx, k)
    piece_plane = np.tile(np.arange(1, planes, dtype=np.int64), len(idx))
    piece_size = np.repeat(base, k) + (piece_plane < np.repeat(rem, k))
    return keep, orig, piece_plane, piece_size

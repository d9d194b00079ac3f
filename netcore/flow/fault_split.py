"""Where a fault breaks a member set's symmetry, its affected members move on their own.

A member set moves in lock step: one rate for all members. That is exact while every member
sees the same contention, which a fault breaks: a member behind a degraded or failed link is
slowed (or re-routed) while the others are not, and in lock step the whole set would wait for
it at every instant instead of only at the end. So before a run with faults, every aggregated
transfer whose set has members whose path touches a faulted link is split: the unaffected
members keep one (smaller) set, and each affected member becomes a transfer of its own with the
same dependencies (same parents; every child waits for all the pieces). The rest of the job
keeps the scalable form. After the run the pieces' times are folded back onto the original node
(start = earliest piece, end = latest), so callers see their own schedule.
"""
from __future__ import annotations

import numpy as np

from netcore.flow.member_routing import route_members
from netcore.members import MemberSets
from netcore.schedule import TRANSFER, Schedule, connection_keys, with_pieces
from topo.routing import spans
from topo.arrays import unique


def affected_members(schedule: Schedule, routing, faults, memo=None) -> np.ndarray | None:
    """bool per member of ``schedule.sets``: its initial path touches a link that has a fault
    event. None when there is nothing to split."""
    if not len(faults) or not schedule.has_members:
        return None
    ms = schedule.sets
    t = schedule.kind == TRANSFER
    pos = ms.positions(unique(schedule.mset[t & (schedule.mset >= 0)]))
    p = route_members(routing, ms, pos, memo=memo)
    faulted = np.zeros(routing.topology.n_dlinks, bool)
    faulted[np.asarray(faults.dlink, dtype=np.int64)] = True
    owner = np.repeat(np.arange(len(pos)), np.diff(p.ptr))
    hit = np.zeros(len(pos), bool)
    hit[owner[faulted[np.asarray(p.link, dtype=np.int64)]]] = True
    out = np.zeros(ms.n_members, bool)
    out[pos[hit]] = True
    return out if out.any() else None


def _alone(ms: MemberSets, affected: np.ndarray):
    """``(owner, n_bad, alone)``: each member's set, the affected members of each set, and the
    members a node naming their set leaves alone: every affected one, except that where every
    member of a set is affected its first stays on the node."""
    owner = np.repeat(np.arange(ms.n_sets), ms.sizes)
    n_bad = np.bincount(owner[affected], minlength=ms.n_sets)
    alone = affected.copy()
    alone[ms.ptr[:-1][n_bad == ms.sizes]] = False
    return owner, n_bad, alone


def added_nodes(schedule: Schedule, affected: np.ndarray) -> int:
    """At most how many nodes ``split`` adds: a piece per node and member it leaves alone, and
    a join per node split (only those with children get one)."""
    ms = schedule.sets
    owner, n_bad, alone = _alone(ms, affected)
    n_alone = np.bincount(owner[alone], minlength=ms.n_sets)
    named = schedule.mset[(schedule.kind == TRANSFER) & (schedule.mset >= 0)]
    return int(n_alone[named].sum()) + int(np.count_nonzero(n_bad[named]))


def split(schedule: Schedule, affected: np.ndarray) -> tuple[Schedule, np.ndarray]:
    """The schedule with affected members split off (module docstring), and ``origin``: for
    every node of the new schedule, the original node it is (a piece or the join of)."""
    ms = schedule.sets
    owner, n_bad, alone = _alone(ms, affected)
    hit_sets = unique(owner[affected])
    # per hit set: the unaffected members as a new set (or none), the affected ones listed;
    # vectorised over sets and nodes (a MoE step splits hundreds of thousands of pieces)
    n_good = ms.sizes - n_bad
    keep_set = np.arange(ms.n_sets, dtype=np.int64)  # the set a node of set s keeps
    first_alone = np.full(ms.n_sets, -1, dtype=np.int64)  # s empties: the node takes member
    with_good = hit_sets[n_good[hit_sets] > 0]
    emptied = hit_sets[n_good[hit_sets] == 0]
    keep_set[with_good] = ms.n_sets + np.arange(len(with_good))
    keep_set[emptied] = -1
    first_alone[emptied] = ms.ptr[emptied]  # every member is affected: the first one
    good_pos = np.flatnonzero(~affected & np.isin(owner, with_good))  # in set order
    new_ptr = ms.ptr[-1] + np.cumsum(n_good[with_good])
    sets = MemberSets(np.concatenate([ms.ptr, new_ptr]),
                      np.concatenate([ms.src, ms.src[good_pos]]),
                      np.concatenate([ms.dst, ms.dst[good_pos]]))
    # the members each hit set's nodes leave alone, in set order (an emptied set's first
    # member stays on the node itself)
    alone_pos = np.flatnonzero(alone)
    n_alone = np.bincount(owner[alone_pos], minlength=ms.n_sets)
    alone_ptr = np.concatenate([[0], np.cumsum(n_alone)])
    t = schedule.kind == TRANSFER
    nodes = np.flatnonzero(t & np.isin(schedule.mset, hit_sets))
    mset = schedule.mset.copy()
    src, dst = schedule.src.copy(), schedule.dst.copy()
    s_of = schedule.mset[nodes]
    mset[nodes] = keep_set[s_of]
    lone = first_alone[s_of] >= 0
    src[nodes[lone]] = ms.src[first_alone[s_of[lone]]]
    dst[nodes[lone]] = ms.dst[first_alone[s_of[lone]]]
    # pieces: one new node per (node, member it leaves alone)
    k = n_alone[s_of]
    orig = np.repeat(nodes, k)
    mem = alone_pos[spans(alone_ptr[s_of], k)]
    c = len(orig)
    # a member moving alone hashes as its own connection, as in the full form
    conn = np.concatenate([schedule.conn, connection_keys(ms.src[mem], ms.dst[mem])])
    conn[nodes[lone]] = connection_keys(src[nodes[lone]], dst[nodes[lone]])
    # the pieces wait for their original's parents; a split node's children wait for its
    # join, which waits for every piece (netcore.schedule.piece_edges)
    out, origin = with_pieces(schedule, orig, sets=sets,
                              src=np.concatenate([src, ms.src[mem]]),
                              dst=np.concatenate([dst, ms.dst[mem]]),
                              mset=np.concatenate([mset, np.full(c, -1)]), conn=conn)
    return out, origin


def fold_back(res, origin: np.ndarray, n: int, pieces: int):
    """Result of the split schedule -> result of the original (netcore.result.fold_onto: a
    node started with its earliest piece and ended with its latest, unfinished if any piece
    is; flags any piece's, counts summed). ``pieces``: how many nodes were split off (the
    rest of ``origin`` beyond ``n`` are the joins that wait for them)."""
    from netcore.result import fold_onto

    res = fold_onto(res, origin, n)
    res.info["split_pieces"] = int(pieces)
    return res

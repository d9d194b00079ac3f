"""Where routing leaves a member set uneven, its outlier members move on their own.

A member set moves in lock step: one rate for all members (``netcore.members``). That is exact
while every member sees the same contention. Faults break it (``fault_split``), and so can
hashing with no fault at all: ECMP puts two connections of different rings on one spine link,
each gets half of it, while the other connections of their rings have links of their own. In
lock step the whole ring then runs at the collided connection's rate at every instant, where
the full form only slows that connection, and its ring's other connections finish their steps
and free their links. On the MoE row of the auto-against-full table that cost +1.07% of step
time (docs/scale.md).

The test is static: a member's share is the least, over the links of its path, of capacity
over the member paths (of every set) crossing that link. A member whose share is below its
set's best member's is an outlier, and is split off exactly as a member behind a fault
(``fault_split.split``): it becomes a transfer of its own with the same dependencies, and the
set's other members keep one smaller set.

A set of independent transfers (every node naming it is one step: an all-to-all's class of
pairs, compute/pair_classes.py; the same pipeline send of every replica) is also tested on its
own: the members' share counting only that set's member paths. Its members run at one time, so
two of them hashed onto one spine link slow each other whenever the set runs, which the count
over every set of the step (most of which run at other times) dilutes. A ring stream (more
than one step) is not: its connections wait for one another at every step in the full form
too, so a collision among them slows the whole ring there as well.

Splitting costs one flow per outlier for every node naming the set. On a fabric where hashing
makes nearly every set uneven (FullFlat's 8 planes under ECMP), repairing all of them would
approach the full form's size (GPT-3 175B on 2,048 GPUs: 544,155 pieces against 37,480
flows). So sets are repaired in order of how uneven they are (best share over worst share;
ties by set id), whole sets at a time, while the pieces stay within ``budget``: by default as
many as the scalable form's own flows, and at least ``MIN_BUDGET`` (a step whose all-to-alls
are a few classes of pairs has few flows, and its few hundred thousand pieces cost the engine
seconds), so the engine's work stays within a small factor.
"""
from __future__ import annotations

import numpy as np

from netcore.flow.member_routing import route_members
from netcore.schedule import TRANSFER, Schedule
from topo.arrays import unique


MIN_BUDGET = 200_000  # pieces the repair may always add (module docstring)


def _one_step_sets(schedule: Schedule, used: np.ndarray) -> np.ndarray:
    """bool per set of ``used``: every transfer naming it is a single step."""
    t = (schedule.kind == TRANSFER) & (schedule.mset >= 0)
    multi = unique(schedule.mset[t & (schedule.steps > 1)])
    return ~np.isin(used, multi)


def _own_share(owner, link, weight, cap, set_of, n_links, which) -> np.ndarray:
    """Per member: the least, over its path, of capacity over the weight of its own set's
    member paths on that link (inf for members of sets not in ``which``)."""
    sel = which[set_of][owner]
    key = set_of[owner[sel]] * np.int64(n_links) + link[sel]  # (set, link)
    at = np.searchsorted(unique(key), key)
    load = np.bincount(at, weights=weight[sel])
    out = np.full(len(set_of), np.inf)
    np.minimum.at(out, owner[sel], cap[link[sel]] / load[at])
    return out


def _best_worst(share, set_of, n_sets) -> tuple[np.ndarray, np.ndarray]:
    """The largest and the least ``share`` of the members of each set."""
    best = np.zeros(n_sets)
    worst = np.full(n_sets, np.inf)
    np.maximum.at(best, set_of, share)
    np.minimum.at(worst, set_of, share)
    return best, worst


def outlier_members(schedule: Schedule, routing, budget: int | None = None,
                    memo=None) -> np.ndarray | None:
    """bool per member of ``schedule.sets``: split it off (module docstring). None when no
    set is uneven, or none fits the budget. ``memo``: member_routing.MemberPathMemo."""
    if not schedule.has_members:
        return None
    ms = schedule.sets
    t = schedule.kind == TRANSFER
    named = schedule.mset[t & (schedule.mset >= 0)]
    used, uses = np.unique(named, return_counts=True)  # nodes naming each set
    pos = ms.positions(used)
    p = route_members(routing, ms, pos, memo=memo)
    link = np.asarray(p.link, dtype=np.int64)
    n_links = routing.topology.n_dlinks
    load = np.bincount(link, weights=np.asarray(p.weight, dtype=np.float64), minlength=n_links)
    cap = np.asarray(routing.topology.dlink_bw, dtype=np.float64)
    owner = np.repeat(np.arange(len(pos)), np.diff(p.ptr))  # member (index into pos)
    share = np.full(len(pos), np.inf)
    np.minimum.at(share, owner, cap[link] / load[link])
    set_of = np.repeat(np.arange(len(used)), ms.sizes[used])  # index into used
    best, worst = _best_worst(share, set_of, len(used))
    # exact comparison of floats computed identically: members on equal links tie exactly
    outlier = share < best[set_of]
    uneven_by = best / worst  # how uneven each set is: repaired most uneven first
    one_step = _one_step_sets(schedule, used)
    if one_step.any():
        own = _own_share(owner, link, np.asarray(p.weight, dtype=np.float64), cap,
                         set_of, n_links, one_step)
        best_own, worst_own = _best_worst(own, set_of, len(used))
        outlier |= own < best_own[set_of]
        with np.errstate(invalid="ignore"):  # inf / inf for the sets not tested on their own
            uneven_by = np.where(one_step, np.maximum(uneven_by, best_own / worst_own),
                                 uneven_by)
    n_out = np.bincount(set_of, weights=outlier, minlength=len(used)).astype(np.int64)
    uneven = np.flatnonzero(n_out > 0)
    if not uneven.size:
        return None
    cost = n_out[uneven] * uses[uneven]
    order = np.lexsort((used[uneven], -uneven_by[uneven]))
    limit = max(int(t.sum()), MIN_BUDGET) if budget is None else int(budget)
    take = uneven[order][np.cumsum(cost[order]) <= limit]
    if not take.size:
        return None
    chosen = np.zeros(len(used), bool)
    chosen[take] = True
    out = np.zeros(ms.n_members, bool)
    out[pos[outlier & chosen[set_of]]] = True
    return out

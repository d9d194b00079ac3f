"""Which transfers of one DAG depth can run at the same time (the contention model's
concurrency estimate, netcore/flow/contention.py; docs/flow_engine.md "The contention model").

Transfers at one depth of the dependency DAG were all counted as sharing a link. Transfers
with no dependencies whose start times (``Schedule.start``) are far apart never overlap: eight
1 MiB flows leaving one host 1 ms apart (100 Gb/s, each done in 85 us) ran at the 8-flow
efficiency (tcp: 121.1 us each against 84.9 us fluid and 88.1 us in the packet engine).

Every transfer gets an *active interval* ``[lo, hi)``:

* ``lo``: its earliest possible start, the longest path to it through the DAG where every
  node takes its shortest possible time (a compute or delay node its duration, a transfer
  ``tail + max over its path entries of size x weight / bandwidth``: alone on its links),
  and no node starts before its own start time;
* ``hi``: the same pass with every transfer taking an estimate of its time when it shares
  its links, ``tail + max over its entries of size x (weight / w) x n / bandwidth``, where
  ``n`` is the largest number of transfers (weighted as the model counts them, ``w =
  max(weight, 1)``) active at once on that link in its phase, plus that time.

Within one depth the transfers form *time windows*: sorted by ``lo``, a window ends where
the next transfer starts at or after every earlier one's ``hi``. A (depth, window) pair is a
*phase*; the contention model groups by (link, phase) where it grouped by (link, depth), and
a link's ``flows`` in a phase is the largest weighted number of its transfers whose
intervals overlap at one instant (a sweep over the interval ends; an end and a start at the
same instant do not overlap). Longer durations widen the intervals, which can only merge
windows and raise the counts, which lengthens the durations again: the estimate is iterated
from the alone times until the counts stop changing (monotone, so it ends; after
``MAX_ROUNDS`` the last round's counts stand). Where every transfer of a depth starts together
(an all-to-all, a collective step) the intervals of a depth share their first instant: one window per depth
and every transfer counted, the depth grouping exactly.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from netcore.flow import _kernels as K

MAX_ROUNDS = 64


@nb.njit(cache=True)
def earliest_starts(ndeps, cptr, cidx, start, dur):
    """Earliest start of every node of a DAG (children ``cidx[cptr[i]:cptr[i+1]]``,
    ``ndeps`` parents per node) when node ``i`` takes ``dur[i]`` and starts no earlier than
    ``start[i]`` and its parents' ends (Kahn's order)."""
    n = len(ndeps)
    left = ndeps.copy()
    est = start.copy()
    queue = np.empty(n, dtype=np.int64)
    head = 0
    tail = 0
    for i in range(n):
        if left[i] == 0:
            queue[tail] = i
            tail += 1
    while head < tail:
        i = queue[head]
        head += 1
        end = est[i] + dur[i]
        for e in range(cptr[i], cptr[i + 1]):
            c = cidx[e]
            if end > est[c]:
                est[c] = end
            left[c] -= 1
            if left[c] == 0:
                queue[tail] = c
                tail += 1
    return est


@nb.njit(cache=True)
def time_windows(order, level, lo, hi):
    """Window of every item, items visited in ``order`` (sorted by level, then lo): a new
    window opens at a new level or where ``lo`` reaches the largest ``hi`` of its window so
    far. Ids are 0, 1, ... in visiting order."""
    win = np.empty(len(level), dtype=np.int64)
    w = -1
    cur = -1
    reach = 0.0
    for k in range(len(order)):
        i = order[k]
        if w < 0 or level[i] != cur or lo[i] >= reach:
            w += 1
            cur = level[i]
            reach = hi[i]
        elif hi[i] > reach:
            reach = hi[i]
        win[i] = w
    return win


@nb.njit(cache=True)
def scatter_max(out, idx, val):
    """``out[idx[k]] = max(out[idx[k]], val[k])`` for every k, in place (np.maximum.at)."""
    for k in range(len(idx)):
        if val[k] > out[idx[k]]:
            out[idx[k]] = val[k]


@nb.njit(cache=True)
def max_overlap(group, lo, hi, wt, total):
    """Per group (ids 0..G-1, one per item), the largest sum of ``wt`` over items whose
    ``[lo, hi)`` contain one instant: ``total`` (the group's sum of ``wt``) where all of
    them share one, else by a sweep over the interval ends (an end before a start at the
    same instant). Also whether every group shares one."""
    G = len(total)
    n = len(group)
    ptr = np.zeros(G + 1, dtype=np.int64)
    for k in range(n):
        ptr[group[k] + 1] += 1
    for g in range(G):
        ptr[g + 1] += ptr[g]
    fill = ptr[:-1].copy()
    member = np.empty(n, dtype=np.int64)
    for k in range(n):
        member[fill[group[k]]] = k
        fill[group[k]] += 1
    out = total.copy()
    common = True
    for g in range(G):
        a, b = ptr[g], ptr[g + 1]
        last_lo = -np.inf
        first_hi = np.inf
        for j in range(a, b):
            k = member[j]
            last_lo = max(last_lo, lo[k])
            first_hi = min(first_hi, hi[k])
        if last_lo < first_hi:
            continue
        common = False
        m = member[a:b]
        s, e, w = lo[m], hi[m], wt[m]
        os_ = np.argsort(s, kind="mergesort")
        oe = np.argsort(e, kind="mergesort")
        run = 0.0
        best = 0.0
        j = 0
        for i in range(len(m)):
            t = s[os_[i]]
            while j < len(m) and e[oe[j]] <= t:
                run -= w[oe[j]]
                j += 1
            run += w[os_[i]]
            if run > best:
                best = run
        out[g] = best
    return out, common


def phases(st, level, link, w, flow, inv, total):
    """(phase of every node or None, number of phases, per-entry weighted overlap count) of
    the contention model's path entries (``link``, ``w``, ``flow`` per entry) of FlowState
    ``st`` with DAG depths ``level``; ``inv``: each entry's (link, depth) group, ``total``:
    the groups' sums of ``max(w, 1)``. None where every depth is one window: the (link,
    depth) groups stand. Phases are numbered by (depth, window) (docstring above)."""
    n = st.n
    if flow.size == 0:
        return None, 1, np.zeros(0)
    NF, NI = st.NF[:n], st.NI[:n]
    ndeps = np.ascontiguousarray(NI[:, K.NDEPS], dtype=np.int64)
    start = np.ascontiguousarray(NF[:, K.START], dtype=np.float64)
    base = np.where(NI[:, K.KIND] == K.TRANSFER, NF[:, K.TAIL], NF[:, K.DUR])
    wt = np.maximum(w, 1.0)
    x = NF[flow, K.SIZE] / st.bw[link]  # an entry's time per unit of its link's share
    flow = np.ascontiguousarray(flow, dtype=np.int64)
    alone = np.zeros(n)
    scatter_max(alone, flow, x * w)
    dur = base + alone
    lo = earliest_starts(ndeps, st.cptr, st.cidx, start, dur)
    has = np.zeros(n, dtype=bool)
    has[flow] = True
    nodes = np.flatnonzero(has)
    order = nodes[np.lexsort((lo[nodes], level[nodes]))]
    n_levels = int(np.count_nonzero(np.bincount(level[nodes])))
    link = link.astype(np.int64)
    depth_inv, depth_total = np.asarray(inv, dtype=np.int64), total
    prev = None
    for _ in range(MAX_ROUNDS):
        hi = earliest_starts(ndeps, st.cptr, st.cidx, start, dur) + dur
        win = time_windows(order, level, lo, hi)
        n_win = int(win[order[-1]]) + 1
        if n_win == n_levels:  # one window per depth: the (link, depth) groups
            inv, total = depth_inv, depth_total
        else:
            inv = np.unique(link * n_win + win[flow], return_inverse=True)[1]
            inv = inv.astype(np.int64)
            total = np.bincount(inv, weights=wt)
        got, common = max_overlap(inv, lo[flow], hi[flow], wt, total)
        cnt = got[inv]
        # converged: the counts did not move, or every depth is one window (windows never
        # span depths, so none can merge) whose groups all share an instant (every
        # transfer counted: no count can grow)
        if common and n_win == n_levels or prev is not None and np.array_equal(cnt, prev):
            break
        prev = cnt
        share = np.zeros(n)
        scatter_max(share, flow, x * (w / wt) * cnt)
        dur = base + share
    if n_win == n_levels:
        return None, n_win, cnt
    phase = np.zeros(n, dtype=np.int64)
    phase[nodes] = win[nodes]
    return phase, n_win, cnt

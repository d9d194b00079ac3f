"""Slow, obviously-correct pure-Python versions of the flow engine, used only by the tests.

* :func:`max_min_rates`: weighted progressive filling, recomputed from scratch.
* :func:`simulate`: the whole fluid model (no faults) with a from-scratch max-min solve at
  every event, no incremental tricks, no event batching beyond "same instant".
"""
from __future__ import annotations

import math


def max_min_rates(paths, cap):
    """``paths[f]`` is a list of (link, weight) pairs; ``cap[l]`` the capacity of link l.

    Every unfrozen flow's rate rises together; the first link to fill freezes the flows on it.
    Returns a list of rates.
    """
    n = len(paths)
    rate = [0.0] * n
    frozen = [False] * n
    used = sorted({l for p in paths for l, _ in p})
    while not all(frozen):
        best, best_link = math.inf, None
        for l in used:
            load = 0.0
            wsum = 0.0
            for f in range(n):
                for ll, w in paths[f]:
                    if ll == l:
                        if frozen[f]:
                            load += w * rate[f]
                        else:
                            wsum += w
            if wsum > 0:
                level = max(cap[l] - load, 0.0) / wsum
                if level < best:
                    best, best_link = level, l
        for f in range(n):
            if not frozen[f] and any(ll == best_link for ll, _ in paths[f]):
                frozen[f] = True
                rate[f] = best
    return rate


def simulate(kind, size, duration, start, parents, paths, tails, cap):
    """Event-by-event fluid simulation of a DAG (lists in, lists out).

    ``kind[i]`` 0 transfer / other = fixed duration; ``parents[i]`` list of node ids;
    ``paths[i]`` list of (link, weight) for transfers; ``tails[i]`` latency added after the last
    byte. Returns (start_times, end_times).
    """
    n = len(kind)
    t_start = [math.nan] * n
    t_end = [math.nan] * n
    left = [len(parents[i]) for i in range(n)]
    children = [[] for _ in range(n)]
    for i in range(n):
        for p in parents[i]:
            children[p].append(i)
    timed = []  # (time, 'start'|'end', node)
    rem = {}
    t = 0.0

    def ready(i, now):
        if start[i] > now:
            timed.append((start[i], "start", i))
        else:
            begin(i, now)

    def begin(i, now):
        t_start[i] = now
        if kind[i] == 0:
            if size[i] > 0:
                rem[i] = float(size[i])
            else:
                timed.append((now + tails[i], "end", i))
        else:
            timed.append((now + duration[i], "end", i))

    for i in range(n):
        if left[i] == 0:
            ready(i, 0.0)
    while rem or timed:
        active = sorted(rem)
        rates = max_min_rates([paths[f] for f in active], cap) if active else []
        drain = {f: t + rem[f] / r for f, r in zip(active, rates) if r > 0}
        t_next = min(list(drain.values()) + [e[0] for e in timed])
        for f, r in zip(active, rates):
            rem[f] -= r * (t_next - t)
        t = t_next
        for f in active:
            if f in drain and drain[f] <= t:
                del rem[f]
                timed.append((t + tails[f], "end", f))
        while True:
            now = [e for e in timed if e[0] <= t]
            if not now:
                break
            for e in now:
                timed.remove(e)
                _, what, i = e
                if what == "start":
                    begin(i, t)
                else:
                    t_end[i] = t
                    for c in children[i]:
                        left[c] -= 1
                        if left[c] == 0:
                            ready(c, t)
    return t_start, t_end

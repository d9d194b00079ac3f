"""Contention-free evaluation of a Schedule: every node starts when its parents end.

Transfers take ``latency + bytes / bandwidth`` (no sharing; ``bandwidth=inf`` makes the network
infinitely fast). Used by tests (pipeline bubble, FLOP accounting) and as a quick estimate;
the network engines in netcore are the real thing.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from netcore.schedule import TRANSFER, Schedule, ScheduleError


@njit(cache=True)
def _longest_path(dep_ptr, dep_idx, dur, release):
    n = len(dur)
    indeg = np.zeros(n, np.int64)
    for i in range(n):
        indeg[i] = dep_ptr[i + 1] - dep_ptr[i]
    # children CSR
    cptr = np.zeros(n + 1, np.int64)
    for e in range(len(dep_idx)):
        cptr[dep_idx[e] + 1] += 1
    for i in range(n):
        cptr[i + 1] += cptr[i]
    fill = cptr[:-1].copy()
    cidx = np.empty(len(dep_idx), np.int64)
    for i in range(n):
        for e in range(dep_ptr[i], dep_ptr[i + 1]):
            p = dep_idx[e]
            cidx[fill[p]] = i
            fill[p] += 1
    start = release.copy()
    end = np.full(n, np.nan)
    stack = np.empty(n, np.int64)
    top = 0
    for i in range(n):
        if indeg[i] == 0:
            stack[top] = i
            top += 1
    done = 0
    while top > 0:
        top -= 1
        i = stack[top]
        end[i] = start[i] + dur[i]
        done += 1
        for e in range(cptr[i], cptr[i + 1]):
            c = cidx[e]
            if end[i] > start[c]:
                start[c] = end[i]
            indeg[c] -= 1
            if indeg[c] == 0:
                stack[top] = c
                top += 1
    return start, end, done


def evaluate(schedule: Schedule, bandwidth_Bps: float = np.inf, latency_s: float = 0.0):
    """(start, end) per node, in seconds."""
    dur = schedule.duration.copy()
    t = schedule.kind == TRANSFER
    # a stream standing for k serial steps (network_detail auto) pays the latency k times
    dur[t] = latency_s * schedule.steps[t] + (schedule.size[t] / bandwidth_Bps
                                              if np.isfinite(bandwidth_Bps) else 0.0)
    start, end, done = _longest_path(schedule.dep_ptr, schedule.dep_idx, dur, schedule.start.copy())
    if done != schedule.n:
        raise ScheduleError(f"dependency cycle: {schedule.n - done} nodes can never start")
    return start, end

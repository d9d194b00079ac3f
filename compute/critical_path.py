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


def evaluate(schedule: Schedule, bandwidth_Bps=np.inf, latency_s=0.0):
    """(start, end) per node, in seconds. ``bandwidth_Bps`` and ``latency_s``: one figure for
    every transfer, or one per node (``transfer_bounds``)."""
    dur = schedule.duration.copy()
    t = schedule.kind == TRANSFER
    n = schedule.n
    bw = np.broadcast_to(np.asarray(bandwidth_Bps, dtype=float), (n,))[t]
    lat = np.broadcast_to(np.asarray(latency_s, dtype=float), (n,))[t]
    # a stream standing for k serial steps (network_detail auto) pays the latency k times
    with np.errstate(divide="ignore"):
        dur[t] = lat * schedule.steps[t] + np.where(np.isfinite(bw), schedule.size[t] / bw, 0.0)
    start, end, done = _longest_path(schedule.dep_ptr, schedule.dep_idx, dur, schedule.start.copy())
    if done != schedule.n:
        raise ScheduleError(f"dependency cycle: {schedule.n - done} nodes can never start")
    return start, end


def transfer_bounds(schedule: Schedule, topology):
    """(bandwidth B/s, latency s) per node that no engine beats for a transfer on
    ``topology``, contention aside: a path leaves its source through the source's links and
    enters its destination through the destination's, so it is no faster than the slower end's
    fastest layer of links (the links of one layer together: a transfer may stripe over a
    fullflat GPU's planes), and its latency is at least the two end links' (one where a
    switch is an end, or where hosts relay and may be wired together). Between scale-up
    domains (``host_group`` on a fabric with a ``scaleup`` layer and hosts that do not relay)
    the scale-up links cannot be the end links. A member set (``network_detail`` auto) moves at
    its slowest member, after its longest latency. Non-transfer nodes get (inf, 0).

    Pricing every transfer at the fabric's slowest GPU link instead put NVLink transfers at
    NIC speed: a contention-free step longer than the flow engine's (TRAIN_BASE with network
    TP, two_tier: 852.7 us against 784.9 us)."""
    n = schedule.n
    bw = np.full(n, np.inf)
    lat = np.zeros(n)
    t = np.flatnonzero(schedule.kind == TRANSFER)
    if not t.size:
        return bw, lat
    top = topology
    nn = top.n_nodes
    names = tuple(top.layer_names)
    su = (top.link_layer == names.index("scaleup")) if "scaleup" in names else \
        np.zeros(top.n_links, bool)
    ends = np.concatenate([top.link_u, top.link_v]).astype(np.int64)
    lbw = np.concatenate([top.link_bw, top.link_bw]).astype(float)
    llat = np.concatenate([top.link_lat, top.link_lat]).astype(float)
    lsu = np.concatenate([su, su])
    layer = np.concatenate([top.link_layer, top.link_layer]).astype(np.int64)
    n_layers = max(len(names), int(layer.max()) + 1 if len(layer) else 1)

    def per_node(keep):
        # a node's links of one layer in parallel (a fullflat GPU's planes, which a transfer
        # may stripe over), the best layer
        by_layer = np.zeros(nn * n_layers)
        np.add.at(by_layer, ends[keep] * n_layers + layer[keep], lbw[keep])
        b = by_layer.reshape(nn, n_layers).max(axis=1)
        la = np.full(nn, np.inf)
        np.minimum.at(la, ends[keep], llat[keep])
        return b, np.where(np.isfinite(la), la, 0.0)

    b_all, l_all = per_node(np.ones(len(ends), bool))
    b_out, l_out = per_node(~lsu)
    hg = np.asarray(top.host_group) if top.host_group is not None else None
    split = bool(su.any()) and hg is not None and not top.hosts_forward
    nh = top.n_hosts

    def bounds(src, dst):
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        hosts = (src < nh) & (dst < nh)
        cross = np.zeros(len(src), bool)
        if split:
            cross[hosts] = hg[src[hosts]] != hg[dst[hosts]]
        bs = np.where(cross, b_out[src], b_all[src])
        bd = np.where(cross, b_out[dst], b_all[dst])
        ls = np.where(cross, l_out[src], l_all[src])
        ld = np.where(cross, l_out[dst], l_all[dst])
        one_link = ~hosts | bool(top.hosts_forward)
        return np.minimum(bs, bd), np.where(one_link, np.maximum(ls, ld), ls + ld)

    b, la = bounds(schedule.src[t], schedule.dst[t])
    ms = schedule.mset[t] if schedule.mset is not None else np.full(len(t), -1)
    agg = ms >= 0
    if agg.any():
        sets = schedule.sets
        mb, ml = bounds(sets.src, sets.dst)
        starts = sets.ptr[:-1]
        set_b = np.minimum.reduceat(mb, starts)
        set_l = np.maximum.reduceat(ml, starts)
        b[agg], la[agg] = set_b[ms[agg]], set_l[ms[agg]]
    bw[t], lat[t] = b, la
    return bw, lat

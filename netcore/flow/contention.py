"""Many-to-many contention model of the flow engine (``[engine] contention``, issue 17).

The fluid model gives every flow its max-min share at once: a perfect scheduler. A packet
transport does not keep a link that many flows share as busy as that: with deep buffers, TCP
fills the senders' FIFO NIC queues and a receiver's link idles while its packets wait behind
packets for other receivers (head-of-line waiting); DCQCN's rate cuts and timer-paced recovery
hold the flows below their fair share (docs/flow_engine.md "All-to-all: where the fluid model
loses time"). The ``contention`` model represents that as a lower *effective capacity*:

    capacity(l) = bandwidth(l) x efficiency_T(flows(l), gbps(l), bytes(l))

where ``T`` is the packet transport named by the option (``"tcp"`` or ``"dcqcn"``),
``flows(l)`` the number of transfers whose path crosses directed link ``l`` and that can be
active on it at the same time (below), ``gbps(l)`` its bandwidth and ``bytes(l)`` the bytes a
transfer moves over it on average (a transfer split over several paths, e.g. spray, counts
its share). The efficiency comes from a *reduced representative* measured once per
transport by the packet engine, not from any case it is compared with: a star (``flows + 1``
hosts on one switch) running a direct all-to-all, where every host link carries ``flows``
flows each way; efficiency = fluid makespan / packet makespan of that star (``python -m
validation.contention_table`` writes ``contention_table.json``). Between grid points the
efficiency is interpolated linearly in log(flows), log(gbps) and log(bytes), and clamped at
the grid's edges. A link crossed by at
most one transfer keeps its full bandwidth (no contention: the model then is the fluid model
exactly). Everything else in the engine is unchanged: the efficiencies are computed once from
the paths (vectorised, no per-flow Python loop) and the compiled event loop runs as before.

Which transfers count together (``link_stats``): those at the same depth of the dependency DAG
(a chain of dependent transfers over one link shares nothing) *and* in the same time window
of that depth, and on a link the most of them whose active intervals overlap at one instant
(netcore/flow/overlap.py). A transfer's interval runs from its earliest possible start (the
DAG's longest path with every node at its shortest time, and its own ``Schedule.start``) to
an estimate of its end (its size over its links' bandwidths shared among the transfers
overlapping it there, iterated to a fixed point); a depth's windows are split where no
interval spans the gap. Transfers that start together (an all-to-all, a collective step)
share their first instant: every transfer of the depth counts, as before. Transfers far
apart in time count alone: eight 1 MiB flows leaving one host 1 ms apart (100 Gb/s) took
121.1 us each under ``tcp`` when the depth counted them all, against 84.9 us fluid and 88.1 us
in the packet engine; now 84.9 us.

Which links, per transport (docs/flow_engine.md "The contention model"): under ``tcp`` the
links leaving a host, except those that also forward other hosts' transfers (hosts of a torus
or ring: such a port is kept busy like a switch port), and the switch-to-switch links of a
layer whose load ratio exceeds 1 (``layer_load_ratio``: a structurally oversubscribed core),
at the efficiency of an oversubscribed dumbbell (``oversub``); under ``dcqcn`` every shared
link, times a speed-mismatch factor (``mismatch``) whose speed ratio, on a switch-to-switch
link, is divided by its layer's load ratio; a receiver link more loaded than its senders (a
hot receiver, ``incast_ratio``) blends the star's efficiency with an incast representative's
(``incast_efficiency``).
"""
from __future__ import annotations

from dataclasses import dataclass

import json
from functools import lru_cache
from pathlib import Path

import numba as nb
import numpy as np

from netcore.flow import _kernels as K
from netcore.flow.overlap import earliest_starts, phases, scatter_max
from topo.routing import spans

MODELS = ("fluid", "tcp", "dcqcn")
# The rules of the model (docs/flow_engine.md "The contention model"); each can be switched
# off only to reproduce the variant table there (validation/experiments/contention_rules.py):
# tcp: a host link that forwards other hosts' transfers is not a NIC queue (kept at full rate)
TCP_FORWARD_RULE = True
# tcp: switch-to-switch links of a structurally oversubscribed layer take the dumbbell's
# efficiency at their layer's load ratio
TCP_CORE_RULE = True
# dcqcn: a switch-to-switch link's speed ratio to the receivers behind it is divided by its
# layer's load ratio (an oversubscribed core cannot fill the receivers' queues at line rate)
DCQCN_RHO_RULE = True
# dcqcn: a receiver link fed by senders that are otherwise idle (its load above theirs: a hot
# receiver) moves from the star's efficiency toward the incast representative's
DCQCN_INCAST_RULE = True
TABLE = Path(__file__).resolve().parent / "contention_table.json"


@lru_cache(maxsize=None)
def table(transport: str):
    """(log flows grid, log gbps grid, log bytes grid, efficiency[flows, gbps, bytes])."""
    d = json.loads(TABLE.read_text())
    eff = np.array(d["eff"][transport], dtype=np.float64)
    return (np.log(np.array(d["flows"], dtype=np.float64)),
            np.log(np.array(d["gbps"], dtype=np.float64)),
            np.log(np.array(d["bytes"], dtype=np.float64)), eff)


@lru_cache(maxsize=None)
def _side_table(block: str, axis: str, transport: str):
    """(log ``axis`` grid, log gbps grid, log bytes grid, values[axis, gbps, bytes]) of the
    json block ``block`` for ``transport``, or None when it has none."""
    d = json.loads(TABLE.read_text()).get(block)
    if not d or transport not in d["eff"]:
        return None
    return (np.log(np.array(d[axis], dtype=np.float64)),
            np.log(np.array(d["gbps"], dtype=np.float64)),
            np.log(np.array(d["bytes"], dtype=np.float64)),
            np.array(d["eff"][transport], dtype=np.float64))


def mismatch_table(transport: str):
    """(log rho grid, log gbps grid, log bytes grid, factor[rho, gbps, bytes]) or None."""
    return _side_table("mismatch", "rho", transport)


def _interp3(tab, x0, x1, x2) -> np.ndarray:
    g0, g1, g2, eff = tab
    (i, a), (j, b), (k, c) = _axis(g0, x0), _axis(g1, x1), _axis(g2, x2)
    out = np.zeros(np.shape(x0))
    for di, wi in ((0, 1 - a), (1, a)):
        ii = np.minimum(i + di, len(g0) - 1)
        for dj, wj in ((0, 1 - b), (1, b)):
            jj = np.minimum(j + dj, len(g1) - 1)
            for dk, wk in ((0, 1 - c), (1, c)):
                kk = np.minimum(k + dk, len(g2) - 1)
                out += wi * wj * wk * eff[ii, jj, kk]
    return out


def _axis(grid: np.ndarray, x: np.ndarray):
    """Lower index and weight of the upper neighbour of every x on a sorted grid (clamped)."""
    x = np.clip(x, grid[0], grid[-1])
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, max(len(grid) - 2, 0))
    if len(grid) == 1:
        return i, np.zeros_like(x)
    w = (x - grid[i]) / (grid[i + 1] - grid[i])
    return i, np.clip(w, 0.0, 1.0)


def efficiency(transport: str, flows, gbps, nbytes) -> np.ndarray:
    """Interpolated many-to-many efficiency of ``transport`` for links carrying ``flows``
    transfers (>= 2; 1 gives 1.0) at ``gbps`` with ``nbytes`` per transfer."""
    flows = np.asarray(flows, dtype=np.float64)
    out = _interp3(table(transport), np.log(np.maximum(flows, 1.0)),
                   np.log(np.asarray(gbps, dtype=np.float64)),
                   np.log(np.maximum(np.asarray(nbytes, dtype=np.float64), 1.0)))
    return np.where(flows <= 1.0, 1.0, np.minimum(out, 1.0))


def _side_factor(tab, x, gbps, nbytes) -> np.ndarray:
    """A side table's factor at ``x`` (>= 1; 1.0 at x <= 1 or without a table)."""
    x = np.asarray(x, dtype=np.float64)
    if tab is None:
        return np.ones(x.shape)
    out = _interp3(tab, np.log(np.maximum(x, 1.0)), np.log(np.asarray(gbps, dtype=np.float64)),
                   np.log(np.maximum(np.asarray(nbytes, dtype=np.float64), 1.0)))
    return np.where(x <= 1.0, 1.0, np.minimum(out, 1.0))


def mismatch(transport: str, rho, gbps_down, nbytes) -> np.ndarray:
    """Factor for a link ``rho`` times as fast as the receiver links its flows end on
    (1.0 at rho <= 1, or when the transport has no such table)."""
    return _side_factor(mismatch_table(transport), rho, gbps_down, nbytes)


def incast_table(transport: str):
    """(log flows grid, log gbps grid, log bytes grid, efficiency[flows, gbps, bytes]) of
    the incast representative, or None."""
    return _side_table("incast", "flows", transport)


def incast_efficiency(transport: str, flows, gbps, nbytes, q) -> np.ndarray:
    """Efficiency of a receiver link of ``flows`` transfers whose load is ``q`` (>= 1) times
    their senders' (mean load of the links they leave their sources on). While the senders
    are busy with their other transfers, the link is in the star's regime (every sender's NIC
    shared, no flow outruns its share); that lasts for about 1/q of the link's bytes, and the
    rest moves as an incast of otherwise idle senders (the incast representative). The time
    adds: 1 / eff = (1/q) / eff_star + (1 - 1/q) / eff_incast. The star's value where the
    transport has no incast table or q <= 1."""
    star = efficiency(transport, flows, gbps, nbytes)
    tab = incast_table(transport)
    flows = np.asarray(flows, dtype=np.float64)
    if tab is None:
        return star
    inc = _side_factor(tab, flows, gbps, nbytes)
    s = 1.0 / np.maximum(q, 1.0)
    return np.where(flows <= 1.0, 1.0, 1.0 / (s / star + (1.0 - s) / inc))


def incast_ratio(st, ls: "LinkStats") -> np.ndarray:
    """Per directed link, its load (bytes over bandwidth, per phase: DAG depth, or a time
    window of one, LinkStats) over the mean, over the transfers crossing it in that phase, of
    the load of the link they leave their source on (same phase); the largest over phases;
    0 on links without traffic. 1 on a receiver link of a uniform all-to-all (its senders
    are as busy as it), about ``flows`` on a receiver of an incast. ``ls``: link_stats(st, ...)."""
    tg = ls.group_load
    src = tg[ls.group_of(ls.first)]
    msrc = np.bincount(ls.inv, weights=ls.wt * src) / ls.group_weight
    ratio = np.zeros(len(st.bw))
    np.maximum.at(ratio, ls.glink, tg / np.maximum(msrc, 1e-300))
    return ratio


def oversub_table(transport: str):
    """(log over grid, log gbps grid, log bytes grid, efficiency[over, gbps, bytes]) or None."""
    return _side_table("oversub", "over", transport)


def oversub(transport: str, ratio, gbps_host, nbytes) -> np.ndarray:
    """Efficiency of a switch-to-switch link whose load (bytes per bandwidth) is ``ratio``
    times its transfers' host links' (1.0 at ratio <= 1, or without a table)."""
    return _side_factor(oversub_table(transport), ratio, gbps_host, nbytes)


@nb.njit(cache=True)
def dag_levels(ndeps, cptr, cidx, step=None):
    """Longest-path depth of every node of a DAG (roots 0) over the children lists
    ``cidx[cptr[i]:cptr[i+1]]``; ``ndeps`` = parents per node. ``step`` (optional, per node):
    what a node adds to its children's depth (default 1; 0 for a node that takes no time,
    which then leaves its children at its parents' depth + 1). The same longest path as a
    node's earliest start, with every node starting at 0 and taking ``step``."""
    n = len(ndeps)
    inc = np.ones(n, dtype=np.int64) if step is None else step.astype(np.int64)
    return earliest_starts(ndeps, cptr, cidx, np.zeros(n, dtype=np.int64), inc)


def layer_load_ratio(topology, st, ls: "LinkStats") -> np.ndarray:
    """Load ratio of every directed link's layer: per (layer, direction, phase: DAG depth or
    a time window of one, LinkStats), the layer's bytes over its bandwidth (links with traffic
    in that phase), against the mean, over the transfers crossing it, of the larger of their
    two host links' loads (bytes over bandwidth, same phase); a link takes the largest over
    phases. > 1: the fabric's core is structurally oversubscribed for this traffic (a hot
    spot of ECMP on a non-blocking layer averages out); 0 on links without traffic.
    ``ls``: link_stats(st, topology)."""
    glink, span, tg = ls.glink, ls.span, ls.group_load
    th = np.maximum(tg[ls.group_of(ls.first)], tg[ls.group_of(ls.last)])
    lay = (topology.link_layer[glink // 2].astype(np.int64) * 2 + glink % 2) * span \
        + ls.uniq % span
    _, il = np.unique(lay, return_inverse=True)
    load = np.bincount(il, weights=ls.group_bytes) / np.bincount(il, weights=st.bw[glink])
    host = np.bincount(il, weights=np.bincount(ls.inv, weights=ls.wt * th)) / np.bincount(
        il, weights=ls.group_weight)
    ratio = np.zeros(len(st.bw))
    np.maximum.at(ratio, glink, (load / np.maximum(host, 1e-300))[il])
    return ratio


@dataclass
class LinkStats:
    """What the contention rules read of the transfers' current paths: per entry (a transfer
    on a link) its link, transfer, weight, the transfer's first and last link and its phase
    (``level``, per node: its depth in the dependency DAG, or where a depth splits into time
    windows its (depth, window) rank, netcore/flow/overlap.py; with the (link, phase) groups
    ``uniq`` / ``inv``), and per directed link the transfers active on it at once in its most
    crowded phase (``flows``), over all phases (``tot``), the bytes per transfer (``per``),
    its Gb/s, the receiver links' mean Gb/s (``down``) and whether it joins two switches;
    per (link, phase) group its link (``glink``), weight (transfers), bytes and load (bytes /
    bandwidth)."""
    link: np.ndarray
    flow: np.ndarray
    w: np.ndarray
    first: np.ndarray
    last: np.ndarray
    level: np.ndarray
    span: int
    uniq: np.ndarray
    inv: np.ndarray
    wt: np.ndarray
    flows: np.ndarray
    tot: np.ndarray
    per: np.ndarray
    gbps: np.ndarray
    down: np.ndarray
    switch_link: np.ndarray
    glink: np.ndarray
    group_weight: np.ndarray
    group_bytes: np.ndarray
    group_load: np.ndarray

    def group_of(self, links) -> np.ndarray:
        """Each entry's (link, depth) group for ``links`` (one per entry) at its own depth."""
        return np.searchsorted(self.uniq, links.astype(np.int64) * self.span
                               + self.level[self.flow])


def link_stats(st, topology) -> LinkStats:
    """LinkStats of ``st`` (a FlowState after ``assign`` with at least one entry)."""
    L = st.L
    # the current path entries of every transfer (re-routes leave old entries behind; flows
    # of one member set share theirs), one record per (transfer, entry), in entry order
    NI = st.NI[: st.n]
    # a zero-byte transfer takes no bandwidth (it ends its tail after it starts): it shares
    # no link with anyone. Counted, it made a link's lone transfer a shared one (a 1 MiB
    # transfer beside a zero-byte one from the same host: 85.9 -> 109.6 us under tcp)
    tr = np.flatnonzero((NI[:, K.KIND] == K.TRANSFER) & (NI[:, K.PLEN] > 0) &
                        (st.payload[: st.n] > 0))
    ln = NI[tr, K.PLEN]
    off = NI[tr, K.POFF]
    idx = spans(off, ln)
    flow = np.repeat(tr, ln)
    order = np.argsort(idx, kind="stable")
    idx, flow = idx[order], flow[order]
    link = st.EI[idx, K.ELINK]
    w = st.ew[idx]
    # the first and the last link of every entry's transfer: the link it leaves its source
    # on and the receiver link its path ends on
    first = st.EI[NI[flow, K.POFF], K.ELINK]
    last = st.EI[NI[flow, K.POFF] + NI[flow, K.PLEN] - 1, K.ELINK]
    # transfers sharing each link: a transfer split over paths (spray) counts once on each
    # link it uses; a member set (netcore/flow/member_routing.py) counts its members there.
    # Transfers that cannot overlap must not count together (a chain of dependent transfers
    # over one link shares nothing): they are grouped by their depth in the dependency DAG
    # (transfers at different depths are ordered by some chain, or at least not started
    # together), and a link's count is that of its most crowded depth.
    # A compute or delay node that takes no time (the join a split node's children wait for:
    # netcore/flow/fault_split.py, uneven_split.py) orders nothing in time beyond its parents:
    # it adds no depth. Counted, a split added a level below the split node, so a fault that
    # never struck (at 10 s in a 0.3 ms run) moved its children off the depth of the transfers
    # they share links with (a transfer's 296.2 us, contention = tcp, became 255.7 us)
    NF = st.NF[: st.n]
    step = np.where((NI[:, K.KIND] != K.TRANSFER) & (NF[:, K.DUR] == 0.0), 0, 1)
    level = dag_levels(np.ascontiguousarray(st.NI[: st.n, K.NDEPS], dtype=np.int64),
                       st.cptr, st.cidx, step.astype(np.int64))
    span = int(level.max()) + 1
    uniq, inv = np.unique(link.astype(np.int64) * span + level[flow], return_inverse=True)
    wt = np.maximum(w, 1.0)
    per_group = np.bincount(inv, weights=wt)
    # Transfers of one depth whose active intervals cannot overlap (start times far apart)
    # must not count together either: a depth is split into time windows where its
    # transfers' intervals leave a gap, and a link's count in a (depth, window) phase is the
    # most transfers active on it at one instant (netcore/flow/overlap.py). Eight 1 MiB
    # flows leaving one host 1 ms apart ran at the 8-flow efficiency: 121.1 us each under
    # tcp against 84.9 us fluid (packet engine: 88.1 us).
    phase, n_phases, active = phases(st, level, link, w, flow, inv, per_group)
    if phase is not None:  # depths split into windows: group by (link, phase)
        level, span = phase, n_phases
        uniq, inv = np.unique(link.astype(np.int64) * span + level[flow], return_inverse=True)
        per_group = np.bincount(inv, weights=wt)
    group_active = np.zeros(len(uniq))
    scatter_max(group_active, inv, active)
    flows = np.zeros(L)
    np.maximum.at(flows, uniq // span, group_active)
    tot = np.bincount(link, weights=wt, minlength=L)  # over all depths
    nbytes = np.bincount(link, weights=w * st.payload[flow], minlength=L)
    per = np.where(tot > 0, nbytes / np.maximum(tot, 1.0), 0.0)
    gbps = st.bw * 8e-9
    # the receiver-link bandwidth a link's transfers end on, averaged over its transfers
    down = np.bincount(link, weights=wt * gbps[last], minlength=L)
    down = np.where(tot > 0, down / np.maximum(tot, 1.0), 1.0)
    switch_link = (topology.dlink_src >= topology.n_hosts) & (
        topology.dlink_dst >= topology.n_hosts)
    glink = uniq // span
    group_bytes = np.bincount(inv, weights=w * st.payload[flow])
    return LinkStats(link, flow, w, first, last, level, span, uniq, inv, wt, flows, tot, per,
                     gbps, down, switch_link, glink, per_group, group_bytes,
                     group_bytes / st.bw[glink])


def link_efficiency(st, topology, transport: str) -> np.ndarray:
    """Efficiency of every directed link of ``topology`` from the transfers' current paths in
    ``st`` (a FlowState after ``assign``): 1.0 on links crossed by at most one transfer."""
    L = st.L
    if transport == "fluid" or st.n_ent == 0 or not (st.payload[: st.n] > 0).any():
        return np.ones(L)
    ls = link_stats(st, topology)
    link, first, last = ls.link, ls.first, ls.last
    flows, per, gbps, down, switch_link = ls.flows, ls.per, ls.gbps, ls.down, ls.switch_link
    eff = np.ones(L)
    use = flows > 1
    if transport == "tcp":
        # deep-buffered TCP loses its time at the senders' FIFO NIC queues: only the links
        # leaving a host are shared FIFOs the star measures (a switch port's queue
        # feeds one link whose bytes all move on; receiver links stay busy once fed) ...
        use &= topology.dlink_src < topology.n_hosts
        # ... and only if the queue holds that host's own transfers: a host that forwards
        # (direct-connect fabrics: torus, ring) has links that also carry transfers which
        # did not start there (their path's first link leaves another node); such a link
        # is a forwarding port, kept busy like a switch's. Hosts of a switched fabric never
        # forward (topo/routing.py), so there the rule is not evaluated at all (a member
        # set's first link stands for one member only).
        if TCP_FORWARD_RULE and topology.hosts_forward:
            use &= np.bincount(link[topology.dlink_src[first] != topology.dlink_src[link]],
                               minlength=L) == 0
    if use.any():
        eff[use] = efficiency(transport, flows[use], gbps[use], per[use])
    if transport == "tcp" and TCP_CORE_RULE:
        # an oversubscribed core: switch-to-switch links of a layer more loaded than the
        # host links (load ratio > 1) set the time; they keep the dumbbell's efficiency
        ratio = layer_load_ratio(topology, st, ls)
        core = switch_link & (flows > 1) & (ratio > 1.0)
        if core.any():
            eff[core] = oversub(transport, ratio[core], down[core], per[core])
    elif transport == "dcqcn":
        # speed mismatch: rho = own bandwidth / the receiver links' (down)
        rho = np.where(flows > 0, gbps / np.maximum(down, 1e-30), 1.0)
        if DCQCN_RHO_RULE:
            ratio = layer_load_ratio(topology, st, ls)
            rho = np.where(switch_link, rho / np.maximum(ratio, 1.0), rho)
        if DCQCN_INCAST_RULE:
            # a hot receiver: a link into a host whose load exceeds its senders' (Zipf
            # all-to-all-v); a uniform all-to-all has q = 1 there and keeps the star's value
            # (only a link every transfer of which ends there: a forwarding host's link
            # of a torus or ring is not a receiver's; q within rounding of 1 is 1)
            q = incast_ratio(st, ls)
            hot = use & (topology.dlink_dst < topology.n_hosts) & (q > 1.0 + 1e-9) & (
                np.bincount(link[last != link], minlength=L) == 0)
            if hot.any():
                eff[hot] = incast_efficiency(transport, flows[hot], gbps[hot], per[hot],
                                             q[hot])
        fat = use & (rho > 1.0)
        if fat.any():
            eff[fat] *= mismatch(transport, rho[fat], down[fat], per[fat])
    return eff

"""Where a collective's stream form is not exact: ring connections of one phase on one link.

``network_detail = "auto"`` runs a ring (or each ring of a hierarchical or torus phase) as one
member set moving in lock step (netcore.members). Two of its connections routed over one
directed link then send at once in every step, each at half the link, and wait out the step's
latency at once too. The full form lets them drift apart: one sends while the other waits for
its latency, so a latency-bound ring loses much less. On a 2x2x3 torus in row-major order
(ECMP, seed 1) a 1 MiB ring all-reduce took 217.0 us as a stream against 180.5 us in full
(+20%), at 64 MiB +2.2%. Rings of one phase that share a link (a hierarchical all-reduce over
groups that straddle nodes, or over ranks out of fabric order) drift against each other in the
full form too, in either direction: -9.7% and +7.7% on two_tier cases of 8 and 12 GPUs.
This finds both, so the workload builder can run the full form instead when it fits.
Phases can also differ from the full form with no link shared inside one: the full form starts
a rank's next phase as soon as that rank is done, the stream a ring once its rings before are
(``phase_drift``: ranks out of fabric order on two_tier, -10.4% to +8.3%).
"""
from __future__ import annotations

import numpy as np

from netcore.flow.member_routing import route_members
from netcore.schedule import TRANSFER


def self_shared_links(schedule, routing, alive=None, by_phase: bool = False,
                      memo=None) -> int:
    """How many directed links two or more member connections of one ring stream cross, or
    with ``by_phase`` of the rings of one phase together (the member-set transfers of one
    label: the rings of one hierarchical or torus phase, which run at once), counted once per
    ring (phase) (links ``alive``, default all up).

    Rings of a ring collective laid one per rail (collectives/rail.py) are checked one by one:
    their phase is a single step of symmetric rings that stay in lock step in the full form
    too (tests/test_metamorphic_scale.py, full against scalable on two_tier), where the
    phase-wide check would send them to the full form for nothing. ``memo``: a
    netcore.flow.member_routing.MemberPathMemo that keeps the paths for phases_in_step."""
    ms = schedule.sets
    if ms is None or routing is None:
        return 0
    t = np.flatnonzero((schedule.kind == TRANSFER) & (schedule.mset >= 0))
    if not t.size:
        return 0
    sets, first = np.unique(schedule.mset[t].astype(np.int64), return_index=True)
    # the group each set is checked in: its phase (label) or itself
    group = schedule.label[t[first]].astype(np.int64) if by_phase else sets
    paths = route_members(routing, ms, ms.positions(sets), alive=alive,
                          memo=memo if alive is None else None)
    owner = np.repeat(np.repeat(group, ms.sizes[sets]), np.diff(paths.ptr))
    # a member lists a link at most once (a spray or plane-striped member with a fraction of
    # its load): two entries of one group on one link are two connections sharing it,
    # whatever their fractions (two halves under spray collide as surely as two whole paths)
    key = owner * np.int64(routing.topology.n_dlinks) + paths.link
    _, count = np.unique(key, return_counts=True)
    return int(np.count_nonzero(count > 1))


def phase_drift(phases, ranks, routing, alive=None, memo=None) -> tuple[float, int]:
    """Where phases of ring streams (collectives.streams.composed_phases) are not the full form
    even though no two connections of one phase share a link: ``(drift, links)``, the relative
    difference between the stream's makespan and the full form's, both without contention,
    and how many directed links carry two phases at once in either form.

    The stream starts a ring when every ring of the phase before that shares a rank with it
    has ended, and holds each ring in lock step. The full form (collectives._ring.ring_phases)
    orders the transfers per rank: a rank's first send of the next phase waits only for its
    own last receive and send of this one (and, reducing, its receiver's). That is the same
    thing while every ring of a phase ends at one instant at all its ranks: connections
    alike (a hierarchical all-reduce in fabric order: NVLink inside every group, one
    network hop along every rail), or rings alike, position for position, into a phase whose
    connections are alike (rails over several leaves, then NVLink groups). Ranks out of
    fabric order mix NVLink and network connections in one group and make rails of each kind:
    the NVLink rails end first, their ranks start the next phase's all-gather while the
    network rails still run, and each ring's ranks start it at different instants. On two_tier
    fabrics of 8 GPUs in random order this put auto 8.5% under and 6.9% over full (-3.8% to
    +3.0% in docs/scale.md 1c), with no link shared inside a phase: a send of the last phase
    (0 -> 5) into the NIC that a network rail (1 -> 5) was still using.

    So this replays both orders with each connection's time per step alone on its path (its
    ring's step latency, then max(wire bytes / the path's narrowest link + propagation, the
    LL cap)), the same for both, so that only the order can make them differ; a difference
    in order either changes the makespan or, where it does not, lets two phases overlap, and
    with no link shared by phases running at once there is no contention and the replay is
    the run. O(steps x connections) in arrays, about the full schedule's transfers."""
    ranks = np.asarray(ranks, dtype=np.int64)
    n = len(ranks)
    ready = np.zeros(n)  # full form, per local rank: its last receive (data for the next phase)
    sent = np.zeros(n)  # its last send
    done = np.zeros(n)  # stream form: the end of the last ring the rank is in
    full_end = stream_end = 0.0
    iv = []  # (links, phase, from, to) of each connection's busy span, per form
    for i, ph in enumerate(phases):
        R, m = ph.src.shape
        if m < 2:
            continue
        paths, owner, lat, T = _step_times(ph, ranks, routing, alive, memo)
        # the full form, step by step as collectives._ring.ring_phases orders it
        rdy, last = ready[ph.src], sent[ph.src]
        first = recv = end = None
        for on, reduce in ((ph.rs, True), (ph.ag, False)):
            if not on:
                continue
            for k in range(m - 1):
                if k:
                    data = np.roll(end, 1, axis=1)  # the receive from p-1 the step before
                else:
                    data = recv if (recv is not None and not reduce) else rdy
                t0 = np.maximum(data, last)
                if reduce:  # a reduce adds into the receiver's data
                    t0 = np.maximum(t0, np.roll(rdy, -1, axis=1))
                end = t0 + T
                last = end
                if first is None:
                    first = t0 + lat
            recv = np.roll(end, 1, axis=1)
        ready[ph.src], sent[ph.src] = recv, last
        full_end = max(full_end, float(last.max()))
        # the stream: ring r after the rings its ranks were in, in lock step at its slowest
        st = done[ph.src].max(axis=1)
        fin = st + ph.steps * T.max(axis=1)
        done[ph.src] = fin[:, None]
        stream_end = max(stream_end, float(fin.max()))
        # busy spans: first transfer's start to last end of each connection (a superset)
        # (the stream pays its steps' latencies before its one transfer)
        for form, lo, hi in ((0, first, last), (1, st[:, None] + ph.steps * lat,
                                                fin[:, None])):
            lo, hi = np.broadcast_to(lo, (R, m)).ravel(), np.broadcast_to(hi, (R, m)).ravel()
            iv.append((form, paths.link, lo[owner], hi[owner]))
    if not full_end:
        return 0.0, 0
    # two phases on one link at once, in either form: a link's spans sorted by time, ends
    # before starts at one instant (a rank's next phase starts as its last one ends), each
    # shrunk by a rounding's worth; the running count of open spans passes 1 where two meet
    eps = 1e-9 * full_end
    overlapped = set()
    for form in (0, 1):
        parts = [x for x in iv if x[0] == form]
        link = np.concatenate([x[1] for x in parts]).astype(np.int64)
        lo = np.concatenate([x[2] for x in parts]) + eps
        hi = np.concatenate([x[3] for x in parts]) - eps
        keep = hi > lo
        link, lo, hi = link[keep], lo[keep], hi[keep]
        ev_link = np.concatenate([link, link])
        ev_t = np.concatenate([lo, hi])
        ev_d = np.concatenate([np.ones(len(lo), np.int64), -np.ones(len(hi), np.int64)])
        order = np.lexsort((ev_d, ev_t, ev_link))
        open_ = np.cumsum(ev_d[order])
        overlapped.update(np.unique(ev_link[order][open_ > 1]).tolist())
    return stream_end / full_end - 1.0, len(overlapped)


def _step_times(ph, ranks, routing, alive, memo=None):
    """Phase ``ph``'s connections routed, with each one's time per step alone on its path:
    (paths, owner of each path entry, ring step latency (R, 1), step time (R, m)). ``memo``
    answers the paths the stream's own check routed (the same connections, keyed alike):
    routing 102,400 GPUs' connections again cost 7 s."""
    from netcore.schedule import connection_keys

    R, m = ph.src.shape
    s, d = ranks[ph.src].ravel(), ranks[ph.dst].ravel()
    if memo is not None and alive is None:
        paths = memo.paths(s, d)
    else:
        paths = routing.paths(s, d, flow_id=connection_keys(s, d), alive=alive)
    owner = np.repeat(np.arange(R * m), np.diff(paths.ptr))
    rate = np.full(R * m, np.inf)
    bw = np.asarray(routing.topology.dlink_bw, dtype=np.float64)
    np.minimum.at(rate, owner, bw[paths.link] / paths.weight)
    lat = np.broadcast_to(np.asarray(ph.step_s, dtype=np.float64), (R,))[:, None]
    move = (ph.nbytes / ph.steps)[:, None] / rate.reshape(R, m) + paths.latency.reshape(R, m)
    return paths, owner, lat, lat + np.maximum(move, (ph.min_s / ph.steps)[:, None])


def phases_in_step(phases, ranks, routing, rtol: float, alive=None, memo=None) -> bool:
    """Whether every connection of each phase takes the same time per step alone on its path
    (within ``rtol``): then every ring of a phase starts and ends at one instant at all its
    ranks in both forms, by induction from the first phase, and phase_drift has nothing to
    find. O(connections): it lets fabric-ordered phases skip phase_drift's replay, which costs
    about the full form's transfers in array steps (seconds past 10^5 GPUs)."""
    ranks = np.asarray(ranks, dtype=np.int64)
    for ph in phases:
        if ph.src.shape[1] < 2:
            continue
        T = _step_times(ph, ranks, routing, alive, memo)[3]
        if float(T.max() - T.min()) > rtol * float(T.max()):
            return False
    return True


# Step times (phases_in_step) this close keep the rings of a phase within about as much of
# one another, and the stream within that of the full form: the bar the stream's own byte
# rounding sets (docs/scale.md 1b, shards a byte apart: 4e-6), met by shards a byte apart
# (1e-6 apart in step time) without the replay
STEP_RTOL = 1e-5

# The relative makespan difference (phase_drift, both forms replayed alike) past which the
# order alone makes a phased stream inexact: the replays sum the same step times in other
# orders (about 1e-15 apart where the forms agree)
PHASE_DRIFT = 1e-9

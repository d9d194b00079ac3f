"""Numba kernels of the research FIFO-queue flow model (driver: model.py in this folder).

Time advances in fixed steps of ``dt`` (one full data packet on the fastest link). Per step:
timed node events, ACK arrivals, sender releases and hop-to-hop arrivals into the output queues,
FIFO service of every busy link, deliveries (which send ACKs) and completions. Every queue is a
ring of (hop entry, bytes, arrival step) records, oldest first; a link serves ``C * dt`` bytes
per step from the front, and the records that arrived in the same step share pro rata (they
arrived together). Bytes leave a hop and reach the next one ``(latency + packet / C) / dt``
steps later, split between the two neighbouring steps so that fractional delays are exact on
average. ACKs are not simulated as bytes: a delivery is acknowledged at the sender after the
reverse path's propagation and ACK serialisation plus the queueing delay (queued bytes over
capacity) of every reverse link at that moment, so ACKs wait behind data.

All state lives in arrays the driver owns; growable pools (link rings, ACK rings) are returned.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from netcore.flow._kernels import _tpop as _hpop
from netcore.flow._kernels import _tpush as _hpush

# node states
WAIT, TIMED, ACTIVE, DONE, STALLED, STRANDED = 0, 1, 2, 3, 4, 5
# timed-event types (code = node * 2 + type): a node becomes ready / its data or end is due
EV_READY, EV_GO = 0, 1
# return codes
RC_STOP, RC_DONE = 0, 1
# scalar slots (isc)
STEP, N_ACT, N_LACT, N_TRANSIT, HEAP_N, POOL_USED, N_DONE, SLOT_USED, EVENTS, STEPS_RUN = \
    range(10)
N_ISC = 10

TRANSFER = 0


# the timed-event heap is the flow engine's (keys, then codes, so ties pop in code order)
@njit(cache=True)
def push_ready(nodes, times, hk, hv, isc):
    for k in range(nodes.shape[0]):
        isc[HEAP_N] = _hpush(hk, hv, isc[HEAP_N], times[k], nodes[k] * 2 + EV_READY)


# ================================================================ link rings
@njit(cache=True)
def _ring_grow(l, roff, rcap, rh, rn, fe, fb, fs, isc):
    """Link l's ring is full: move it to twice the room at the end of the pool (growing the
    pool when needed). Returns the (possibly new) pool arrays."""
    need = 2 * rcap[l] if rcap[l] > 0 else 64
    if isc[POOL_USED] + need > fe.shape[0]:
        size = max(2 * fe.shape[0], isc[POOL_USED] + need)
        ge = np.empty(size, np.int64)
        gb = np.empty(size)
        gs = np.empty(size, np.int64)
        ge[:isc[POOL_USED]] = fe[:isc[POOL_USED]]
        gb[:isc[POOL_USED]] = fb[:isc[POOL_USED]]
        gs[:isc[POOL_USED]] = fs[:isc[POOL_USED]]
        fe, fb, fs = ge, gb, gs
    o = isc[POOL_USED]
    for k in range(rn[l]):
        j = roff[l] + ((rh[l] + k) & (rcap[l] - 1))
        fe[o + k] = fe[j]
        fb[o + k] = fb[j]
        fs[o + k] = fs[j]
    roff[l] = o
    rcap[l] = need
    rh[l] = 0
    isc[POOL_USED] += need
    return fe, fb, fs


@njit(cache=True, inline="always")
def _slack(size):
    # splitting bytes pro rata and over two arrival steps rounds; a transfer is complete when
    # all but this much has arrived (far below a byte)
    return 1e-9 * size + 1e-9


# ================================================================ node life cycle
@njit(cache=True)
def _node_done(i, t, t_end, state, left, start, cptr, cidx, hk, hv, isc):
    state[i] = DONE
    t_end[i] = t
    isc[N_DONE] += 1
    for k in range(cptr[i], cptr[i + 1]):
        c = cidx[k]
        left[c] -= 1
        if left[c] == 0:
            s = start[c]
            isc[HEAP_N] = _hpush(hk, hv, isc[HEAP_N], s if s > t else t, c * 2 + EV_READY)


@njit(cache=True, inline="always")
def _path_delay(f, poff, plen, elink, capv, Q, fwd, rev):
    """Queueing delay of f's path (forward data links and/or reverse ACK links) right now."""
    d = 0.0
    for e in range(poff[f], poff[f] + plen[f]):
        l = elink[e]
        if fwd and capv[l] > 0.0:
            d += Q[l] / capv[l]
        if rev and capv[l ^ 1] > 0.0:
            d += Q[l ^ 1] / capv[l ^ 1]
    return d


# ================================================================ the step loop
@njit(cache=True)
def advance(t_stop, dt, isc, kind, dur, start, left, state, t_start, t_end, cptr, cidx,
            hk, hv, wire, n0b, iwb, hs0, ackfix, poff, plen, elink, eflow, dly, q, tr,
            rel, dlv, ack, aslot, active, capv, Q, lbytes, lbusy, lact, lin,
            roff, rcap, rh, rn, fe, fb, fs, ah_t, ah_v, ah_h, ah_n, free_slots):
    """Run steps while ``step * dt < t_stop``. Returns (code, fe, fb, fs, ah_t, ah_v, ah_h,
    ah_n, free_slots), the last eight being the (possibly grown) pools."""
    n = kind.shape[0]
    W = tr.shape[1]
    KH = ah_t.shape[1]
    while True:
        step = isc[STEP]
        t = step * dt
        if isc[N_DONE] >= n:
            return RC_DONE, fe, fb, fs, ah_t, ah_v, ah_h, ah_n, free_slots
        if not (t < t_stop):
            return RC_STOP, fe, fb, fs, ah_t, ah_v, ah_h, ah_n, free_slots
        isc[STEPS_RUN] += 1
        # ---- timed node events due by now
        while isc[HEAP_N] > 0 and hk[0] <= t:
            code = hv[0]
            when = hk[0]
            isc[HEAP_N] = _hpop(hk, hv, isc[HEAP_N])
            i = code >> 1
            isc[EVENTS] += 1
            if (code & 1) == EV_READY:
                t_start[i] = when
                if kind[i] == TRANSFER:
                    if plen[i] <= 0:
                        state[i] = STRANDED
                        continue
                    # SYN and SYN-ACK wait behind whatever is queued on the path both ways
                    go = when + hs0[i] + _path_delay(i, poff, plen, elink, capv, Q, True, True)
                else:
                    go = when + dur[i]
                state[i] = TIMED
                isc[HEAP_N] = _hpush(hk, hv, isc[HEAP_N], go, i * 2 + EV_GO)
            elif kind[i] != TRANSFER or wire[i] <= 0.0:
                _node_done(i, when, t_end, state, left, start, cptr, cidx, hk, hv, isc)
            elif plen[i] <= 0:
                state[i] = STRANDED
            else:
                if isc[SLOT_USED] == free_slots.shape[0]:
                    # every ACK ring is taken: double them all
                    m = free_slots.shape[0]
                    nt = np.zeros((2 * m, KH))
                    nv = np.zeros((2 * m, KH))
                    nt[:m] = ah_t
                    nv[:m] = ah_v
                    ah_t, ah_v = nt, nv
                    nh = np.zeros(2 * m, np.int64)
                    nn = np.zeros(2 * m, np.int64)
                    nh[:m] = ah_h
                    nn[:m] = ah_n
                    ah_h, ah_n = nh, nn
                    nf = np.empty(2 * m, np.int64)
                    nf[:m] = free_slots
                    for k in range(m, 2 * m):
                        nf[k] = k
                    free_slots = nf
                s = free_slots[isc[SLOT_USED]]
                isc[SLOT_USED] += 1
                aslot[i] = s
                ah_h[s] = 0
                ah_n[s] = 0
                state[i] = ACTIVE
                active[isc[N_ACT]] = i
                isc[N_ACT] += 1
        n_act = isc[N_ACT]
        if n_act == 0 and isc[N_TRANSIT] == 0 and isc[N_LACT] == 0:
            # nothing moves until the next timed event (or the caller's stop)
            nxt = t_stop
            if isc[HEAP_N] > 0 and hk[0] < nxt:
                nxt = hk[0]
            if nxt == np.inf:
                return RC_DONE, fe, fb, fs, ah_t, ah_v, ah_h, ah_n, free_slots
            s2 = int(math.ceil(nxt / dt))
            while s2 * dt < nxt:
                s2 += 1
            isc[STEP] = s2 if s2 > step else step + 1
            continue
        slot = step & (W - 1)
        # ---- ACKs, releases into the first hop, arrivals from the wire
        for a in range(n_act):
            f = active[a]
            s = aslot[f]
            while ah_n[s] > 0 and ah_t[s, ah_h[s]] <= t:
                ack[f] = ah_v[s, ah_h[s]]
                ah_h[s] = (ah_h[s] + 1) & (KH - 1)
                ah_n[s] -= 1
            # slow start without loss: before the first ACK the first flight (the peer's
            # unscaled window), then the window is IW + acknowledged bytes
            allowed = n0b[f] if ack[f] <= 0.0 else iwb[f] + 2.0 * ack[f]
            if allowed > wire[f]:
                allowed = wire[f]
            e0 = poff[f]
            got = False
            # what reaches each hop's queue this step: the sender's release at the first,
            # bytes off the wire at the others (and at the receiver)
            for e in range(e0, e0 + plen[f] + 1):
                if e == e0:
                    if not (allowed > rel[f]):
                        continue
                    x = allowed - rel[f]
                    rel[f] = allowed
                else:
                    x = tr[e, slot]
                    if x <= 0.0:
                        continue
                    tr[e, slot] = 0.0
                    isc[N_TRANSIT] -= 1
                l = elink[e]
                if l < 0:  # the receiver
                    dlv[f] += x
                    got = True
                    continue
                q[e] += x
                Q[l] += x
                if lin[l] == 0:
                    lin[l] = 1
                    lact[isc[N_LACT]] = l
                    isc[N_LACT] += 1
                if rn[l] == rcap[l]:
                    fe, fb, fs = _ring_grow(l, roff, rcap, rh, rn, fe, fb, fs, isc)
                j = roff[l] + ((rh[l] + rn[l]) & (rcap[l] - 1))
                fe[j] = e
                fb[j] = x
                fs[j] = step
                rn[l] += 1
            if got:
                # the ACK of what just arrived reaches the sender after the reverse path,
                # behind the data queued on it now (FIFO: an ACK never overtakes an earlier one)
                ta = t + ackfix[f] + _path_delay(f, poff, plen, elink, capv, Q, False, True)
                if ah_n[s] > 0:
                    last = (ah_h[s] + ah_n[s] - 1) & (KH - 1)
                    if ta < ah_t[s, last]:
                        ta = ah_t[s, last]
                    if ah_n[s] == KH or ta == ah_t[s, last]:
                        # full ring (or same instant): the newest record absorbs this one
                        ah_t[s, last] = ta
                        ah_v[s, last] = dlv[f]
                        continue
                j = (ah_h[s] + ah_n[s]) & (KH - 1)
                ah_t[s, j] = ta
                ah_v[s, j] = dlv[f]
                ah_n[s] += 1
        # ---- FIFO service
        k = 0
        while k < isc[N_LACT]:
            l = lact[k]
            budget = capv[l] * dt
            served = 0.0
            while budget > 0.0 and rn[l] > 0:
                h = rh[l]
                c = rcap[l]
                o = roff[l]
                st = fs[o + h]
                tot = 0.0
                m = 0
                while m < rn[l] and fs[o + ((h + m) & (c - 1))] == st:
                    tot += fb[o + ((h + m) & (c - 1))]
                    m += 1
                whole = tot <= budget
                frac = 1.0 if whole else budget / tot
                for u in range(m):
                    j = o + ((h + u) & (c - 1))
                    e = fe[j]
                    out = fb[j] if whole else fb[j] * frac
                    if out <= 0.0:
                        continue
                    fb[j] -= out
                    q[e] -= out
                    d = dly[l]
                    di = int(d)
                    w = d - di
                    # a slot is counted while it holds a positive amount
                    v = out * (1.0 - w)
                    if v > 0.0:
                        s0 = (step + di) & (W - 1)
                        if tr[e + 1, s0] == 0.0:
                            isc[N_TRANSIT] += 1
                        tr[e + 1, s0] += v
                    v = out * w
                    if v > 0.0:
                        s1 = (step + di + 1) & (W - 1)
                        if tr[e + 1, s1] == 0.0:
                            isc[N_TRANSIT] += 1
                        tr[e + 1, s1] += v
                if whole:
                    rh[l] = (h + m) & (c - 1)
                    rn[l] -= m
                    budget -= tot
                    served += tot
                else:
                    served += budget
                    budget = 0.0
            Q[l] -= served
            lbytes[l] += served
            if capv[l] > 0.0:
                lbusy[l] += served / capv[l]
            if rn[l] == 0:
                Q[l] = 0.0
                lin[l] = 0
                isc[N_LACT] -= 1
                lact[k] = lact[isc[N_LACT]]
                continue
            k += 1
        # ---- completions (the last byte reached the receiver this step)
        a = 0
        while a < isc[N_ACT]:
            f = active[a]
            if dlv[f] >= wire[f] - _slack(wire[f]):
                free_slots[isc[SLOT_USED] - 1] = aslot[f]
                isc[SLOT_USED] -= 1
                aslot[f] = -1
                isc[N_ACT] -= 1
                active[a] = active[isc[N_ACT]]
                _node_done(f, t, t_end, state, left, start, cptr, cidx, hk, hv, isc)
                isc[EVENTS] += 1
                continue
            a += 1
        isc[STEP] = step + 1
        # ---- nothing queued or on the wire: jump to the next ACK or timed event
        if isc[N_LACT] == 0 and isc[N_TRANSIT] == 0:
            nxt = t_stop
            if isc[HEAP_N] > 0 and hk[0] < nxt:
                nxt = hk[0]
            for a in range(isc[N_ACT]):
                s = aslot[active[a]]
                if ah_n[s] > 0 and ah_t[s, ah_h[s]] < nxt:
                    nxt = ah_t[s, ah_h[s]]
            if nxt < np.inf:
                s2 = int(math.ceil(nxt / dt))
                while s2 * dt < nxt:
                    s2 += 1
                if s2 > step + 1:
                    isc[STEP] = s2


# ================================================================ fault support
@njit(cache=True)
def stall(flows, isc, state, active, poff, plen, eflow, q, tr, rel, dlv, Q, roff, rcap, rh,
          rn, fe, fb, dead):
    """Flows whose path lost a link: every byte of theirs still queued or on the wire is lost
    (the sender will send it again from what was delivered), they leave the active set and
    wait for a new path. ``dead`` is a scratch boolean array over nodes."""
    for k in range(flows.shape[0]):
        dead[flows[k]] = True
    for l in range(rn.shape[0]):
        if rn[l] == 0:
            continue
        c = rcap[l]
        rest = 0.0
        hit = False
        for u in range(rn[l]):
            j = roff[l] + ((rh[l] + u) & (c - 1))
            # the flows' queued bytes are lost; a zero record keeps the ring's order intact
            if dead[eflow[fe[j]]] and fb[j] != 0.0:
                fb[j] = 0.0
                hit = True
            rest += fb[j]
        if hit:
            Q[l] = rest
            if rest == 0.0:
                # only lost records left (always so on a link that went down): empty the
                # ring; the service loop then retires the link
                rn[l] = 0
                rh[l] = 0
    for k in range(flows.shape[0]):
        f = flows[k]
        for e in range(poff[f], poff[f] + plen[f] + 1):
            q[e] = 0.0
            for s in range(tr.shape[1]):
                if tr[e, s] != 0.0:
                    tr[e, s] = 0.0
                    isc[N_TRANSIT] -= 1
        rel[f] = dlv[f]
        state[f] = STALLED
    a = 0
    while a < isc[N_ACT]:
        if dead[active[a]]:
            isc[N_ACT] -= 1
            active[a] = active[isc[N_ACT]]
            continue
        a += 1
    for k in range(flows.shape[0]):
        dead[flows[k]] = False


"""Slow, obviously-correct pure-Python versions of the flow engine, used only by the tests.

* :func:`max_min_rates`: weighted progressive filling, recomputed from scratch.
* :func:`simulate`: the whole fluid model (no faults) with a from-scratch max-min solve at
  every event, no incremental tricks, no event batching beyond "same instant"; with ``tcp``
  it also models the handshake and the slow-start caps (an event at every cap doubling of
  every flow, where the engine only wakes flows that are held at their cap).
* :func:`tcp_params` / :func:`tcp_single_flow_end`: the transport = "tcp" quantities and the
  closed-form completion time of a flow alone on its path (docs/flow_engine.md).
"""
from __future__ import annotations

import math


def max_min_rates(paths, cap, caps=None):
    """``paths[f]`` is a list of (link, weight) pairs; ``cap[l]`` the capacity of link l;
    ``caps[f]`` (optional) an upper bound on flow f's own rate (math.inf: none).

    Every unfrozen flow's rate rises together; the first link to fill freezes the flows on it,
    and a flow whose own bound is reached first freezes alone. Returns a list of rates.
    """
    n = len(paths)
    rate = [0.0] * n
    frozen = [False] * n
    used = sorted({l for p in paths for l, _ in p})
    while not all(frozen):
        levels = _link_levels(paths, cap, used, frozen, rate)
        if caps is not None:
            own = [(caps[f], f) for f in range(n) if not frozen[f] and caps[f] < math.inf]
            if own:
                c, f = min(own)
                if c <= min(levels.values(), default=math.inf):
                    frozen[f] = True
                    rate[f] = c
                    continue
        best, best_link = math.inf, None
        for l, level in levels.items():
            if level < best:
                best, best_link = level, l
        for f in range(n):
            if not frozen[f] and any(ll == best_link for ll, _ in paths[f]):
                frozen[f] = True
                rate[f] = best
    return rate


def _link_levels(paths, cap, used, frozen, rate):
    out = {}
    for l in used:
        load = wsum = 0.0
        for f in range(len(paths)):
            for ll, w in paths[f]:
                if ll == l:
                    if frozen[f]:
                        load += w * rate[f]
                    else:
                        wsum += w
        if wsum > 0:
            out[l] = max(cap[l] - load, 0.0) / wsum
    return out


# ---------------------------------------------------------------- transport = "tcp"
TCP_HEADER, PPP, ACK, SYN = 52, 2, 52, 56  # ns-3.44 TcpSocketBase (timestamps) over PPP
FIRST_WINDOW = 65535  # the SYN-ACK's unscaled window limits the first flight (RFC 7323 2.2)


def tcp_params(links, weights, bw, latency, hops, payload, mtu, init_cwnd=10, handshake=True):
    """(wire bytes, tail, handshake delay, RTT, cap base, first-round cap, cap bound) of one
    transfer whose
    path is ``links`` (directed link ids, hop order; reverse link = l ^ 1) with ``weights``,
    ``latency`` (one way) and ``hops``. A split (spray) flow uses hops x its slowest link."""
    mss = mtu - TCP_HEADER
    pkt = mtu + PPP
    npk = math.ceil(payload / mss) if payload > 0 else 0
    wire = payload + npk * (TCP_HEADER + PPP)
    last = pkt if npk > 1 else (payload + TCP_HEADER + PPP if npk == 1 else 0)
    if all(w == 1.0 for w in weights):
        rtt = 2 * latency + sum(pkt / bw[l] + (ACK + PPP) / bw[l ^ 1] for l in links)
        hs = 2 * latency + sum((SYN + PPP) / bw[l] + (SYN + PPP) / bw[l ^ 1] for l in links) \
            + (ACK + PPP) / bw[links[0]]
        tail = latency + sum(last / bw[l] for l in links[1:])
    else:
        b = min(bw[l] for l in links)
        rtt = 2 * latency + hops * (pkt + ACK + PPP) / b
        hs = 2 * latency + 2 * hops * (SYN + PPP) / b + (ACK + PPP) / b
        tail = latency + (hops - 1) * last / b
    bound = min(bw[l] / w for l, w in zip(links, weights))
    # round 0 sends n0 packets (all of init_cwnd, or what fits the SYN-ACK's window); each of
    # their ACKs grows the window by one, so round k >= 1 sends (init_cwnd + n0) * 2^(k-1)
    n0 = max(1, min(init_cwnd, FIRST_WINDOW // mss)) if handshake else init_cwnd
    return (wire, tail, (hs if handshake else 0.0), rtt, 0.5 * (init_cwnd + n0) * pkt / rtt,
            n0 * pkt / rtt, bound)


def tcp_single_flow_end(t0, wire, bottleneck, hs, rtt, cap0, tail, capf=None):
    """Completion time of a tcp flow alone on its path, round by round.

    Data starts at ``t0 + hs``. Slow-start round k (``k*rtt`` after that) sends at
    ``min(c_k, bottleneck)`` with ``c_0 = capf`` (default ``cap0``) and ``c_k = cap0 * 2**k``;
    a round whose cap is below the bottleneck carries exactly ``c_k * rtt`` bytes. The flow
    ends inside the first round that can carry what is left (at ``k*rtt + left / c_k``), or,
    from the first round whose cap reaches the bottleneck, after ``left / bottleneck``; plus
    ``t0 + hs`` before and ``tail`` after.
    """
    capf = cap0 if capf is None else capf
    left, k = float(wire), 0
    while True:
        c = capf if k == 0 else cap0 * 2.0 ** k
        if c >= bottleneck:
            drain = k * rtt + left / bottleneck
            break
        if left <= c * rtt:
            drain = k * rtt + left / c
            break
        left -= c * rtt
        k += 1
    return t0 + hs + drain + tail


def _round(td, rtt, t):
    """Slow-start round at t, with the engine's own expression for the round boundaries."""
    k = max(int((t - td) / rtt), 0)
    while td + (k + 1) * rtt <= t:
        k += 1
    while k > 0 and td + k * rtt > t:
        k -= 1
    return k


def simulate(kind, size, duration, start, parents, paths, tails, cap, tcp=None):
    """Event-by-event fluid simulation of a DAG (lists in, lists out).

    ``kind[i]`` 0 transfer / other = fixed duration; ``parents[i]`` list of node ids;
    ``paths[i]`` list of (link, weight) for transfers; ``tails[i]`` latency added after the last
    byte. ``tcp[i]`` (optional): (handshake, rtt, cap0, capf, cap_bound) of transfer i, whose
    ``size`` is then its wire bytes. Returns (start_times, end_times).
    """
    n = len(kind)
    t_start = [math.nan] * n
    t_end = [math.nan] * n
    left = [len(parents[i]) for i in range(n)]
    children = [[] for _ in range(n)]
    for i in range(n):
        for p in parents[i]:
            children[p].append(i)
    timed = []  # (time, 'start'|'data'|'end', node)
    rem = {}
    tdata = {}
    t = 0.0

    def cap_at(f, now):
        if tcp is None:
            return math.inf
        _, rtt, c0, cf, bound = tcp[f]
        k = _round(tdata[f], rtt, now)
        c = cf if k == 0 else c0 * 2.0 ** k
        return c if c < bound else math.inf

    def next_doubling(f, now):
        if cap_at(f, now) == math.inf:
            return math.inf
        rtt = tcp[f][1]
        return tdata[f] + (_round(tdata[f], rtt, now) + 1) * rtt

    def ready(i, now):
        if start[i] > now:
            timed.append((start[i], "start", i))
        else:
            begin(i, now)

    def begin(i, now):
        t_start[i] = now
        if kind[i] == 0 and tcp is not None and tcp[i][0] > 0:
            timed.append((now + tcp[i][0], "data", i))
        elif kind[i] == 0:
            data(i, now)
        else:
            timed.append((now + duration[i], "end", i))

    def data(i, now):  # the transfer's bytes start (after its handshake, if any)
        tdata[i] = now
        if size[i] > 0:
            rem[i] = float(size[i])
        else:
            timed.append((now + tails[i], "end", i))

    for i in range(n):
        if left[i] == 0:
            ready(i, 0.0)
    while rem or timed:
        active = sorted(rem)
        caps = [cap_at(f, t) for f in active]
        rates = max_min_rates([paths[f] for f in active], cap, caps) if active else []
        drain = {f: t + rem[f] / r for f, r in zip(active, rates) if r > 0}
        t_next = min(list(drain.values()) + [e[0] for e in timed] +
                     [next_doubling(f, t) for f in active])
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
                elif what == "data":
                    data(i, t)
                else:
                    t_end[i] = t
                    for c in children[i]:
                        left[c] -= 1
                        if left[c] == 0:
                            ready(c, t)
    return t_start, t_end

"""Prototype (research, not used by netcosim): the flow engine's tcp model with standing queues
in the round-trip time, run on the ns-3 suite's scenarios.

    python validation/experiments/queue_rtt_prototype.py [SCENARIO ...]

Why: the flow engine misses ns-3 by -24% (ring all-reduce), -12% (degraded link) and -25%
(oversubscribed all-to-all) because ACKs wait behind data in FIFO queues (docs/ns3.md, "ACK-
behind-data confirmed and measured"). This script tries the model proposed there before anyone
builds it into the Numba kernels: slow-start rounds become per-flow state whose length is
RTT0 + the queueing delay on the data path and on the ACK path (reverse links) at the round's
start; a link's standing queue is the excess window of the flows bottlenecked there (the first
saturated link of their path), min(window, remaining) - rate * RTT0. Everything else is
netcore.flow.reference (tcp parameters, max-min with caps); with the model off it reproduces the
flow engine. Only degrade faults at time 0 are applied (link_fail_midrun runs fault-free).

Result (session 2): ring -24.0% -> -3.0%, degraded_link -12.3% -> -2.5%, alltoall_leaf_spine
unchanged (-25.2%: its flows are link-bound from the start, so only FIFO sharing, not modelled
here, would change it), fullflat_alltoall -0.3% -> +17.3% (too slow: a round doubles the window
even when the flow is link-bound, where real slow start grows it by the bytes acknowledged, so
windows and queues are over-estimated), the other seven unchanged.
"""
import math
import sys
import tomllib
from pathlib import Path

import numpy as np

from netcore.flow import reference
from netcosim.runner import prepare
from netcosim.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]


def build(name):
    d = tomllib.load(open(ROOT / "validation" / "scenarios" / f"{name}.toml", "rb"))
    d["engine"] = {"kind": "flow", "transport": "tcp", "mtu": d["engine"].get("mtu", 9000)}
    sc = Scenario.from_dict(d, default_name=name)
    P = prepare(sc, True)
    return P, d["engine"]["mtu"]


def run(name, model=True):
    P, mtu = build(name)
    topo, sched, routing = P.topology, P.schedule, P.routing
    faults = P.faults
    tr = np.flatnonzero(sched.kind == 0)
    p = routing.paths(sched.src[tr], sched.dst[tr], flow_id=tr)
    n = sched.n
    bw = topo.dlink_bw.astype(float)
    cap_l = bw.copy()
    # degrade faults at t=0 only (degraded_link): apply to capacity
    if faults is not None and len(faults):
        for t, l, k, f in zip(faults.time, faults.dlink, faults.kind, faults.factor):
            if t == 0 and k == 1:
                cap_l[l] = bw[l] * f
    bwe = cap_l  # effective bandwidth for serialisation too
    paths, tails, tcp, links_of = [[] for _ in range(n)], [0.0] * n, [None] * n, [[] for _ in range(n)]
    size = sched.size.astype(float).tolist()
    iw = 10
    mss = mtu - 52
    pkt = mtu + 2
    n0 = max(1, min(iw, 65535 // mss))
    for j, i in enumerate(tr):
        links = p.link[p.ptr[j]:p.ptr[j + 1]].tolist()
        ws = p.weight[p.ptr[j]:p.ptr[j + 1]].tolist()
        paths[i] = [(l, 1.0) for l in links]
        links_of[i] = links
        wire, tail, hs, rtt, cap0, capf, bound = reference.tcp_params(
            links, ws, bwe, float(p.latency[j]), int(p.hops[j]), size[i], mtu, iw, True)
        size[i], tails[i], tcp[i] = wire, tail, (hs, rtt, cap0, capf, bound)
    parents = [sched.deps_of(i).tolist() for i in range(n)]
    kind = sched.kind.tolist()
    duration = sched.duration.tolist()
    start = sched.start.tolist()
    return simulate(kind, size, duration, start, parents, paths, tails, cap_l.tolist(), tcp,
                    links_of, n0, iw, pkt, model)


def simulate(kind, size, duration, start, parents, paths, tails, cap, tcp, links_of, n0, iw, pkt,
             model):
    n = len(kind)
    t_start = [math.nan] * n
    t_end = [math.nan] * n
    left = [len(parents[i]) for i in range(n)]
    children = [[] for _ in range(n)]
    for i in range(n):
        for q in parents[i]:
            children[q].append(i)
    timed = []
    rem, tdata = {}, {}
    rk, rstart, rlen = {}, {}, {}
    rate, bneck, capped = {}, {}, {}
    t = 0.0

    def window(k):
        return n0 * pkt if k == 0 else (iw + n0) * pkt * 2.0 ** (k - 1)

    def queues():
        Q = {}
        if not model:
            return Q
        for g, x in rate.items():
            if g not in rem or capped.get(g) or bneck.get(g) is None:
                continue
            w = window(rk[g])
            ex = min(w, rem[g]) - x * tcp[g][1]
            if ex > 0:
                Q[bneck[g]] = Q.get(bneck[g], 0.0) + ex
        return Q

    def delay(f, Q):
        d = 0.0
        for l in links_of[f]:
            d += Q.get(l, 0.0) / cap[l] + Q.get(l ^ 1, 0.0) / cap[l ^ 1]
        return d

    def advance(f, now, Q):
        while rstart[f] + rlen[f] <= now:
            rstart[f] += rlen[f]
            rk[f] += 1
            rlen[f] = tcp[f][1] + delay(f, Q)

    def cap_at(f):
        c = window(rk[f]) / rlen[f]
        return c if c < tcp[f][4] else math.inf

    def ready(i, now):
        if start[i] > now:
            timed.append((start[i], "start", i))
        else:
            begin(i, now)

    def begin(i, now):
        t_start[i] = now
        if kind[i] == 0:
            hs = tcp[i][0]
            if model:  # the handshake's packets queue too
                hs += delay(i, queues())
            timed.append((now + hs, "data", i))
        else:
            timed.append((now + duration[i], "end", i))

    def data(i, now):
        tdata[i] = now
        if size[i] > 0:
            rem[i] = float(size[i])
            rk[i] = 0
            rstart[i] = now
            rlen[i] = tcp[i][1] + delay(i, queues())
        else:
            timed.append((now + tails[i], "end", i))

    for i in range(n):
        if left[i] == 0:
            ready(i, 0.0)
    steps = 0
    while rem or timed:
        steps += 1
        Q = queues()
        active = sorted(rem)
        for f in active:
            advance(f, t, Q)
        caps = [cap_at(f) for f in active]
        rates = reference.max_min_rates([paths[f] for f in active], cap, caps) if active else []
        # bottleneck of each flow: a saturated link on its path (the first), or its cap
        load = {}
        for f, r in zip(active, rates):
            for l, _ in paths[f]:
                load[l] = load.get(l, 0.0) + r
        rate.clear()
        for f, r, c in zip(active, rates, caps):
            rate[f] = r
            capped[f] = c < math.inf and r >= c * (1 - 1e-9)
            bneck[f] = None
            if not capped[f]:
                for l, _ in paths[f]:
                    if load[l] >= cap[l] * (1 - 1e-9):
                        bneck[f] = l
                        break
        drain = {f: t + rem[f] / r for f, r in zip(active, rates) if r > 0}
        nexts = list(drain.values()) + [e[0] for e in timed] + \
            [rstart[f] + rlen[f] for f in active]
        t_next = min(nexts)
        for f, r in zip(active, rates):
            rem[f] -= r * (t_next - t)
        t = t_next
        for f in active:
            if f in drain and drain[f] <= t * (1 + 1e-12):
                del rem[f]
                rate.pop(f, None)
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
    return np.nanmax(t_end), steps


if __name__ == "__main__":
    import csv
    ns3 = {}
    for row in csv.DictReader(open(ROOT / "validation" / "results" / "ns3.csv")):
        ns3[row["scenario"]] = row
    names = sys.argv[1:] or [r for r in ns3]
    for name in names:
        ref = float(ns3[name]["ns3_makespan_us"]) if "ns3_makespan_us" in ns3[name] else None
        m0, _ = run(name, model=False)
        m1, steps = run(name, model=True)
        print(f"{name:26s} ns-3 {ref:9.1f}  base {m0 * 1e6:9.1f} ({(m0 * 1e6 - ref) / ref:+.1%})  "
              f"queue model {m1 * 1e6:9.1f} ({(m1 * 1e6 - ref) / ref:+.1%})  steps {steps}")

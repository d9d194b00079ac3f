"""Prototype (research, not used by netcosim): a fluid TCP model with standing queues in the
round-trip time, run on the ns-3 suite's scenarios against ns-3's makespans.

    python validation/experiments/queue_rtt_prototype.py [SCENARIO ...]   # ~1-3 min each

Why: the flow engine misses ns-3 by -24% (ring all-reduce), -12% (degraded link) and -25%
(oversubscribed all-to-all) because ACKs wait behind data in FIFO queues (docs/ns3.md, "ACK-
behind-data confirmed and measured"). This script tries a model for it before anyone builds one
into the Numba kernels. Time-stepped (dt = 0.5 us, plus the schedule's events), per transfer g:

* delivered_g(t): bytes through the network, at the max-min rate with caps (the reference's
  solver, netcore.flow.reference.max_min_rates);
* acknowledged_g(t) = delivered_g(t - lag_g), lag_g = RTT0_g (the engine's RTT) + the queueing
  delay on g's path except at its own bottleneck + on the reverse links its ACKs take;
* released_g = min(size, n0 packets) before the first ACK (the 65,535-byte first flight),
  then min(size, IW packets + 2 x acknowledged): slow start, one MSS per MSS acknowledged;
* backlog_g = released_g - delivered_g; a flow with no backlog is capped at the rate its
  release grows; a link's standing queue is the backlog of the flows whose first saturated
  link it is;
* handshake: the engine's, plus the queueing delay of its path at the start.
With the queues left out it reproduces the flow engine's tcp transport within ~0.5%.

Results (session 2; "no queues" / "queues", error against ns-3):

| scenario | no queues | queues |
|---|---:|---:|
| ring_allreduce_fat_tree | -24.1% | -7.7% |
| degraded_link | -12.3% | -9.7% |
| alltoall_leaf_spine | -25.2% | -18.9% |
| fullflat_alltoall | -0.3% | +0.1% |
| permutation_fat_tree | -1.0% | -0.4% |
| leaf_spine_oversub | -1.0% | +1.0% |
| chain_deps, incast_8to1, torus_ring, incast_small | -0.1%, 0.0%, +0.1%, +0.4% | same |
| link_fail_midrun (run without its fault: only degrades at time 0 are applied) | -4.4% | -3.8% |

A first version that kept the engine's slow-start rounds (window doubling per round of length
RTT0 + queueing) reached -3.0% and -2.5% on the first two but +17.3% on fullflat_alltoall: a
round doubles the window even when the flow is link-bound, where real slow start grows it by
the bytes acknowledged. What the all-to-all still lacks is FIFO sharing: a queue serves its
flows in proportion to what they feed it, not max-min. A simple proxy for it (`fifo=True`:
each flow capped at its bottleneck at capacity x its share of the queued bytes) moves
alltoall_leaf_spine to -14.6% and ring to -6.6% but fullflat_alltoall to +16.2%: wrong; FIFO
shares follow the flows' arrival rates into the queue, which this proxy does not track.
"""
import bisect
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



def run(name, model=True, dt=0.5e-6, fifo=False):
    P, mtu = build(name)
    topo, sched, routing, faults = P.topology, P.schedule, P.routing, P.faults
    tr = np.flatnonzero(sched.kind == 0)
    p = routing.paths(sched.src[tr], sched.dst[tr], flow_id=sched.routing_keys(tr))
    n = sched.n
    bw = topo.dlink_bw.astype(float)
    cap = bw.copy()
    if faults is not None and len(faults):
        for t, l, k, f in zip(faults.time, faults.dlink, faults.kind, faults.factor):
            if t == 0 and k == 1:
                cap[l] = bw[l] * f
    iw, mss, pkt = 10, mtu - 52, mtu + 2
    n0 = max(1, min(iw, 65535 // mss))
    paths, links_of, size, tail, hs, rtt0, bound = {}, {}, {}, {}, {}, {}, {}
    for j, i in enumerate(tr):
        links = p.link[p.ptr[j]:p.ptr[j + 1]].tolist()
        ws = p.weight[p.ptr[j]:p.ptr[j + 1]].tolist()
        wire, tl, h, r, _c0, _cf, b = reference.tcp_params(
            links, ws, cap, float(p.latency[j]), int(p.hops[j]), float(sched.size[i]), mtu, iw,
            True)
        paths[i], links_of[i] = [(l, 1.0) for l in links], links
        size[i], tail[i], hs[i], rtt0[i], bound[i] = wire, tl, h, r, b
    parents = [sched.deps_of(i).tolist() for i in range(n)]
    children = [[] for _ in range(n)]
    for i in range(n):
        for q in parents[i]:
            children[q].append(i)
    left = [len(parents[i]) for i in range(n)]
    kind, dur, start = sched.kind.tolist(), sched.duration.tolist(), sched.start.tolist()
    t_end = [math.nan] * n
    timed = []  # (time, what, node)
    served, hist, backlog, bneck = {}, {}, {}, {}
    t = 0.0

    def served_at(f, when):
        ts, ss = hist[f]
        if when <= ts[0]:
            return 0.0
        j = bisect.bisect_right(ts, when) - 1
        if j + 1 < len(ts):
            return ss[j] + (ss[j + 1] - ss[j]) * (when - ts[j]) / (ts[j + 1] - ts[j])
        return ss[j]

    def released(f, acked):
        if acked <= 0:
            return min(size[f], n0 * pkt)
        return min(size[f], iw * pkt + 2 * acked)

    Q = {}

    def delay(f, own):
        if not model:
            return 0.0
        d = 0.0
        for l in links_of[f]:
            if l != own:
                d += Q.get(l, 0.0) / cap[l]
            d += Q.get(l ^ 1, 0.0) / cap[l ^ 1]
        return d

    def ready(i, now):
        if start[i] > now:
            timed.append((start[i], "start", i))
        elif kind[i] == 0:
            timed.append((now + hs[i] + delay(i, None), "data", i))
        else:
            timed.append((now + dur[i], "end", i))

    for i in range(n):
        if left[i] == 0:
            ready(i, 0.0)
    lag = {}
    while served or timed:
        # events due now
        while True:
            due = [e for e in timed if e[0] <= t + 1e-15]
            if not due:
                break
            for e in due:
                timed.remove(e)
                _, what, i = e
                if what == "start":
                    ready(i, t)
                elif what == "data":
                    served[i] = 0.0
                    hist[i] = ([t], [0.0])
                    lag[i] = rtt0[i]
                else:
                    t_end[i] = t
                    for c in children[i]:
                        left[c] -= 1
                        if left[c] == 0:
                            ready(c, t)
        if not served:
            if not timed:
                break
            t = min(e[0] for e in timed)
            continue
        active = sorted(served)
        caps, rel = [], {}
        for f in active:
            a = served_at(f, t - lag[f])
            a_prev = served_at(f, t - dt - lag[f])
            rel[f] = released(f, a)
            b = max(0.0, rel[f] - served[f])
            backlog[f] = b
            grow = (released(f, served_at(f, t + dt - lag[f])) - rel[f]) / dt
            c = b / dt + max(0.0, grow)
            caps.append(c if c < bound[f] else math.inf)
        if fifo and model and Q:
            # FIFO proxy (fifo=True): a link with a standing queue serves its flows in
            # proportion to the bytes each has queued there (shares as caps, from the previous
            # step's queues; max-min hands out what is left)
            for idx, f in enumerate(active):
                bl = bneck.get(f)
                if bl is not None and Q.get(bl, 0.0) > 0 and backlog[f] > 0:
                    caps[idx] = min(caps[idx], cap[bl] * backlog[f] / Q[bl])
        rates = reference.max_min_rates([paths[f] for f in active], cap.tolist(), caps)
        load = {}
        for f, r in zip(active, rates):
            for l, _ in paths[f]:
                load[l] = load.get(l, 0.0) + r
        Q.clear()
        for f, r, c in zip(active, rates, caps):
            bneck[f] = None
            if c < math.inf and r >= c * (1 - 1e-9):
                continue  # window-limited: nothing waits
            for l, _ in paths[f]:
                if load[l] >= cap[l] * (1 - 1e-9):
                    bneck[f] = l
                    break
            if bneck[f] is not None:
                Q[bneck[f]] = Q.get(bneck[f], 0.0) + backlog[f]
        for f in active:
            lag[f] = rtt0[f] + delay(f, bneck[f])
        # step
        step = dt
        nxt = [e[0] for e in timed]
        if nxt:
            step = min(step, max(min(nxt) - t, 1e-12))
        for f, r in zip(active, rates):
            if r > 0:
                step = min(step, (size[f] - served[f]) / r)
        step = max(step, 1e-12)
        t += step
        for f, r in zip(active, rates):
            served[f] = min(size[f], served[f] + r * step)
            hist[f][0].append(t)
            hist[f][1].append(served[f])
            if served[f] >= size[f] * (1 - 1e-12):
                del served[f]
                timed.append((t + tail[f], "end", f))
    return np.nanmax(t_end)


if __name__ == "__main__":
    import csv
    ns3 = {r["scenario"]: float(r["ns3_makespan_us"])
           for r in csv.DictReader(open(ROOT / "validation" / "results" / "ns3.csv"))}
    for name in sys.argv[1:] or list(ns3):
        ref = ns3[name]
        m0 = run(name, model=False) * 1e6
        m1 = run(name, model=True) * 1e6
        print(f"{name:26s} ns-3 {ref:9.1f}  no queues {m0:9.1f} ({(m0 - ref) / ref:+.1%})  "
              f"queues {m1:9.1f} ({(m1 - ref) / ref:+.1%})", flush=True)

"""Which tie rule still differs between ns-3 and the packet engine's ``ns3_ties`` mode.

    PYTHONPATH=. python validation/experiments/tie_rule_mini.py SCENARIO.toml [--jitter J --seed S]

A minimal event simulator of loss-free TCP transfers (SYN, SYN-ACK in a
``ScheduleNow`` event of its own, handshake ACK + the data segment in the SYN-ACK's arrival
event, one ACK per segment, slow start as ns-3's NewReno (see ``mini``); 58/58/54/payload+54/54
bytes on the wire; FIFO ports, store and forward,
static paths from the scenario's routing), whose events are ordered by (time, sequence number
taken when the event is scheduled), as ns-3's scheduler (uid) and the packet engine (seq) do.
Arrivals and ends of serialisation take their numbers when the serialisation starts
(TransmitComplete first, then the far end's Receive), as in ns-3 and in ``ns3_ties``.

It has exactly one switch, the rule deciding when a port may start its next packet:

* ``ns3``: ns-3's ``PointToPointNetDevice`` stays BUSY until its ``TransmitComplete`` event has
  run. A packet that arrives at exactly the end of the current serialisation, in an event that
  runs before that ``TransmitComplete`` (its number was taken upstream, earlier), is queued and
  starts in the ``TransmitComplete`` event; so of the two events at that picosecond, the
  *later* one starts it.
* ``engine``: the packet engine (``Sim::try_start``) treats a port as idle once
  ``busy_until <= now``, so that packet starts in its own arrival event, the *earlier* one.

The next start takes new sequence numbers in whichever event started it, so the two rules
order later same-picosecond arrivals at a common port differently. The script runs ns-3 and the
packet engine (``ns3_ties = true``) on the scenario through ``tie_jitter.run_one`` and compares
per-transfer end times with the mini simulator under each rule. Loss-free runs only (deep
buffers); MSS = mtu - 52.
"""
from __future__ import annotations

import argparse
import heapq
import sys
import tempfile
from pathlib import Path

import numpy as np

SYN, SYNACK, HSACK, DATA, ACK = range(5)
WIRE = {SYN: 58, SYNACK: 58, HSACK: 54, ACK: 54}  # IP + PPP bytes (docs/ns3.md)


def mini(topology, routing, schedule, rule: str, mss: int = 8948, init_cwnd: int = 10):
    """End time (s) of every transfer of ``schedule`` under port rule ``rule``. Transfers of
    several segments follow ns-3's TcpSocketBase + TcpNewReno without loss: 10-segment initial
    window, the SYN-ACK's unscaled 65535-byte window until the first ACK of data, +1 MSS per
    ACK (slow start throughout: nothing is lost), a segment goes out when the bytes in flight
    plus its payload fit in min(cwnd, peer window); one ACK per segment, sent in the segment's
    arrival event; new segments go out in the ACK's arrival event."""
    from netcore.schedule import TRANSFER

    tidx = np.flatnonzero(schedule.kind == TRANSFER)
    p = routing.paths(schedule.src[tidx], schedule.dst[tidx], flow_id=schedule.routing_keys(tidx))
    fwd = [list(p.link[p.ptr[k]:p.ptr[k + 1]]) for k in range(len(tidx))]
    rev = [[int(l) ^ 1 for l in reversed(f)] for f in fwd]
    size = schedule.size[tidx].astype(np.int64)
    bw = topology.dlink_bw
    lat = np.rint(topology.dlink_lat * 1e12).astype(np.int64)
    D = topology.n_dlinks
    ev: list = []
    seq = [0]
    now = [0]

    def take():
        seq[0] += 1
        return seq[0]

    q = [[] for _ in range(D)]
    qh = [0] * D
    busy_until = [0] * D
    busy = [False] * D
    txdone_seq = [0] * D
    txdone_pending = [False] * D
    end = np.full(len(tidx), np.nan)
    sent = np.zeros(len(tidx), np.int64)    # bytes handed to IP
    acked = np.zeros(len(tidx), np.int64)   # bytes cumulatively acknowledged
    got = np.zeros(len(tidx), np.int64)     # bytes received in order
    cwnd = np.full(len(tidx), init_cwnd * mss, np.int64)
    wnd = np.full(len(tidx), 65535, np.int64)

    def start(l):
        f, typ, hop, n = q[l][qh[l]]
        qh[l] += 1
        wire = WIRE[typ] if typ != DATA else n + 54
        ser = int(round(wire * 1e12 / bw[l]))
        busy_until[l] = now[0] + ser
        busy[l] = True
        txdone_seq[l] = take()  # TransmitComplete first, then the far end's Receive
        heapq.heappush(ev, (now[0] + ser + int(lat[l]), take(), "arr", (l, f, typ, hop, n)))
        if rule == "ns3":
            heapq.heappush(ev, (busy_until[l], txdone_seq[l], "txdone", l))
        elif qh[l] < len(q[l]):
            heapq.heappush(ev, (busy_until[l], txdone_seq[l], "txdone", l))
            txdone_pending[l] = True

    def try_start(l):
        if qh[l] >= len(q[l]):
            return
        if rule == "ns3":
            if not busy[l]:
                start(l)
            return
        if busy_until[l] > now[0]:
            if not txdone_pending[l]:
                heapq.heappush(ev, (busy_until[l], txdone_seq[l], "txdone", l))
                txdone_pending[l] = True
            return
        start(l)

    def send(l, f, typ, hop, n=0):
        q[l].append((f, typ, hop, n))
        try_start(l)

    def send_data(f):
        first = fwd[f][0]
        while sent[f] < size[f]:
            n = int(min(mss, size[f] - sent[f]))
            if sent[f] - acked[f] + n > min(cwnd[f], wnd[f]):
                break
            sent[f] += n
            send(first, f, DATA, 0, n)

    def path(f, typ):
        return fwd[f] if typ in (SYN, HSACK, DATA) else rev[f]

    for f in range(len(tidx)):
        heapq.heappush(ev, (0, take(), "release", f))
    while ev:
        t, _, kind, a = heapq.heappop(ev)
        now[0] = t
        if kind == "release":
            send(path(a, SYN)[0], a, SYN, 0)
        elif kind == "synack":  # ns-3 ProcessListen -> ScheduleNow(CompleteFork)
            send(path(a, SYNACK)[0], a, SYNACK, 0)
        elif kind == "txdone":
            if rule == "ns3":
                busy[a] = False
                try_start(a)
            elif txdone_pending[a] and t == busy_until[a]:
                txdone_pending[a] = False
                try_start(a)
        else:
            l, f, typ, hop, n = a
            links = path(f, typ)
            if hop + 1 < len(links):
                send(links[hop + 1], f, typ, hop + 1, n)
            elif typ == SYN:
                heapq.heappush(ev, (t, take(), "synack", f))
            elif typ == SYNACK:
                send(path(f, HSACK)[0], f, HSACK, 0)
                send_data(f)
            elif typ == DATA:
                got[f] += n
                send(path(f, ACK)[0], f, ACK, 0, int(got[f]))  # n: cumulative ACK
                if got[f] == size[f]:
                    end[f] = t / 1e12
            elif typ == ACK:
                if n > acked[f]:
                    acked[f] = n
                    cwnd[f] += mss
                    wnd[f] = 1 << 30
                    send_data(f)
    return end


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import tie_jitter
    from netcosim.scenario import load_scenario

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario")
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path = Path(args.scenario)
    sc = load_scenario(path)
    prep = sc.with_full_detail().prepare(check_engine=False)
    topo, routing = prep.topology, prep.routing
    if args.jitter > 0:
        topo, _ = tie_jitter.jittered_topology(topo, args.jitter, args.seed)
        routing = sc.build_routing(topo)
    with tempfile.TemporaryDirectory() as tmp:
        row = tie_jitter.run_one(path, args.jitter, args.seed, save=Path(tmp))
        z = dict(np.load(next(Path(tmp).glob("*.npz"))))
    print(tie_jitter._line(row))
    t = z["size"] > 0
    real = {"ns-3": z["ns3_end"][t], "packet ns3_ties": z["ns3ties_end"][t]}
    mss = int(sc.engine.get("mtu", 9000)) - 52  # as validation/ns3/runner.py HEADER_BYTES
    for rule in ("ns3", "engine"):
        e = mini(topo, routing, prep.schedule, rule, mss=mss)
        for name, r in real.items():
            d = np.abs(e - r)
            print(f"mini rule={rule:6s} vs {name:15s}: {int((d > 1e-15).sum()):5d} of {len(e)} "
                  f"transfer ends differ (max {d.max() * 1e9:.3f} ns); makespan mini "
                  f"{np.nanmax(e) * 1e6:.5f} us, {name} {np.nanmax(r) * 1e6:.5f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

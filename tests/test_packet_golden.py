"""Packet engine golden results: 32 small runs whose every result array is hashed.

Why: the engine's speed work (event queue layout, prefetching, memory layout) must never change
a result. These cases cover every transport, per-path and per-hop routing, all-to-all, ring
all-reduce with dependencies, incast with drops, random loss, warm connections, delayed ACKs,
ns-3 tie order, and a link going down, degrading and coming back mid-run with reroutes. The
cases run with eager ports (ns3_ties = false) unless their name ends in "-ns3ties": the
table predates ns-3's order becoming the default (session 38) and holds both orders. A hash
changes only when the model does; then check the change on purpose and update the table:

    python tests/test_packet_golden.py      # prints the current table
"""
import hashlib

import numpy as np
import pytest

import collectives
from netcore.packet import run
from netcore.schedule import Schedule
from topo.builders import fat_tree
from topo.faults import DEGRADE, DOWN, UP, LinkFaults
from topo.routing import Routing

GOLDEN = {
    # session 41: DCTCP as ns-3's TcpDctcp runs it (TcpLinuxReno growth, no growth in CWR,
    # the cut with the alpha before the ACK, ECT on every packet, ns-3's alpha windows; Linux's
    # floor of two segments on a cut kept); and
    # a sender whose receiver holds everything keeps its timers until its last ACK (a lost
    # last ACK has it resend the tail, as in ns-3): every dctcp case but ring-dctcp, and the
    # tcp cases with drops (makespans: a2a-tcp-spray 1000368.8 -> 1000347.7 us, adaptive
    # 2000281.6 -> 2000234.5, fault-a2a-tcp-ns3ties 3000313.0 -> 3000352.2; a2a-tcp-ecmp,
    # -loss and fault-a2a-tcp unchanged: only their resends and link bytes moved)
    # session 40: with delayed ACKs the listener ACKs the first data segment at once (ns-3
    # ProcessSynRcvd), and at once while it holds out-of-order data: a2a-tcp-delack only
    # (makespan 540.120 -> 540.154 us); RTT samples in ns-3's milliseconds changed no case
    # session 29: an ideal sender keeps at most host_queue_packets of its own frames in its
    # NIC (it queued up to buffer_packets, so one NIC's flows ran in series): every ideal
    # case (queue statistics and events; all-to-all makespans 643.9 -> 387.6 us adaptive,
    # 685.1 -> 453.4 ecmp, 642.2 -> 389.8 spray, 1547.1 -> 727.0 with faults; ring and
    # incast makespans unchanged)
    # session 28: DCTCP marks at switch queues only (not the sender's own NIC queue), changing
    # the dctcp cases; a link coming back up routes again the transfers not yet started (the
    # fault cases: reroutes 1 -> 2)
    # session 25: TCP recovery on ns-3's scoreboard with SACK changed every case with drops
    "a2a-tcp-ecmp": "9fb6c80d93bf",
    "a2a-tcp-spray": "2754fb2bf550",
    "a2a-tcp-adaptive": "ec78504c825c",
    "ring-tcp": "cc8c4d9e33cb",
    "inc-tcp": "bfe43b9d1171",
    "a2a-dctcp-ecmp": "ed16af3ad49f",
    "a2a-dctcp-spray": "2b06436a7e79",
    "a2a-dctcp-adaptive": "790d05e9cb2e",
    "ring-dctcp": "cc8c4d9e33cb",
    "inc-dctcp": "ceb265d3247c",
    "a2a-ideal-ecmp": "1b7e2fa819a4",
    "a2a-ideal-spray": "f3836eca097a",
    "a2a-ideal-adaptive": "a7813e90c0c3",
    "ring-ideal": "e8dcaaa8c1b4",
    "inc-ideal": "150aaee92fd8",
    "a2a-dcqcn-ecmp": "8b4609fa7a61",
    "a2a-dcqcn-spray": "d79a3120d06d",
    "a2a-dcqcn-adaptive": "8368da27ab3d",
    "ring-dcqcn": "eca1dd0c63a6",
    "inc-dcqcn": "ea29f3e36705",
    "a2a-tcp-loss": "98dd097b995a",
    "a2a-tcp-warm": "6e7ec97e3350",
    "a2a-tcp-delack": "e339820bc8bd",
    "a2a-tcp-ns3ties": "21ce806f3109",  # session 11: ns-3's busy port at busy_until == now
    # session 38: ns-3's order (the default now) on the other kinds of case too
    "ring-tcp-ns3ties": "0003115d6230",
    "inc-tcp-ns3ties": "81da605150c0",
    "a2a-dcqcn-ns3ties": "50c380b9d1d5",
    "inc-ideal-ns3ties": "4e3c75082721",
    "fault-a2a-tcp-ns3ties": "8da77a1b513f",
    "fault-ring-dcqcn-ns3ties": "d567f32ebf41",
    "fault-a2a-tcp": "1916b90ddf88",
    "fault-ring-tcp": "cfa24e9b29fb",
    "fault-a2a-dctcp": "8c5a18bc7875",
    "fault-ring-dctcp": "094ad0198506",
    "fault-a2a-ideal": "5d12dfb29b7c",
    "fault-ring-ideal": "75afcda0508e",
    "fault-a2a-dcqcn": "cb5d3ffd716b",
    "fault-ring-dcqcn": "0e01537919a4",
}


def _digest(res) -> str:
    m = hashlib.sha1()
    for a in (res.start, res.end, res.link_bytes, res.link_busy):
        m.update(np.ascontiguousarray(a).tobytes())
    for k in sorted(res.link_extra):
        m.update(np.ascontiguousarray(res.link_extra[k]).tobytes())
    m.update(np.ascontiguousarray(res.node_extra["retransmissions"]).tobytes())
    m.update(str(res.events).encode())
    return m.hexdigest()[:12]


def _cases():
    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    hs = np.arange(t.n_hosts)
    ring = collectives.build("all_reduce", "ring", hs, 4 << 20)
    src, dst = np.meshgrid(hs, hs, indexing="ij")
    m = src != dst
    a2a = Schedule.from_transfers(src[m], dst[m], np.full(int(m.sum()), 300_000))
    inc = Schedule.from_transfers(np.arange(1, 9), np.zeros(8, int), np.full(8, 2_000_000))
    none = LinkFaults.none()
    # host 10's uplink (dlinks 40/41) goes down, an edge-aggregation link (60/61) drops to a
    # quarter of its rate, then the uplink comes back
    faults = LinkFaults(np.array([200e-6, 200e-6, 300e-6, 300e-6, 900e-6, 900e-6]),
                        np.array([40, 41, 60, 61, 40, 41]),
                        np.array([DOWN, DOWN, DEGRADE, DEGRADE, UP, UP]),
                        np.array([0, 0, .25, .25, 1, 1.]))
    cases = {}
    for tr in ["tcp", "dctcp", "ideal", "dcqcn"]:
        k = {"ecn_k": 10} if tr == "dctcp" else {}
        for pol in ["ecmp", "spray", "adaptive"]:
            cases[f"a2a-{tr}-{pol}"] = (t, a2a, pol, none,
                                        dict(transport=tr, mtu=9000, buffer_packets=30, **k))
        cases[f"ring-{tr}"] = (t, ring, "ecmp", none, dict(transport=tr, mtu=4000))
        cases[f"inc-{tr}"] = (t, inc, "ecmp", none,
                              dict(transport=tr, mtu=1500, buffer_packets=8,
                                   **({"ecn_k": 4} if tr == "dctcp" else {})))
    for name, extra in (("loss", {"loss_rate": 0.001}), ("warm", {"warm_connections": True}),
                        ("delack", {"delayed_ack": True}), ("ns3ties", {"ns3_ties": True})):
        cases[f"a2a-tcp-{name}"] = (t, a2a, "ecmp", none, dict(transport="tcp", mtu=9000, **extra))
    for tr in ["tcp", "dctcp", "ideal", "dcqcn"]:
        k = {"ecn_k": 10} if tr == "dctcp" else {}
        for nm, sched in (("a2a", a2a), ("ring", ring)):
            cases[f"fault-{nm}-{tr}"] = (t, sched, "ecmp", faults,
                                         dict(transport=tr, mtu=9000, buffer_packets=30, **k))
    for name in ("ring-tcp", "inc-tcp", "a2a-dcqcn-ecmp", "inc-ideal", "fault-a2a-tcp",
                 "fault-ring-dcqcn"):
        topo, sched, policy, faults, opts = cases[name]
        cases[f"{name.removesuffix('-ecmp')}-ns3ties"] = (topo, sched, policy, faults,
                                                          dict(opts, ns3_ties=True))
    return cases


def _run(case):
    topo, sched, policy, faults, opts = case
    return run(topo, sched, Routing(topo, policy, seed=3), faults, seed=2,
               **dict({"ns3_ties": False}, **opts))


@pytest.fixture(scope="module")
def cases():
    return _cases()


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_packet_results_are_unchanged(cases, name):
    res = _run(cases[name])
    if name.startswith("fault-"):
        assert res.info["reroutes"] >= 1  # the case does exercise rerouting
    assert _digest(res) == GOLDEN[name]


if __name__ == "__main__":
    for name, case in _cases().items():
        print(f'    "{name}": "{_digest(_run(case))}",')

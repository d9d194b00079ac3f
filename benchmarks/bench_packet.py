"""Packet engine speed and memory (figures go in docs/packet_engine.md; nothing is asserted).

    python benchmarks/bench_packet.py            # both cases
    python benchmarks/bench_packet.py alltoall   # fat_tree(k=8) all-to-all, tcp
    python benchmarks/bench_packet.py ring       # fat_tree(k=8) ring all-reduce 128 MiB, tcp
    python benchmarks/bench_packet.py incremental  # cost of one add_transfers + advance pair

Packet-hop events are every event the core processes (arrivals at the far end of a link,
transmissions, timers); events/s is over the engine's own wall time (Result.wall_s).
"""
import resource
import sys
import time

import numpy as np

import collectives
from netcore.packet import run
from netcore.schedule import Schedule
from topo.builders import fat_tree
from topo.faults import LinkFaults
from topo.routing import Routing


def report(name, res, setup_s):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name}: makespan {res.makespan * 1e3:.3f} ms simulated, engine wall {res.wall_s:.2f} s "
          f"(+{setup_s:.2f} s set-up), events {res.events:,}, "
          f"{res.events / res.wall_s / 1e6:.2f} M events/s, drops {res.info['drops']}, "
          f"retransmissions {res.info['retransmissions']}, peak packets "
          f"{res.info['peak_packets']:,}, max RSS {rss:.0f} MiB, finished "
          f"{int(res.finished.sum())}/{len(res.end)}")


def alltoall(nbytes=256 * 1024, mtu=9000):
    t = fat_tree(8, link_gbps=400, latency_us=0.5)
    h = t.n_hosts
    src, dst = np.meshgrid(np.arange(h), np.arange(h), indexing="ij")
    m = src != dst
    s = Schedule.from_transfers(src[m], dst[m], np.full(int(m.sum()), nbytes))
    t0 = time.perf_counter()
    r = Routing(t, "ecmp", seed=1)
    res = run(t, s, r, LinkFaults.none(), seed=1, transport="tcp", mtu=mtu)
    report(f"fat_tree(k=8) all-to-all {h}x{h - 1} x {nbytes} B, tcp, mtu {mtu}", res,
           time.perf_counter() - t0 - res.wall_s)


def ring(nbytes=128 << 20, mtu=9000):
    t = fat_tree(8, link_gbps=400, latency_us=0.5)
    s = collectives.build("all_reduce", "ring", np.arange(t.n_hosts), nbytes)
    t0 = time.perf_counter()
    r = Routing(t, "ecmp", seed=1)
    res = run(t, s, r, LinkFaults.none(), seed=1, transport="tcp", mtu=mtu)
    report(f"fat_tree(k=8) ring all-reduce {nbytes >> 20} MiB over {t.n_hosts} ranks "
           f"({s.n_transfers} transfers), tcp, mtu {mtu}", res,
           time.perf_counter() - t0 - res.wall_s)


def incremental(steps=2000):
    """A chain of 1-byte ideal transfers between two hosts of a fat_tree(k=4), each added when
    the previous one completes: per pair of calls the core runs only a handful of events, so
    the time per pair is the Python + binding overhead of co-simulation."""
    from netcore.packet.incremental import PacketIncremental

    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    inc = PacketIncremental(t, Routing(t, "ecmp"), LinkFaults.none(), transport="ideal")
    t0 = time.perf_counter()
    now = 0.0
    for i in range(steps):
        inc.add_transfers([i % 2], [1 - i % 2], [1], start_s=now)
        now, done = inc.advance(None)
    wall = time.perf_counter() - t0
    res = inc.result()
    print(f"incremental: {steps} add_transfers + advance pairs in {wall:.3f} s = "
          f"{wall / steps * 1e6:.1f} us per pair ({res.events / steps:.1f} events per pair)")


if __name__ == "__main__":
    which = sys.argv[1:] or ["alltoall", "ring", "incremental"]
    for w in which:
        {"alltoall": alltoall, "ring": ring, "incremental": incremental}[w]()

"""Packet engine speed and memory (figures go in docs/packet_engine.md; nothing is asserted).

    python benchmarks/bench_packet.py            # both cases
    python benchmarks/bench_packet.py alltoall   # fat_tree(k=8) all-to-all, tcp
    python benchmarks/bench_packet.py ring       # fat_tree(k=8) ring all-reduce 128 MiB, tcp
    python benchmarks/bench_packet.py incremental  # cost of one add_transfers + advance pair
    python benchmarks/bench_packet.py ring eager   # the same with eager ports (ns3_ties = false)

tcp runs in ns-3's order of events at equal picoseconds by default (ns3_ties, session 38);
`eager` gives the faster eager ports that were the default before.

Two counts: packet-hop events (a packet arriving at the far end of a link, i.e. at a node:
`info["events_by_kind"]["arrive"]`, the issue's metric, comparable across engine versions) and
raw events (everything the core pops: arrivals, timers, node events; tcp/dctcp ports have no
end-of-serialisation events since the third speed pass, so raw counts dropped ~44% for the
same work). Rates are over the engine's own wall time (Result.wall_s) and over the CPU time of
the whole `run` call (time.process_time, set-up included), which the shared machine's load
disturbs less.
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


EAGER = "eager" in sys.argv[1:]
ORDER = {"ns3_ties": False} if EAGER else {}
ORDER_NAME = " (eager ports)" if EAGER else ""


def report(name, res, setup_s, cpu_s):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    hops = res.info["events_by_kind"]["arrive"]
    print(f"{name}: makespan {res.makespan * 1e3:.3f} ms simulated, engine wall {res.wall_s:.2f} s "
          f"(+{setup_s:.2f} s set-up), run CPU {cpu_s:.2f} s, packet hops {hops:,} "
          f"({hops / res.wall_s / 1e6:.2f} M/s wall, {hops / cpu_s / 1e6:.2f} M/CPU-s), "
          f"raw events {res.events:,} ({res.events / res.wall_s / 1e6:.2f} M/s wall), "
          f"drops {res.info['drops']}, "
          f"retransmissions {res.info['retransmissions']}, peak packets "
          f"{res.info['peak_packets']:,}, max RSS {rss:.0f} MiB, finished "
          f"{int(res.finished.sum())}/{len(res.end)}")


def alltoall(nbytes=None, mtu=9000):
    if nbytes is None:  # `bench_packet.py alltoall 65536` picks the transfer size
        sizes = [int(a) for a in sys.argv[2:] if a.isdigit()]
        nbytes = sizes[0] if sizes else 256 * 1024
    t = fat_tree(8, link_gbps=400, latency_us=0.5)
    h = t.n_hosts
    src, dst = np.meshgrid(np.arange(h), np.arange(h), indexing="ij")
    m = src != dst
    s = Schedule.from_transfers(src[m], dst[m], np.full(int(m.sum()), nbytes))
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = Routing(t, "ecmp", seed=1)
    res = run(t, s, r, LinkFaults.none(), seed=1, transport="tcp", mtu=mtu, **ORDER)
    cpu = time.process_time() - c0
    report(f"fat_tree(k=8) all-to-all {h}x{h - 1} x {nbytes} B, tcp{ORDER_NAME}, mtu {mtu}", res,
           time.perf_counter() - t0 - res.wall_s, cpu)


def ring(nbytes=128 << 20, mtu=9000):
    t = fat_tree(8, link_gbps=400, latency_us=0.5)
    s = collectives.build("all_reduce", "ring", np.arange(t.n_hosts), nbytes)
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = Routing(t, "ecmp", seed=1)
    res = run(t, s, r, LinkFaults.none(), seed=1, transport="tcp", mtu=mtu, **ORDER)
    cpu = time.process_time() - c0
    report(f"fat_tree(k=8) ring all-reduce {nbytes >> 20} MiB over {t.n_hosts} ranks "
           f"({s.n_transfers} transfers), tcp{ORDER_NAME}, mtu {mtu}", res,
           time.perf_counter() - t0 - res.wall_s, cpu)


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
    which = ([a for a in sys.argv[1:] if not a.isdigit() and a != "eager"]
             or ["alltoall", "ring", "incremental"])
    for w in which:
        {"alltoall": alltoall, "ring": ring, "incremental": incremental}[w]()

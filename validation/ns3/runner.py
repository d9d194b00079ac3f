"""`run_ns3`: run a Schedule on a Topology in ns-3 and return the engines' Result type.

Python only prepares flat arrays (paths per routing epoch, the DAG, faults) and collects the
outputs; the run itself (connections, dependency release, compute timers, faults) happens in
the C++ driver (driver.cc) inside ns-3's event loop. See docs/ns3.md for every ns-3 setting.
"""
from __future__ import annotations

import time

import numpy as np

from netcore.packet import plane_split
from netcore.packet.engine import two_way
from netcore.result import Result
from netcore.schedule import TRANSFER, Schedule
from topo.errors import InputError
from topo.faults import LinkFaults
from validation.ns3 import binding
from validation.ns3.support import TRANSPORTS_OK, NS3Unsupported, check_options, check_policy

# TCP/IP header bytes in every data segment: IPv4 20 + TCP 20 + timestamp option 12 (ns-3
# sends the option on every segment when Timestamp is on, its default). MSS = MTU - 52 makes a
# full segment exactly one MTU-sized IP packet.
HEADER_BYTES = 52
PPP_BYTES = 2  # PointToPointNetDevice adds a 2-byte PPP header to every frame on the wire

# TCP settings (docs/ns3.md explains each against the ns-3.44 default it replaces); the
# timers, windows and ACK policy come from the scenario's engine options (support.TCP_PASSED)
TCP = {
    "snd_buf": 1 << 31,  # the whole transfer is handed to TCP at once (in 1 GiB Send calls)
    "rcv_buf": 1 << 30,  # window never limits: 2^30 is the largest window scale 14 can advertise
    "timestamps": True,  # ns-3 default (MSS = MTU - 52 assumes it)
    "recovery": "ns3::TcpClassicRecovery",
}
# what fits the send buffer; also keeps a transfer within half the 32-bit sequence space
MAX_TRANSFER_BYTES = (1 << 31) - 1


def _epochs(topology, faults: LinkFaults):
    """Routing epochs: [(time, alive mask)], a new one whenever the set of live links
    changes."""
    D = topology.n_dlinks
    out = [(0.0, faults.alive_at(D, 0.0))]
    for t in np.unique(faults.time[faults.time > 0]):
        alive = faults.alive_at(D, float(t))
        if not np.array_equal(alive, out[-1][1]):
            out.append((float(t), alive))
    return out


def _refuse_revisits(routing, paths, tidx) -> None:
    """A path through some node twice (valiant's detour to an intermediate switch and back
    over the same link) needs two next hops for one destination address there, which the
    hop-by-hop static routes cannot hold: ns-3 would loop it, and the transfer never ended
    (the engines follow the path as given). Refused by name."""
    topology = routing.topology
    k = np.repeat(np.arange(tidx.size), np.diff(paths.ptr))
    node = np.asarray(topology.dlink_src, dtype=np.int64)[paths.link]
    key = np.sort(k * np.int64(topology.n_nodes) + node)
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.size:
        i, v = divmod(int(key[dup[0]]), int(topology.n_nodes))
        raise NS3Unsupported(f"routing.policy = {routing.policy!r}: the path of transfer "
                             f"{int(tidx[i])} passes node {v} twice, which ns-3's "
                             f"per-destination static routes cannot reproduce")


def _epoch_paths(routing, schedule: Schedule, alive, tidx, plane=None):
    """Per node CSR of directed links (empty for compute/delay), and reachability. ``plane``:
    per node of a plane-split schedule, the plane its path stays in (as the packet engine)."""
    n = schedule.n
    ptr = np.zeros(n + 1, dtype=np.int64)
    reach = np.ones(n, dtype=np.uint8)
    if tidx.size == 0:
        return ptr, np.zeros(0, dtype=np.int32), reach
    if plane is not None:
        p = plane_split.paths(routing, schedule.src[tidx], schedule.dst[tidx],
                              schedule.routing_keys(tidx), plane[tidx], alive)
    else:
        p = routing.paths(schedule.src[tidx], schedule.dst[tidx],
                          flow_id=schedule.routing_keys(tidx), alive=alive)
    if p.weight.size and not np.all(p.weight == 1.0):
        raise NS3Unsupported(f"routing.policy = {routing.policy!r}: splits flows over several "
                             f"paths, which ns-3 static routes cannot reproduce")
    _refuse_revisits(routing, p, tidx)
    cnt = np.zeros(n, dtype=np.int64)
    cnt[tidx] = np.diff(p.ptr)
    ptr[1:] = np.cumsum(cnt)
    reach[tidx] = p.reachable.astype(np.uint8)
    return ptr, np.ascontiguousarray(p.link, dtype=np.int32), reach


def _vec(v, dtype):
    """A cppyy std::vector as a numpy copy."""
    n = int(v.size())
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.array(np.frombuffer(v.data(), dtype=dtype, count=n))


def run_ns3(topology, schedule: Schedule, routing, faults: LinkFaults | None = None,
            mtu: int = 9000, buffer_packets: int = 1000, seed: int = 0,
            horizon_s: float = 0.0, trace_links=None, trace_cwnd=None,
            **engine_options) -> Result:
    """Run ``schedule`` in ns-3. ``routing`` is a ``topo.routing.Routing``; other engine
    options are checked by :func:`validation.ns3.support.check_options` (features ns-3 cannot
    reproduce are refused by name). ``seed`` is accepted for symmetry with the engines: the
    ns-3 run has no random element (static routes, drop-tail, no loss model).

    Instrumentation (for finding why an engine disagrees; off by default): ``trace_links``,
    directed link ids whose frames (time, bytes) and queue lengths (time, packets waiting) are
    recorded into ``info["trace_tx"]`` / ``info["trace_queue"]``; ``trace_cwnd``, transfer
    node ids whose congestion window changes go to ``info["trace_cwnd"]``. Times are schedule
    time in seconds. The engine option ``sack`` (on by default, as ns-3's) sets
    TcpSocketBase::Sack."""
    opts = check_options({**engine_options, "mtu": mtu, "buffer_packets": buffer_packets})
    check_policy(routing.policy)
    if faults is None:
        faults = LinkFaults.none()
    schedule.validate(topology.n_hosts)
    # a routing striped over planes (fullflat): one connection per plane, as the packet engine
    n0, plane = schedule.n, None
    split = plane_split.split(schedule, topology.n_hosts, routing.planes) \
        if getattr(routing, "planes", 0) >= 2 else None
    if split is not None:
        schedule, origin, plane = split
    tmask = schedule.kind == TRANSFER
    big = np.flatnonzero(tmask & (schedule.size > MAX_TRANSFER_BYTES))
    if big.size:
        i = int(big[0])
        raise InputError(f"node {i}: bytes = {int(schedule.size[i])}: the ns-3 runner takes "
                         f"transfers up to {MAX_TRANSFER_BYTES} bytes")
    tidx = np.flatnonzero(tmask).astype(np.int64)

    ns, drv = binding.load()
    t_setup = time.perf_counter()
    epochs = _epochs(topology, faults)
    # a path uses links alive both ways (the packet engine's two_way: ACKs walk it backwards,
    # and the driver installs their routes on l ^ 1)
    paths = [_epoch_paths(routing, schedule, two_way(alive), tidx, plane)
             for _, alive in epochs]
    t_build = time.perf_counter()
    seg = opts["mtu"] - HEADER_BYTES
    del_ack_count = opts["delack_count"] if opts["delayed_ack"] else 1  # 1: one ACK per segment
    drv.Configure(seg, TCP["snd_buf"], TCP["rcv_buf"], del_ack_count, opts["sack"],
                  TCP["timestamps"], TCP["recovery"], opts["init_cwnd"], opts["min_rto_s"],
                  opts["init_rto_s"], opts["clock_granularity_s"], opts["conn_timeout_s"],
                  opts["syn_retries"], opts["data_retries"], opts["dupack_threshold"],
                  opts["limited_transmit"], opts["delack_timeout_s"],
                  TRANSPORTS_OK[opts["transport"]], opts["dctcp_g"], opts["dctcp_alpha_init"],
                  opts["dctcp_min_ssthresh_segments"])

    d = drv.Driver()
    t = topology
    lu, lv = t.link_u.astype(np.int32), t.link_v.astype(np.int32)
    bw, lat = t.link_bw.astype(np.float64), t.link_lat.astype(np.float64)
    d.BuildFabric(t.n_nodes, t.n_hosts, t.n_links, lu, lv, bw, lat, opts["mtu"],
                  opts["buffer_packets"], opts["ecn_k"])
    cptr, cidx = schedule.children()
    keep = [schedule.kind.astype(np.int8), schedule.src.astype(np.int32),
            schedule.dst.astype(np.int32), schedule.size.astype(np.int64),
            schedule.duration.astype(np.float64), schedule.start.astype(np.float64),
            schedule.dep_ptr.astype(np.int64), cptr.astype(np.int64), cidx.astype(np.int64)]
    if len(keep[8]) == 0:
        keep[8] = np.zeros(1, dtype=np.int64)  # a valid pointer for an empty array
    d.SetSchedule(schedule.n, *keep)
    for (te, alive), (ptr, link, reach) in zip(epochs, paths):
        link_arg = link if link.size else np.zeros(1, dtype=np.int32)
        d.AddEpoch(te, ptr, link_arg, reach, np.ascontiguousarray(two_way(alive), np.uint8),
                   np.ascontiguousarray(alive, dtype=np.uint8))
    fa = [np.ascontiguousarray(faults.time, dtype=np.float64),
          np.ascontiguousarray(faults.dlink, dtype=np.int64),
          np.ascontiguousarray(faults.factor, dtype=np.float64)]
    if len(faults):
        d.SetFaults(len(faults), *fa)
    tl = np.zeros(topology.n_dlinks, dtype=np.uint8)
    tn = np.zeros(max(schedule.n, 1), dtype=np.uint8)
    if trace_links is not None:
        tl[np.asarray(trace_links, dtype=np.int64)] = 1
    if trace_cwnd is not None:
        tn[np.asarray(trace_cwnd, dtype=np.int64)] = 1
    if trace_links is not None or trace_cwnd is not None:
        d.SetTrace(tl, tn)
    build_s = time.perf_counter() - t_build

    # Schedule time zero is simulation time zero: every connection opens (SYN) when its
    # transfer is released, so the handshake is part of each transfer, as in the engines.
    wall = float(d.Run(0.0, float(horizon_s)))

    n, D = schedule.n, topology.n_dlinks
    start = np.empty(n)
    end = np.empty(n)
    stranded = np.empty(n, dtype=np.uint8)
    link_bytes = np.empty(D)
    link_busy = np.empty(D)
    drops = np.empty(D, dtype=np.uint64)
    qmax = np.empty(D, dtype=np.uint64)
    drv.CopyOut(d, start, end, stranded, link_bytes, link_busy, drops, qmax)
    marks = np.empty(D, dtype=np.uint64)
    drv.CopyMarks(d, marks)
    unfinished = int(np.count_nonzero(~np.isfinite(end) & (stranded == 0)))
    info = {
        "ns3_version": "3.44",
        "ns3_import_s": binding.load_seconds(),
        "ns3_build_s": build_s,
        "setup_s": t_build - t_setup,
        "connected": _vec(d.tConnected, np.float64),  # handshake done, per node (NaN: none)
        "connect_failures": int(d.connectFailures),
        "drops": int(drops.sum()),
        "ip_drops": int(d.ipDrops),  # packets IP dropped (no route after a reroute)
        "unfinished": unfinished,
        "routing_epochs": len(epochs),
        "mss": seg,
        "tcp": dict(TCP, sack=opts["sack"], transport=opts["transport"]),
    }
    if trace_links is not None:
        info["trace_tx"] = {"t": _vec(d.trT, np.float64), "dlink": _vec(d.trL, np.int32),
                            "bytes": _vec(d.trB, np.int32)}
        info["trace_queue"] = {"t": _vec(d.tqT, np.float64), "dlink": _vec(d.tqL, np.int32),
                               "packets": _vec(d.tqP, np.int32)}
    if trace_cwnd is not None:
        info["trace_cwnd"] = {"t": _vec(d.tcT, np.float64), "node": _vec(d.tcN, np.int32),
                              "cwnd": _vec(d.tcW, np.int64)}
    d.Destroy()
    res = Result(engine="ns3", start=start, end=end, stranded=stranded.astype(bool),
                 link_bytes=link_bytes, link_busy=link_busy, events=int(d.events), wall_s=wall,
                 link_extra={"drops": drops.astype(np.int64),
                             "queue_max_packets": qmax.astype(np.int64),
                             "ecn_marks": marks.astype(np.int64)},
                 info=info)
    if split is None:
        return res
    info["connected"] = info["connected"][:n0]  # a transfer's own (plane 0) connection
    return plane_split.fold_back(res, origin, n0, plane)

"""Packet-level engine: Python sets up flat arrays, the C++ core (``netcore._packet``) runs
every event (packets, transports, dependencies, compute/delay nodes, faults); Python comes
back only at reroute points (a link went down ``reroute_delay_us`` ago) to ask
``topo.routing`` for new paths, and at the end to collect results. See docs/packet_engine.md.
"""
from __future__ import annotations

import time

import numpy as np

from netcore.packet import limits, plane_split
from netcore.packet.options import L3L4_HEADER, check_options
from netcore.result import Result
from netcore.schedule import TRANSFER, Schedule
from topo.arrays import unique
from topo.routing import spans

_TRANSPORT_ID = {"ideal": 0, "tcp": 1, "dctcp": 2, "dcqcn": 3}
PS = 1e12  # picoseconds per second
_EVENT_NAMES = ("arrive", "tx_done", "node_ready", "node_done", "rto", "delayed_ack", "pace",
                "dcqcn_alpha", "dcqcn_rate", "pfc", "fault", "reroute", "sample")


def _ps(seconds) -> np.ndarray:
    return np.rint(np.asarray(seconds, dtype=np.float64) * PS).astype(np.int64)


def _config(opts: dict, per_hop: bool, adaptive: bool):
    from netcore import _packet

    c = _packet.Config()
    t = opts["transport"]
    c.transport = _TRANSPORT_ID[t]
    c.mtu = opts["mtu"]
    c.l3l4_header = L3L4_HEADER[t]
    c.l2_header = opts["l2_header_bytes"]
    c.buffer_packets = opts["buffer_packets"]
    c.buffer_bytes = opts["buffer_bytes"]
    c.switch_buffer_bytes = opts["switch_buffer_bytes"]
    c.host_queue_packets = opts["host_queue_packets"]
    c.per_hop = per_hop
    c.adaptive = adaptive
    c.init_cwnd = opts["init_cwnd"]
    c.min_rto = int(round(opts["min_rto_s"] * PS))
    c.init_rto = int(round(opts["init_rto_s"] * PS))
    c.max_rto = int(round(opts["max_rto_s"] * PS))
    c.clock_granularity = int(round(opts["clock_granularity_s"] * PS))
    c.conn_timeout = int(round(opts["conn_timeout_s"] * PS))
    c.syn_retries = opts["syn_retries"]
    c.data_retries = opts["data_retries"]
    c.dupack_threshold = opts["dupack_threshold"]
    c.limited_transmit = opts["limited_transmit"]
    c.sack = opts["sack"]
    c.delayed_ack = opts["delayed_ack"]
    c.delack_count = opts["delack_count"]
    c.delack_timeout = int(round(opts["delack_timeout_s"] * PS))
    c.handshake = opts["handshake"]
    c.warm_connections = opts["warm_connections"]
    c.ns3_ties = opts["ns3_ties"]
    c.ecn_k = opts["ecn_k"] if t == "dctcp" else 0  # unused (and unchecked) elsewhere
    c.dctcp_g = float(opts["dctcp_g"])
    c.dctcp_alpha_init = float(opts["dctcp_alpha_init"])
    c.dctcp_min_ssthresh = int(opts["dctcp_min_ssthresh_segments"])
    c.kmin_bytes = float(opts["kmin_bytes"])
    c.kmax_bytes = float(opts["kmax_bytes"])
    c.pmax = float(opts["pmax"])
    c.dcqcn_g = float(opts["dcqcn_g"])
    c.alpha_timer = int(round(opts["alpha_timer_us"] * 1e6))
    c.rate_timer = int(round(opts["rate_timer_us"] * 1e6))
    c.byte_counter = opts["byte_counter_bytes"]
    c.fast_recovery_steps = opts["fast_recovery_steps"]
    c.rate_ai = opts["rate_ai_gbps"] * 1e9 / 8
    c.rate_hai = opts["rate_hai_gbps"] * 1e9 / 8
    c.min_rate = opts["min_rate_gbps"] * 1e9 / 8
    c.cnp_interval = int(round(opts["cnp_interval_us"] * 1e6))
    c.pfc_xoff_bytes = opts["pfc_xoff_bytes"] if t == "dcqcn" else 0
    c.pfc_xon_bytes = opts["pfc_xon_bytes"] if t == "dcqcn" else 0
    c.reroute_delay = int(round(opts["reroute_delay_us"] * 1e6))
    c.loss_rate = float(opts["loss_rate"])
    c.max_time = 0 if opts["max_time_s"] is None else int(round(opts["max_time_s"] * PS))
    c.sample_interval = int(round(opts["sample_queues_us"] * 1e6))
    return c


def single_path(routing):
    """The routing the core follows: a connection's packets take one path, in hop order, so a
    plane-striped routing (topo.routing, fullflat) is asked for its unstriped paths (one plane
    per connection, the policy's choice) rather than its per-plane paths back to back.
    ``run`` stripes by splitting transfers per plane instead (netcore/packet/plane_split.py)."""
    return routing.unstriped() if getattr(routing, "striped", False) else routing


def two_way(alive):
    """The directed links a path may use: a connection's ACKs, SYN-ACKs and CNPs walk its path
    backwards over the reverse links ``l ^ 1``, so a link whose reverse is down cannot carry
    one (a one-way fault there made every TCP connection routed over it give up, although
    the fabric had other paths). ``None`` (every link up) stays ``None``."""
    if alive is None:
        return None
    a = np.asarray(alive, dtype=bool)
    return a & a[np.arange(a.size) ^ 1]


def per_hop_paths(routing, topology, src, dst, keys, alive, reach):
    """(ptr, links, reach) for the core under a per-hop policy (spray, adaptive): no path
    (routed per packet) except for pairs inside a scale-up domain, which follow their
    ``Routing.paths`` path over the scale-up links. Per-hop choices come from
    ``Routing.distances``, and on two_tier with rails = false a node's ToR leaf is as near to
    its GPUs as their NVSwitch: a one-node ring all-reduce of 1 MiB took 95.0 us under
    adaptive and 147.4 us under spray against 36.5 us over NVLink. A pair whose scale-up path
    is cut is routed per packet like the rest. ``reach``: per pair, from the distances."""
    n = len(src)
    ptr = np.zeros(n + 1, dtype=np.int64)
    links = np.zeros(0, dtype=np.int32)
    inside = routing.scaleup_pairs(src, dst) if hasattr(routing, "scaleup_pairs") else None
    if inside is None:
        return ptr, links, reach
    a = np.flatnonzero(inside)
    p = routing.paths(src[a], dst[a], flow_id=keys[a], alive=two_way(alive))
    lay = topology.layer_names.index("scaleup")
    on_scaleup = topology.link_layer[np.asarray(p.link, dtype=np.int64) // 2] == lay
    plen = np.diff(np.asarray(p.ptr, dtype=np.int64))
    # a path that leaves the scale-up links (its own were cut) is dropped: per packet instead
    # (counted per pair with bincount: an unreachable pair has an empty path, which
    # np.add.reduceat cannot take when it comes last)
    left = np.bincount(np.repeat(np.arange(len(a)), plen), weights=~on_scaleup,
                       minlength=len(a))
    keep = np.asarray(p.reachable, dtype=bool) & (plen > 0) & (left == 0)
    if not keep.any():
        return ptr, links, reach
    lens = np.zeros(n, dtype=np.int64)
    lens[a[keep]] = plen[keep]
    ptr[1:] = np.cumsum(lens)
    links = np.asarray(p.link, dtype=np.int32)[spans(np.asarray(p.ptr)[:-1][keep], plen[keep])]
    reach = reach.copy()
    reach[a[keep]] = True
    return ptr, links, reach


class _Router:
    """Gives the core paths (per flow) or hop distances (per packet) for a given alive mask.
    ``plane``: per node of a plane-split schedule, the plane its path stays in (-1: any)."""

    def __init__(self, topology, schedule: Schedule, routing, per_hop: bool, plane=None):
        self.striped = routing if plane is not None else None
        self.plane = plane
        self.routing = single_path(routing)
        self.per_hop = per_hop
        self.topology = topology
        self.src = schedule.src
        self.keys = schedule.routing_keys(np.arange(schedule.n))  # ECMP hash key per node
        self.dst = schedule.dst
        t = schedule.kind == TRANSFER
        self.transfers = np.flatnonzero(t).astype(np.int32)
        # ACKs and CNPs travel back to the sender: both ends are destinations
        ends = unique(np.concatenate([schedule.src[t], schedule.dst[t]]))
        self.dsts = ends.astype(np.int32)
        self.row = np.full(topology.n_nodes, -1, dtype=np.int32)
        self.row[self.dsts] = np.arange(len(self.dsts), dtype=np.int32)

    def push(self, sim, nodes: np.ndarray, alive: np.ndarray | None) -> None:
        nodes = np.asarray(nodes, dtype=np.int32)
        if self.per_hop:
            if len(self.dsts):
                dist = np.ascontiguousarray(self.routing.distances(self.dsts, alive=alive),
                                            dtype=np.int32)
                sim.set_distances(self.row, dist.ravel(), len(self.dsts))
                reach = dist[self.row[self.dst[nodes]], self.src[nodes]] >= 0
            else:
                reach = np.ones(len(nodes), dtype=bool)
            ptr, links, reach = per_hop_paths(self.routing, self.topology, self.src[nodes],
                                              self.dst[nodes], self.keys[nodes], alive, reach)
            sim.set_paths(nodes, ptr, links, reach.astype(np.uint8))
            return
        if len(nodes) == 0:
            return
        alive = two_way(alive)  # a path carries the connection both ways
        if self.striped is not None:
            p = plane_split.paths(self.striped, self.src[nodes], self.dst[nodes],
                                  self.keys[nodes], self.plane[nodes], alive)
        else:
            p = self.routing.paths(self.src[nodes], self.dst[nodes], flow_id=self.keys[nodes],
                                   alive=alive)
        sim.set_paths(nodes, np.asarray(p.ptr, dtype=np.int64), np.asarray(p.link, dtype=np.int32),
                      np.asarray(p.reachable, dtype=np.uint8))


def run(topology, schedule: Schedule, routing, faults, seed: int = 0, **options) -> Result:
    try:
        return _run(topology, schedule, routing, faults, seed, **options)
    except OverflowError as e:  # the core's own range guards (clock, event numbers, ids)
        raise (limits.from_core(e) or e) from None


def _run(topology, schedule: Schedule, routing, faults, seed: int = 0, **options) -> Result:
    from netcore import _packet

    opts = check_options(options)
    if opts["warm_connections"]:
        t = schedule.kind == TRANSFER
        if (schedule.src[t] >= topology.n_hosts).any() or (schedule.dst[t] >= topology.n_hosts).any():
            from topo.errors import InputError

            raise InputError("engine.warm_connections = true: connections are kept per host "
                             "pair, and this schedule sends to or from switches (an in-network "
                             "collective); leave warm_connections off")
    n0 = schedule.n
    split = None
    if getattr(routing, "planes", 0) >= 2 and not opts["warm_connections"]:
        # one connection per plane (plane_split.py); warm connections are one per host pair,
        # so with them each pair keeps one plane (routing_notice warns)
        split = plane_split.split(schedule, topology.n_hosts, routing.planes)
    if split is not None:
        schedule, origin, plane = split
    limits.check(topology, schedule, faults, opts)  # what the core's integers can represent
    policy = getattr(routing, "policy", "ecmp")
    per_hop = policy in ("spray", "adaptive")
    cfg = _config(opts, per_hop, policy == "adaptive")
    cptr, cidx = schedule.children()
    indeg = np.diff(schedule.dep_ptr).astype(np.int32)
    ptr, _nbr, adj_link = topology.adjacency
    nf = len(faults) if faults is not None else 0
    sim = _packet.Sim(
        cfg, int(topology.n_hosts), bool(topology.hosts_forward), int(seed) & ((1 << 64) - 1),
        topology.dlink_src, topology.dlink_dst, topology.dlink_bw, _ps(topology.dlink_lat),
        ptr.astype(np.int64), adj_link.astype(np.int32),
        schedule.kind, schedule.src, schedule.dst, schedule.size,
        _ps(schedule.duration), _ps(schedule.start), cptr.astype(np.int64),
        cidx.astype(np.int64), indeg,
        _ps(faults.time) if nf else np.zeros(0, np.int64),
        faults.dlink.astype(np.int32) if nf else np.zeros(0, np.int32),
        faults.kind.astype(np.int8) if nf else np.zeros(0, np.int8),
        faults.factor if nf else np.zeros(0))
    router = _Router(topology, schedule, routing, per_hop,
                     plane=None if split is None else plane)
    router.push(sim, router.transfers, None)
    reroutes = 0
    t0 = time.perf_counter()
    route_s = 0.0
    while sim.run() == 1:  # a reroute is due: ask routing for paths over the surviving links
        r0 = time.perf_counter()
        alive = sim.alive().astype(bool)
        router.push(sim, sim.dead_transfers(), alive)
        route_s += time.perf_counter() - r0
        reroutes += 1
    sim.finish()
    wall = time.perf_counter() - t0
    res = _collect(sim, topology, schedule, opts, wall, route_s, reroutes)
    return res if split is None else plane_split.fold_back(res, origin, n0, plane)


def _collect(sim, topology, schedule, opts, wall, route_s, reroutes, upto=-1) -> Result:
    """The Result of the core's state; ``upto`` >= 0: link figures as closed at that
    picosecond without changing the run (a look mid-run), else as finish() closed them."""
    start = sim.node_start().astype(np.float64)
    end = sim.node_end().astype(np.float64)
    start = np.where(start >= 0, start / PS, np.nan)
    end = np.where(end >= 0, end / PS, np.nan)
    stranded = ~np.isfinite(end)
    ls = sim.link_stats(upto)
    span_ps = float(sim.now) if sim.now > 0 else 1.0
    events = int(sim.events)
    link_extra = {
        "packets": ls["packets"],
        "drops": ls["drops"],
        "ecn_marks": ls["ecn_marks"],
        "pause_s": ls["pause_ps"] / PS,
        "queue_max_packets": ls["queue_max_packets"],
        "queue_max_bytes": ls["queue_max_bytes"],
        # time averages over the whole run (0 .. last event)
        "queue_mean_packets": ls["queue_area_packets_ps"] / span_ps,
        "queue_mean_bytes": ls["queue_area_bytes_ps"] / span_ps,
    }
    info = {
        "transport": opts["transport"],
        "mtu": opts["mtu"],
        "mss": opts["mtu"] - L3L4_HEADER[opts["transport"]],
        "events": events,
        "events_per_s": events / wall if wall > 0 else 0.0,
        "event_numbers": int(sim.event_numbers),
        "reroutes": reroutes,
        "reroute_wall_s": route_s,
        "drops": int(ls["drops"].sum()),
        "ecn_marks": int(ls["ecn_marks"].sum()),
        "retransmissions": int(sim.node_retx().sum()),
        "headroom_violations": int(sim.headroom_violations),
        "peak_packets": int(sim.pool_capacity()),
        "peak_pending_events": int(sim.heap_max),
        "events_by_kind": {k: int(v) for k, v in zip(_EVENT_NAMES, sim.events_by_type())},
        "end_time_s": float(sim.now) / PS,
        # a lossless fabric that froze (PFC pauses or credits in a cycle): what had not
        # finished then is stranded (docs/packet_engine.md, "Deadlock")
        "deadlock_at_s": float(sim.deadlock_at) / PS if sim.deadlock_at >= 0 else None,
        "deadlocked_ports": int(sim.deadlock_ports),
        # TCP connections abandoned after engine.syn_retries / data_retries: their transfers
        # (and what waits on them) are stranded although a path exists
        "tcp_gave_up": int(sim.tcp_gave_up),
    }
    if opts["sample_queues_us"] > 0:
        t = sim.sample_times()
        info["queue_series"] = {
            "t_s": t,
            "packets": sim.sample_queues().reshape(len(t), topology.n_dlinks),
        }
    return Result(
        engine="packet", start=start, end=end, stranded=stranded,
        link_bytes=ls["bytes"].astype(np.float64), link_busy=ls["busy_ps"] / PS,
        events=events, wall_s=wall, link_extra=link_extra,
        node_extra={"retransmissions": sim.node_retx().astype(np.int64)}, info=info,
        # a look mid-run: its link figures are closed at now, not at the last transfer done
        span=upto / PS if upto >= 0 else None)

"""What the packet engine's integers can represent, checked before a run.

The C++ core keeps time in int64 picoseconds and numbers each connection's stream in int32
segments (``netcore/_packet_cpp/sim.hpp``: ``TIME_LIMIT``, ``MAX_SEGMENTS``). Inputs beyond
those ranges used to wrap silently (a 38 TB transfer "finished" in microseconds, a fault at
1e13 us struck at time 0); they are refused here, before anything runs, with the limit named.
The core has its own guards for what only shows while running (the clock passing the limit,
the event counter), raised as ``PacketLimit`` too.

``check`` raises ``PacketLimit`` (an ``InputError``) that says *which* input is at fault
(``node``: a schedule node; ``fault``: an index into ``faults``; ``option``: an engine
option), so that the scenario layer can name the field it came from (netcosim.scenario).
"""
from __future__ import annotations

import numpy as np

from topo.errors import InputError

PS = 1e12
TIME_LIMIT_PS = 1 << 62            # sim.hpp TIME_LIMIT: 4.61e18 ps = 4.61e12 us (53 days)
TIME_LIMIT_US = TIME_LIMIT_PS / 1e6
DELAY_LIMIT_PS = 1 << 60           # any one delay added to the clock (options, a frame's time)
MAX_SEGMENTS = 2**31 - 2           # sim.hpp MAX_SEGMENTS: int32 segment numbers per connection
MAX_EVENTS = 1 << 40               # event_queue.hpp MAX_SEQ
# sim_core.cpp numbers schedule nodes in its events, and counts each node's parents, in int32
MAX_NODES = 2**31 - 1
MAX_PARENTS = 2**31 - 1

TIME_LIMIT_TEXT = f"{TIME_LIMIT_US:.4g} us (2^62 ps, 53 days)"

# the engine's time options, in the unit their key says
_TIME_OPTIONS = {"min_rto_s": 1e12, "init_rto_s": 1e12, "max_rto_s": 1e12,
                 "clock_granularity_s": 1e12, "conn_timeout_s": 1e12, "delack_timeout_s": 1e12,
                 "max_time_s": 1e12, "alpha_timer_us": 1e6, "rate_timer_us": 1e6,
                 "cnp_interval_us": 1e6, "reroute_delay_us": 1e6, "sample_queues_us": 1e6}


# integer options the core holds in int32 (config.hpp) and in int64
_INT32_OPTIONS = ("init_cwnd", "syn_retries", "data_retries", "dupack_threshold", "delack_count",
                  "fast_recovery_steps")
_INT64_OPTIONS = ("buffer_packets", "buffer_bytes", "switch_buffer_bytes", "host_queue_packets",
                  "byte_counter_bytes", "ecn_k", "pfc_xoff_bytes", "pfc_xon_bytes")
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# options that are periods of a timer that re-arms itself (0 = off, where allowed)
_PERIODS = ("alpha_timer_us", "rate_timer_us", "sample_queues_us")
MIN_PERIOD_PS = 1000  # 1 ns


class PacketLimit(InputError):
    """An input the packet engine cannot represent. ``node``/``fault``/``option`` say which."""

    def __init__(self, msg: str, node: int | None = None, fault: int | None = None,
                 option: str | None = None, what: str | None = None):
        super().__init__(msg)
        self.node, self.fault, self.option, self.what = node, fault, option, what


def check_options(opts: dict) -> None:
    """Every time option is at most 2^60 ps (about 13 days), so the core's timers cannot wrap;
    a DCQCN sender's slowest rate must pace one frame within that too; integer options fit
    the core's int32 / int64 fields."""
    for keys, top, width in ((_INT32_OPTIONS, INT32_MAX, "32"), (_INT64_OPTIONS, INT64_MAX, "64")):
        for key in keys:
            v = opts.get(key)
            if isinstance(v, int) and v > top:
                raise PacketLimit(f"engine.{key} = {v!r}: the packet engine holds it in a "
                                  f"{width}-bit integer (at most {top})", option=key)
    for key, scale in _TIME_OPTIONS.items():
        v = opts.get(key)
        if v is not None and float(v) * scale > DELAY_LIMIT_PS:
            raise PacketLimit(f"engine.{key} = {v!r}: the packet engine's timers reach at "
                              f"most {DELAY_LIMIT_PS / scale:.4g} {key.rsplit('_', 1)[-1]} "
                              f"(2^60 ps)", option=key)
    # periodic timers re-arm themselves: a period that rounds to 0 ps never lets the clock
    # move (a hang), and one of a few picoseconds is one in all but name
    for key in _PERIODS:
        v = opts.get(key)
        if v and float(v) * _TIME_OPTIONS[key] < MIN_PERIOD_PS:
            raise PacketLimit(f"engine.{key} = {v!r}: a period below {MIN_PERIOD_PS} ps "
                              f"({MIN_PERIOD_PS / 1e6:g} us); the timer would fire without "
                              f"letting the clock move on", option=key)
    frame = opts["mtu"] + opts["l2_header_bytes"]
    if frame * 8 * PS / (opts["min_rate_gbps"] * 1e9) > DELAY_LIMIT_PS:
        raise PacketLimit(f"engine.min_rate_gbps = {opts['min_rate_gbps']!r}: one "
                          f"{frame}-byte frame would take more than 2^60 ps", option="min_rate_gbps")


def segments(size, mss: int) -> np.ndarray:
    size = np.asarray(size, dtype=np.int64)
    return size // mss + (size % mss != 0)


def check(topology, schedule, faults, opts: dict) -> None:
    """Refuse a run whose times, segment numbers or event count leave the core's ranges."""
    check_options(opts)
    check_fabric(topology, opts)
    check_faults(topology, faults)
    check_schedule(topology, schedule, opts)


def mss_of(opts: dict) -> int:
    from netcore.packet.options import L3L4_HEADER

    return opts["mtu"] - L3L4_HEADER[opts["transport"]]


def check_fabric(topology, opts: dict) -> None:
    frame = opts["mtu"] + opts["l2_header_bytes"]
    # fabric: one frame's serialisation and a link's latency are delays added to the clock
    bw = np.asarray(topology.dlink_bw, dtype=np.float64)
    with np.errstate(over="ignore"):  # a fabric not from a builder (which bounds latencies)
        lat = np.asarray(topology.dlink_lat, dtype=np.float64) * PS
    if len(bw):
        d = int(np.argmin(bw))
        if frame * PS / bw[d] > DELAY_LIMIT_PS:
            raise PacketLimit(f"link {int(topology.dlink_src[d])}-{int(topology.dlink_dst[d])}: "
                              f"{bw[d] * 8 / 1e9:.3g} Gbps takes more than 2^60 ps for one "
                              f"{frame}-byte frame, beyond the packet engine's clock",
                              what="link")
        d = int(np.argmax(lat))
        if lat[d] > DELAY_LIMIT_PS:
            raise PacketLimit(f"link {int(topology.dlink_src[d])}-{int(topology.dlink_dst[d])}: "
                              f"a latency of {float(topology.dlink_lat[d]) * 1e6:.4g} us is beyond the packet "
                              f"engine's {DELAY_LIMIT_PS / 1e6:.4g} us (2^60 ps) per delay",
                              what="link")


def check_schedule(topology, schedule, opts: dict) -> None:
    from netcore.schedule import TRANSFER

    if schedule.n > MAX_NODES:
        raise PacketLimit(f"the schedule has {schedule.n:,} nodes; the packet engine numbers at "
                          f"most {MAX_NODES:,} (int32)", what="nodes")
    if schedule.n:
        indeg = np.diff(np.asarray(schedule.dep_ptr, dtype=np.int64))
        i = int(np.argmax(indeg))
        if indeg[i] > MAX_PARENTS:
            raise PacketLimit(f"node {i}: {int(indeg[i]):,} parents; the packet engine counts "
                              f"at most {MAX_PARENTS:,} (int32)", node=i, what="parents")
    check_times(schedule, "packet engine")
    check_segments(topology, schedule.src, schedule.dst, schedule.size,
                   np.flatnonzero(schedule.kind == TRANSFER), opts)


def check_times(schedule, engine: str) -> None:
    """The times given in the input (starts, compute/delay durations) end before the clock
    does (``engine`` names it in the message; the flow engine keeps the same end)."""
    for name, arr in (("start", schedule.start), ("duration", schedule.duration)):
        s = np.asarray(arr, dtype=np.float64)
        with np.errstate(over="ignore"):  # 1e308 us overflows to inf: refused just below
            t = s * PS
        bad = np.flatnonzero(~(t < TIME_LIMIT_PS))  # NaN too
        if len(bad):
            i = int(bad[0])
            raise PacketLimit(f"node {i}: a {name} of {s[i] * 1e6:.6g} us is beyond the "
                              f"{engine}'s clock, which ends at {TIME_LIMIT_TEXT}",
                              node=i, what=name)


def check_faults(topology, faults) -> None:
    if faults is not None and len(faults):
        faults.check_factors()
        s = np.asarray(faults.time, dtype=np.float64)
        with np.errstate(over="ignore"):  # overflowing to inf: refused just below
            t = s * PS
        bad = np.flatnonzero(~(t < TIME_LIMIT_PS))
        if len(bad):
            k = int(bad[0])
            d = int(faults.dlink[k])
            raise PacketLimit(f"a fault at {s[k] * 1e6:.6g} us on link "
                              f"{int(topology.dlink_src[d])}-{int(topology.dlink_dst[d])} is "
                              f"beyond the packet engine's clock, which ends at "
                              f"{TIME_LIMIT_TEXT}", fault=k, what="time")


def check_segments(topology, src, dst, size, t, opts: dict) -> None:
    """Segment numbers per connection, and the event counter, for transfers ``t`` (indexes
    into src/dst/size: schedule nodes)."""
    if not len(t):
        return
    mss = mss_of(opts)
    segs = segments(size[t], mss)
    max_bytes = MAX_SEGMENTS * mss
    over = np.flatnonzero(segs > MAX_SEGMENTS)
    if len(over):
        i = int(t[over[0]])
        raise PacketLimit(f"node {i}: {int(size[i])} bytes are {int(segs[over[0]])} "
                          f"segments of {mss} bytes; the packet engine numbers at most "
                          f"{MAX_SEGMENTS} segments ({max_bytes} bytes) per transfer (the flow engine "
                          f"has no such limit)",
                          node=i, what="bytes")
    if opts.get("warm_connections"):  # one connection per host pair carries all its transfers
        key = src[t].astype(np.int64) * topology.n_hosts + dst[t]
        pairs, inv = np.unique(key, return_inverse=True)
        per_pair = np.bincount(inv, weights=segs.astype(np.float64))
        over = np.flatnonzero(per_pair > MAX_SEGMENTS)
        if len(over):
            j = int(over[0])
            i = int(t[np.flatnonzero(inv == j)[-1]])
            raise PacketLimit(f"node {i}: the transfers from host {int(src[i])} to "
                              f"host {int(dst[i])} carry {int(per_pair[j])} segments of "
                              f"{mss} bytes over one connection (engine.warm_connections = "
                              f"true); the packet engine numbers at most {MAX_SEGMENTS} "
                              f"({max_bytes} bytes) per connection", node=i, what="bytes")
    check_events(topology, src[t], dst[t], size[t], segs, mss, opts)


def check_events(topology, src, dst, size, segs, mss: int, opts: dict) -> None:
    """The run's events against the 2^40 the core numbers. The core spends one on every packet
    at every link it crosses (its arrival there; two with engine.ns3_ties, which numbers the
    end of its serialisation too): each data segment crosses at least the
    links of a shortest path, and with tcp/dctcp the receiver sends an ACK back over as many
    per data packet (per engine.delack_count with engine.delayed_ack); an ACK lost to a full
    queue crosses fewer, a few percent of the count in congested runs, and retransmissions
    add to it. Counting one event per segment and one per ACK, as before, passed an
    all-to-all of 1e14 bytes on a k=4 fat-tree (5.5 links per segment, 1.8e12 events): it ran
    for a day and more at about 10^7 events a second towards the core's guard at 2^40. With
    engine.max_time_s the run may stop before its data is through: the core's guard alone
    then."""
    if opts.get("max_time_s") is not None:
        return
    per_ack = _acks_per_segment(opts)
    per_hop = _numbers_per_crossing(opts)
    n_segs = float(segs.sum())
    # below the limit even if every packet crossed every node (a path visits each at most
    # once): no hop counts needed, the usual case
    if n_segs * (1.0 + per_ack) * per_hop * max(topology.n_nodes - 1, 1) <= MAX_EVENTS:
        return
    crossings, events = link_events(topology, src, dst, segs, opts)
    if events > MAX_EVENTS:
        acked = per_ack > 0
        ack = ("" if not acked else
               f", and so does its ACK (one per {opts['delack_count']} segments)" if per_ack < 1
               else ", and so does its ACK")
        raise PacketLimit(f"the workload's {int(size.sum())} bytes are {int(n_segs)} segments "
                          f"of {mss} bytes; each crosses {crossings / n_segs:.3g} links on "
                          f"average{ack}: {events:.3g} events at {_PER_HOP_WORDS[per_hop]}; "
                          f"the packet engine numbers at most 2^40 ({MAX_EVENTS}) events per "
                          f"run (the flow engine has no such limit)", what="events")


# ns-3's tie order (engine.ns3_ties) numbers the end of every serialisation as well as the
# arrival it leads to, as ns-3 schedules both when a frame starts
_PER_HOP_WORDS = {1.0: "one per packet and link",
                  2.0: "two per packet and link (ns-3's tie order, engine.ns3_ties, numbers the "
                       "end of each serialisation too; engine.ns3_ties = false numbers one)"}


def _numbers_per_crossing(opts: dict) -> float:
    return 2.0 if opts.get("ns3_ties") else 1.0


def _acks_per_segment(opts: dict) -> float:
    if opts["transport"] not in ("tcp", "dctcp"):
        return 0.0
    return 1.0 / opts["delack_count"] if opts.get("delayed_ack") else 1.0


def link_events(topology, src, dst, segs, opts: dict) -> tuple[float, float]:
    """(links the data segments cross, the events of those crossings and of their ACKs') over
    shortest paths, for transfers src -> dst of ``segs`` segments each (check_events)."""
    from topo.hops import pair_hops

    key = np.asarray(src, dtype=np.int64) * topology.n_nodes + np.asarray(dst, dtype=np.int64)
    pairs, inv = np.unique(key, return_inverse=True)
    hops = pair_hops(topology, pairs // topology.n_nodes, pairs % topology.n_nodes)
    hops = np.maximum(hops, 0)[inv].astype(np.float64)  # unreachable: stranded, no events
    crossings = float(np.dot(np.asarray(segs, dtype=np.float64), hops))
    return crossings, crossings * (1.0 + _acks_per_segment(opts)) * _numbers_per_crossing(opts)


def from_core(e: Exception) -> PacketLimit | None:
    """The core's own range guards (std::overflow_error, "packet engine: ...") as a
    PacketLimit; None for any other exception. ``what``: "clock" for the clock passing its
    end (the run was too long: a caller without engine.max_time_s gives its own advice),
    "core" for the others."""
    if isinstance(e, OverflowError) and str(e).startswith("packet engine:"):
        return PacketLimit(str(e), what="clock" if "simulated clock" in str(e) else "core")
    return None

"""Options of the flow engine: defaults, types and ranges. Errors name ``engine.<key>``."""
from __future__ import annotations

import math

from netcore.tcp_timers import DATA_RETRIES, SYN_RETRIES, TIMER_PRESETS, fill_from_preset
from topo.errors import InputError, is_finite

# the timers the tcp transport uses: only for a connection a fault leaves without a path,
# whose retransmission timeouts (SYN timeouts for one that starts without a path) decide when
# it finds the path again (docs/flow_engine.md, "Faults in time")
TIMER_KEYS = ("min_rto_s", "max_rto_s", "clock_granularity_s", "conn_timeout_s")
TCP_ONLY = ("tcp_timers", *TIMER_KEYS, "data_retries", "syn_retries")
TCP_START_ONLY = ("init_cwnd", "handshake")  # TCP start-up: the fluid transport has none

DEFAULTS = {
    # bytes of one packet; when set, a transfer's end includes one store-and-forward
    # serialisation of its last packet on every hop after the first (see docs/flow_engine.md)
    "mtu": None,
    # time between a link going down and the re-routing of the flows it carried (microseconds)
    "reroute_delay_us": 0.0,
    # record the piecewise-constant rate of every directed link (Result.link_extra["series_*"])
    "link_series": False,
    # record the directed links each transfer used (Result.node_extra["path_*"])
    "record_paths": True,
    # "fluid": every flow gets its max-min share at once (the classic model);
    # "tcp": each transfer is its own TCP connection: handshake, header bytes, slow start as
    # a per-flow rate cap (docs/flow_engine.md "TCP start-up")
    "transport": "fluid",
    # tcp: initial congestion window, segments (ns-3 TcpSocket::InitialCwnd, RFC 6928)
    "init_cwnd": 10,
    # tcp: SYN / SYN-ACK / ACK before the data, as each ns-3 BulkSendApplication connection
    "handshake": True,
    # tcp: named set of retransmission timers (netcore/tcp_timers.py; a key below given
    # explicitly wins), and the timeouts in a row after which a connection gives up
    "tcp_timers": "ns3",
    **{k: TIMER_PRESETS["ns3"][k] for k in TIMER_KEYS},
    "data_retries": DATA_RETRIES,
    "syn_retries": SYN_RETRIES,
    # many-to-many contention (docs/flow_engine.md "The contention model"): "fluid" gives
    # every link its full bandwidth (max-min, the classic model); "tcp" / "dcqcn" lower the
    # capacity of every link crossed by several transfers to the efficiency that packet
    # transport reaches on a star with as many flows per link (netcore/flow/contention.py)
    "contention": "fluid",
    # re-solve only the flows a change reaches, checked to give the max-min allocation
    # (docs/flow_engine.md "Local repair"); false: every change re-solves its whole connected
    # component, as before (same rates to rounding; for checking and timing)
    "local_repair": True,
    # bytes the run may still allocate (None: unchecked). A schedule of member sets (the
    # scalable form) is refused with an InputError, before its paths are built, when its path
    # entries would need more (engine.py, ENTRY_BYTES); `netcosim run` passes its memory
    # guard's budget, so a run that cannot fit says so instead of being killed for memory
    "memory_budget": None,
}

TRANSPORTS = ("fluid", "tcp")

# tcp packet sizes, the same as the packet engine's (netcore/packet/options.py L3L4_HEADER and
# l2_header_bytes, netcore/_packet_cpp/config.hpp), i.e. ns-3.44's TcpSocketBase with
# timestamps on (IPv4 20 + TCP 20 + timestamp option 12) over PointToPointNetDevice (PPP 2)
TCP_HEADER = 52       # bytes of IPv4 + TCP on every data packet; MSS = mtu - 52
PPP_HEADER = 2        # bytes of the point-to-point header on every packet
TCP_ACK_BYTES = 52    # pure ACK (IP bytes)
TCP_SYN_BYTES = 56    # SYN / SYN-ACK: IP 20 + TCP 20 + 16 option bytes (window scale,
                      # SACK-permitted, timestamps, padded; no MSS option), ns-3.44 on the wire
# Until the first ACK of data the sender knows only the SYN-ACK's window, which is never scaled
# (RFC 7323 section 2.2): at most 65535 payload bytes in flight in the first round
TCP_FIRST_WINDOW = 65535
MAX_MTU = 1 << 20
TCP_DEFAULT_MTU = 9000  # used when transport = "tcp" and no mtu is given (packet engine default)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_options(opts: dict) -> dict:
    """Fill defaults and check every option; unknown keys are errors (a typo must not be
    silently ignored in a sweep of thousands of runs)."""
    out = dict(DEFAULTS)
    for key, val in (opts or {}).items():
        if key not in DEFAULTS:
            raise InputError(f"engine.{key}: unknown option of the flow engine (known: "
                             f"{', '.join(sorted(DEFAULTS))})")
        out[key] = val
    mtu = out["mtu"]
    if mtu is not None:
        if not isinstance(mtu, int) or isinstance(mtu, bool) or mtu <= 0:
            raise InputError(f"engine.mtu = {mtu!r}: expected a positive integer number of "
                             f"bytes (or nothing)")
        if mtu > MAX_MTU:  # the packet engine's bound; larger would overflow int64 packet sums
            raise InputError(f"engine.mtu = {mtu!r}: expected at most {MAX_MTU} bytes (1 MiB)")
    d = out["reroute_delay_us"]
    if not _is_number(d) or not is_finite(d) or d < 0:
        raise InputError(f"engine.reroute_delay_us = {d!r}: expected a time >= 0")
    out["reroute_delay_us"] = float(d)
    t = out["transport"]
    if t not in TRANSPORTS:
        raise InputError(f"engine.transport = {t!r}: the flow engine models "
                         f"{' or '.join(repr(x) for x in TRANSPORTS)}")
    if t == "tcp":
        if out["mtu"] is None:
            out["mtu"] = TCP_DEFAULT_MTU
        elif out["mtu"] <= TCP_HEADER:
            raise InputError(f"engine.mtu = {out['mtu']!r}: must exceed the {TCP_HEADER}-byte "
                             f"IPv4 + TCP header when transport = 'tcp'")
    _check_timers(opts or {}, out)
    c = out["contention"]
    from netcore.flow.contention import MODELS

    if not isinstance(c, str) or c not in MODELS:
        raise InputError(f"engine.contention = {c!r}: expected one of "
                         f"{', '.join(repr(x) for x in MODELS)}")
    iw = out["init_cwnd"]
    if not isinstance(iw, int) or isinstance(iw, bool) or iw < 1:
        raise InputError(f"engine.init_cwnd = {iw!r}: expected an integer >= 1 (segments)")
    mb = out["memory_budget"]
    if mb is not None and (not _is_number(mb) or not math.isfinite(mb) or mb <= 0):
        raise InputError(f"engine.memory_budget = {mb!r}: expected a number of bytes > 0 "
                         f"(or nothing)")
    for key in ("link_series", "record_paths", "handshake", "local_repair"):
        if not isinstance(out[key], bool):
            raise InputError(f"engine.{key} = {out[key]!r}: expected true or false")
    return out


def _check_timers(given: dict, out: dict) -> None:
    """Fill the tcp timers from their preset and check them; refuse them with the fluid
    transport, which has no timers (a sweep over them would change nothing)."""
    if out["transport"] != "tcp":
        for key in TCP_ONLY:  # (defaults pass: checked options are checked again)
            if key in given and given[key] != DEFAULTS[key]:
                raise InputError(f"engine.{key} = {given[key]!r}: only transport = 'tcp' has "
                                 f"retransmission timers (engine.transport = "
                                 f"{out['transport']!r})")
        for key in TCP_START_ONLY:  # ignored, a sweep over them changed nothing
            if key in given and given[key] != DEFAULTS[key]:
                raise InputError(f"engine.{key} = {given[key]!r}: only transport = 'tcp' has "
                                 f"a start-up (handshake, initial window) (engine.transport = "
                                 f"{out['transport']!r})")
    fill_from_preset(given, out, TIMER_KEYS)
    for key in TIMER_KEYS:
        v = out[key]
        low_ok = v >= 0 if key == "clock_granularity_s" else v > 0
        if not _is_number(v) or not is_finite(v) or not low_ok:
            raise InputError(f"engine.{key} = {v!r}: expected a number "
                             f"{'>= 0' if key == 'clock_granularity_s' else '> 0'} (seconds)")
        out[key] = float(v)
    if out["min_rto_s"] > out["max_rto_s"]:
        raise InputError(f"engine.min_rto_s = {out['min_rto_s']!r}: above engine.max_rto_s = "
                         f"{out['max_rto_s']!r}")
    for key in ("data_retries", "syn_retries"):
        r = out[key]
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise InputError(f"engine.{key} = {r!r}: expected an integer >= 0")

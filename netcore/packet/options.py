"""Options of the packet engine: every default in one place, with where it comes from.

User-facing units: bytes, packets, microseconds / seconds (as the key says), Gbps. Errors name
``engine.<key>`` and the value. The ns-3 figures are the attribute defaults of ns-3.44
(``src/internet/model/tcp-socket.cc``, ``tcp-socket-base.cc``, ``rtt-estimator.cc``,
``tcp-dctcp.cc``; ``src/point-to-point/model/ppp-header.cc``): the ns-3 cross-validation
compares against exactly these.
"""
from __future__ import annotations

# TCP timer presets (`engine.tcp_timers`), shared with the flow engine's tcp transport
from netcore.tcp_timers import (DATA_RETRIES, SYN_RETRIES, TIMER_KEYS, TIMER_PRESETS,
                                fill_from_preset)
from topo.errors import InputError, is_finite

TRANSPORTS = ("ideal", "tcp", "dctcp", "dcqcn")
NS3_TIE_TRANSPORTS = ("tcp", "dctcp")  # ns3_ties on unless the scenario says otherwise

# bytes of IPv4 + transport headers on every data packet, by transport
L3L4_HEADER = {
    "tcp": 52,    # IPv4 20 + TCP 20 + timestamp option 12 (ns-3 TcpSocketBase Timestamp=true)
    "dctcp": 52,
    "ideal": 52,  # same framing as tcp so ideal and tcp runs are comparable
    "dcqcn": 44,  # RoCEv2: IPv4 20 + UDP 8 + InfiniBand BTH 12 + ICRC 4
}

DEFAULTS = {
    "transport": "tcp",
    "mtu": 9000,                  # IP MTU, bytes (docs/DESIGN.md scenario example)
    "l2_header_bytes": 2,         # ns-3 PointToPointNetDevice adds a 2-byte PppHeader, nothing
                                  # else (no preamble, FCS or inter-frame gap)
    "buffer_packets": 1000,       # per output port, waiting packets (DESIGN.md)
    "buffer_bytes": 0,            # per output port, 0 = no byte limit
    "switch_buffer_bytes": 0,     # shared by all ports of a switch, 0 = none
    # --- TCP (ns-3.44 defaults) ---
    "tcp_timers": "ns3",          # named set of the timer options below (TIMER_PRESETS)
    "init_cwnd": 10,              # TcpSocket::InitialCwnd = 10 segments
    **TIMER_PRESETS["ns3"],       # min_rto_s, init_rto_s, max_rto_s, clock_granularity_s,
                                  # conn_timeout_s (SYN retransmission)
    "syn_retries": SYN_RETRIES,   # TcpSocket::ConnCount = 6
    "data_retries": DATA_RETRIES,  # TcpSocket::DataRetries = 6 (then the connection gives up)
    "dupack_threshold": 3,        # TcpSocketBase::ReTxThreshold = 3
    "limited_transmit": True,     # TcpSocketBase::LimitedTransmit = true (RFC 3042)
    "sack": True,                 # TcpSocketBase::Sack = true: SACK blocks and RFC 6675 recovery
    "delayed_ack": False,         # one ACK per data packet (issue 5); ns-3 DelAckCount is 2
    "delack_count": 2,            # TcpSocket::DelAckCount = 2
    "delack_timeout_s": 0.2,      # TcpSocket::DelAckTimeout = 200 ms
    "handshake": True,            # SYN / SYN-ACK / ACK before data, as ns-3's BulkSendApplication
    "warm_connections": False,    # one connection per host pair, kept across transfers
    # ns-3's order of events at equal picoseconds (an end-of-serialisation event per queued
    # packet, numbered when the previous serialisation started, as ns-3's TransmitComplete).
    # None: on for tcp and dctcp, the transports ns-3 cross-validates (since session 38: on
    # symmetric fabrics ties move results by a few percent, and the engine should then be
    # ns-3's), off for ideal and dcqcn, which ns-3 has no model of. false: tcp/dctcp ports are
    # eager, 1.4-1.7x faster, the same results wherever nothing ties (docs/packet_engine.md,
    # "Tie order at equal times")
    "ns3_ties": None,
    # --- DCTCP (Alizadeh et al., SIGCOMM 2010; ns-3 TcpDctcp) ---
    "ecn_k": None,                # marking threshold, packets; default 65 (DCTCP paper: K = 65
                                  # at 10 Gbps), below buffer_packets when the buffer is smaller
    "dctcp_g": 1.0 / 16,          # TcpDctcp::DctcpShiftG = 0.0625
    "dctcp_alpha_init": 1.0,      # TcpDctcp::DctcpAlphaOnInit = 1
    # floor of a DCTCP cut, segments: 2 as Linux's dctcp_ssthresh (net/ipv4/tcp_dctcp.c); 0 as
    # ns-3's TcpDctcp::GetSsThresh (none: a window cut below one segment waits for the RTO)
    "dctcp_min_ssthresh_segments": 2,
    # --- DCQCN (Zhu et al., SIGCOMM 2015, section 5 / Table of parameters) ---
    "kmin_bytes": 5_000,          # RED marking starts (5 KB)
    "kmax_bytes": 200_000,        # every packet marked above (200 KB)
    "pmax": 0.01,                 # marking probability at Kmax (1 %)
    "dcqcn_g": 1.0 / 256,         # alpha gain
    "alpha_timer_us": 55.0,       # alpha update period K = 55 us
    "rate_timer_us": 55.0,        # rate increase timer T = 55 us
    "byte_counter_bytes": 10_000_000,  # rate increase byte counter B = 10 MB
    "fast_recovery_steps": 5,     # F = 5
    "rate_ai_gbps": 0.04,         # R_AI = 40 Mb/s
    "rate_hai_gbps": 0.4,         # R_HAI = 10 x R_AI (the ratio of the authors' released ns-3
                                  # code: RateAI 5 Mb/s, RateHAI 50 Mb/s)
    "min_rate_gbps": 0.1,         # MinRate 100 Mb/s (authors' ns-3 code)
    "cnp_interval_us": 50.0,      # NP sends at most one CNP per flow per 50 us
    # --- PFC ---
    "pfc_xoff_bytes": None,       # default: 24.47 KB per ingress port, the DCQCN paper's t_PFC
                                  # (12 MB buffer, 32 ports, 8 priorities), at least 2 frames
    "pfc_xon_bytes": None,        # default: half of pfc_xoff_bytes
    "host_queue_packets": 2,      # own frames a sender keeps waiting in its NIC (ideal, dcqcn)
    # --- faults, loss, guards, observability ---
    "reroute_delay_us": 0.0,      # same default as the flow engine
    "loss_rate": 0.0,             # per packet per link, seeded Bernoulli (bit-error style)
    "max_time_s": None,           # stop the clock here; what is unfinished is stranded
    "sample_queues_us": 0.0,      # > 0: record every port's queue length at this period
}


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and is_finite(v)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _need(cond: bool, key: str, val, what: str) -> None:
    if not cond:
        raise InputError(f"engine.{key} = {val!r}: {what}")


def check_options(opts: dict) -> dict:
    """Fill defaults, check every value; unknown keys are errors. Returns a new dict."""
    out = dict(DEFAULTS)
    for key, val in (opts or {}).items():
        if key == "kind" and val == "packet":  # the scenario's [engine] table names the engine
            continue
        if key == "link_series":
            raise InputError(f"engine.link_series = {val!r}: the packet engine does not record "
                             f"link load over time (link_series.csv comes from the flow "
                             f"engine; the packet engine samples queue lengths with "
                             f"engine.sample_queues_us)")
        if key not in DEFAULTS:
            raise InputError(f"engine.{key}: unknown option of the packet engine (known: "
                             f"{', '.join(sorted(DEFAULTS))})")
        out[key] = val
    fill_from_preset(opts or {}, out, TIMER_KEYS)  # the timers the scenario does not set
    t = out["transport"]
    _need(t in TRANSPORTS, "transport", t, f"expected one of {', '.join(TRANSPORTS)}")
    if out["ns3_ties"] is None:
        out["ns3_ties"] = t in NS3_TIE_TRANSPORTS
    hdr = L3L4_HEADER[t]
    mtu = out["mtu"]
    _need(_int(mtu), "mtu", mtu, "expected an integer number of bytes")
    _need(mtu > hdr, "mtu", mtu, f"must exceed the {hdr}-byte {t} header (IPv4 + transport)")
    _need(mtu <= 1 << 20, "mtu", mtu, "expected at most 1 MiB")
    for key in ("buffer_packets", "init_cwnd", "dupack_threshold", "delack_count",
                "fast_recovery_steps", "host_queue_packets"):
        _need(_int(out[key]) and out[key] >= 1, key, out[key], "expected an integer >= 1")
    for key in ("l2_header_bytes", "buffer_bytes", "switch_buffer_bytes", "syn_retries",
                "data_retries", "byte_counter_bytes"):
        _need(_int(out[key]) and out[key] >= 0, key, out[key], "expected an integer >= 0")
    _need(out["byte_counter_bytes"] > 0, "byte_counter_bytes", out["byte_counter_bytes"],
          "expected > 0")
    for key in ("limited_transmit", "sack", "delayed_ack", "handshake", "warm_connections",
                "ns3_ties"):
        _need(isinstance(out[key], bool), key, out[key], "expected true or false")
    for key in ("min_rto_s", "init_rto_s", "max_rto_s", "conn_timeout_s", "delack_timeout_s",
                "alpha_timer_us", "rate_timer_us", "cnp_interval_us", "rate_ai_gbps",
                "rate_hai_gbps", "min_rate_gbps"):
        _need(_num(out[key]) and out[key] > 0, key, out[key], "expected a number > 0")
    for key in ("clock_granularity_s", "reroute_delay_us", "sample_queues_us", "kmin_bytes",
                "kmax_bytes"):
        _need(_num(out[key]) and out[key] >= 0, key, out[key], "expected a number >= 0")
    _need(out["min_rto_s"] <= out["max_rto_s"], "min_rto_s", out["min_rto_s"],
          f"above engine.max_rto_s = {out['max_rto_s']}")
    _need(out["init_rto_s"] <= out["max_rto_s"], "init_rto_s", out["init_rto_s"],
          f"above engine.max_rto_s = {out['max_rto_s']}")
    for key in ("dctcp_g", "dcqcn_g", "dctcp_alpha_init", "pmax"):
        _need(_num(out[key]) and 0 <= out[key] <= 1, key, out[key], "expected 0 <= value <= 1")
    for key in ("dctcp_g", "dcqcn_g"):
        _need(out[key] > 0, key, out[key], "expected a gain > 0")
    fl = out["dctcp_min_ssthresh_segments"]
    _need(_int(fl) and 0 <= fl <= 1024, "dctcp_min_ssthresh_segments", fl,
          "expected an integer number of segments, 0..1024")
    lr = out["loss_rate"]
    _need(_num(lr) and 0 <= lr < 1, "loss_rate", lr, "expected 0 <= loss_rate < 1")
    # thresholds that depend on the buffer: a default follows the buffer, and a threshold the
    # transport does not use (ECN for tcp/ideal/dcqcn, RED/PFC for all but dcqcn) is checked
    # for its type only, never against the buffer
    if out["ecn_k"] is None:
        out["ecn_k"] = min(65, out["buffer_packets"] - 1)
    k = out["ecn_k"]
    _need(_int(k) and k >= 0, "ecn_k", k, "expected an integer number of packets >= 0")
    if t == "dctcp":  # the only transport that marks by queue length
        _need(k < out["buffer_packets"], "ecn_k", k,
              f"a marking threshold must be below engine.buffer_packets = "
              f"{out['buffer_packets']}")
    if t == "dcqcn":
        _need(out["kmin_bytes"] < out["kmax_bytes"], "kmax_bytes", out["kmax_bytes"],
              f"must exceed engine.kmin_bytes = {out['kmin_bytes']}")
    mt = out["max_time_s"]
    _need(mt is None or (_num(mt) and mt > 0), "max_time_s", mt, "expected a time > 0 or nothing")
    # the core's clock counts whole picoseconds and reads 0 as "no limit": a positive time that
    # rounds to 0 ps would silently run to the end
    _need(mt is None or round(mt * 1e12) >= 1, "max_time_s", mt,
          "below the packet engine's resolution of one picosecond")
    frame = mtu + out["l2_header_bytes"]
    port_bytes = out["buffer_packets"] * frame
    if out["buffer_bytes"]:
        _need(out["buffer_bytes"] >= frame, "buffer_bytes", out["buffer_bytes"],
              f"cannot hold one {frame}-byte frame")
        port_bytes = min(port_bytes, out["buffer_bytes"])
    if out["switch_buffer_bytes"]:
        _need(out["switch_buffer_bytes"] >= frame, "switch_buffer_bytes",
              out["switch_buffer_bytes"], f"cannot hold one {frame}-byte frame")
    if out["pfc_xoff_bytes"] is None:
        out["pfc_xoff_bytes"] = min(port_bytes, max(2 * frame, 24_470))
    xoff = out["pfc_xoff_bytes"]
    if out["pfc_xon_bytes"] is None:
        out["pfc_xon_bytes"] = xoff // 2 if _int(xoff) else 0
    xon = out["pfc_xon_bytes"]
    if t == "dcqcn":  # PFC runs with dcqcn only
        _need(_int(xoff) and xoff >= frame, "pfc_xoff_bytes", xoff,
              f"expected an integer >= one {frame}-byte frame")
        _need(xoff <= port_bytes, "pfc_xoff_bytes", xoff,
              f"above the {port_bytes}-byte port buffer (engine.buffer_packets/buffer_bytes)")
        _need(_int(xon) and 0 <= xon < xoff, "pfc_xon_bytes", xon,
              f"expected an integer with 0 <= xon < engine.pfc_xoff_bytes = {xoff}")
    else:
        for key, v in (("pfc_xoff_bytes", xoff), ("pfc_xon_bytes", xon)):
            _need(_int(v) and v >= 0, key, v, "expected an integer number of bytes >= 0")
    from netcore.packet.limits import check_options as check_ranges

    check_ranges(out)  # times the core's picosecond clock can add without wrapping
    return out

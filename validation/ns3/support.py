"""What the ns-3 runner can reproduce, and the refusal of everything else.

ns-3 here runs TCP NewReno, or DCTCP (ns-3's TcpDctcp, with the packet engine's marking rule
in the device queues), over point-to-point links, drop-tail queues and static routes. A scenario asking for something that setup cannot reproduce exactly is refused with
an InputError that names the feature, never approximated silently.
"""
from __future__ import annotations

from netcore.packet import options as packet_options
from topo.errors import InputError

# Routing policies whose flows each follow one fixed path: installed exactly as per-transfer
# static host routes. spray splits a flow over many paths; adaptive chooses per packet from
# queue lengths at run time: ns-3's static routing can do neither.
POLICIES_OK = ("shortest", "dmodk", "dmodk_level", "dor", "ecmp", "valiant")
POLICIES_REFUSED = {
    "spray": "routing.policy = 'spray': per-packet spraying over all shortest paths cannot be "
             "reproduced with ns-3 static routes",
    "adaptive": "routing.policy = 'adaptive': load-dependent per-hop path choice cannot be "
                "reproduced with ns-3 static routes",
}
# transport -> ns-3 congestion control (TcpL4Protocol::SocketType)
TRANSPORTS_OK = {"tcp": "ns3::TcpNewReno", "dctcp": "ns3::TcpDctcp"}

DEFAULTS = {
    "transport": "tcp",
    "mtu": 9000,
    "buffer_packets": 1000,
}

# option -> value that means "feature off"; any other value is refused by name
_OFF_VALUES = {
    "loss_rate": (0, 0.0, None),
    "pfc": (False, None, 0),
    "ecn": (False, None, 0),
    "ecn_kmin": (None,),
    "ecn_kmax": (None,),
    "ecn_threshold_packets": (None, 0),
    "ecn_k_packets": (None, 0),
    "pfc_xoff_packets": (None, 0),
    "pfc_xon_packets": (None, 0),
    "reroute_delay_us": (None, 0, 0.0),
}


# The packet engine's TCP options that have an ns-3 attribute: a scenario's value (or its
# engine.tcp_timers preset's) is set on every socket (driver.cc Configure). delayed_ack /
# delack_count become DelAckCount (1 when delayed ACKs are off).
TCP_PASSED = {
    "min_rto_s": "TcpSocketBase::MinRto",
    "init_rto_s": "RttEstimator::InitialEstimation",
    "clock_granularity_s": "TcpSocketBase::ClockGranularity",
    "conn_timeout_s": "TcpSocket::ConnTimeout",
    "syn_retries": "TcpSocket::ConnCount",
    "data_retries": "TcpSocket::DataRetries",
    "init_cwnd": "TcpSocket::InitialCwnd",
    "dupack_threshold": "TcpSocketBase::ReTxThreshold",
    "limited_transmit": "TcpSocketBase::LimitedTransmit",
    "sack": "TcpSocketBase::Sack",
    "delayed_ack": "TcpSocket::DelAckCount",
    "delack_count": "TcpSocket::DelAckCount",
    "delack_timeout_s": "TcpSocket::DelAckTimeout",
}
# Packet-engine options ns-3 has one fixed behaviour for: any other value is refused by name
# rather than run with ns-3's (which would compare two different set-ups in silence).
_NS3_FIXED = {
    "max_rto_s": (60.0, "ns-3 caps the retransmission timeout at 60 s in "
                        "TcpSocketBase::ReTxTimeout, not an attribute; set engine.max_rto_s = "
                        "60 to compare with ns-3"),
    "handshake": (True, "ns-3's sockets always open with SYN / SYN-ACK"),
    "warm_connections": (False, "the ns-3 runner opens one connection per transfer"),
    "l2_header_bytes": (2, "ns-3's point-to-point frames carry a 2-byte PPP header"),
    "buffer_bytes": (0, "the ns-3 runner's queues count packets only (engine.buffer_packets)"),
    "switch_buffer_bytes": (0, "the ns-3 runner has no buffer shared by a switch's ports"),
    "max_time_s": (None, "stop the ns-3 run with --horizon-ms instead"),
}


class NS3Unsupported(InputError):
    """The scenario uses a feature the ns-3 runner cannot reproduce."""


def check_policy(policy: str) -> None:
    if policy in POLICIES_REFUSED:
        raise NS3Unsupported(POLICIES_REFUSED[policy])
    if policy not in POLICIES_OK:
        raise NS3Unsupported(f"routing.policy = {policy!r}: not supported by the ns-3 runner "
                             f"(supported: {', '.join(POLICIES_OK)})")


def check_options(opts: dict | None) -> dict:
    """The packet-engine options the ns-3 run honours, with defaults; refuse the rest by name.

    Only options whose value changes behaviour are refused: e.g. ``loss_rate = 0`` is fine,
    ``loss_rate = 0.01`` is not.
    """
    opts = dict(opts or {})
    out = dict(DEFAULTS)
    transport = opts.get("transport", "tcp")
    if transport not in TRANSPORTS_OK:
        raise NS3Unsupported(f"engine.transport = {transport!r}: the ns-3 runner reproduces "
                             f"'tcp' (NewReno) and 'dctcp' (TcpDctcp); DCQCN/ideal are not "
                             f"modelled there")
    for key, off in _OFF_VALUES.items():
        if key in opts and opts[key] not in off:
            raise NS3Unsupported(f"engine.{key} = {opts[key]!r}: the ns-3 runner does not "
                                 f"reproduce {key.split('_')[0]} (plain drop-tail TCP only)")
    for key in ("mtu", "buffer_packets"):
        if key in opts:
            v = opts[key]
            if not isinstance(v, int) or isinstance(v, bool):
                raise InputError(f"engine.{key} = {v!r}: expected an integer")
            out[key] = v
    if not 576 <= out["mtu"] <= 65535:
        raise InputError(f"engine.mtu = {out['mtu']!r}: expected 576..65535 bytes "
                         f"(ns-3 PointToPointNetDevice Mtu is 16-bit)")
    if out["buffer_packets"] < 1:
        raise InputError(f"engine.buffer_packets = {out['buffer_packets']!r}: expected >= 1")
    out["transport"] = transport
    # TCP settings as the packet engine resolves them (its engine.tcp_timers preset, its checks
    # and messages); keys the packet engine does not know are not the ns-3 run's business
    known = {k: v for k, v in opts.items() if k in packet_options.DEFAULTS}
    tcp = packet_options.check_options({**known, "mtu": out["mtu"],
                                        "buffer_packets": out["buffer_packets"]})
    for key, (value, why) in _NS3_FIXED.items():
        if tcp[key] != value:
            raise NS3Unsupported(f"engine.{key} = {tcp[key]!r}: not reproducible in ns-3 ({why})")
    # every timer key, so that checking the result again (run_ns3 does) gives the same result
    out.update({key: tcp[key] for key in (*TCP_PASSED, *packet_options.TIMER_KEYS)})
    out["tcp_timers"] = tcp["tcp_timers"]
    # DCTCP: the marking threshold (0: no queue marks, tcp) and TcpDctcp's two attributes
    out["ecn_k"] = tcp["ecn_k"] if transport == "dctcp" else 0
    out["dctcp_g"] = tcp["dctcp_g"]
    out["dctcp_alpha_init"] = tcp["dctcp_alpha_init"]
    out["dctcp_min_ssthresh_segments"] = tcp["dctcp_min_ssthresh_segments"]
    return out

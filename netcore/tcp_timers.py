"""TCP retransmission timers, by name: shared by the packet engine's tcp/dctcp transports and
the flow engine's tcp transport (which uses them only for a connection a fault leaves without
a path, docs/flow_engine.md "Faults in time").

A timer key given explicitly wins over its preset. ns-3's defaults stay the cross-validation
reference, but they measure timers rather than the fabric in a failure study of an AI cluster
(a 1 s minimum RTO against RTTs of microseconds), hence a Linux set and a data-centre-tuned
set (docs/packet_engine.md, "TCP timers", gives the sources).
"""
from __future__ import annotations

from topo.errors import InputError

TIMER_KEYS = ("min_rto_s", "init_rto_s", "max_rto_s", "clock_granularity_s", "conn_timeout_s")
TIMER_PRESETS = {
    # ns-3.44: TcpSocketBase::MinRto 1 s, RttEstimator::InitialEstimation 1 s, 60 s cap,
    # ClockGranularity 1 ms, TcpSocket::ConnTimeout 3 s
    "ns3": {"min_rto_s": 1.0, "init_rto_s": 1.0, "max_rto_s": 60.0,
            "clock_granularity_s": 1e-3, "conn_timeout_s": 3.0},
    # Linux (include/net/tcp.h): TCP_RTO_MIN = HZ/5 = 200 ms, TCP_TIMEOUT_INIT = 1 s (RFC 6298,
    # also the first SYN timeout), TCP_RTO_MAX = 120 s; 1 ms timer granularity (HZ = 1000)
    "linux": {"min_rto_s": 0.2, "init_rto_s": 1.0, "max_rto_s": 120.0,
              "clock_granularity_s": 1e-3, "conn_timeout_s": 1.0},
    # data-centre-tuned Linux: the minimum RTO lowered to 5 ms per route (`ip route ... rto_min
    # 5ms`, or net.ipv4.tcp_rto_min_us), between DCTCP's 10 ms (Alizadeh et al., SIGCOMM 2010)
    # and the 200 us of fine-grained timers (Vasudevan et al., SIGCOMM 2009); microsecond
    # timer granularity (hrtimers); SYNs keep Linux's 1 s
    "datacenter": {"min_rto_s": 5e-3, "init_rto_s": 1.0, "max_rto_s": 120.0,
                   "clock_granularity_s": 1e-6, "conn_timeout_s": 1.0},
}

# timeouts in a row without progress before a connection gives up (ns-3.44
# TcpSocket::DataRetries = 6), and SYN retransmissions before a connection attempt does
# (TcpSocket::ConnCount = 6)
DATA_RETRIES = 6
SYN_RETRIES = 6


def fill_from_preset(given: dict, out: dict, keys) -> None:
    """Check ``out["tcp_timers"]`` and give each timer of ``keys`` that ``given`` (the
    options as written) does not set its preset's value, in ``out``."""
    preset = out["tcp_timers"]
    if not isinstance(preset, str) or preset not in TIMER_PRESETS:
        raise InputError(f"engine.tcp_timers = {preset!r}: expected one of "
                         f"{', '.join(TIMER_PRESETS)}")
    for key in keys:
        if key not in given:
            out[key] = TIMER_PRESETS[preset][key]

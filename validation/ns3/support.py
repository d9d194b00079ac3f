"""What the ns-3 runner can reproduce, and the refusal of everything else.

ns-3 here runs plain TCP NewReno over point-to-point links, drop-tail queues and static
routes. A scenario asking for something that setup cannot reproduce exactly is refused with
an InputError that names the feature, never approximated silently.
"""
from __future__ import annotations

from topo.errors import InputError

# Routing policies whose flows each follow one fixed path: installed exactly as per-transfer
# static host routes. spray splits a flow over many paths; adaptive chooses per packet from
# queue lengths at run time: ns-3's static routing can do neither.
POLICIES_OK = ("shortest", "dmodk", "dor", "ecmp", "valiant")
POLICIES_REFUSED = {
    "spray": "routing.policy = 'spray': per-packet spraying over all shortest paths cannot be "
             "reproduced with ns-3 static routes",
    "adaptive": "routing.policy = 'adaptive': load-dependent per-hop path choice cannot be "
                "reproduced with ns-3 static routes",
}
TRANSPORTS_OK = ("tcp",)

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
                             f"only 'tcp' (NewReno); DCTCP/DCQCN/ideal are not modelled there")
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
    return out

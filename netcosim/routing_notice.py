"""A warning for a routing choice that silently costs a fabric most of its bandwidth.

On ``fullflat`` every GPU has one link into each of ``planes`` independent planes. A
single-path policy (``shortest``, ``ecmp``, ``dmodk``, ``valiant``) is striped over the planes
by ``topo.routing`` (each connection routed once per plane, an even share on each), as NCCL
drives one NIC per plane with channels of its own: the flow engine and the analytical estimate
use every plane. The packet engine does not: it sends a connection's packets over one path, so
there a single-path policy keeps each connection on one plane and a GPU that talks to one peer
at a time (a ring step, a pipeline send) gets 1/``planes`` of its bandwidth. ``spray`` (or
``adaptive``) stripes packets over every plane on that engine (docs/topologies.md, "fullflat").
"""
from __future__ import annotations

import sys

SINGLE_PATH = ("shortest", "ecmp", "dmodk", "valiant")
_shown: set[str] = set()


def plane_notice(topology, policy: str, engine: str) -> str | None:
    """The warning for ``policy`` on ``topology`` run by ``engine``, or None when it does not
    apply (other engines stripe single-path policies over the planes)."""
    planes = int((getattr(topology, "params", None) or {}).get("planes", 1) or 1)
    if getattr(topology, "kind", None) != "fullflat" or planes < 2 or policy not in SINGLE_PATH \
            or engine != "packet":
        return None
    return (f"routing.policy = {policy!r} on fullflat: the packet engine sends each connection "
            f"over one of the {planes} planes (the flow engine and the analytical estimate "
            f"split it over all of them), so a GPU sending to one peer at a time (ring steps, "
            f"pipeline sends) gets 1/{planes} of its bandwidth there. routing.policy = "
            f"\"spray\" stripes packets over every plane (docs/topologies.md, \"fullflat\")")


def warn_planes(topology, policy: str, engine: str) -> None:
    """Print the plane warning on stderr, once per process and message."""
    text = plane_notice(topology, policy, engine)
    if text is not None and text not in _shown:
        _shown.add(text)
        print(f"warning: {text}", file=sys.stderr)

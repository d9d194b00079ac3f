"""A warning for a routing choice that silently costs a fabric most of its bandwidth.

On ``fullflat`` every GPU has one link into each of ``planes`` independent planes. A
single-path policy (``topo.routing.STRIPED``) is striped over the planes:
``topo.routing`` routes each pair once per plane and the flow engine and the analytical
estimate split the flow evenly over them; the packet engine splits each transfer into one
connection per plane (netcore/packet/plane_split.py), as NCCL drives one NIC per plane with
channels of its own. One case is left: with ``engine.warm_connections`` the packet engine keeps
one connection per host pair, on one plane, so a GPU that talks to one peer at a time (a ring
step, a pipeline send) gets 1/``planes`` of its bandwidth (docs/topologies.md, "fullflat").
"""
from __future__ import annotations

import sys

from topo.routing import STRIPED

SINGLE_PATH = STRIPED
_shown: set[str] = set()


def plane_notice(topology, policy: str, engine: str, warm_connections: bool = False) \
        -> str | None:
    """The warning for ``policy`` on ``topology`` run by ``engine`` (with warm connections or
    not), or None when it does not apply."""
    planes = int((getattr(topology, "params", None) or {}).get("planes", 1) or 1)
    if getattr(topology, "kind", None) != "fullflat" or planes < 2 or policy not in SINGLE_PATH \
            or engine != "packet" or not warm_connections:
        return None
    return (f"routing.policy = {policy!r} on fullflat with engine.warm_connections: the packet "
            f"engine keeps one connection per host pair, on one of the {planes} planes, so a "
            f"GPU sending to one peer at a time (ring steps, pipeline sends) gets 1/{planes} of "
            f"its bandwidth (without warm connections a transfer gets a connection per plane; "
            f"docs/topologies.md, \"fullflat\")")


def warn_planes(topology, policy: str, engine: str, warm_connections: bool = False) -> None:
    """Print the plane warning on stderr, once per process and message."""
    text = plane_notice(topology, policy, engine, warm_connections)
    if text is not None and text not in _shown:
        _shown.add(text)
        print(f"warning: {text}", file=sys.stderr)

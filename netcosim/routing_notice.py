"""A warning for a routing choice that silently costs a fabric most of its bandwidth.

On ``fullflat`` every GPU has one link into each of ``planes`` independent planes. A
single-path policy (``shortest``, ``ecmp``, ``dmodk``, ``valiant``) puts each connection on one
plane, so a GPU that talks to one peer at a time (a ring step, a pipeline send) gets
1/``planes`` of its bandwidth while the other planes idle. NCCL instead drives every NIC of a
GPU with channels of its own, and NVLink-style fabrics stripe every transfer over all links:
``spray`` (or ``adaptive``) models that striping. Measured with ``netcosim run
examples/fullflat_alltoall.toml --set workload.op=all_reduce --set workload.algorithm=ring
--set workload.bytes=4GiB``: 109.7 GB/s bus bandwidth under ``ecmp`` against 748.7 GB/s under
``spray`` (docs/topologies.md, "fullflat").
"""
from __future__ import annotations

import sys

SINGLE_PATH = ("shortest", "ecmp", "dmodk", "valiant")
_shown: set[str] = set()


def plane_notice(topology, policy: str) -> str | None:
    """The warning for ``policy`` on ``topology``, or None when it does not apply."""
    planes = int((getattr(topology, "params", None) or {}).get("planes", 1) or 1)
    if getattr(topology, "kind", None) != "fullflat" or planes < 2 or policy not in SINGLE_PATH:
        return None
    return (f"routing.policy = {policy!r} on fullflat puts each connection on one of its "
            f"{planes} planes: a GPU sending to one peer at a time (ring steps, pipeline "
            f"sends) gets 1/{planes} of its bandwidth. NCCL's channels and NVLink-style "
            f"fabrics stripe a transfer over every plane; routing.policy = \"spray\" models "
            f"that (docs/topologies.md, \"fullflat\")")


def warn_planes(topology, policy: str) -> None:
    """Print the plane warning on stderr, once per process and message."""
    text = plane_notice(topology, policy)
    if text is not None and text not in _shown:
        _shown.add(text)
        print(f"warning: {text}", file=sys.stderr)

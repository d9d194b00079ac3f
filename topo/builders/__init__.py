"""Topology builders: one function per fabric family, each returning a ``topo.Topology``.

``build(kind, params)`` is what the scenario loader calls with the ``[topology]`` table minus
``kind``; ``ACCEPTED_KEYS[kind]`` / ``REQUIRED_KEYS[kind]`` list the keys each kind takes (read
from the builder signatures, so they cannot drift). See docs/topologies.md.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping

from topo.builders.custom import custom
from topo.builders.dragonfly import dragonfly
from topo.builders.fat_tree import fat_tree
from topo.builders.fullflat import fullflat
from topo.builders.leaf_spine import leaf_spine
from topo.builders.torus import torus
from topo.builders.two_tier import two_tier
from topo.errors import InputError
from topo.topology import Topology

BUILDERS = {
    "fat_tree": fat_tree,
    "leaf_spine": leaf_spine,
    "torus": torus,
    "fullflat": fullflat,
    "two_tier": two_tier,
    "dragonfly": dragonfly,
    "custom": custom,
}


def _keys(fn, required: bool) -> tuple[str, ...]:
    out = []
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind is p.KEYWORD_ONLY:  # ``where``: not a user key
            continue
        if not required or p.default is p.empty:
            out.append(name)
    return tuple(out)


ACCEPTED_KEYS: dict[str, tuple[str, ...]] = {k: _keys(f, False) for k, f in BUILDERS.items()}
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {k: _keys(f, True) for k, f in BUILDERS.items()}
# in-network reduction (topo/innet.py), for every kind that has switches
for _k in ACCEPTED_KEYS:
    if _k != "torus":
        ACCEPTED_KEYS[_k] = ACCEPTED_KEYS[_k] + ("reduce_gbps",)


def build(kind, params: Mapping | None = None, where: str = "topology") -> Topology:
    """Build a fabric from a scenario ``[topology]`` table (without ``kind``).

    Unknown or missing keys, wrong types and out-of-range values raise InputError naming
    ``<where>.<key>`` and the value."""
    if not isinstance(kind, str) or kind not in BUILDERS:
        raise InputError(f"{where}.kind = {kind!r}: expected one of {', '.join(BUILDERS)}")
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise InputError(f"{where} = {params!r}: expected a table of parameters")
    accepted = ACCEPTED_KEYS[kind]
    for key in params:
        if key not in accepted:
            raise InputError(f"{where}.{key} = {params[key]!r}: unknown key for kind = "
                             f"{kind!r} (accepted: {', '.join(accepted)})")
    for key in REQUIRED_KEYS[kind]:
        if key not in params:
            raise InputError(f"{where}.{key}: required for kind = {kind!r}")
    params = dict(params)
    reduce_gbps = params.pop("reduce_gbps", None)
    t = BUILDERS[kind](**params, where=where)
    if reduce_gbps is not None:
        from topo.innet import apply_reduce

        apply_reduce(t, reduce_gbps, f"{where}.reduce_gbps")
    return t


__all__ = ["build", "BUILDERS", "ACCEPTED_KEYS", "REQUIRED_KEYS", "fat_tree", "leaf_spine",
           "torus", "fullflat", "two_tier", "dragonfly", "custom"]

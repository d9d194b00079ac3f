"""Collective templates for the step generator.

A template is a Schedule over local ranks 0..g-1 built once per (op, algorithm, g, nbytes) and
then stamped onto every group that runs it (``training._Stamp``). It comes from the collectives
library (``collectives.build``); only while that library is absent does a minimal ring stand-in
(below) keep the generator usable, and it is used for nothing else.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from netcore.schedule import Schedule
from topo.errors import InputError

# default algorithm per op when the caller does not choose one
DEFAULT_ALGO = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring",
                "all_to_all": "direct"}


def _library():
    try:
        import collectives
    except ImportError:  # pragma: no cover
        return None
    return collectives if hasattr(collectives, "build") else None


@lru_cache(maxsize=256)
def template(op: str, g: int, nbytes: int, algorithm: str | None = None) -> Schedule:
    """Transfers of ``op`` over local ranks 0..g-1 carrying ``nbytes`` (the per-rank buffer)."""
    if g < 2 or nbytes <= 0:
        return Schedule.empty()
    lib = _library()
    algo = algorithm or DEFAULT_ALGO.get(op, "ring")
    if lib is not None:
        try:
            return lib.build(op, algo, list(range(g)), int(nbytes))
        except InputError:
            if algorithm is not None:
                raise
            return lib.build(op, "ring", list(range(g)), int(nbytes))
    return _stand_in(op, g, int(nbytes))


def uses_library() -> bool:
    return _library() is not None


def _stand_in(op: str, g: int, nbytes: int) -> Schedule:
    """Ring reduce-scatter / all-gather / all-reduce and direct all-to-all (temporary)."""
    chunk = max(nbytes // g, 1)
    if op == "all_to_all":
        src, dst = np.nonzero(~np.eye(g, dtype=bool))
        return Schedule.from_transfers(src, dst, np.full(len(src), chunk))
    steps = {"reduce_scatter": g - 1, "all_gather": g - 1, "all_reduce": 2 * (g - 1)}.get(op)
    if steps is None:
        raise InputError(f"collective op = {op!r}: unknown")
    r = np.arange(g)
    src = np.tile(r, steps)
    dst = (src + 1) % g
    # step k transfer out of rank r waits for step k-1 transfer into r (from r-1)
    deps = [[] if i < g else [i - g - (1 if src[i] > 0 else -(g - 1))] for i in range(steps * g)]
    return Schedule.from_transfers(src, dst, np.full(steps * g, chunk), deps=deps,
                                   tag=np.repeat(np.arange(steps), g))

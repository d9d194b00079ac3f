"""Collective templates for the step generator.

A template is a Schedule over local ranks 0..g-1 built once per (op, algorithm, g, nbytes) and
then stamped onto every group that runs it (``training._Stamp``). It comes from the collectives
library (``collectives.build``), so every collective a training step runs is one the library's
checker verifies.
"""
from __future__ import annotations

from functools import lru_cache

import collectives
from netcore.schedule import Schedule
from topo.errors import InputError

# default algorithm per op when the caller does not choose one
DEFAULT_ALGO = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring",
                "all_to_all": "direct"}


@lru_cache(maxsize=256)
def template(op: str, g: int, nbytes: int, algorithm: str | None = None) -> Schedule:
    """Transfers of ``op`` over local ranks 0..g-1 carrying ``nbytes`` (the per-rank buffer)."""
    if g < 2 or nbytes <= 0:
        return Schedule.empty()
    algo = algorithm or DEFAULT_ALGO.get(op, "ring")
    try:
        return collectives.build(op, algo, list(range(g)), int(nbytes))
    except InputError:
        if algorithm is not None:
            raise
        # the default algorithm does not support this group size: fall back to the ring
        return collectives.build(op, "ring", list(range(g)), int(nbytes))

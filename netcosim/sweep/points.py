"""Expanding a sweep into points (full scenario tables) and checking them before any run.

A point is the base scenario with the block's ``set`` and one choice per axis applied. Each
carries its swept values (the table's parameter columns) and a content id, a hash of the
scenario table, which ``--resume`` uses to recognise a point already run even when the sweep
file was reordered or extended.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass

import numpy as np

from netcosim.scenario import Scenario, apply_override
from netcosim.sweep.spec import MAX_POINTS, Block, SweepSpec
from topo.errors import InputError, OverBudget
from topo.arrays import unique


@dataclass
class Point:
    index: int  # position in the expansion (row order of the table)
    params: dict  # column -> value of every axis of its block
    data: dict  # the full scenario table
    where: str  # "sweep[1] point 7: topology.k=8, ..." for messages
    # a fault-study trial: hosts cut apart by its faults are stranded runs, not bad input
    strandable: bool = False

    @property
    def id(self) -> str:
        return point_id(self.data)


def point_id(data: dict) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def block_size(block: Block) -> int:
    if block.mode == "zip":
        return len(block.axes[0].values)
    n = 1
    for a in block.axes:
        n *= len(a.values)
    return n


def choices(block: Block):
    """Per point, the index of the value chosen on each axis, made one at a time (a
    million-point grid is never a million tuples at once)."""
    sizes = [len(a.values) for a in block.axes]
    if block.mode == "zip":
        return (tuple([i] * len(sizes)) for i in range(sizes[0]))
    total = block_size(block)
    if block.mode == "grid":
        if total > MAX_POINTS:
            raise InputError(f"{block.where}: {total} grid points is more than a sweep can "
                             f"hold ({MAX_POINTS}); use mode = \"sample\"")
        return itertools.product(*[range(s) for s in sizes])
    if total > FLAT_LIMIT:
        return iter(sampled_huge(block))
    flat = sampled(block)
    return (tuple(int(x) for x in np.unravel_index(int(i), sizes)) for i in flat)


# numpy draws and unravels flat grid positions as int64: a larger sampled grid (four axes of
# a million values) is drawn axis by axis (sampled_huge)
FLAT_LIMIT = 2**63 - 1


def sampled(block: Block) -> np.ndarray:
    """mode = "sample": the flat grid positions of its n distinct points, in grid order so
    the table reads like a thinned grid."""
    total = block_size(block)
    if block.n > total:
        raise InputError(f"{block.where}.n = {block.n}: the grid has only {total} points "
                         f"(use mode = \"grid\" to run them all)")
    rng = np.random.default_rng(block.sample_seed)
    return np.sort(rng.choice(total, size=block.n, replace=False))


def sampled_huge(block: Block) -> list[tuple]:
    """mode = "sample" on a grid beyond FLAT_LIMIT points: n distinct points as index tuples,
    in grid order, each axis's index drawn uniformly (so each point is equally likely) and a
    point drawn twice drawn again (n is at most MAX_POINTS, a vanishing share of such a grid).
    Before, numpy's int64 overflowed: 'internal error: OverflowError', exit 1."""
    sizes = [len(a.values) for a in block.axes]
    rng = np.random.default_rng(block.sample_seed)
    picks: set[tuple] = set()
    while len(picks) < block.n:
        need = block.n - len(picks)
        for t in zip(*[rng.integers(0, s, size=need).tolist() for s in sizes]):
            if len(picks) < block.n:
                picks.add(t)
    return sorted(picks)


def block_points(block: Block) -> int:
    """Points a block gives, from its axes alone (nothing expanded)."""
    return block.n if block.mode == "sample" else block_size(block)


def count_points(spec: SweepSpec) -> int:
    """Points of the whole sweep, computed from the axes before anything is expanded; a sweep
    beyond MAX_POINTS is refused here, with the count."""
    sizes = [block_points(b) for b in spec.blocks]
    total = sum(sizes)
    if total > MAX_POINTS:
        shape = "; ".join(
            f"{b.where}: " + (" x ".join(str(len(a.values)) for a in b.axes)
                              if b.mode == "grid" and len(b.axes) > 1 else f"{n:,}")
            for b, n in zip(spec.blocks, sizes))
        raise InputError(f"sweep: {total:,} points ({shape}) is more than a sweep may hold "
                         f"({MAX_POINTS:,}); use fewer values, or mode = \"sample\" with n")
    return total


class PointSet:
    """The points of a sweep, made on demand: each pass over it builds them one at a time
    (``netcosim sweep`` passes over them to check, to run and to write the table), so a
    million-point sweep is never a million scenario tables at once. ``len()`` is counted from
    the axes, and a sweep beyond MAX_POINTS is refused on creation."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self._n = count_points(spec)
        if not self._n:
            raise InputError("sweep: no points")

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        spec, index = self.spec, 0
        for block in spec.blocks:
            fixed = _fixed(spec, block)
            for pick in choices(block):
                yield _point(spec, block, fixed, pick, index)
                index += 1


def expand(spec: SweepSpec) -> list[Point]:
    """Every point of every block as a list, scenario tables built and shape-checked (unknown
    keys, wrong types); parts are built later by ``check_points``."""
    return list(PointSet(spec))


def sample_points(spec: SweepSpec, per_block: int) -> list[Point]:
    """At most ``per_block`` points of each block, without expanding the others: the first,
    the last and evenly spaced ones between (indexes as in ``expand``)."""
    count_points(spec)
    points, offset = [], 0
    for block in spec.blocks:
        n = block_points(block)
        fixed = _fixed(spec, block)
        if n <= per_block:
            at = np.arange(n)
        else:
            at = unique(np.linspace(0, n - 1, per_block).round().astype(np.int64))
        if block.mode == "sample" and block_size(block) > FLAT_LIMIT:
            picks = sampled_huge(block)
            sel = [picks[int(i)] for i in at]
        elif block.mode == "sample":
            sizes = [len(a.values) for a in block.axes]
            flat = sampled(block)[at]
            sel = [tuple(int(x) for x in np.unravel_index(int(i), sizes)) for i in flat]
        elif block.mode == "zip":
            sel = [tuple([int(i)] * len(block.axes)) for i in at]
        else:
            sizes = [len(a.values) for a in block.axes]
            sel = [tuple(int(x) for x in np.unravel_index(int(i), sizes)) for i in at]
        for i, pick in zip(at, sel):
            points.append(_point(spec, block, fixed, pick, offset + int(i)))
        offset += n
    return points


def _fixed(spec: SweepSpec, block: Block) -> dict:
    fixed = copy.deepcopy(spec.base)
    for path, value in block.fixed:
        _apply(fixed, path, value, f"{block.where}.set")
    return fixed


def _point(spec: SweepSpec, block: Block, fixed: dict, pick, index: int) -> Point:
    data = copy.deepcopy(fixed)
    params = dict(block.constants)
    for axis, i in zip(block.axes, pick):
        params[axis.column] = column_value(axis.values[i])
        for path, value in axis.settings[i]:
            _apply(data, path, copy.deepcopy(value), f"{block.where}.{axis.key}")
    label = ", ".join(f"{k}={_fmt(v)}" for k, v in params.items())
    where = f"sweep point {index} ({label})"
    try:
        Scenario.from_dict(data, source=spec.source, default_name="sweep")
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    return Point(index, params, data, where)


def column_value(v):
    """An axis value as the table's column holds it: a size written with a unit ("16MB",
    "1MiB") in bytes, as a range's sizes are, so the column sorts and plots as numbers (a list
    of size strings left the column text and `--plot` drew nothing); anything else as given.
    The point's scenario keeps the value as written."""
    if isinstance(v, str) and v.strip()[-1:].isalpha():  # a unit, not a bare number
        from netcore.sizes import parse_bytes

        try:
            return parse_bytes(v)
        except InputError:
            return v
    return v


def _apply(data: dict, path: list, value, where: str) -> None:
    text = ".".join(map(str, path))
    try:
        apply_override(data, path, value, text)
    except InputError as e:
        raise InputError(f"{where}: {str(e).replace('--set ', '')}") from None


def _fmt(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


# =========================================================================== full check
class Checker:
    """Builds each point's parts the way ``Scenario.prepare`` does, reusing the parts points
    share (a fabric built once serves every point on it). Keeps no schedule: a sweep of a
    thousand large collectives would not fit in memory."""

    MAX_CACHED = 32

    def __init__(self):
        self.fabrics = {}  # topology key -> (topology, {routing key: routing}, {faults key: faults})
        self.options = {}  # engine key -> options
        self.passed = set()

    def check(self, data: dict, reachable: bool = True) -> None:
        """Raises InputError (or the workload's MemoryInfeasible) for a bad point."""
        from netcosim.scenario import check_reachable

        # a fault trial passes without the reachability check: the same scenario as a sweep
        # point must still be checked for it (a worker checks both kinds in one process)
        key = (point_id(data), reachable)
        if key in self.passed:
            return
        from netcosim import plan

        stand_in = plan.is_best(data)
        if stand_in:  # a layout search: check it with its best-estimated layout
            data = plan.checkable(data)
        sc = Scenario.from_dict(data, default_name="sweep")
        ek = _key(sc.engine)
        if ek not in self.options:
            self.options[ek] = sc.engine_options()
        tk = _key(sc.topology)
        if tk not in self.fabrics:
            if len(self.fabrics) >= self.MAX_CACHED:
                self.fabrics.pop(next(iter(self.fabrics)))
            self.fabrics[tk] = (sc.build_topology(), {}, {})
        topo, routings, faults = self.fabrics[tk]
        rk = (_key(sc.routing), sc.seed)
        if rk not in routings:
            routings[rk] = sc.build_routing(topo)
        fk = _key(sc.faults)
        if fk not in faults:
            faults[fk] = sc.build_faults(topo)
        try:
            schedule = _build_unvalidated(sc, topo)
        except OverBudget:
            if not stand_in:
                raise
            # the stand-in layout is not what the search runs: each layout it simulates is
            # held to the memory guard then, and a refused one is a failed candidate. The
            # stand-in of the 1.8T MoE with SHARP on 1,024 GPUs (one micro-batch) is 16 M
            # nodes, and refused the whole co-design study beside a second worker
            self.passed.add(key)
            return
        if reachable:
            check_reachable(topo, routings[rk], faults[fk], schedule, sc.engine_kind)
        self.passed.add(key)


def _key(v) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _build_unvalidated(sc: Scenario, topology):
    """The workload's schedule as ``build_workload`` makes it, minus the DAG re-check: that
    check guards against builder bugs, not bad input, costs more than the build itself on a
    large collective, and runs anyway when the point is run (a failure then lands in its row).
    """
    from netcosim import workloads

    if sc.workload is None:
        return sc.build_schedule(topology)  # raises the "workload: missing" error
    workloads.check_keys(sc.workload, "workload")
    wk = workloads.get(sc.workload["kind"], "workload")
    return wk.builder(topology, sc.workload, "workload", sc.seed)

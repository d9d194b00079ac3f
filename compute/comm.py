"""Collective templates for the step generator.

A template is a Schedule over local ranks 0..g-1 built once per (op, algorithm, g, nbytes) and
then stamped onto every group that runs it (``training._Stamp``). It comes from the collectives
library (``collectives.build``), so every collective a training step runs is one the library's
checker verifies.

The network algorithm is chosen per op (``algorithms``): the training step's ``algorithm`` is
either one name, used by every op that has an algorithm of that name (the others keep their
default), or a table ``{all_reduce = "ring", all_to_all = "pairwise"}``. Both are checked
against the collectives registry before anything is built.
"""
from __future__ import annotations

import inspect
from functools import lru_cache

import numpy as np

import collectives
from collectives.streams import Stream, ring_stream
from netcore.schedule import Schedule
from topo.errors import InputError

# the collectives a training step runs on the network, and the default algorithm of each
OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
DEFAULT_ALGO = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring",
                "all_to_all": "direct"}
# an expert all-to-all under a routing imbalance runs as all_to_all_v (a bytes matrix in place
# of one size) with the algorithm chosen for all_to_all
V_DEFAULT = {"all_to_all_v": "direct"}


def _needs_options(op: str, algorithm: str) -> list[str]:
    """Options the algorithm cannot run without (default None, e.g. hierarchical's
    group_size): a template over local ranks 0..g-1 has nothing to fill them from."""
    params = inspect.signature(collectives.ALGORITHMS[op][algorithm]).parameters
    # in-network algorithms take their trees from the fabric (innet_templates); chunks, the
    # step latency and the protocol have defaults
    return [k for k, p in params.items()
            if p.default is None and k not in ("ranks", "nbytes", "matrix", "chunks", "fabric",
                                               "trees", "step_latency_s", "protocol",
                                               "per_node")]


def _check_one(op: str, name, field: str) -> str:
    if not isinstance(name, str):
        raise InputError(f"{field} = {name!r}: expected an algorithm name (a string)")
    try:
        _, algo = collectives.resolve(op, name)
    except InputError:
        raise InputError(f"{field} = {name!r}: {op} supports "
                         f"{', '.join(collectives.ALGORITHMS[op])}") from None
    need = _needs_options(op, algo)
    if need:
        raise InputError(f"{field} = {name!r}: {algo} {op} needs {', '.join(need)}, which a "
                         f"training step does not set; choose another algorithm")
    return algo


def algorithms(algorithm=None, field: str = "algorithm") -> dict[str, str]:
    """The explicitly chosen algorithm per op (canonical names), validated up front.

    ``None``: none chosen (defaults apply). One name: every op of ``OPS`` that has it (at least
    one must). A mapping: ``{op: name}`` with ops from ``OPS``. InputError names ``field``.
    """
    if algorithm is None:
        return {}
    if isinstance(algorithm, str):
        out = {}
        for op in OPS:
            algo = collectives.ALIASES.get((op, algorithm), algorithm)
            if algo in collectives.ALGORITHMS[op]:
                out[op] = _check_one(op, algorithm, field)
        if not out:
            known = sorted({a for op in OPS for a in collectives.ALGORITHMS[op]})
            raise InputError(f"{field} = {algorithm!r}: not an algorithm of any collective a "
                             f"training step runs (known: {', '.join(known)}; or a table "
                             f"per op such as {{all_reduce = \"ring\"}})")
        return out
    if isinstance(algorithm, dict):
        out = {}
        for op, name in algorithm.items():
            if op not in OPS:
                raise InputError(f"{field}.{op}: not a collective a training step runs "
                                 f"(ops: {', '.join(OPS)})")
            out[op] = _check_one(op, name, f"{field}.{op}")
        return out
    raise InputError(f"{field} = {algorithm!r}: expected an algorithm name or a table "
                     f"{{op = name}}")


RAIL_OPS = ("all_reduce", "reduce_scatter", "all_gather")


def runs_rail_rings(op: str, algorithm: str | None) -> bool:
    """Whether ``op`` with ``algorithm`` (None: the default) lays one ring per rail on a group
    holding several GPUs of each of several two_tier nodes (collectives/rail.py): the ring
    all-reduce, reduce-scatter and all-gather."""
    return op in RAIL_OPS and (algorithm or DEFAULT_ALGO.get(op)) == "ring"


def _rails(op: str, algorithm: str | None, per_node) -> int | None:
    """``per_node`` where the collective runs one ring per rail, else None."""
    return int(per_node) if per_node and runs_rail_rings(op, algorithm) else None


def per_node(topology, hosts) -> int | None:
    """How many GPUs of each two_tier node every row of ``hosts`` (k, g) holds, consecutive in
    the row and the same in every row (collectives.rail.per_node), else None."""
    from collectives.rail import per_node as of_row

    hosts = np.asarray(hosts, dtype=np.int64)
    if hosts.ndim != 2 or not len(hosts):
        return None
    m = of_row(topology, hosts[0])
    if m is None:
        return None
    node = np.asarray(topology.host_group)[hosts].reshape(len(hosts), -1, m)
    if (node != node[:, :, :1]).any():
        return None
    heads = np.sort(node[:, :, 0], axis=1)
    return m if (np.diff(heads, axis=1) > 0).all() else None


@lru_cache(maxsize=256)
def _template(op: str, g: int, nbytes, algorithm: str | None, rails=None) -> Schedule:
    if op == "all_to_all_v":  # nbytes: the g x g matrix as a tuple of rows
        import numpy as np

        mat = np.asarray(nbytes, dtype=np.int64)
        if g < 2 or not mat[~np.eye(g, dtype=bool)].any():
            return Schedule.empty()
        return collectives.build(op, algorithm or V_DEFAULT[op], list(range(g)), mat)
    if g < 2 or nbytes <= 0:
        return Schedule.empty()
    algo = algorithm or DEFAULT_ALGO.get(op, "ring")
    try:
        if rails:
            return collectives.build(op, algo, list(range(g)), int(nbytes), per_node=rails)
        return collectives.build(op, algo, list(range(g)), int(nbytes))
    except InputError:
        if algorithm is not None:
            raise
        # the default algorithm does not support this group size: fall back to the ring
        return collectives.build(op, "ring", list(range(g)), int(nbytes))


def template(op: str, g: int, nbytes, algorithm: str | None = None,
             per_node=None) -> Schedule:
    """Transfers of ``op`` over local ranks 0..g-1 carrying ``nbytes`` (the per-rank buffer;
    for ``all_to_all_v`` the bytes matrix as a tuple of rows). ``per_node``: the group holds
    that many consecutive ranks of each two_tier node (``per_node``): rings then run one per
    rail.

    Built once per key and cached; every caller gets its own copy, so changing one (arrays,
    labels, meta) can never leak into another training step."""
    return _template(op, int(g), nbytes if op == "all_to_all_v" else int(nbytes),
                     algorithm, _rails(op, algorithm, per_node)).copy()


@lru_cache(maxsize=256)
def stream(op: str, g: int, nbytes: int, algorithm: str | None = None) -> Stream | None:
    """The stream form of ``op`` over g local ranks (collectives.streams), when the algorithm
    has one that is known without building its template; None otherwise."""
    if op not in DEFAULT_ALGO or g < 2 or nbytes <= 0:
        return None
    return ring_stream(op, algorithm or DEFAULT_ALGO.get(op, "ring"), int(g), int(nbytes))


@lru_cache(maxsize=256)
def rail_streams(op: str, g: int, nbytes: int, algorithm: str | None, per_node: int):
    """The rail rings of ``op`` over g local ranks, ``per_node`` consecutive ones per node, in
    stream form: one Stream per rail over the local ranks in that ring's order, each with its
    ring's shards (collectives.rail.rail_phase); None where the collective has no rail rings."""
    from collectives.rail import rail_layout, rail_phase

    m = _rails(op, algorithm, per_node)
    if m is None or g < 4 or g % m or g // m < 2 or nbytes <= 0:
        return None
    ph = rail_phase(rail_layout(m, g), op, int(nbytes))
    return tuple(Stream(ph.src[r], ph.dst[r], int(ph.nbytes[r]), ph.steps, 0.0,
                        float(ph.min_s[r]), int(ph.short[r])) for r in range(m))


# --------------------------------------------------------------------------- in-network
def in_network(algorithm: str | None) -> bool:
    """Whether ``algorithm`` (canonical) reduces in the switches (nvls, sharp)."""
    return algorithm in collectives.IN_NETWORK


@lru_cache(maxsize=256)
def _innet_template(op: str, g: int, nbytes: int, algorithm: str, key: tuple) -> Schedule:
    from topo.innet import Tree

    trees, off = [], g
    for parent, rank_switch, rate in key:  # switches renumbered g, g+1, ... (after the ranks)
        K = len(parent)
        trees.append(Tree(np.arange(off, off + K), np.asarray(parent), np.asarray(rank_switch),
                          np.asarray(rate)))
        off += K
    return collectives.build(op, algorithm, list(range(g)), int(nbytes), trees=trees)


def innet_templates(op: str, nbytes: int, algorithm: str, hosts: np.ndarray, topology):
    """Templates of an in-network collective over every row of ``hosts`` (k, g): the groups
    whose aggregation trees have one shape share a template over local ranks 0..g-1 whose
    switches are numbered g, g+1, ...; yields (rows, template, switch ids (len(rows), K))
    where column j of the switch ids is template endpoint g + j of each row."""
    from topo.innet import trees

    if topology is None:
        raise InputError(f"algorithm = {algorithm!r}: an in-network collective needs the "
                         f"fabric's switches (a topology)")
    hosts = np.asarray(hosts)
    if hosts.shape[1] < 2 or nbytes <= 0:  # nothing to communicate
        yield np.arange(len(hosts)), Schedule.empty(), np.zeros((len(hosts), 0), np.int64)
        return
    fam: dict = {}
    for i, row in enumerate(hosts):
        trs = trees(topology, row, algorithm)
        key = tuple(t.key() for t in trs)
        f = fam.setdefault(key, ([], []))
        f[0].append(i)
        f[1].append(np.concatenate([np.asarray(t.switches, dtype=np.int64) for t in trs]))
    g = np.asarray(hosts).shape[1]
    for key, (rows, sws) in fam.items():
        t = _innet_template(op, g, int(nbytes), algorithm, key)
        yield np.asarray(rows), t.copy(), np.stack(sws)



"""collectives: turn a collective call into a Schedule of point-to-point transfers, check that
a schedule computes its collective, pick an algorithm for a fabric, and report NCCL-style.

``build(op, algorithm, ranks, nbytes, **options)`` dispatches to the per-algorithm functions
(``ring_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, protocol=None,
fabric=None)`` and friends); docs/collectives.md describes each algorithm, the protocols
(collectives/protocols.py), the checker and the choice rule.
"""
from __future__ import annotations

from collectives.all_reduce import (bidirectional_ring_all_reduce, direct_all_reduce,
                                    double_binary_tree_all_reduce,
                                    recursive_halving_doubling_all_reduce, ring_all_reduce)
from collectives.all_to_all import (direct_all_to_all, direct_all_to_all_v,
                                    hierarchical_all_to_all, hierarchical_all_to_all_v,
                                    pairwise_all_to_all, pairwise_all_to_all_v)
from collectives.checker import CheckFailed, check
from collectives.gather_scatter import (direct_all_gather, direct_reduce_scatter,
                                        ring_all_gather, ring_reduce_scatter)
from collectives.hierarchical import hierarchical_all_reduce, torus_all_reduce
from collectives.innet import (IN_NETWORK, nvls_all_gather, nvls_all_reduce,
                               nvls_reduce_scatter, sharp_all_gather, sharp_all_reduce,
                               sharp_reduce_scatter)
from collectives.nvls_tree import nvls_tree_all_reduce
from collectives.p2p import send_recv
from collectives.rooted import ring_broadcast, ring_reduce, tree_broadcast, tree_reduce
from topo.errors import InputError

# op -> algorithm -> function. Aliases: "tree" = double binary tree for all-reduce,
# "rabenseifner" = recursive halving-doubling, "shift" = pairwise.
ALGORITHMS: dict[str, dict[str, object]] = {
    "all_reduce": {
        "ring": ring_all_reduce,
        "bidirectional_ring": bidirectional_ring_all_reduce,
        "double_binary_tree": double_binary_tree_all_reduce,
        "recursive_halving_doubling": recursive_halving_doubling_all_reduce,
        "direct": direct_all_reduce,
        "hierarchical": hierarchical_all_reduce,
        "torus": torus_all_reduce,
        "nvls": nvls_all_reduce,
        "sharp": sharp_all_reduce,
        "nvls_tree": nvls_tree_all_reduce,
    },
    "all_to_all": {
        "direct": direct_all_to_all,
        "pairwise": pairwise_all_to_all,
        "hierarchical": hierarchical_all_to_all,
    },
    "all_to_all_v": {
        "direct": direct_all_to_all_v,
        "pairwise": pairwise_all_to_all_v,
        "hierarchical": hierarchical_all_to_all_v,
    },
    "reduce_scatter": {"ring": ring_reduce_scatter, "direct": direct_reduce_scatter,
                       "nvls": nvls_reduce_scatter, "sharp": sharp_reduce_scatter},
    "all_gather": {"ring": ring_all_gather, "direct": direct_all_gather,
                   "nvls": nvls_all_gather, "sharp": sharp_all_gather},
    "broadcast": {"ring": ring_broadcast, "tree": tree_broadcast},
    "reduce": {"ring": ring_reduce, "tree": tree_reduce},
    "send_recv": {"direct": send_recv},
}
ALIASES = {
    ("all_reduce", "tree"): "double_binary_tree",
    ("all_reduce", "dbt"): "double_binary_tree",
    ("all_reduce", "rabenseifner"): "recursive_halving_doubling",
    ("all_reduce", "rhd"): "recursive_halving_doubling",
    ("all_reduce", "bidir_ring"): "bidirectional_ring",
    ("all_reduce", "torus_dor"): "torus",
    ("all_reduce", "nvlstree"): "nvls_tree",
    ("all_to_all", "shift"): "pairwise",
    ("all_to_all_v", "shift"): "pairwise",
    ("send_recv", "p2p"): "direct",
    **{(op, "collnet"): "sharp" for op in ("all_reduce", "reduce_scatter", "all_gather")},
}
OPS = tuple(ALGORITHMS)


def resolve(op: str, algorithm: str) -> tuple[str, str]:
    """Canonical (op, algorithm); InputError naming the bad one."""
    if not isinstance(op, str) or op not in ALGORITHMS:
        raise InputError(f"op = {op!r}: expected one of {', '.join(ALGORITHMS)}")
    if not isinstance(algorithm, str):  # a list or table is no name (and not hashable)
        raise InputError(f"algorithm = {algorithm!r}: {op} supports "
                         f"{', '.join(ALGORITHMS[op])}")
    algorithm = ALIASES.get((op, algorithm), algorithm)
    if algorithm not in ALGORITHMS[op]:
        raise InputError(f"algorithm = {algorithm!r}: {op} supports "
                         f"{', '.join(ALGORITHMS[op])}")
    return op, algorithm


def build(op: str, algorithm: str, ranks, nbytes, fabric=None, **options):
    """The Schedule of ``op`` with ``algorithm`` over ``ranks`` (host ids, in ring order).

    ``fabric``: the topology, passed on to the algorithms (the in-network ones, ``nvls``,
    ``sharp`` and ``nvls_tree``, build their reduction trees from it; a protocol's per-step
    latency depends on whether a step stays in a scale-up domain). ``protocol``: None (no
    protocol costs), "ll", "ll128", "simple", or "auto" (least estimate; needs ``fabric``);
    collectives/protocols.py."""
    from collectives import protocols

    op, algorithm = resolve(op, algorithm)
    fn = ALGORITHMS[op][algorithm]
    import inspect

    params = inspect.signature(fn).parameters
    if protocols.check_for(algorithm, options.get("protocol")) == protocols.AUTO:
        if fabric is None:
            raise InputError("protocol = 'auto': choosing a protocol by size needs the fabric "
                             "(collectives.build(..., fabric=topology))")
        rest = {k: v for k, v in options.items() if k != "protocol"}
        options = dict(options, protocol=protocols.best(fabric, op, algorithm, ranks, nbytes,
                                                        **rest)[0])
    if fabric is not None and "fabric" in params:
        options = dict(options, fabric=fabric)
    unknown = [k for k in options if k not in params or k in ("ranks", "nbytes", "matrix")
               or k.startswith("_")]
    if unknown:
        allowed = [k for k in params if k not in ("ranks", "nbytes", "matrix")
                   and not k.startswith("_") and params[k].kind != params[k].VAR_KEYWORD]
        raise InputError(f"{unknown[0]} = {options[unknown[0]]!r}: not an option of {algorithm} "
                         f"{op} (options: {', '.join(allowed)})")
    return fn(ranks, nbytes, **options)


def needs_fabric(op: str, algorithm: str) -> bool:
    """Whether the algorithm reduces in the network (builds from the fabric's switches)."""
    op, algorithm = resolve(op, algorithm)
    return algorithm in IN_NETWORK or algorithm == "nvls_tree"


from collectives.choose import Choice, choose  # noqa: E402  (uses ALGORITHMS)

__all__ = ["build", "choose", "Choice", "check", "CheckFailed", "ALGORITHMS", "OPS", "resolve",
           "IN_NETWORK", "needs_fabric",
           *(f.__name__ for algos in ALGORITHMS.values() for f in algos.values())]

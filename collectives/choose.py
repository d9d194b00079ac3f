"""`choose(topology, op, nbytes)`: the algorithm and rank order a sensible library would use.

The rule (docs/collectives.md has the reasoning and sources):

1. Rank order follows the fabric: on a torus, row-major coordinates (ring neighbours are
   physical neighbours, and the torus algorithm runs one ring per dimension); elsewhere
   hosts sorted by ``host_group`` (leaf switch on fat-tree / leaf-spine, node on two_tier),
   so a ring crosses each leaf's uplinks only twice (NCCL's topology-aware rings do this).
2. two_tier (scale-up domains + scale-out), when the ranks are whole equal groups of more than
   one: hierarchical all-reduce and rail-aligned hierarchical all-to-all.
3. torus with all hosts: dimension-order all-reduce.
4. Otherwise all-reduce picks ring or double binary tree by the alpha-beta estimate (as NCCL's
   tuner picks the algorithm of least predicted time): the tree's log-depth latency wins for
   small messages, the ring's bandwidth for large ones. Broadcast/reduce likewise pick tree
   or pipelined chain. Reduce-scatter and all-gather use the ring; all-to-all(-v) the direct
   algorithm; send/recv is direct.
5. Chunks for pipelined trees and chains: one per 512 KiB, between 1 and 64.
6. Where switches reduce (``reduce_gbps`` on the topology): all-reduce, reduce-scatter and
   all-gather take ``nvls`` (ranks in one scale-up domain) or ``sharp`` (scale-out
   aggregation tree) instead when their alpha-beta estimate is lower.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topo.errors import InputError

CHUNK_BYTES = 512 << 10
MAX_CHUNKS = 64


@dataclass
class Choice:
    op: str
    algorithm: str
    ranks: np.ndarray  # host ids in the order the algorithm should use
    options: dict = field(default_factory=dict)
    reason: str = ""

    def build(self, nbytes=None):
        import collectives as co

        return co.build(self.op, self.algorithm, self.ranks,
                        self.nbytes if nbytes is None else nbytes, **self.options)


def ordered_ranks(topology, ranks=None) -> np.ndarray:
    """Hosts in fabric order: by coordinates on a torus, else by (host_group, host id)."""
    from collectives._plan import check_ranks

    r = np.arange(topology.n_hosts) if ranks is None else check_ranks(ranks)
    if (r >= topology.n_hosts).any():
        raise InputError(f"ranks: host {int(r.max())} does not exist (hosts are "
                         f"0..{topology.n_hosts - 1})")
    if topology.coords is not None:
        keys = topology.coords[r].T[::-1]  # lexsort: last key is the primary one
        return r[np.lexsort(keys)]
    return r[np.lexsort((r, topology.host_group[r]))]


def _pipeline_chunks(nbytes: int) -> int:
    return int(min(MAX_CHUNKS, max(1, nbytes // CHUNK_BYTES)))


def choose(topology, op: str, nbytes, ranks=None) -> Choice:
    c = _choose(topology, op, nbytes, ranks)
    if op in ("all_reduce", "reduce_scatter", "all_gather"):
        c = _in_network(topology, c, nbytes)
    return c


def _in_network(topology, base: Choice, nbytes) -> Choice:
    """Rule 6: where switches reduce (``topology.reduce_bw``), NVLS / SHARP replace the
    choice when their alpha-beta estimate is lower (NCCL's tuner likewise weighs NVLS and
    CollNet against ring and tree wherever the hardware offers them)."""
    bw = getattr(topology, "reduce_bw", None)
    if bw is None or not (bw > 0).any():
        return base
    from collectives import innet
    from collectives.analytical import Fabric, estimate
    from topo.innet import trees

    fab = Fabric(topology)
    best, best_t = base, None
    for algo in innet.IN_NETWORK:
        try:
            trs = trees(topology, base.ranks, algo)
        except InputError:
            continue  # the fabric cannot do it for these ranks
        if best_t is None:
            best_t = estimate(topology, base.op, base.algorithm, base.ranks, nbytes,
                              fabric=fab, **base.options)
        t = innet.estimate(fab, base.op, algo, base.ranks, nbytes, trees=trs)
        if t < best_t:
            best = Choice(base.op, algo, base.ranks, {"trees": trs},
                          f"in-network {algo}: alpha-beta estimate {t * 1e6:.1f} us < "
                          f"{base.algorithm} {best_t * 1e6:.1f} us")
            best.nbytes = nbytes
            best_t = t
    return best


def _choose(topology, op: str, nbytes, ranks=None) -> Choice:
    import collectives as co
    from collectives.analytical import Fabric, estimate

    if op not in co.ALGORITHMS:
        raise InputError(f"op = {op!r}: expected one of {', '.join(co.ALGORITHMS)}")
    r = ordered_ranks(topology, ranks)
    n = len(r)
    whole = ranks is None or len(r) == topology.n_hosts
    groups = topology.host_group[r]
    sizes = np.bincount(groups)[np.unique(groups)]
    g = int(sizes[0])
    grouped = (topology.kind == "two_tier" and len(sizes) > 1 and (sizes == g).all() and g > 1)

    def pick(op_, algo, reason, **opts):
        c = Choice(op_, algo, r, opts, reason)
        c.nbytes = nbytes
        return c

    if op == "send_recv":
        return pick(op, "direct", "point-to-point")
    if op in ("all_to_all", "all_to_all_v"):
        if grouped:
            return pick(op, "hierarchical", "two_tier: aggregate per rail (PXN-style)",
                        group_size=g, leader="rail")
        return pick(op, "direct", "all pairs at once (NCCL all-to-all)")
    if op in ("reduce_scatter", "all_gather"):
        return pick(op, "ring", "ring in fabric order")
    if op == "all_reduce" and grouped:
        return pick(op, "hierarchical", f"two_tier: {g} ranks per scale-up group",
                    group_size=g)
    if op == "all_reduce" and topology.kind == "torus" and whole and n > 2:
        return pick(op, "torus", "torus: one ring per dimension",
                    dims=tuple(int(d) for d in topology.params["dims"]))
    fab = Fabric.cached(topology)
    C = _pipeline_chunks(int(nbytes))
    if op == "all_reduce":
        cands = [("ring", {}), ("double_binary_tree", {"chunks": C})] if n > 2 else \
            [("ring", {})]
    else:  # broadcast, reduce
        cands = [("ring", {"chunks": C}), ("tree", {"chunks": C})]
    best = min(cands, key=lambda a: estimate(topology, op, a[0], r, nbytes, fabric=fab, **a[1]))
    return pick(op, best[0], "least alpha-beta estimate among " +
                ", ".join(a for a, _ in cands), **best[1])

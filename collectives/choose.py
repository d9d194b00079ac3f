"""`choose(topology, op, nbytes)`: the algorithm and rank order a sensible library would use.

The rule (docs/collectives.md has the reasoning and sources):

1. Rank order follows the fabric: on a torus, all hosts in a cycle of one-hop neighbours
   (``torus_ring_order``, where a dimension is even) for rings, chains and trees, row-major
   coordinates for the torus algorithm (one ring per dimension) and otherwise; elsewhere
   hosts sorted by ``host_group`` (leaf switch on fat-tree / leaf-spine, node on two_tier),
   so a ring crosses each leaf's uplinks only twice (NCCL's topology-aware rings do this).
   With ``keep_order`` the ranks run in the order given, and the rules below choose for that
   order (a scenario's explicit ``ranks`` list is such an order).
2. two_tier (scale-up domains + scale-out), when the ranks are whole equal groups of more than
   one: all-reduce by NCCL's own tuner model (collectives/nccl_tuner.py: NCCL runs what its
   formula predicts fastest, not what is fastest) among Ring (one per rail,
   collectives/rail.py), Tree (rail trees) and NVLS-Tree where the node switch reduces, with
   the protocol it picks; all-gather and reduce-scatter by the ring (one per rail) with the
   protocol NCCL's tuner picks; rail-aligned hierarchical all-to-all.
3. torus with all hosts in row-major order: dimension-order all-reduce.
4. Otherwise all-reduce picks ring or double binary tree by the alpha-beta estimate (as NCCL's
   tuner picks the algorithm of least predicted time): the tree's log-depth latency wins for
   small messages, the ring's bandwidth for large ones. Broadcast/reduce likewise pick tree
   or pipelined chain. Reduce-scatter and all-gather use the ring; all-to-all(-v) the direct
   algorithm; send/recv is direct.
5. The protocol (LL, LL128, Simple) of least estimate for the algorithm, as NCCL's tuner
   picks it (collectives/protocols.py); chunks are the protocol's default.
6. Where switches reduce (``reduce_gbps`` on the topology): all-reduce, reduce-scatter and
   all-gather take ``nvls`` (ranks in one scale-up domain) or ``sharp`` (scale-out
   aggregation tree) instead when their alpha-beta estimate is lower (Simple protocol only,
   as NCCL); NVLS-Tree across two_tier nodes is rule 2's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from collectives.rail import per_node
from topo.errors import InputError


@dataclass
class Choice:
    op: str
    algorithm: str
    ranks: np.ndarray  # host ids in the order the algorithm should use
    options: dict = field(default_factory=dict)
    reason: str = ""
    nccl_tuner: bool = False  # picked by NCCL's tuner model (rule 2)

    @property
    def protocol(self):
        return self.options.get("protocol")

    def build(self, nbytes=None, fabric=None):
        import collectives as co

        return co.build(self.op, self.algorithm, self.ranks,
                        self.nbytes if nbytes is None else nbytes, fabric=fabric,
                        **self.options)


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


def torus_ring_order(topology) -> np.ndarray | None:
    """All hosts of a torus in an order whose every neighbour, the last and the first too, is
    one hop away, or None (not a torus, or no such order found). Row-major order is not: at
    the end of a row the next rank is one hop along the row's wrap-around and one along the
    next dimension, and those two-hop connections cross links the ring's one-hop connections
    use. This is the reflected mixed-radix Gray code (a boustrophedon): digit j runs forward
    or backward by the parity of the digits above it, so consecutive codes differ by one in
    one digit. It closes into a cycle when the slowest digit's size is even (every other digit
    then ends at 0, and the slowest wraps to 0): an even dimension is taken as the slowest.
    Where every dimension is odd no such order is laid (None)."""
    if topology.kind != "torus" or topology.coords is None:
        return None
    dims = [int(d) for d in topology.params["dims"]]
    even = [j for j, d in enumerate(dims) if d % 2 == 0]
    if not even or len(dims) < 2:
        return None
    slow = even[-1]
    order = [j for j in range(len(dims)) if j != slow] + [slow]  # fastest first
    radix = np.array([dims[j] for j in order], dtype=np.int64)
    n = int(np.prod(radix))
    i = np.arange(n, dtype=np.int64)
    below = np.concatenate([[1], np.cumprod(radix)[:-1]])  # product of faster digits
    raw = (i[:, None] // below) % radix
    flip = ((i[:, None] // (below * radix)) % 2).astype(bool)
    code = np.where(flip, radix - 1 - raw, raw)
    coords = np.empty((n, len(dims)), dtype=np.int64)
    coords[:, order] = code
    host = np.full(tuple(dims), -1, dtype=np.int64)
    c = np.asarray(topology.coords, dtype=np.int64)
    host[tuple(c.T)] = np.arange(len(c))
    out = host[tuple(coords.T)]
    return out if (out >= 0).all() and len(out) == topology.n_hosts else None


def choose(topology, op: str, nbytes, ranks=None, protocol="auto",
           keep_order: bool = False) -> Choice:
    """The algorithm, rank order and protocol for ``op`` of ``nbytes`` (docs/collectives.md,
    "Choosing"). ``protocol``: "auto" (least estimate, as NCCL's tuner), or a name to use.
    ``keep_order``: ``ranks`` run in the order given (the choice's options, e.g. the trees of
    NVLS-Tree or the group size of a hierarchical algorithm, are laid for that order) instead
    of in fabric order."""
    from collectives import protocols

    protocol = protocols.resolve(protocol) or protocols.AUTO
    if keep_order and ranks is None:
        raise InputError("ranks: keep_order needs the ranks in their order")
    c = _choose(topology, op, nbytes, ranks, protocol, keep_order)
    if op in ("all_reduce", "reduce_scatter", "all_gather") and \
            protocol in (protocols.AUTO, "simple"):
        c = _in_network(topology, c, nbytes)
    return c


def _best(topology, op, r, nbytes, cands, protocol, fab):
    """(algorithm, options, seconds) of the least estimate over candidates x protocols."""
    from collectives import protocols
    from collectives.analytical import estimate

    best = None
    for algo, opts in cands:
        names = protocols.allowed(algo) if protocol == protocols.AUTO else (protocol,)
        for p in names:
            if p not in protocols.allowed(algo):
                continue
            t = estimate(topology, op, algo, r, nbytes, fabric=fab, protocol=p, **opts)
            if best is None or t < best[2]:
                best = (algo, dict(opts, protocol=p), t)
    if best is None:
        raise InputError(f"protocol = {protocol!r}: none of {', '.join(a for a, _ in cands)} "
                         f"runs with it")
    return best


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

    fab = Fabric.cached(topology)
    best, best_t = base, None
    cands = []
    for algo in innet.IN_NETWORK:
        try:
            cands.append((algo, {"trees": trees(topology, base.ranks, algo)}))
        except InputError:
            continue  # the fabric cannot do it for these ranks
    for algo, opts in cands:
        if best_t is None:
            best_t = estimate(topology, base.op, base.algorithm, base.ranks, nbytes,
                              fabric=fab, **base.options)
        t = estimate(topology, base.op, algo, base.ranks, nbytes, fabric=fab,
                     protocol="simple", **opts)
        if t < best_t:
            best = Choice(base.op, algo, base.ranks, dict(opts, protocol="simple"),
                          f"in-network {algo}: alpha-beta estimate {t * 1e6:.1f} us < "
                          f"{base.algorithm} {best_t * 1e6:.1f} us")
            best.nbytes = nbytes
            best_t = t
    return best


def _nccl_choice(topology, r, g, nbytes, protocol, op="all_reduce") -> Choice:
    """Rule 2: whole two_tier nodes run what NCCL's tuner predicts fastest among Ring (one
    per rail), Tree (rail trees) and, where the node switch reduces, NVLS-Tree
    (collectives/nccl_tuner.py): NCCL runs its prediction's winner, not the fastest.
    All-gather and reduce-scatter: the ring, with the protocol NCCL's tuner picks."""
    from collectives import nccl_tuner, nvls_tree, protocols

    v = nccl_tuner.view(topology, r)
    algo, proto, us = nccl_tuner.pick(v, nbytes, None if protocol == protocols.AUTO
                                      else protocol, op)
    opts = {"protocol": proto}
    if algo == "nvls_tree":
        opts.update(group_size=g, trees=nvls_tree._domain_trees(r, g, len(r) // g, topology,
                                                                None))
    c = Choice(op, algo, r, opts,
               f"two_tier: {v.nodes} nodes of {g}; NCCL's tuner picks {algo}/{proto} "
               f"({us:.1f} us predicted)", nccl_tuner=True)
    c.nbytes = nbytes
    return c


def _choose(topology, op: str, nbytes, ranks=None, protocol="auto",
            keep_order: bool = False) -> Choice:
    import collectives as co
    from collectives.analytical import Fabric

    if op not in co.ALGORITHMS:
        raise InputError(f"op = {op!r}: expected one of {', '.join(co.ALGORITHMS)}")
    r = ordered_ranks(topology, ranks)
    # the torus algorithm reads a rank's position as its coordinates: all hosts, row-major
    row_major = len(r) == topology.n_hosts
    if keep_order:
        given = np.asarray(ranks, dtype=np.int64).reshape(-1)
        row_major = row_major and np.array_equal(given, r)
        r = given
    if row_major and not keep_order and not (op == "all_reduce" and topology.kind == "torus"):
        # a ring (chain, tree) over all hosts of a torus in a cycle of one-hop neighbours;
        # the torus all-reduce below keeps row-major order (its rings are per dimension)
        snake = torus_ring_order(topology)
        if snake is not None:
            r = snake
    n = len(r)
    # ranks per scale-up group when they are two or more equal groups of more than one, each
    # consecutive in ``r`` (rule 2), else None
    g = per_node(topology, r)
    grouped = g is not None
    fab = Fabric.cached(topology)

    def pick(op_, cands, reason):
        algo, opts, t = _best(topology, op_, r, nbytes, cands, protocol, fab)
        c = Choice(op_, algo, r, opts, f"{reason}; protocol {opts['protocol']}")
        c.nbytes = nbytes
        return c

    if op == "send_recv":
        return pick(op, [("direct", {})], "point-to-point")
    if op in ("all_to_all", "all_to_all_v"):
        if grouped:
            return pick(op, [("hierarchical", {"group_size": g, "leader": "rail"})],
                        "two_tier: aggregate per rail (PXN-style)")
        return pick(op, [("direct", {})], "all pairs at once (NCCL all-to-all)")
    if op in ("reduce_scatter", "all_gather"):
        if grouped:
            return _nccl_choice(topology, r, g, nbytes, protocol, op)
        return pick(op, [("ring", {})], "ring in fabric order")
    if op == "all_reduce" and grouped:
        return _nccl_choice(topology, r, g, nbytes, protocol)
    if op == "all_reduce" and topology.kind == "torus" and row_major and n > 2:
        return pick(op, [("torus", {"dims": tuple(int(d) for d in topology.params["dims"])})],
                    "torus: one ring per dimension")
    if op == "all_reduce":
        cands = [("ring", {}), ("double_binary_tree", {})] if n > 2 else [("ring", {})]
    else:  # broadcast, reduce
        cands = [("ring", {}), ("tree", {})]
    return pick(op, cands, "least alpha-beta estimate among " +
                ", ".join(a for a, _ in cands))

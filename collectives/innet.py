"""In-network collectives: the switches reduce (and replicate) the data.

* ``nvls``: NVLink SHARP. Every GPU of one scale-up domain sends its buffer to the scale-up
  switch, which reduces the contributions and multicasts the result back: each GPU sends S
  and receives S (a ring sends and receives 2(n-1)/n S).
* ``sharp``: InfiniBand SHARP aggregation trees over the scale-out switches. Each rank sends
  its buffer to its first switch; every switch of the tree reduces its children's
  contributions and forwards one stream to its parent; the root reduces the last and
  multicasts the result down the same tree.

The reduction is a node of the Schedule: switch ``j`` is an endpoint of transfers (rank ->
switch, switch -> switch, switch -> rank: the engines route to and from any node) and a
*switch-reduce* node at the switch (a DELAY of ``chunk bytes / reduce rate`` seconds,
``extra['reduce'] = 2``, carrying the blocks it reduces) stands between what the switch
received and what it sends. The checker (collectives/checker.py) executes it: a switch has an
accumulator that reducing transfers add into and an output that the reduce node fills and
outgoing transfers read. Data is cut into chunks that pipeline through the tree (each tree
edge and each switch's reduction carries one chunk at a time); with several planes (a host on
several such switches) chunks go round-robin over one tree per plane.

reduce-scatter: the same upward reduction; each rank receives only its shard (the root sends a
child switch the shards of the ranks below it). all-gather: ranks send their shard up (no
reduction), the root multicasts the gathered buffer (each rank receives all S).

The trees come from the fabric (``fabric=``, topo/innet.py) or are given (``trees=``, a list of
``topo.innet.Tree`` whose switch ids are the endpoints to use; training stamps templates whose
switches are numbered after the local ranks).
"""
from __future__ import annotations


import numpy as np

from collectives._plan import (Plan, check_int, check_latency, check_nbytes, check_ranks,
                               chunked_layout)
from topo.errors import InputError

def auto_chunks(nbytes: int, parts: int, planes: int = 1, op: str = "all_reduce",
                algorithm: str = "nvls", n: int = 2, bounded: bool = True) -> int:
    """Chunks when none are given: NCCL's pipeline (collectives.protocols: NVLS one loop step
    of 16 channels x n heads x NCCL's chunk for the size, SHARP 16 channels x 128 KiB; at most
    256 chunks, and, ``bounded``, at most what keeps the schedule under
    protocols.MAX_DEFAULT_TRANSFERS), at least one per plane, and no more than every block of
    a chunk can get a byte. The estimate, which builds no schedule, takes ``bounded`` False."""
    from collectives import protocols

    c = protocols.default_chunks(op, algorithm, nbytes, parts, "simple",
                                 6 * n if bounded else 0, 1, n)
    c = max(c, planes)
    return max(1, min(c, nbytes // max(1, parts)))


def _trees(algorithm, ranks, fabric, trees):
    if trees is not None:
        return list(trees)
    if fabric is None:
        raise InputError(f"fabric = None: {algorithm} reduces in the fabric's switches and "
                         f"needs the topology (collectives.build(..., fabric=topology))")
    from topo.innet import trees as make

    return make(fabric, ranks, algorithm)


def _runs(members: np.ndarray) -> list[tuple[int, int]]:
    """Sorted rank indices as (first, length) runs of consecutive ones."""
    m = np.sort(members)
    cut = np.flatnonzero(np.diff(m) != 1) + 1
    return [(int(a[0]), len(a)) for a in np.split(m, cut)]


def _build(op, algorithm, ranks, nbytes, chunks, step_latency_s, fabric, trees, protocol=None):
    from collectives import protocols

    ranks = check_ranks(ranks)
    nbytes = check_nbytes(nbytes)
    n = len(ranks)
    proto = protocols.check_for(algorithm, protocol)
    if proto == protocols.AUTO:
        proto = "simple"  # the only protocol NCCL runs in-network collectives with
    lat = protocols.costs(proto, check_latency(step_latency_s, allow_none=True), fabric,
                          algorithm)
    trs = _trees(algorithm, ranks, fabric, trees)
    T = len(trs)
    parts = 1 if op == "all_reduce" else n
    if chunks is None:
        C = auto_chunks(nbytes, parts, T, op, algorithm, n)
    else:
        C = check_int(chunks, "chunks")
    if nbytes < C * parts:
        raise InputError(f"chunks = {C}: {algorithm} {op} of {nbytes} bytes over {n} ranks "
                         f"cannot be cut into {C} chunks of {parts} non-empty blocks each")
    plan = Plan(op, algorithm, ranks, nbytes, C, lat, chunked_layout(nbytes, C, parts))
    sw_all = np.concatenate([np.asarray(t.switches, dtype=np.int64) for t in trs])
    if np.intersect1d(sw_all, ranks).size:
        raise InputError(f"trees: switch {int(np.intersect1d(sw_all, ranks)[0])} is also a rank")
    plan.nodes = np.concatenate([ranks, sw_all])
    chunk_bytes = plan.block_bytes.reshape(C, parts).sum(axis=1)
    step = protocols.nvls_step_s_per_byte(lat, nbytes, n)
    r_all = np.arange(n)
    off = n
    for ti, tree in enumerate(trs):
        K = len(tree.switches)
        parent = np.asarray(tree.parent, dtype=np.int64)
        rsw = np.asarray(tree.rank_switch, dtype=np.int64)
        if len(rsw) != n or (rsw < 0).any() or (rsw >= K).any():
            raise InputError(f"trees[{ti}]: rank_switch must give a switch of the tree for "
                             f"each of the {n} ranks")
        rate = np.asarray(tree.rate, dtype=np.float64)
        cs = np.arange(ti, C, T)  # chunks of this tree
        if not len(cs):
            continue
        ext = off + np.arange(K)
        off += K
        lo_all = cs * parts  # first block of each chunk
        children = [np.flatnonzero(parent == j) for j in range(K)]
        ranks_of = [np.flatnonzero(rsw == j) for j in range(K)]
        below = [None] * K  # ranks in each switch's subtree
        for j in range(K - 1, -1, -1):
            below[j] = np.concatenate([ranks_of[j]] + [below[c] for c in children[j]])
        # ---- up: ranks to their switch
        if op == "all_gather":
            up = plan.transfers(r_all[None, :], ext[rsw][None, :],
                                lo_all[:, None] + r_all[None, :], reduce=False,
                                label="to_switch", tag=0)
        else:
            up = plan.transfers(r_all[None, :], ext[rsw][None, :], lo_all[:, None],
                                n=parts, reduce=True, label="to_switch", tag=0)
        plan.order(up[1:], up[:-1])
        ready = [None] * K  # per switch, the node after which its output holds the chunk
        fwd = [None] * K  # per switch, its transfer(s) to the parent (Ct, runs)
        for j in range(K - 1, -1, -1):
            if op == "all_gather":
                node = plan.joins(np.full(len(cs), ext[j]), label="gathered")
            else:
                node = plan.reduces(np.full(len(cs), ext[j]), lo_all,
                                    chunk_bytes[cs] * (1 / rate[j] + step), n=parts, tag=1)
                plan.deps(node[1:], node[:-1])  # the switch reduces one chunk at a time
            plan.deps(node[:, None], up[:, ranks_of[j]])
            for c in children[j]:
                plan.deps(node[:, None], fwd[c])
            ready[j] = node
            if parent[j] >= 0:
                if op == "all_gather":
                    runs = _runs(below[j])
                    f = np.stack([plan.transfers(ext[j], ext[parent[j]], lo_all + a, n=m,
                                                 reduce=False, label="up_tree", tag=2)
                                  for a, m in runs], axis=1)
                else:
                    f = plan.transfers(ext[j], ext[parent[j]], lo_all, n=parts, reduce=True,
                                       label="up_tree", tag=2)[:, None]
                plan.deps(f, node[:, None])
                plan.order(f[1:], f[:-1])
                fwd[j] = f
        # ---- down: the root's result to every switch of the tree, then to the ranks
        have = [None] * K  # per switch, the nodes after which it holds the result (Ct, k)
        root = int(np.flatnonzero(parent < 0)[0])
        have[root] = ready[root][:, None]
        for j in range(K):
            if j != root:
                p = parent[j]
                if op == "reduce_scatter":
                    runs = _runs(below[j])
                    d = np.stack([plan.transfers(ext[p], ext[j], lo_all + a, n=m,
                                                 reduce=False, label="down_tree", tag=3)
                                  for a, m in runs], axis=1)
                else:
                    d = plan.transfers(ext[p], ext[j], lo_all, n=parts, reduce=False,
                                       label="down_tree", tag=3)[:, None]
                plan.deps(d[:, :, None], have[p][:, None, :])
                plan.order(d[1:], d[:-1])
                have[j] = d
            rs = ranks_of[j]
            if not len(rs):
                continue
            if op == "reduce_scatter":
                m = plan.transfers(ext[j], rs[None, :], lo_all[:, None] + rs[None, :],
                                   reduce=False, label="from_switch", tag=4)
            else:
                m = plan.transfers(ext[j], rs[None, :], lo_all[:, None], n=parts,
                                   reduce=False, label="from_switch", tag=4)
            plan.deps(m[:, :, None], have[j][:, None, :])
            plan.order(m[1:], m[:-1])
    if op != "all_reduce":
        plan.meta["block_owner"] = np.arange(C * parts, dtype=np.int64) % n
    plan.meta["switches"] = sw_all
    plan.meta["trees"] = trs
    return plan.build()


def nvls_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, fabric=None,
                    trees=None, protocol=None):
    """NVLS all-reduce: every GPU sends S to the scale-up switch, which reduces and multicasts
    the result; S each way per GPU. ``chunks`` default: sqrt(S / 64 KiB) within 1..64."""
    return _build("all_reduce", "nvls", ranks, nbytes, chunks, step_latency_s, fabric, trees,
                  protocol)


def sharp_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, fabric=None,
                     trees=None, protocol=None):
    """SHARP all-reduce: reduced up an aggregation tree of scale-out switches, multicast down."""
    return _build("all_reduce", "sharp", ranks, nbytes, chunks, step_latency_s, fabric, trees,
                  protocol)


def nvls_reduce_scatter(ranks, nbytes, chunks=None, step_latency_s=None, fabric=None,
                        trees=None, protocol=None):
    """NVLS reduce-scatter: S up per GPU, its shard S/n back."""
    return _build("reduce_scatter", "nvls", ranks, nbytes, chunks, step_latency_s, fabric,
                  trees,
                  protocol)


def sharp_reduce_scatter(ranks, nbytes, chunks=None, step_latency_s=None, fabric=None,
                         trees=None, protocol=None):
    """SHARP reduce-scatter: reduced up the tree, each shard sent down to its owner only."""
    return _build("reduce_scatter", "sharp", ranks, nbytes, chunks, step_latency_s, fabric,
                  trees,
                  protocol)


def nvls_all_gather(ranks, nbytes, chunks=None, step_latency_s=None, fabric=None,
                    trees=None, protocol=None):
    """NVLS all-gather: each GPU sends its shard S/n to the switch, which multicasts all S."""
    return _build("all_gather", "nvls", ranks, nbytes, chunks, step_latency_s, fabric, trees,
                  protocol)


def sharp_all_gather(ranks, nbytes, chunks=None, step_latency_s=None, fabric=None,
                     trees=None, protocol=None):
    """SHARP-style all-gather: shards go up the tree, the root multicasts all S down."""
    return _build("all_gather", "sharp", ranks, nbytes, chunks, step_latency_s, fabric, trees,
                  protocol)


IN_NETWORK = ("nvls", "sharp")


# --------------------------------------------------------------------------- estimate
def estimate(fab, op, algorithm, ranks, nbytes, chunks=None, step_latency_s=None,
             trees=None, protocol=None) -> float:
    """Alpha-beta time of the schedule above (``fab``: collectives.analytical.Fabric).

    Per tree, every chunk crosses stages in turn (ranks -> first switches, each switch's
    reduction, each tree edge up, each edge down, switches -> ranks); a stage of one tree
    level lasts as long as its slowest member (path latency + bytes / bottleneck bandwidth,
    or chunk bytes / reduce rate). The first chunk pays every stage and its step latency
    (fill); each further chunk of the tree adds the slowest stage (the pipeline's beat: an
    edge carries one chunk at a time; the step latency follows the data, so it is hidden).
    Trees (planes) run side by side; the protocol's launch latency comes first."""
    from collectives import protocols

    ranks = check_ranks(ranks)
    S = check_nbytes(nbytes)
    n = len(ranks)
    trs = _trees(algorithm, ranks, fab.topology, trees)
    T = len(trs)
    parts = 1 if op == "all_reduce" else n
    # NCCL's chunks: the bound on a schedule's transfers is the builders' (auto_chunks)
    C = auto_chunks(S, parts, T, op, algorithm, n, bounded=False) if chunks is None else \
        check_int(chunks, "chunks")
    proto = protocols.check_for(algorithm, protocol)
    if proto == protocols.AUTO:
        proto = "simple"
    costs = protocols.costs(proto, check_latency(step_latency_s, allow_none=True),
                            fab.topology, algorithm)
    m = S / C
    step = protocols.nvls_step_s_per_byte(costs, S, n)
    wire = 1.0 if costs.num == costs.den else costs.den / costs.num
    worst = 0.0
    for ti, tree in enumerate(trs):
        Ct = len(range(ti, C, T))
        if not Ct:
            continue
        sw = np.asarray(tree.switches, dtype=np.int64)
        parent = np.asarray(tree.parent, dtype=np.int64)
        rsw = np.asarray(tree.rank_switch, dtype=np.int64)
        K = len(sw)
        depth = np.zeros(K, dtype=np.int64)
        for j in range(K):
            if parent[j] >= 0:
                depth[j] = depth[parent[j]] + 1
        below = np.zeros(K)
        np.add.at(below, rsw, 1)
        for j in range(K - 1, 0, -1):
            if parent[j] >= 0:
                below[parent[j]] += below[j]

        def stage(src, dst, b):
            if not len(src):
                return 0.0, 0.0
            lat, bott = fab.pairs(src, dst)
            L = float(np.max(costs.latency(src, dst))) if costs.any_latency else 0.0
            return float(np.max(lat + wire * np.asarray(b, dtype=float) / bott)), L

        up_b = m / n if op == "all_gather" else m
        down_b = m / n if op == "reduce_scatter" else m
        stages = [stage(ranks, sw[rsw], np.full(n, up_b)),
                  stage(sw[rsw], ranks, np.full(n, down_b))]
        for lvl in range(int(depth.max()), -1, -1):
            at = np.flatnonzero(depth == lvl)
            if op != "all_gather":
                stages.append((float(np.max(m / np.asarray(tree.rate)[at])) + m * step, 0.0))
            if lvl == 0:
                continue
            frac = below[at] / n
            stages.append(stage(sw[at], sw[parent[at]],
                                m * frac if op == "all_gather" else np.full(len(at), m)))
            stages.append(stage(sw[parent[at]], sw[at],
                                m * frac if op == "reduce_scatter" else np.full(len(at), m)))
        fill = sum(t + L for t, L in stages)
        beat = max(t for t, _ in stages)
        worst = max(worst, fill + (Ct - 1) * beat)
    return costs.launch_s + worst

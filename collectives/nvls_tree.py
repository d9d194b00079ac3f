"""NVLS-Tree all-reduce (NCCL's NVLSTree): NVLink SHARP inside each scale-up domain, a double
binary tree across the domains, NVLink SHARP multicast back.

Ranks come in ``group_size`` consecutive ranks per scale-up domain (two_tier's node), local
rank q of every domain on rail q. Per chunk c:

1. every rank sends its chunk to its domain's switch, which reduces the g contributions
   (``nvls``: a switch-reduce node) and sends local rank q shard q of the domain's sum;
2. local ranks q of all domains all-reduce shard q with the double binary tree (half the shard
   per tree, reduced up, broadcast down, as ``double_binary_tree``), one tree pair per rail;
3. every rank sends its finished shard to its switch, which multicasts the whole chunk to
   every rank of the domain.

Bytes per rank (S the buffer, g ranks per domain): NVLink up S + S/g, down S/g + S; network
about 2 S/g each way (an inner tree node) against the flat ring's 2(n-1)/n S per node spread
over g NICs, i.e. the same network bytes as NCCL's ring, but the intra-domain part costs one
switch reduction instead of 2(g-1) ring steps. Chunks pipeline through every stage, one
NCCL loop step each (16 channels x g heads x NCCL's chunk for the size; every switch
reduction also pays the NVLS step cost; collectives.protocols). Simple
protocol only, as NCCL. The switch of each domain comes from the fabric (``fabric=``, its
scale-up switch must reduce: ``reduce_gbps``) or is given (``trees=``, one
``topo.innet.Tree`` of one switch per domain).
"""
from __future__ import annotations

import numpy as np

from collectives._plan import Plan, check_chunks, check_latency, check_nbytes, check_ranks
from collectives._plan import chunked_layout
from collectives._trees import depths, double_binary_trees, heights
from topo.errors import InputError
from topo.arrays import unique


def _groups(n: int, group_size) -> tuple[int, int]:
    from collectives.hierarchical import _check_groups

    g = _check_groups(n, group_size)
    return g, n // g


def _domain_trees(ranks, g, G, fabric, trees):
    """One single-switch Tree per domain (its NVLS switch and reduce rate)."""
    if trees is not None:
        trs = list(trees)
    else:
        if fabric is None:
            raise InputError("fabric = None: nvls_tree reduces in the scale-up switches and "
                             "needs the topology (collectives.build(..., fabric=topology))")
        from topo.innet import trees as make

        trs = []
        for a in range(G):
            got = make(fabric, ranks[a * g:(a + 1) * g], "nvls")
            if len(got) != 1:
                raise InputError(f"algorithm = 'nvls_tree': the ranks of domain {a} hang on "
                                 f"{len(got)} scale-up switch planes; one is modelled")
            trs.append(got[0])
    if len(trs) != G or any(len(t.switches) != 1 for t in trs):
        raise InputError(f"trees: nvls_tree needs one single-switch tree per domain ({G})")
    return trs


def nvls_tree_all_reduce(ranks, nbytes, chunks=None, step_latency_s=None, group_size=None,
                         protocol=None, fabric=None, trees=None):
    """NVLS inside each domain of ``group_size`` ranks, a double binary tree across the
    domains per rail, NVLS multicast back (see the module)."""
    from collectives import protocols

    ranks = check_ranks(ranks)
    nbytes = check_nbytes(nbytes)
    n = len(ranks)
    g, G = _groups(n, group_size)
    proto = protocols.check_for("nvls_tree", protocol)
    if proto in (None, protocols.AUTO):
        proto = "simple" if proto == protocols.AUTO else None
    trs = _domain_trees(ranks, g, G, fabric, trees)
    P = 2 * g  # blocks per chunk: shard q, tree t -> block c*2g + 2q + t
    if chunks is None:
        C = protocols.default_chunks("all_reduce", "nvls_tree", nbytes, P, proto,
                                     6 * n + 4 * (G - 1) * g, G, g)
    else:
        C = check_chunks(chunks, nbytes, P, f"nvls_tree all_reduce over {n} ranks")
    costs = protocols.costs(proto, check_latency(step_latency_s, allow_none=True), fabric,
                            "nvls_tree")
    plan = Plan("all_reduce", "nvls_tree", ranks, nbytes, C, costs,
                chunked_layout(nbytes, C, P))
    sw = np.array([int(t.switches[0]) for t in trs], dtype=np.int64)
    if np.intersect1d(sw, ranks).size or len(unique(sw)) != G:
        raise InputError("trees: the domains' switches must be distinct and not ranks")
    rate = np.array([float(t.rate[0]) for t in trs])
    plan.nodes = np.concatenate([ranks, sw])
    chunk_bytes = plan.block_bytes.reshape(C, P).sum(axis=1)
    step = protocols.nvls_step_s_per_byte(costs, nbytes, g, G)
    a = np.arange(G)[:, None]  # domain
    q = np.arange(g)[None, :]  # local rank = rail
    rank = a * g + q  # (G, g) rank index
    swi = n + np.arange(G)  # switch endpoint index per domain
    par = double_binary_trees(G) if G > 1 else np.full((2, 1), -1)
    dep = [depths(par[0]), depths(par[1])]
    tree_orders = []
    for t in range(2):
        nonroot = np.flatnonzero(par[t] >= 0)
        tree_orders.append((nonroot[np.argsort(-dep[t][nonroot], kind="stable")],
                            nonroot[np.argsort(dep[t][nonroot], kind="stable")],
                            int(np.flatnonzero(par[t] < 0)[0])))
    prev = {}  # last node of each order chain (per chunk sequence)

    def chain(key, ids):
        if key in prev:
            plan.order(ids, prev[key])
        prev[key] = ids

    for c in range(C):
        lo = c * P
        # 1. up to the switch (reduce into its accumulator), reduction, shard q down
        up = plan.transfers(rank, np.broadcast_to(swi[:, None], rank.shape), lo, n=P,
                            reduce=True, label="to_switch", tag=0)
        chain("up", up)
        red = plan.reduces(swi, lo, chunk_bytes[c] * (1 / rate + step), n=P, tag=1)
        plan.deps(red[:, None], up)
        if "red" in prev:
            plan.deps(red, prev["red"])  # a switch reduces one chunk at a time
        prev["red"] = red
        down = plan.transfers(np.broadcast_to(swi[:, None], rank.shape), rank, lo + 2 * q,
                              n=2, reduce=False, label="from_switch", tag=2)
        plan.deps(down, red[:, None])
        chain("down", down)
        # 2. across the domains: per tree t, half of shard q up the tree and back down
        ready = down  # (G, g): after it rank (a, q) holds its domain's shard q
        final = []  # per tree: nodes after which each rank holds the finished half
        final_reads = []  # (domain, node): the domain's ranks read their half in it
        for t in range(2):
            up_order, down_order, root = tree_orders[t]
            upi = np.full((G, g), -1, dtype=np.int64)
            dni = np.full((G, g), -1, dtype=np.int64)
            if G > 1:
                for y in up_order:  # deepest first: children before their parents
                    p = par[t][y]
                    upi[y] = plan.transfers(rank[y], rank[p], lo + 2 * q[0] + t, reduce=True,
                                            label="tree_reduce", tag=3 + dep[t][y])
                    plan.deps(upi[y], ready[y])  # y's shard, with its children's sums
                    plan.deps(upi[y], ready[p])  # the parent adds into its own shard
                    kids = np.flatnonzero(par[t] == y)
                    for k in kids:
                        plan.deps(upi[y], upi[k])
                kids_root = np.flatnonzero(par[t] == root)
                for y in down_order:
                    p = par[t][y]
                    dni[y] = plan.transfers(rank[p], rank[y], lo + 2 * q[0] + t, reduce=False,
                                            label="tree_broadcast", tag=20 + dep[t][y])
                    if p == root:
                        for k in kids_root:
                            plan.deps(dni[y], upi[k])
                        plan.deps(dni[y], ready[root])
                    else:
                        plan.deps(dni[y], dni[p])
                chain(("tu", t), upi[up_order])
                chain(("td", t), dni[down_order])
            f = dni.copy()
            for y in down_order:  # a parent has read its half once it sent it down
                final_reads.append((par[t][y], dni[y]))
            # the root holds the finished half once its children's sums have arrived
            f_root = [upi[k] for k in np.flatnonzero(par[t] == root)] or [ready[root]]
            final.append((f, root, f_root))
        # 3. finished shards up (copied into the switch's output), multicast down
        up2 = plan.transfers(rank, np.broadcast_to(swi[:, None], rank.shape), lo + 2 * q,
                             n=2, reduce=False, label="shard_to_switch", tag=40)
        plan.deps(up2, ready)
        for f, root, f_root in final:
            plan.deps(up2, f)
            for x in f_root:
                plan.deps(up2[root], x)
        # the multicast will overwrite the rank's copy: its sends down the trees come first
        for dom, x in final_reads:
            plan.deps(up2[dom], x)
        chain("up2", up2)
        gathered = plan.joins(np.broadcast_to(swi, (G,)), label="gathered")
        plan.deps(gathered[:, None], up2)
        down2 = plan.transfers(np.broadcast_to(swi[:, None], rank.shape), rank, lo, n=P,
                               reduce=False, label="multicast", tag=41)
        plan.deps(down2, gathered[:, None])
        chain("down2", down2)
    plan.meta["switches"] = sw
    plan.meta["group_size"] = g
    plan.meta["trees"] = trs
    return plan.build()


def estimate(fab, ranks, nbytes, chunks=None, step_latency_s=None, group_size=None,
             protocol=None, trees=None) -> float:
    """Alpha-beta time of the schedule above (``fab``: collectives.analytical.Fabric): one
    chunk crosses every stage (to the switch, its reduction, shard down, the tree levels up
    and down, shard up, multicast) and pays each stage's step latency; every further chunk
    adds the busiest resource's share of a chunk (a rank's NVLink up or down: a chunk and a
    shard; the switch's reduction; the tree's steady round on the NICs)."""
    from collectives import protocols
    from collectives.analytical import round_parts

    ranks = check_ranks(ranks)
    S = check_nbytes(nbytes)
    n = len(ranks)
    g, G = _groups(n, group_size)
    trs = _domain_trees(ranks, g, G, fab.topology, trees)
    proto = protocols.check_for("nvls_tree", protocol)
    if proto == protocols.AUTO:
        proto = "simple"
    P = 2 * g
    # NCCL's chunks: without the builder's bound on the schedule's transfers (no schedule here;
    # collectives.analytical._default_chunks)
    C = protocols.default_chunks("all_reduce", "nvls_tree", S, P, proto, 0, G, g) \
        if chunks is None else int(chunks)
    costs = protocols.costs(proto, check_latency(step_latency_s, allow_none=True),
                            fab.topology, "nvls_tree")
    wire = costs.den / costs.num
    m = S / C
    sw = np.array([int(t.switches[0]) for t in trs], dtype=np.int64)
    rate = np.array([float(t.rate[0]) for t in trs])
    to_sw = np.repeat(sw, g)

    def link(src, dst, b):
        lat, bott = fab.pairs(src, dst)
        L = float(np.max(costs.latency(src, dst))) if costs.any_latency else 0.0
        return float(np.max(lat + wire * b / bott)), L

    shard = m / g
    up_chunk, dn_shard = link(ranks, to_sw, m), link(to_sw, ranks, shard)
    up_shard, dn_chunk = link(ranks, to_sw, shard), link(to_sw, ranks, m)
    red = float(np.max(m / rate)) + m * protocols.nvls_step_s_per_byte(costs, S, g, G)
    stages = [up_chunk, (red, 0.0), dn_shard]
    beat_tree = 0.0
    if G > 1:
        par = double_binary_trees(G)
        dep = [depths(par[0]), depths(par[1])]
        # up the trees a domain sends once its children's halves arrived: stage by height
        # (leaves at once, whatever their depth), down them by depth (the root first)
        hgt = [heights(par[0]), heights(par[1])]
        D = int(max(dep[0].max(), dep[1].max()))
        q = np.arange(g)

        def tree_round(s_, d_):
            """A round of tree messages of half a shard each (round_parts counts a rank's
            NIC shared within the round: a parent sending to, or receiving from, two
            children at once)."""
            return round_parts(fab, s_, d_, wire * shard / 2)

        def level(lvl, upward):
            s_, d_ = [], []
            for t in range(2):
                at = np.flatnonzero((hgt[t] == lvl) & (par[t] >= 0)) if upward else \
                    np.flatnonzero(dep[t] == lvl)
                for y in at:
                    pa, ch = (y, par[t][y]) if upward else (par[t][y], y)
                    s_.append(ranks[pa * g + q])
                    d_.append(ranks[ch * g + q])
            s_, d_ = np.concatenate(s_), np.concatenate(d_)
            L = float(np.max(costs.latency(s_, d_))) if costs.any_latency else 0.0
            return tree_round(s_, d_), L
        stages += [level(lvl, True) for lvl in range(D)]
        stages += [level(lvl, False) for lvl in range(1, D + 1)]
        allp = []
        for t in range(2):
            y = np.flatnonzero(par[t] >= 0)
            for yy in y:
                for a_, b_ in ((yy, par[t][yy]), (par[t][yy], yy)):
                    allp.append((ranks[a_ * g + q], ranks[b_ * g + q]))
        beat_tree = tree_round(np.concatenate([x for x, _ in allp]),
                               np.concatenate([y for _, y in allp]))
    stages += [up_shard, dn_chunk]
    # steady state: per chunk, a rank's NVLink carries a chunk and a shard each way
    lat_up = float(np.min(fab.pairs(ranks, to_sw)[0]))
    lat_dn = float(np.min(fab.pairs(to_sw, ranks)[0]))
    beat = max(up_chunk[0] + up_shard[0] - lat_up, dn_chunk[0] + dn_shard[0] - lat_dn, red,
               beat_tree)
    fill = sum(t + L for t, L in stages)
    return costs.launch_s + fill + (C - 1) * beat

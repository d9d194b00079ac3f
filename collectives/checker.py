"""Symbolic execution of a collective Schedule: does it really compute the collective?

Independent of how a schedule was built: it uses only the node arrays, the dependency edges,
the per-transfer block sets (``extra``: blk_lo/blk_n/blk_s/blk_n2/blk_s2, reduce) and the
op's definition from ``meta`` (op, ranks, block sizes, owner/root/pairs where the op needs one).

State. Reductions (all_reduce, reduce_scatter, reduce): every rank starts with its own
contribution to every block; the state is a count per (rank, block, contributor). A reducing
transfer adds the sender's counts into the receiver's, a copying one overwrites them. Moves
(all_gather, broadcast, all_to_all[_v], send_recv): the state is "rank holds block"; a
transfer may only send blocks its sender holds.

Semantics of time. A transfer sends what its sender holds when it starts, and all the
schedule guarantees about "when" is the dependency order. So before executing, the checker
proves the result cannot depend on timing: every write into a (rank, block) that a transfer
reads must be an ancestor or a descendant of it (else the transfer could send data not yet
received, or already overwritten), and two writes into one place must be ordered unless both
are reductions (sums commute). Then any topological order gives the same final state, which
must equal the definition exactly: for reductions every contribution counted exactly once.

Switches (in-network collectives, collectives/innet.py; ``meta['switches']``). A switch has
two places per block: an *accumulator*, which reducing transfers into the switch add to
(copying ones write its output directly), and an *output*, which transfers out of the switch
read. A *switch-reduce* node (a DELAY with ``extra['reduce'] == 2`` and a block set, at the
switch) combines its inputs: it copies the accumulator into the output. Both start empty, so
a missing contribution, one counted twice, or a multicast that does not wait for the
reduction (a race on the output) are caught like any other.
"""
from __future__ import annotations

import numpy as np

from netcore.schedule import DELAY, TRANSFER, Schedule
from topo.arrays import unique

REDUCING = ("all_reduce", "reduce_scatter", "reduce")
MOVING = ("all_gather", "broadcast", "all_to_all", "all_to_all_v", "send_recv")
SWITCH_REDUCE = 2  # extra['reduce'] of a switch reduction node (collectives/_plan.py)
MAX_RACE_NODES = 60_000  # the race proof keeps an ancestor bitset per node (N^2/8 bytes)


class CheckFailed(AssertionError):
    """The schedule does not compute its collective; the message says where and why."""


def block_sets(s: Schedule, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, blocks) of the block ids each of ``nodes`` carries."""
    ex = s.extra
    lo = ex["blk_lo"][nodes].astype(np.int64)
    one = np.ones(len(nodes), dtype=np.int64)
    n1 = ex["blk_n"][nodes].astype(np.int64) if "blk_n" in ex else one
    s1 = ex["blk_s"][nodes].astype(np.int64) if "blk_s" in ex else one
    n2 = ex["blk_n2"][nodes].astype(np.int64) if "blk_n2" in ex else one
    s2 = ex["blk_s2"][nodes].astype(np.int64) if "blk_s2" in ex else 0 * one
    cnt = n1 * n2
    ptr = np.concatenate([[0], np.cumsum(cnt)])
    owner = np.repeat(np.arange(len(nodes)), cnt)
    q = np.arange(int(ptr[-1])) - ptr[owner]
    return ptr, lo[owner] + (q % n1[owner]) * s1[owner] + (q // n1[owner]) * s2[owner]


def check(s: Schedule, races: bool = True) -> dict:
    """Raise :class:`CheckFailed` unless ``s`` computes ``s.meta['op']``; return a summary."""
    meta = s.meta
    for key in ("op", "ranks", "n_blocks", "block_bytes"):
        if key not in meta:
            raise CheckFailed(f"schedule meta has no {key!r}: not a collective schedule")
    op = meta["op"]
    if op not in REDUCING + MOVING:
        raise CheckFailed(f"op {op!r} has no definition in the checker")
    ranks = np.asarray(meta["ranks"], dtype=np.int64)
    n, B = len(ranks), int(meta["n_blocks"])
    bb = np.asarray(meta["block_bytes"], dtype=np.int64)
    if len(bb) != B:
        raise CheckFailed(f"block_bytes has {len(bb)} entries for {B} blocks")
    _check_layout(meta, op, n, B, bb)

    switches = np.asarray(meta.get("switches", ()), dtype=np.int64).reshape(-1)
    K = len(switches)
    top = int(max(ranks.max(), switches.max(initial=0), s.src.max(initial=0),
                  s.dst.max(initial=0))) + 1
    host_to_rank = np.full(top, -1, dtype=np.int64)
    host_to_rank[ranks] = np.arange(n)
    sw_of = np.full(top, -1, dtype=np.int64)  # switch node -> its index
    if K:
        if np.intersect1d(switches, ranks).size or len(unique(switches)) != K:
            raise CheckFailed("meta switches: must be distinct and not ranks")
        sw_of[switches] = np.arange(K)
    if "blk_lo" not in s.extra or "reduce" not in s.extra:
        raise CheckFailed("schedule has no block descriptors (extra blk_lo/reduce)")
    is_t = s.kind == TRANSFER
    is_r = (s.kind == DELAY) & (s.extra["reduce"] == SWITCH_REDUCE)
    tr = np.flatnonzero(is_t | is_r)  # the nodes that move or combine data
    tt = is_t[tr]
    bad = tr[s.extra["blk_lo"][tr] < 0]
    if bad.size:
        raise CheckFailed(f"node {int(bad[0])}: a transfer that carries no blocks")
    red = s.extra["reduce"][tr].astype(np.int64)
    # rows of the state: ranks 0..n-1, then per switch its accumulator and its output
    acc_row = lambda node: n + 2 * sw_of[node]  # noqa: E731
    src_node, dst_node = s.src[tr].astype(np.int64), s.dst[tr].astype(np.int64)
    dst_node = np.where(tt, dst_node, src_node)
    if ((src_node < 0) | (dst_node < 0)).any():
        i = int(tr[np.flatnonzero((src_node < 0) | (dst_node < 0))[0]])
        raise CheckFailed(f"node {i}: has no endpoint")
    srank = np.where(host_to_rank[src_node] >= 0, host_to_rank[src_node],
                     np.where(sw_of[src_node] >= 0, acc_row(src_node) + tt, -1))
    drank = np.where(host_to_rank[dst_node] >= 0, host_to_rank[dst_node],
                     np.where(sw_of[dst_node] >= 0, acc_row(dst_node) + (~tt | (red != 1)), -1))
    bad = np.flatnonzero((srank < 0) | (drank < 0))
    if bad.size:
        i = int(tr[bad[0]])
        if not tt[bad[0]]:
            raise CheckFailed(f"node {i}: a switch reduction at node {int(s.src[i])}, which "
                              f"is not one of the schedule's switches")
        raise CheckFailed(f"node {i}: transfer {int(s.src[i])} -> {int(s.dst[i])} involves a "
                          f"node that is neither one of the ranks nor a switch of the schedule")
    red = np.where(tt, red, 0)  # a switch reduction copies the accumulator to the output
    ptr, blk = block_sets(s, tr)
    if blk.size and ((blk < 0) | (blk >= B)).any():
        k = int(np.searchsorted(ptr, np.flatnonzero((blk < 0) | (blk >= B))[0], side="right") - 1)
        raise CheckFailed(f"node {int(tr[k])}: carries a block outside 0..{B - 1}")
    carried = np.add.reduceat(bb[blk], ptr[:-1]) if blk.size else np.zeros(len(tr), np.int64)
    carried = np.where(np.diff(ptr) > 0, carried, 0)
    # a protocol puts more bytes on the wire than its blocks hold (LL: twice; LL128: 16/15)
    num, den = (int(x) for x in meta.get("wire_ratio", (1, 1)))
    wire = (carried * den + num - 1) // num
    bad = np.flatnonzero(tt & (wire != s.size[tr]))
    if bad.size:
        i = int(tr[bad[0]])
        raise CheckFailed(f"node {i}: sends {int(s.size[i])} bytes but its blocks hold "
                          f"{int(carried[bad[0]])}" +
                          (f" ({int(wire[bad[0]])} on the wire with protocol "
                           f"{meta.get('protocol')})" if num != den else ""))
    reducing = op in REDUCING
    if not reducing and ((red == 1).any() or (~tt).any()):
        i = int(tr[np.flatnonzero((red == 1) | ~tt)[0]])
        raise CheckFailed(f"node {i}: a reduction in a {op}, which moves data only")
    rows = n + 2 * K

    order = s.topological_order()  # raises on a cycle
    if races:
        _check_races(s, tr, srank, drank, ptr, blk, red, B, n, switches)
    # Execute level by level (depth in the DAG), later ids first within a level: any valid
    # order gives the same result once races are excluded; this one also makes a missing
    # dependency visible without the race proof (a forwarder runs before its supplier).
    level = [0] * s.n
    dp, di = s.dep_ptr.tolist(), s.dep_idx.tolist()
    for v in order.tolist():
        ps = di[dp[v]:dp[v + 1]]
        level[v] = 1 + max(level[p] for p in ps) if ps else 0
    lv = np.asarray(level, dtype=np.int64)[tr]
    seq = np.lexsort((-tr, lv))  # transfers in a topological order

    if reducing:
        # contribution counts saturate at 2 ("more than once"): the check needs only 0, 1 or
        # more, and a wrong schedule that keeps re-reducing (counts doubling per round) could
        # otherwise wrap a fixed-width count back to exactly 1 and pass
        state = np.zeros((rows, B, n), dtype=np.int8)
        state[np.arange(n), :, np.arange(n)] = 1
        for k in seq.tolist():
            b = blk[ptr[k]:ptr[k + 1]]
            vals = state[srank[k], b].copy()
            if red[k]:
                state[drank[k], b] = np.minimum(state[drank[k], b] + vals, 2)
            else:
                state[drank[k], b] = vals
        _final_reduce(meta, op, state[:n], n, B, ranks)
    else:
        held = np.zeros((rows, B), dtype=bool)
        held[:n] = _initial_held(meta, op, n, B)
        for k in seq.tolist():
            b = blk[ptr[k]:ptr[k + 1]]
            have = held[srank[k], b]
            if not have.all():
                miss = int(b[~have][0])
                raise CheckFailed(f"node {int(tr[k])}: {_place(int(srank[k]), n, ranks, switches)}"
                                  f" sends block {miss} before it holds it")
            held[drank[k], b] = True
        _final_move(meta, op, held[:n], n, B, ranks)
    return {"op": op, "ranks": n, "transfers": int(tt.sum()), "blocks": B,
            "bytes": int(s.size[tr[tt]].sum()), "switches": K,
            "switch_reductions": int((~tt).sum())}


def _place(row: int, n: int, ranks, switches) -> str:
    """A state row for messages: a rank, or a switch's accumulator / output."""
    if row < n:
        return f"rank {row} (host {int(ranks[row])})"
    j, which = divmod(row - n, 2)
    return f"switch {int(switches[j])} ({'output' if which else 'accumulator'})"


# --------------------------------------------------------------------------- definitions
def _check_layout(meta, op, n, B, bb):
    """The block sizes must be the op's data: a wrong layout could hide a wrong schedule."""
    nbytes = meta.get("nbytes")
    if op in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"):
        if int(bb.sum()) != int(nbytes):
            raise CheckFailed(f"blocks hold {int(bb.sum())} bytes, the {op} is of {nbytes}")
    if op in ("reduce_scatter", "all_gather"):
        owner = np.asarray(meta.get("block_owner"))
        if owner.shape != (B,) or ((owner < 0) | (owner >= n)).any():
            raise CheckFailed(f"{op}: meta block_owner must give a rank for each block")
        per = np.bincount(owner, weights=bb, minlength=n)
        chunks = int(meta.get("chunks", 1))
        if per.max() - per.min() > chunks:  # S/n each, up to a byte per chunk of rounding
            raise CheckFailed(f"{op}: shards are uneven ({int(per.min())}..{int(per.max())} "
                              f"bytes)")
    if op in ("all_to_all", "all_to_all_v"):
        C = int(meta["chunks"])
        if meta.get("layout") != "pairs" or B != n * n * C:
            raise CheckFailed(f"{op}: expected the pairs layout of n*n*chunks blocks")
        M = bb.reshape(n, n, C).sum(axis=2)
        if op == "all_to_all":
            if (M.sum(axis=1) != int(nbytes)).any():
                raise CheckFailed(f"all_to_all: a rank's pieces do not add up to {nbytes}")
        elif not np.array_equal(M, np.asarray(meta["matrix"])):
            raise CheckFailed("all_to_all_v: block sizes differ from the byte matrix")
    if op == "send_recv":
        P = np.asarray(meta["pairs"])
        C = int(meta["chunks"])
        if B != len(P) * C or (bb.reshape(len(P), C).sum(axis=1) != int(nbytes)).any():
            raise CheckFailed("send_recv: blocks do not match the pairs and message size")


def _initial_held(meta, op, n, B):
    held = np.zeros((n, B), dtype=bool)
    if op == "all_gather":
        held[np.asarray(meta["block_owner"]), np.arange(B)] = True
    elif op == "broadcast":
        held[int(meta["root"]), :] = True
    elif op in ("all_to_all", "all_to_all_v"):
        held[_pair_src_dst(meta, n, B)[0], np.arange(B)] = True
    elif op == "send_recv":
        held[np.asarray(meta["pairs"])[:, 0].repeat(int(meta["chunks"])), np.arange(B)] = True
    return held


def _pair_src_dst(meta, n, B):
    C = int(meta["chunks"])
    pair = np.arange(B) // C
    return pair // n, pair % n


def _final_move(meta, op, held, n, B, ranks):
    if op in ("all_gather", "broadcast"):
        need_rank = None
    elif op in ("all_to_all", "all_to_all_v"):
        need_rank = _pair_src_dst(meta, n, B)[1]
    else:  # send_recv
        need_rank = np.asarray(meta["pairs"])[:, 1].repeat(int(meta["chunks"]))
    if need_rank is None:
        miss = np.argwhere(~held)
    else:
        miss = np.flatnonzero(~held[need_rank, np.arange(B)])
        miss = np.stack([need_rank[miss], miss], axis=1)
    if len(miss):
        r, b = (int(x) for x in miss[0])
        raise CheckFailed(f"{op}: rank {r} (host {int(ranks[r])}) ends without block {b} "
                          f"({len(miss)} (rank, block) pairs missing)")


def _final_reduce(meta, op, state, n, B, ranks):
    if op == "all_reduce":
        idx_r = np.repeat(np.arange(n), B)
        idx_b = np.tile(np.arange(B), n)
    elif op == "reduce_scatter":
        idx_b = np.arange(B)
        idx_r = np.asarray(meta["block_owner"])
    else:  # reduce
        idx_b = np.arange(B)
        idx_r = np.full(B, int(meta["root"]))
    got = state[idx_r, idx_b]  # (k, n) contribution counts
    bad = np.flatnonzero((got != 1).any(axis=1))
    if bad.size:
        k = int(bad[0])
        r, b = int(idx_r[k]), int(idx_b[k])
        cnt = got[k]
        missing = np.flatnonzero(cnt == 0).tolist()
        twice = np.flatnonzero(cnt > 1).tolist()
        what = []
        if missing:
            what.append(f"missing the contribution of rank(s) {missing[:8]}")
        if twice:
            what.append(f"counting rank(s) {twice[:8]} more than once")
        raise CheckFailed(f"{op}: rank {r} (host {int(ranks[r])}) block {b} is "
                          f"{' and '.join(what)} ({bad.size} (rank, block) pairs wrong)")


# --------------------------------------------------------------------------- races
def _check_races(s, tr, srank, drank, ptr, blk, red, B, n, switches):
    N = s.n
    if N > MAX_RACE_NODES:
        raise CheckFailed(f"race proof limited to {MAX_RACE_NODES} nodes (schedule has {N}); "
                          f"check a smaller instance or pass races=False")
    # ancestor bitsets (Python ints: OR of a few-thousand-bit ints is fast enough here)
    anc = [0] * N
    dp, di = s.dep_ptr.tolist(), s.dep_idx.tolist()
    for v in s.topological_order().tolist():
        a = 0
        for p in di[dp[v]:dp[v + 1]]:
            a |= anc[p] | (1 << p)
        anc[v] = a

    def ordered(x, y):
        return (anc[y] >> x) & 1 or (anc[x] >> y) & 1

    cnt = np.diff(ptr)
    t_of = np.repeat(np.arange(len(tr)), cnt)
    wloc = drank[t_of] * B + blk  # locations written
    rloc = srank[t_of] * B + blk  # locations read
    worder = np.argsort(wloc, kind="stable")
    wsorted = wloc[worder]
    # readers vs writers of the same place
    lo = np.searchsorted(wsorted, rloc, side="left")
    hi = np.searchsorted(wsorted, rloc, side="right")
    has = np.flatnonzero(hi > lo)
    for e in has.tolist():
        t = int(tr[t_of[e]])
        for w_e in worder[lo[e]:hi[e]].tolist():
            w = int(tr[t_of[w_e]])
            if not ordered(t, w):
                raise CheckFailed(
                    f"node {t}: {_place(int(srank[t_of[e]]), n, s.meta['ranks'], switches)} "
                    f"sends block {int(blk[e])} while node {w} may still be writing it (no "
                    f"dependency orders them: the data sent would depend on timing)")
    # writers vs writers: concurrent writes are fine only if both are reductions
    starts = np.flatnonzero(np.concatenate([[True], wsorted[1:] != wsorted[:-1]]))
    ends = np.concatenate([starts[1:], [len(wsorted)]])
    multi = np.flatnonzero(ends - starts > 1)
    for g in multi.tolist():
        ws = [int(t_of[x]) for x in worder[starts[g]:ends[g]].tolist()]
        for a_i in range(len(ws)):
            for b_i in range(a_i + 1, len(ws)):
                x, y = ws[a_i], ws[b_i]
                if red[x] and red[y]:
                    continue
                if x != y and not ordered(int(tr[x]), int(tr[y])):
                    loc = int(wsorted[starts[g]])
                    raise CheckFailed(
                        f"nodes {int(tr[x])} and {int(tr[y])} both write block {loc % B} at "
                        f"{_place(loc // B, n, s.meta['ranks'], switches)} with no dependency "
                        f"between them (one overwrites)")

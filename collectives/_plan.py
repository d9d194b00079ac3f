"""Shared machinery of every collective algorithm: argument checks, block layouts and `Plan`,
which collects transfer batches and dependency edges as arrays and emits one Schedule.

Block model (what the checker executes): a collective's data is cut into *blocks*, numbered
``0 .. n_blocks-1`` with sizes ``block_bytes``. Every transfer carries a strided set of blocks
``{lo + i*s + k*s2 : i < n, k < n2}`` and either *reduces* them into the receiver's copy
(``reduce=1``) or *overwrites* it (``reduce=0``). The set is stored per node in
``Schedule.extra``: ``blk_lo`` and ``reduce`` always; ``blk_n``/``blk_s`` and ``blk_n2``/
``blk_s2`` only when some transfer needs them (defaults 1/1 and 1/0). Delay nodes carry -1.
Transfer sizes are the sums of the block sizes they carry, so bytes and blocks never disagree.

Node ids: every algorithm allocates ids so that parents always precede children; with a per-
step latency each transfer gets a DELAY node just before it that takes over its parents.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from netcore.schedule import DELAY, TRANSFER, Schedule
from netcore.sizes import MAX_BYTES
from topo.errors import InputError

JOIN = 3  # internal: a zero-time barrier node, emitted as a DELAY of duration 0
REDUCE = 4  # internal: an in-network reduction at a switch, emitted as a DELAY (``reduce`` 2)
SWITCH_REDUCE = 2  # ``extra['reduce']`` of a switch reduction node (collectives/innet.py)


# --------------------------------------------------------------------------- argument checks
def check_ranks(ranks, name: str = "ranks") -> np.ndarray:
    """Host ids as int64, at least two, no duplicates. An int n means hosts 0..n-1."""
    if isinstance(ranks, (bool, np.bool_)):
        raise InputError(f"{name} = {ranks!r}: expected a list of host ids or a count")
    if isinstance(ranks, (int, np.integer)):
        if ranks < 2:
            raise InputError(f"{name} = {ranks}: a collective needs at least 2 ranks")
        return np.arange(int(ranks), dtype=np.int64)
    try:
        arr = np.asarray(ranks)
    except Exception:
        raise InputError(f"{name} = {ranks!r}: expected a list of host ids") from None
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        if arr.ndim == 1 and arr.size and all(float(x).is_integer() for x in arr.tolist()
                                              if isinstance(x, (int, float))):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{name} = {_short(ranks)}: expected a flat list of integer host ids")
    if arr.size < 2:
        raise InputError(f"{name} = {_short(ranks)}: a collective needs at least 2 ranks")
    arr = arr.astype(np.int64)
    if (arr < 0).any():
        raise InputError(f"{name}: host id {int(arr[arr < 0][0])} is negative")
    uniq, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        raise InputError(f"{name}: host {int(uniq[counts > 1][0])} appears "
                         f"{int(counts[counts > 1][0])} times (ranks must be distinct)")
    return arr


def check_nbytes(nbytes, name: str = "nbytes") -> int:
    if isinstance(nbytes, str):
        from netcore.sizes import parse_bytes

        nbytes = parse_bytes(nbytes, name)
    if isinstance(nbytes, (bool, np.bool_)) or not isinstance(nbytes, (int, np.integer, float)):
        raise InputError(f"{name} = {_short(nbytes)}: expected a positive integer number of bytes")
    if isinstance(nbytes, float) and not float(nbytes).is_integer():
        raise InputError(f"{name} = {nbytes!r}: expected a whole number of bytes")
    if nbytes <= 0:
        raise InputError(f"{name} = {nbytes!r}: must be > 0")
    # a Schedule's sizes are int64 (netcore.sizes.MAX_BYTES, the limit parse_bytes keeps):
    # 2**63 bytes (or the float 2.0**63, or 1e19) went on to the block layout and died there
    # with "OverflowError: Python int too large to convert to C long"
    if nbytes > MAX_BYTES:
        raise InputError(f"{name} = {nbytes!r}: larger than the {MAX_BYTES} bytes an int64 "
                         f"holds")
    return int(nbytes)


def check_int(value, name: str, lo: int = 1) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise InputError(f"{name} = {value!r}: expected an integer >= {lo}") from None
    if isinstance(value, (bool, np.bool_)) or v < lo:
        raise InputError(f"{name} = {value!r}: expected an integer >= {lo}")
    return int(v)


def check_latency(step_latency_s, allow_none: bool = False):
    """Seconds >= 0; None (the protocol's latencies) when ``allow_none``."""
    if step_latency_s is None and allow_none:
        return None
    if isinstance(step_latency_s, (bool, np.bool_)):  # float(True) is a second
        raise InputError(f"step_latency_s = {step_latency_s!r}: expected seconds >= 0")
    try:
        x = float(step_latency_s)
    except (TypeError, ValueError):
        raise InputError(f"step_latency_s = {step_latency_s!r}: expected seconds >= 0") from None
    if not math.isfinite(x) or x < 0:
        raise InputError(f"step_latency_s = {step_latency_s!r}: expected seconds >= 0")
    return x


def check_chunks(chunks, nbytes: int, parts: int, what: str) -> int:
    """``parts`` blocks per chunk; every chunk must give each of its blocks at least a byte
    when there is more than one chunk (splitting finer than a byte is not pipelining)."""
    c = check_int(chunks, "chunks")
    if c > 1 and nbytes < c * parts:
        raise InputError(f"chunks = {c}: {what} of {nbytes} bytes cannot be cut into {c} chunks "
                         f"of {parts} non-empty blocks each (needs nbytes >= {c * parts})")
    return c


def check_root(root, n: int) -> int:
    r = check_int(root, "root", lo=0)
    if r >= n:
        raise InputError(f"root = {r}: must be a rank index in 0..{n - 1}")
    return r


def _short(x) -> str:
    s = repr(x)
    return s if len(s) < 60 else s[:57] + "..."


# --------------------------------------------------------------------------- sizes
def split(total, parts: int) -> np.ndarray:
    """``total`` bytes into ``parts`` near-equal integers (the first ``total % parts`` get one
    more), vectorised over an array of totals: shape ``total.shape + (parts,)``."""
    total = np.asarray(total, dtype=np.int64)
    base = total[..., None] // parts
    rem = total[..., None] % parts
    return base + (np.arange(parts) < rem)


def chunked_layout(nbytes: int, chunks: int, parts: int) -> np.ndarray:
    """Chunk-major block sizes: block ``c*parts + p`` is part p of chunk c (NCCL's loop over
    ``nranks * chunkSize`` slices, each cut into one piece per rank)."""
    return split(split(nbytes, chunks), parts).reshape(-1)


# --------------------------------------------------------------------------- the plan
class Plan:
    """Accumulates nodes in batches (arrays of any shape) and dependency edges, then builds.

    Only transfers, zero-time joins and switch reductions are planned; DELAY nodes for the
    per-step latency are inserted by :meth:`build`, one before every transfer, and launch
    delays one per rank. Edges are of two kinds: :meth:`deps` (data: the transfer needs what
    its parent delivered, so the step latency comes after it) and :meth:`order` (sequence: a
    sender's previous send on the connection, which the step latency does not follow: NCCL
    keeps NCCL_STEPS steps in flight, so a sender streams its chunks while each one's flag
    makes its way). Without latencies, or with one chunk (nothing to stream), both kinds are
    the same edge.

    ``costs`` (collectives.protocols.Costs) gives the wire bytes of a payload, the per-step
    latency of each transfer and the launch latency; a float is a fixed per-step latency.
    """

    def __init__(self, op: str, algorithm: str, ranks: np.ndarray, nbytes, chunks: int,
                 step_latency_s, block_bytes: np.ndarray):
        from collectives.protocols import Costs, costs as make_costs

        self.op, self.algorithm = op, algorithm
        self.ranks = ranks
        # endpoint of every rank index: the ranks, then any switches (in-network collectives
        # address switch j as rank index n + j)
        self.nodes = ranks
        self.costs = step_latency_s if isinstance(step_latency_s, Costs) else \
            make_costs(None, step_latency_s)
        self.nbytes, self.chunks = nbytes, chunks
        self.step_latency_s = self.costs.fixed_step_s
        self.block_bytes = np.asarray(block_bytes, dtype=np.int64)
        self._cum = np.concatenate([[0], np.cumsum(self.block_bytes)])
        # bytes of every block together past 2^62: a transfer's sum of blocks may not fit
        # int64 (the sums below wrap), so _sizes checks them (exabyte collectives only)
        self._big = float(self.block_bytes.astype(np.float64).sum()) >= 2.0**62
        self._cols: dict[str, list] = {k: [] for k in ("kind", "src", "dst", "size", "tag",
                                                       "label", "lo", "n", "s", "n2", "s2",
                                                       "red", "dur", "lat")}
        self._child: list[np.ndarray] = []
        self._parent: list[np.ndarray] = []
        self._ochild: list[np.ndarray] = []
        self._oparent: list[np.ndarray] = []
        self.labels: list[str] = []
        self.meta: dict = {}
        self.n = 0
        # sends a rank keeps in flight side by side (collectives.protocols.channels): they
        # share a protocol's throughput cap
        self.channels = 1

    # ------------------------------------------------------------------ nodes
    def _alloc(self, shape) -> np.ndarray:
        k = int(np.prod(shape))
        ids = np.arange(self.n, self.n + k, dtype=np.int64).reshape(shape)
        self.n += k
        return ids

    def _label(self, label: str) -> int:
        if label not in self.labels:
            self.labels.append(label)
        return self.labels.index(label)

    def transfers(self, src, dst, lo, *, reduce: bool, label: str, tag=-1, n=1, s=1, n2=1,
                  s2=0, step_s=None) -> np.ndarray:
        """A batch of transfers from rank index ``src`` to ``dst`` (arrays broadcast together)
        carrying blocks ``{lo + i*s + k*s2}``. Returns node ids shaped like the broadcast.
        ``step_s``: the protocol step latency of each transfer, where the builder prices it
        itself (rings: their connections' mean, _ring.py); None: the protocol's own for the
        transfer's endpoints."""
        src, dst, lo, tag, n, s, n2, s2 = np.broadcast_arrays(
            *(np.asarray(x, dtype=np.int64) for x in (src, dst, lo, tag, n, s, n2, s2)))
        ids = self._alloc(src.shape)
        lat = np.full(src.shape, np.nan) if step_s is None else \
            np.broadcast_to(np.asarray(step_s, dtype=np.float64), src.shape)
        flat = lambda a: np.ascontiguousarray(a).reshape(-1)  # noqa: E731
        lo_, n_, s_, n2_, s2_ = (flat(a) for a in (lo, n, s, n2, s2))
        c = self._cols
        k = lo_.size
        c["kind"].append(np.full(k, TRANSFER, dtype=np.int8))
        c["src"].append(self.nodes[flat(src)])
        c["dst"].append(self.nodes[flat(dst)])
        c["size"].append(np.asarray(self.costs.wire(self._sizes(lo_, n_, s_, n2_, s2_)),
                                    dtype=np.int64))
        c["tag"].append(flat(tag))
        c["label"].append(np.full(k, self._label(label), dtype=np.int16))
        c["lo"].append(lo_)
        c["n"].append(n_)
        c["s"].append(s_)
        c["n2"].append(n2_)
        c["s2"].append(s2_)
        c["red"].append(np.full(k, 1 if reduce else 0, dtype=np.int8))
        c["dur"].append(np.zeros(k))
        c["lat"].append(flat(lat))
        return ids

    def reduces(self, at, lo, duration, *, label: str = "switch_reduce", tag=-1, n=1,
                s=1) -> np.ndarray:
        """In-network reductions at rank index ``at`` (a switch): each combines what was
        reduced into the switch for blocks ``{lo + i*s}`` and takes ``duration`` seconds."""
        at, lo, tag, n, s = np.broadcast_arrays(
            *(np.asarray(x, dtype=np.int64) for x in (at, lo, tag, n, s)))
        dur = np.broadcast_to(np.asarray(duration, dtype=np.float64), at.shape)
        ids = self._alloc(at.shape)
        flat = lambda a: np.ascontiguousarray(a).reshape(-1)  # noqa: E731
        k = ids.size
        c = self._cols
        c["kind"].append(np.full(k, REDUCE, dtype=np.int8))
        c["src"].append(self.nodes[flat(at)])
        c["dst"].append(np.full(k, -1, dtype=np.int64))
        c["size"].append(np.zeros(k, dtype=np.int64))
        c["tag"].append(flat(tag))
        c["label"].append(np.full(k, self._label(label), dtype=np.int16))
        c["lo"].append(flat(lo))
        c["n"].append(flat(n))
        c["s"].append(flat(s))
        c["n2"].append(np.ones(k, dtype=np.int64))
        c["s2"].append(np.zeros(k, dtype=np.int64))
        c["red"].append(np.full(k, SWITCH_REDUCE, dtype=np.int8))
        c["dur"].append(flat(dur).astype(np.float64))
        c["lat"].append(np.full(k, np.nan))
        return ids

    def joins(self, rank, label: str = "join") -> np.ndarray:
        """Zero-time barrier nodes on ``rank`` (rank index), used where many transfers wait for
        many others (n parents + n children instead of n*n edges)."""
        rank = np.asarray(rank, dtype=np.int64)
        ids = self._alloc(rank.shape)
        k = rank.size
        c = self._cols
        c["kind"].append(np.full(k, JOIN, dtype=np.int8))
        c["src"].append(self.nodes[rank.reshape(-1)])
        c["dst"].append(np.full(k, -1, dtype=np.int64))
        c["size"].append(np.zeros(k, dtype=np.int64))
        c["tag"].append(np.full(k, -1, dtype=np.int64))
        c["label"].append(np.full(k, self._label(label), dtype=np.int16))
        for key, v in (("lo", -1), ("n", 1), ("s", 1), ("n2", 1), ("s2", 0), ("red", -1)):
            c[key].append(np.full(k, v, dtype=np.int8 if key == "red" else np.int64))
        c["dur"].append(np.zeros(k))
        c["lat"].append(np.full(k, np.nan))
        return ids

    def _sizes(self, lo, n, s, n2, s2) -> np.ndarray:
        if lo.size == 0:
            return np.zeros(0, dtype=np.int64)
        if (n == 1).all() and (n2 == 1).all():
            return self.block_bytes[lo]
        out = self._sum(self.block_bytes, self._cum, lo, n, s, n2, s2)
        if self._big:
            self._exact(out, lo, n, s, n2, s2)
        return out

    def _exact(self, out, lo, n, s, n2, s2) -> None:
        """Where a transfer's blocks sum past 2^62 (int64 sums wrap modulo 2^64: a 2^62-byte
        hierarchical all-to-all over 16 ranks in groups of 8 sent 0 bytes between leaders),
        its bytes in Python integers; beyond int64 an InputError."""
        bf = self.block_bytes.astype(np.float64)
        cf = np.concatenate([[0.0], np.cumsum(bf)])
        approx = self._sum(bf, cf, lo, n, s, n2, s2)
        for i in np.flatnonzero(approx >= 2.0**62).tolist():
            idx = (int(lo[i]) + np.arange(int(n[i]))[:, None] * int(s[i]) +
                   np.arange(int(n2[i]))[None, :] * int(s2[i]))
            exact = sum(self.block_bytes[idx.reshape(-1)].tolist())
            if exact > MAX_BYTES:
                raise InputError(f"bytes: one transfer of this {self.algorithm} {self.op} "
                                 f"carries {exact:,} bytes, beyond the {MAX_BYTES:,} an int64 "
                                 f"holds")
            out[i] = exact

    def _sum(self, blocks, cum, lo, n, s, n2, s2) -> np.ndarray:
        """Per transfer, the sum of its blocks (``cum``: prefix sums of ``blocks``)."""
        simple = (n2 == 1) & ((s == 1) | (n == 1))
        out = np.empty(lo.size, dtype=blocks.dtype)
        # contiguous ranges: prefix sums
        out[simple] = cum[lo[simple] + n[simple]] - cum[lo[simple]]
        rest = np.flatnonzero(~simple)
        if rest.size:
            # strided sets: group by shape so each group is one fancy-indexing sum
            keys = np.stack([n[rest], s[rest], n2[rest], s2[rest]], axis=1)
            uniq, inv = np.unique(keys, axis=0, return_inverse=True)
            for g, (gn, gs, gn2, gs2) in enumerate(uniq.tolist()):
                sel = rest[inv.reshape(-1) == g]
                idx = (lo[sel][:, None, None] + np.arange(gn)[None, :, None] * gs +
                       np.arange(gn2)[None, None, :] * gs2)
                out[sel] = blocks[idx].sum(axis=(1, 2))
        return out

    # ------------------------------------------------------------------ edges
    def deps(self, child, parent) -> None:
        """Data edges parent -> child (broadcast together); negative ids are skipped."""
        child, parent = np.broadcast_arrays(np.asarray(child, dtype=np.int64),
                                            np.asarray(parent, dtype=np.int64))
        ok = (child >= 0) & (parent >= 0)
        self._child.append(child[ok])
        self._parent.append(parent[ok])

    def order(self, child, parent) -> None:
        """Sequence edges parent -> child: the sender's previous send on the same connection
        (or edge), which a transfer waits for without a step latency in between."""
        child, parent = np.broadcast_arrays(np.asarray(child, dtype=np.int64),
                                            np.asarray(parent, dtype=np.int64))
        ok = (child >= 0) & (parent >= 0)
        self._ochild.append(child[ok])
        self._oparent.append(parent[ok])

    # ------------------------------------------------------------------ output
    def build(self) -> Schedule:
        # the stride columns are only materialised when some transfer is strided
        strided = any((a != 1).any() for a in self._cols["n"])
        strided2 = any((a != 1).any() for a in self._cols["n2"])
        skip = set(() if strided else ("n", "s")) | set(() if strided2 else ("n2", "s2"))
        c = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64)
             for k, v in self._cols.items() if k not in skip}
        N = self.n
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)  # noqa: E731
        child, parent = cat(self._child), cat(self._parent)
        ochild, oparent = cat(self._ochild), cat(self._oparent)
        for a, b in ((child, parent), (ochild, oparent)):
            if a.size and (b >= a).any():  # an algorithm bug, not bad input
                i = int(np.flatnonzero(b >= a)[0])
                raise AssertionError(f"{self.algorithm}: node {int(a[i])} depends on later "
                                     f"node {int(b[i])}")
        kind = c["kind"]
        is_t = kind == TRANSFER
        costs = self.costs
        if self.chunks == 1 and ochild.size:
            # one chunk: a sender has nothing to stream, its next step waits for its previous
            # one as for its data, and the latency comes after both (the ranks of a ring then
            # move in lock step at the slowest connection, as the stream form says)
            child, parent = np.concatenate([child, ochild]), np.concatenate([parent, oparent])
            ochild = oparent = np.zeros(0, np.int64)
        with_delay = costs.any_latency and bool(is_t.any())
        cap = costs.rate_cap(self.ranks, self.channels) if is_t.any() else 0.0
        # a step-latency DELAY sits just before each transfer and takes the transfer's data
        # parents (the step's latency follows the data it waits for); the transfer keeps its
        # order parents (the sender's previous send). Under a protocol's throughput cap
        # (protocols.Costs.rate_cap) a second DELAY of payload / cap sits just after each
        # transfer, with the transfer's parents, and whatever waits for the transfer waits
        # for it too: the transfer ends no earlier than the cap lets it.
        before = is_t if with_delay else np.zeros(N, dtype=bool)
        after = is_t if cap > 0 else np.zeros(N, dtype=bool)
        new_id = np.arange(N) + np.cumsum(before) + np.cumsum(after) - after
        delay_of = new_id[before] - 1
        cap_of = new_id[after] + 1
        M = N + int(before.sum()) + int(after.sum())
        lat = np.asarray(costs.latency(c["src"][before], c["dst"][before]), dtype=np.float64) \
            if with_delay else np.zeros(0)
        if with_delay and costs.fixed_step_s is None:
            own = c["lat"][before]  # a builder's own pricing (rings: their connections' mean)
            lat = np.where(np.isnan(own), lat, own)
        # a data edge's child is its transfer's step-latency delay where it has one
        data_child = new_id[child] - before[child]
        order_child = new_id[ochild]
        e_child = [data_child, order_child, new_id[before]]
        e_parent = [new_id[parent], new_id[oparent], delay_of]
        if cap > 0:
            for ch_, par_ in ((data_child, parent), (order_child, oparent)):
                m = after[par_]  # waiting for a capped transfer: wait for its cap too
                e_child.append(ch_[m])
                e_parent.append(new_id[par_[m]] + 1)
            is_capped = np.zeros(M, dtype=bool)
            is_capped[new_id[after]] = True
            ec, ep = np.concatenate(e_child), np.concatenate(e_parent)
            m = is_capped[ec]  # the cap starts with its transfer: the transfer's parents
            e_child, e_parent = [ec, ec[m] + 1], [ep, ep[m]]
        child, parent = np.concatenate(e_child), np.concatenate(e_parent)

        def spread(col, fill, dtype):
            if M == N:
                return col.astype(dtype, copy=False)
            a = np.full(M, fill, dtype=dtype)
            a[new_id] = col
            return a

        out_kind = np.full(M, DELAY, dtype=np.int8)
        out_kind[new_id[is_t]] = TRANSFER
        src = spread(c["src"], -1, np.int64)
        src[delay_of] = c["src"][before]  # a delay belongs to its transfer's sender
        src[cap_of] = c["src"][after]
        dst = spread(c["dst"], -1, np.int64)  # joins already carry -1 / 0
        size = spread(c["size"], 0, np.int64)
        tag = spread(c["tag"], -1, np.int64)
        tag[delay_of] = c["tag"][before]
        tag[cap_of] = c["tag"][after]
        dur = spread(c["dur"], 0.0, np.float64)
        dur[delay_of] = lat
        # the payload of a transfer's wire bytes, over the cap
        dur[cap_of] = c["size"][after] * (costs.num / costs.den) / cap if cap > 0 else 0.0
        labels = list(self.labels) or ["transfer"]
        label = spread(c["label"], 0, np.int16)
        if with_delay:
            label[delay_of] = len(labels)
            labels.append("step_latency")
        if cap > 0:
            label[cap_of] = len(labels)
            labels.append("throughput_cap")
        blk_lo = spread(c["lo"], -1, np.int64)
        red = spread(c["red"], -1, np.int8)
        t = is_t | (kind == REDUCE)
        extra_cols = {}
        if strided and (c["n"][t] != 1).any():
            extra_cols["blk_n"] = spread(c["n"], 1, np.int32)
            extra_cols["blk_s"] = spread(c["s"], 1, np.int64)
        if strided2 and (c["n2"][t] != 1).any():
            extra_cols["blk_n2"] = spread(c["n2"], 1, np.int32)
            extra_cols["blk_s2"] = spread(c["s2"], 0, np.int64)
        if costs.launch_s > 0 and M:
            # NCCL's base latency: one launch DELAY per rank, ahead of every node of that rank
            # that has no parent (the ids shift so that parents keep preceding children)
            has_parent = np.zeros(M, dtype=bool)
            has_parent[child] = True
            roots = np.flatnonzero(~has_parent)
            owner = src[roots]
            owners, inv = np.unique(owner, return_inverse=True)
            K = len(owners)
            child = np.concatenate([child + K, roots + K])
            parent = np.concatenate([parent + K, inv.reshape(-1)])
            pre = lambda a, fill: np.concatenate([np.full(K, fill, dtype=a.dtype), a])  # noqa
            out_kind = pre(out_kind, DELAY)
            src = np.concatenate([owners.astype(np.int64), src])
            dst, size, tag = pre(dst, -1), pre(size, 0), pre(tag, -1)
            dur = np.concatenate([np.full(K, costs.launch_s), dur])
            label = pre(label, len(labels))
            labels.append("launch_latency")
            blk_lo, red = pre(blk_lo, -1), pre(red, -1)
            extra_cols = {k: pre(v, 1 if k in ("blk_n", "blk_s", "blk_n2") else 0)
                          for k, v in extra_cols.items()}
            M += K
        # CSR by child; duplicate edges dropped (data and order deps can coincide)
        key = child * M + parent
        key.sort()  # (np.unique's hash path is several times slower at millions of edges)
        if key.size:
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        ch, par = key // M, key % M
        dep_ptr = np.concatenate([[0], np.cumsum(np.bincount(ch, minlength=M))])
        extra = {"blk_lo": blk_lo, "reduce": red, **extra_cols}
        sched = Schedule(kind=out_kind, src=src, dst=dst, size=size, duration=dur,
                         start=np.zeros(M), dep_ptr=dep_ptr, dep_idx=par, tag=tag, label=label,
                         labels=labels, extra=extra)
        sched.meta = {"op": self.op, "algorithm": self.algorithm,
                      "ranks": self.ranks.copy(), "n_ranks": int(len(self.ranks)),
                      "nbytes": self.nbytes, "chunks": self.chunks,
                      "step_latency_s": self.step_latency_s,
                      "protocol": costs.protocol, "wire_ratio": (costs.num, costs.den),
                      "launch_latency_s": costs.launch_s, "rate_cap_Bps": cap,
                      "n_blocks": int(len(self.block_bytes)), "block_bytes": self.block_bytes,
                      **self.meta}
        return sched

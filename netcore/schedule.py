"""The Schedule: a DAG of transfers and compute ops, stored as flat numpy arrays.

Node ``i`` is one of

* ``TRANSFER``: ``size[i]`` bytes from host ``src[i]`` to host ``dst[i]``;
* ``COMPUTE``: an operator on rank ``src[i]`` that takes ``duration[i]`` seconds (``dst = -1``);
  compute/ fills ``duration`` from FLOPs and bytes before an engine sees it;
* ``DELAY``: a pure wait of ``duration[i]`` seconds (software/NIC overhead), ``src`` is the rank
  it belongs to (or -1).

A node becomes ready when all its parents (``deps_of(i)``, CSR ``dep_ptr``/``dep_idx``) have
finished and the clock is at least ``start[i]``. Both engines take a Schedule and return
per-node start/end times. Engines treat COMPUTE and DELAY alike (a fixed duration, no
resource); serialising a rank's compute stream is expressed with dependency edges.

Per-node side data (e.g. which data blocks a collective transfer carries) can ride along in
``extra`` (name -> array of length n); it is sliced and concatenated with the nodes.

Scalable representation (``network_detail = "auto"``, docs/scale.md): a transfer may stand for a
*member set* of identical transfers moving in lock step (``mset[i] >= 0`` indexes ``sets``, a
``netcore.members.MemberSets``), and may stand for ``steps[i]`` transfers in series on the same
connections (a collective's ring steps as one stream): the engine pays its path latency that many
times. ``src``/``dst`` of such a node are its first member's. Its ``size`` is what its busiest
member carries; where members carry a byte or two less (shards rounded to whole bytes),
``extra[BYTES_SHORT]`` holds how much less all members carry together, so ``total_bytes`` stays
the bytes of the transfers it stands for.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from netcore.members import MemberSets
from topo.errors import InputError

TRANSFER = 0
COMPUTE = 1
DELAY = 2
KIND_NAMES = ("transfer", "compute", "delay")
# extra column: bytes a transfer's members (over all its steps) carry less than size x members
# (a stream's size is its busiest connection's); absent or negative: none less
BYTES_SHORT = "bytes_short"


class ScheduleError(InputError):
    """An invalid schedule; the message names the node and field."""


@dataclass(eq=False)
class Schedule:
    kind: np.ndarray  # int8 (n,)
    src: np.ndarray  # int32 (n,)
    dst: np.ndarray  # int32 (n,)
    size: np.ndarray  # int64 (n,) bytes (0 for compute/delay)
    duration: np.ndarray  # float64 (n,) seconds (compute/delay)
    start: np.ndarray  # float64 (n,) earliest start, seconds
    dep_ptr: np.ndarray  # int64 (n+1,)
    dep_idx: np.ndarray  # int64 (E,) parent node ids
    tag: np.ndarray = None  # int64 (n,) free for the producer (chunk, step, ...); -1 default
    label: np.ndarray = None  # int16 (n,) index into labels
    labels: list = field(default_factory=lambda: ["transfer"])
    extra: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)  # producer facts (op, algorithm, ranks, bytes)
    mset: np.ndarray = None  # int64 (n,) member set of the transfer (-1: just itself)
    steps: np.ndarray = None  # int32 (n,) serial transfers the node stands for (1 default)
    sets: MemberSets = None  # the member sets ``mset`` indexes (None: no sets)
    # routing hash key of each transfer (``connection_keys``); -1: the node id. Hash-based
    # routing (ecmp, valiant) picks a transfer's path from it: transfers of one connection
    # (a collective's steps between two ranks, a pipeline's sends) take one path, as a NIC's
    # persistent queue pair does
    conn: np.ndarray = None

    def __post_init__(self):
        n = len(self.kind)
        self.kind = _narrow(self.kind, np.int8, "kind")
        self.src = _narrow(self.src, np.int32, "src")
        self.dst = _narrow(self.dst, np.int32, "dst")
        self.size = _narrow(self.size, np.int64, "size")
        self.duration = np.ascontiguousarray(self.duration, dtype=np.float64)
        self.start = np.ascontiguousarray(self.start, dtype=np.float64)
        self.dep_ptr = np.ascontiguousarray(self.dep_ptr, dtype=np.int64)
        self.dep_idx = np.ascontiguousarray(self.dep_idx, dtype=np.int64)
        if self.tag is None:
            self.tag = np.full(n, -1, dtype=np.int64)
        if self.label is None:
            self.label = np.zeros(n, dtype=np.int16)
        self.tag = np.ascontiguousarray(self.tag, dtype=np.int64)
        self.label = _narrow(self.label, np.int16, "label")
        self.mset = (np.full(n, -1, dtype=np.int64) if self.mset is None else
                     np.ascontiguousarray(self.mset, dtype=np.int64))
        self.steps = (np.ones(n, dtype=np.int32) if self.steps is None else
                      _narrow(self.steps, np.int32, "steps"))
        self.conn = (np.full(n, -1, dtype=np.int64) if self.conn is None else
                     np.ascontiguousarray(self.conn, dtype=np.int64))
        for name in ("src", "dst", "size", "duration", "start", "tag", "label", "mset", "steps",
                     "conn"):
            if len(getattr(self, name)) != n:
                raise ScheduleError(f"{name} has {len(getattr(self, name))} entries, expected {n}")
        if len(self.dep_ptr) != n + 1 or self.dep_ptr[0] != 0 or self.dep_ptr[-1] != len(self.dep_idx):
            raise ScheduleError("dep_ptr is not a CSR pointer over dep_idx")

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls) -> "Schedule":
        z = np.zeros(0)
        return cls(z, z, z, z, z, z, np.zeros(1), z)

    @classmethod
    def from_transfers(cls, src, dst, size, start=None, deps=None, tag=None,
                       label: str = "transfer") -> "Schedule":
        """Transfers only. ``deps`` is a list (one entry per transfer) of parent index lists."""
        src = np.asarray(src, dtype=np.int64)
        n = len(src)
        if deps is None:
            dep_ptr, dep_idx = np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        else:
            if len(deps) != n:
                raise ScheduleError(f"deps has {len(deps)} entries, expected {n}")
            lens = np.fromiter((len(d) for d in deps), dtype=np.int64, count=n)
            dep_ptr = np.concatenate([[0], np.cumsum(lens)])
            dep_idx = (np.fromiter((int(p) for d in deps for p in d), dtype=np.int64,
                                   count=int(dep_ptr[-1])))
        return cls(
            kind=np.full(n, TRANSFER), src=src, dst=dst, size=size,
            duration=np.zeros(n), start=np.zeros(n) if start is None else start,
            dep_ptr=dep_ptr, dep_idx=dep_idx, tag=tag,
            label=np.zeros(n), labels=[label],
        )

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return len(self.kind)

    @property
    def n(self) -> int:
        return len(self.kind)

    @property
    def is_transfer(self) -> np.ndarray:
        return self.kind == TRANSFER

    @property
    def n_transfers(self) -> int:
        """Transfer nodes (what an engine carries as flows)."""
        return int(np.count_nonzero(self.kind == TRANSFER))

    @property
    def has_members(self) -> bool:
        return self.sets is not None and bool((self.mset >= 0).any())

    def members_per_node(self) -> np.ndarray:
        """Per node, the transfers moving together that it stands for (1 without a set)."""
        m = np.ones(self.n, dtype=np.int64)
        if self.has_members:
            has = self.mset >= 0
            m[has] = self.sets.sizes[self.mset[has]]
        return m

    def multiplicity(self) -> np.ndarray:
        """Per node, the point-to-point transfers it stands for: members x serial steps for a
        transfer, 0 for compute and delay nodes."""
        return np.where(self.kind == TRANSFER, self.members_per_node() * self.steps, 0)

    @property
    def n_member_transfers(self) -> int:
        """Point-to-point transfers represented (``n_transfers`` when nothing is aggregated;
        a stream of k steps over m members counts m x k)."""
        return int(self.multiplicity().sum())

    def node_bytes(self) -> np.ndarray:
        """Bytes every node moves over the fabric in all (size x members, less
        ``extra[BYTES_SHORT]``)."""
        out = np.where(self.kind == TRANSFER, self.size * self.members_per_node(), 0)
        short = self.extra.get(BYTES_SHORT)
        return out if short is None else out - np.where(self.kind == TRANSFER,
                                                        np.maximum(short, 0), 0)

    @property
    def total_bytes(self) -> int:
        """Bytes of every transfer (size x members), exact: in int64 while the sum is safely
        below 2**63, in Python integers beyond (a 4 EiB ring all-reduce over 16 ranks summed
        to -9223372036854775808)."""
        t = self.kind == TRANSFER
        size, mem = self.size[t], self.members_per_node()[t]
        short = self.extra.get(BYTES_SHORT)
        less = int(np.maximum(short[t], 0).sum()) if short is not None else 0
        if float(np.dot(size.astype(np.float64), mem.astype(np.float64))) < 2.0**62:
            return int((size * mem).sum()) - less
        return sum(int(a) * int(b) for a, b in zip(size.tolist(), mem.tolist())) - less

    def routing_keys(self, nodes: np.ndarray) -> np.ndarray:
        """The hash key of each of ``nodes``: its connection key, or its id when it has none."""
        nodes = np.asarray(nodes, dtype=np.int64)
        c = self.conn[nodes]
        return np.where(c >= 0, c, nodes)

    def with_connections(self) -> "Schedule":
        """Every transfer keyed by its (src, dst) connection (``connection_keys``), in place."""
        t = self.kind == TRANSFER
        self.conn = np.where(t, connection_keys(self.src, self.dst), -1)
        return self

    def deps_of(self, i: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[i]: self.dep_ptr[i + 1]]

    def children(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR of children: ``(child_ptr, child_idx)``, the reverse of the dependency edges."""
        n = self.n
        parent = self.dep_idx
        child = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.dep_ptr))
        order = np.argsort(parent, kind="stable")
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(ptr, parent + 1, 1)
        np.cumsum(ptr, out=ptr)
        return ptr, child[order]

    def topological_order(self) -> np.ndarray:
        """A topological order (compiled Kahn's algorithm); raises ScheduleError naming a node
        that waits on a dependency cycle."""
        from netcore._dag import topological_order

        if self.dep_idx.size and (self.dep_idx.min() < 0 or self.dep_idx.max() >= self.n):
            bad = int(np.flatnonzero((self.dep_idx < 0) | (self.dep_idx >= self.n))[0])
            child = int(np.searchsorted(self.dep_ptr, bad, side="right") - 1)
            raise ScheduleError(f"node {child}: depends on node {int(self.dep_idx[bad])}, "
                                f"which does not exist")
        order, filled = topological_order(self.dep_ptr, self.dep_idx)
        if filled != self.n:
            stuck = np.setdiff1d(np.arange(self.n), order[:filled])
            raise ScheduleError(f"dependency cycle: node {int(stuck[0])} (and {stuck.size - 1} "
                                f"others) can never start")
        return order

    # ------------------------------------------------------------------ checks
    def validate(self, n_hosts: int | None = None, n_nodes: int | None = None) -> None:
        """Raise ScheduleError with a precise message for anything an engine cannot run.

        Transfer endpoints must be hosts ``0 .. n_hosts-1``; with ``n_nodes`` a switch
        (``n_hosts .. n_nodes-1``) may be one too (in-network collectives send to and from
        the switches that reduce), as long as each transfer has a host at one end or is
        between two switches of the same schedule."""
        n = self.n
        top = n_hosts if n_nodes is None else n_nodes
        bad_kind = np.flatnonzero((self.kind < 0) | (self.kind > DELAY))
        if bad_kind.size:
            raise ScheduleError(f"node {int(bad_kind[0])}: kind {int(self.kind[bad_kind[0]])} unknown")
        t = self.kind == TRANSFER
        for cond, what in (
            (t & (self.size < 0), "bytes {v} must be >= 0"),
            (t & (self.src == self.dst), "a transfer from host {s} to itself"),
            (~(self.start >= 0) | ~np.isfinite(self.start), "start time {st} must be >= 0"),
            (~t & (~(self.duration >= 0) | ~np.isfinite(self.duration)),
             "duration {d} must be >= 0"),
        ):
            bad = np.flatnonzero(cond)
            if bad.size:
                i = int(bad[0])
                raise ScheduleError(f"node {i}: " + what.format(
                    v=int(self.size[i]), s=int(self.src[i]), st=self.start[i], d=self.duration[i]))
        bad = np.flatnonzero(self.steps < 1)
        if bad.size:
            raise ScheduleError(f"node {int(bad[0])}: steps {int(self.steps[bad[0]])} must be >= 1")
        if (self.mset >= 0).any():
            S = 0 if self.sets is None else self.sets.n_sets
            bad = np.flatnonzero((self.mset >= S) | ((self.mset >= 0) & ~t))
            if bad.size:
                raise ScheduleError(f"node {int(bad[0])}: member set {int(self.mset[bad[0]])} "
                                    f"does not exist or the node is not a transfer")
            ms = self.sets
            bad = np.flatnonzero(ms.src == ms.dst)
            if bad.size:
                raise ScheduleError(f"member {int(bad[0])}: a transfer from host "
                                    f"{int(ms.src[bad[0]])} to itself")
            if n_hosts is not None:
                bad = np.flatnonzero((ms.src < 0) | (ms.src >= top) | (ms.dst < 0) |
                                     (ms.dst >= top))
                if bad.size:
                    raise ScheduleError(f"member {int(bad[0])}: host does not exist "
                                        f"(hosts are 0..{n_hosts - 1})")
        if n_hosts is not None:
            bad = np.flatnonzero(t & ((self.src < 0) | (self.src >= top) |
                                      (self.dst < 0) | (self.dst >= top)))
            if bad.size:
                i = int(bad[0])
                host = int(self.src[i]) if not (0 <= self.src[i] < top) else int(self.dst[i])
                what = ("host" if n_nodes is None else "node")
                raise ScheduleError(f"node {i}: {what} {host} does not exist "
                                    f"({what}s are 0..{top - 1})")
        if self.dep_idx.size:
            bad = np.flatnonzero((self.dep_idx < 0) | (self.dep_idx >= n))
            if bad.size:
                child = int(np.searchsorted(self.dep_ptr, bad[0], side="right") - 1)
                raise ScheduleError(f"node {child}: depends on node {int(self.dep_idx[bad[0]])}, "
                                    f"which does not exist")
        self.topological_order()

    def copy(self) -> "Schedule":
        """An independent copy: every array, label list and meta value its own."""
        return Schedule(self.kind.copy(), self.src.copy(), self.dst.copy(), self.size.copy(),
                        self.duration.copy(), self.start.copy(), self.dep_ptr.copy(),
                        self.dep_idx.copy(), self.tag.copy(), self.label.copy(),
                        list(self.labels), {k: v.copy() for k, v in self.extra.items()},
                        copy.deepcopy(self.meta), self.mset.copy(), self.steps.copy(),
                        self.sets, self.conn.copy())

    # ------------------------------------------------------------------ combination
    def subset(self, keep: np.ndarray) -> "Schedule":
        """Nodes where ``keep`` is true, with dependencies on dropped nodes removed."""
        keep = np.asarray(keep, dtype=bool)
        new_id = np.full(self.n, -1, dtype=np.int64)
        new_id[keep] = np.arange(int(keep.sum()))
        owner = np.repeat(np.arange(self.n), np.diff(self.dep_ptr))
        ok = keep[owner] & keep[self.dep_idx] if self.dep_idx.size else np.zeros(0, bool)
        dep_idx = new_id[self.dep_idx[ok]]
        counts = np.bincount(new_id[owner[ok]], minlength=int(keep.sum())) if ok.any() else \
            np.zeros(int(keep.sum()), dtype=np.int64)
        dep_ptr = np.concatenate([[0], np.cumsum(counts)])
        return Schedule(self.kind[keep], self.src[keep], self.dst[keep], self.size[keep],
                        self.duration[keep], self.start[keep], dep_ptr, dep_idx,
                        self.tag[keep], self.label[keep], list(self.labels),
                        {k: v[keep] for k, v in self.extra.items()}, dict(self.meta),
                        self.mset[keep], self.steps[keep], self.sets, self.conn[keep])

    @staticmethod
    def concat(parts: list["Schedule"], after_all: bool = False) -> "Schedule":
        """Join schedules; ids of later parts are shifted. With ``after_all`` every root of a
        part depends on every sink of the previous part (sequential phases)."""
        if not parts:
            return Schedule.empty()
        labels: list[str] = []
        cols = {k: [] for k in ("kind", "src", "dst", "size", "duration", "start", "tag",
                                "label", "steps", "conn")}
        any_sets = any(p.sets is not None for p in parts)
        sets, set_off = MemberSets.concat([p.sets for p in parts]) if any_sets else (None, None)
        msets = [np.where(p.mset >= 0, p.mset + (set_off[i] if any_sets else 0), -1)
                 for i, p in enumerate(parts)]
        dep_ptrs, dep_idxs = [np.zeros(1, dtype=np.int64)], []
        extra_keys = set().union(*(p.extra.keys() for p in parts))
        extras = {k: [] for k in extra_keys}
        offset = 0
        edge_off = 0
        prev_sinks = None
        for p in parts:
            remap = np.array([_label_index(labels, name) for name in p.labels] or [0],
                             dtype=np.int16)
            for k in cols:
                v = getattr(p, k)
                cols[k].append(remap[v] if k == "label" else v)
            if after_all and prev_sinks is not None and p.n:
                indeg = np.diff(p.dep_ptr)
                counts = indeg + np.where(indeg == 0, len(prev_sinks), 0)
                ptr = np.concatenate([[0], np.cumsum(counts)])
                idx = np.empty(int(ptr[-1]), dtype=np.int64)
                for_roots = np.flatnonzero(indeg == 0)
                # own deps first (shifted), then the previous part's sinks for roots
                own_pos = np.repeat(ptr[:-1], indeg) + _ranks_within(indeg)
                idx[own_pos] = p.dep_idx + offset
                root_pos = (np.repeat(ptr[for_roots], len(prev_sinks)) +
                            np.tile(np.arange(len(prev_sinks)), len(for_roots)))
                idx[root_pos] = np.tile(prev_sinks, len(for_roots))
                dep_ptrs.append(ptr[1:] + edge_off)
                dep_idxs.append(idx)
                edge_off += len(idx)
            else:
                dep_ptrs.append(p.dep_ptr[1:] + edge_off)
                dep_idxs.append(p.dep_idx + offset)
                edge_off += len(p.dep_idx)
            for k in extra_keys:
                extras[k].append(p.extra[k] if k in p.extra else
                                 np.full(p.n, -1, dtype=np.int64))
            if p.n:
                cptr, _ = p.children()
                prev_sinks = np.flatnonzero(np.diff(cptr) == 0) + offset
            offset += p.n
        return Schedule(**{k: np.concatenate(v) for k, v in cols.items()},
                        dep_ptr=np.concatenate(dep_ptrs),
                        dep_idx=np.concatenate(dep_idxs) if dep_idxs else np.zeros(0),
                        labels=labels or ["transfer"],
                        extra={k: np.concatenate(v) for k, v in extras.items()},
                        meta={"parts": [p.meta for p in parts]},
                        mset=np.concatenate(msets), sets=sets)

    def describe(self) -> str:
        counts = np.bincount(self.kind, minlength=3)
        rep = (f" standing for {self.n_member_transfers} point-to-point transfers"
               if self.has_members or (self.steps > 1).any() else "")
        return (f"Schedule({self.n} nodes: {counts[0]} transfers{rep}, {counts[1]} compute, "
                f"{counts[2]} delays; {len(self.dep_idx)} edges; {self.total_bytes} bytes)")

    __repr__ = describe


def connection_keys(src, dst) -> np.ndarray:
    """Routing hash key of the connection from host ``src`` to host ``dst``: above every node
    id (2^62 + src * 2^31 + dst), so it never coincides with an unkeyed transfer's key."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    return (np.int64(1) << np.int64(62)) + (src << np.int64(31)) + dst


def _label_index(labels: list, name: str) -> int:
    if name not in labels:
        labels.append(name)
    return labels.index(name)


def _ranks_within(counts: np.ndarray) -> np.ndarray:
    """For counts [2, 0, 3] -> [0, 1, 0, 1, 2] (position inside each run)."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total) - starts


class ScheduleBuilder:
    """Append nodes in vectorised batches; Python work per batch, never per node.

    ``add_transfers(src, dst, size, parents=...)`` takes arrays of equal length and an optional
    ``parents`` that is either a 2-D int array (k, m) padded with -1, or a (ptr, idx) CSR pair.
    It returns the new node ids, which later batches use as parents.
    """

    def __init__(self):
        self._cols = {k: [] for k in ("kind", "src", "dst", "size", "duration", "start", "tag",
                                      "label")}
        self._dep_counts: list[np.ndarray] = []
        self._dep_idx: list[np.ndarray] = []
        self._extra: dict[str, list] = {}
        self.labels: list[str] = []
        self.meta: dict = {}
        self.n = 0

    def _add(self, kind, src, dst, size, duration, start, parents, tag, label, extra):
        src = np.atleast_1d(np.asarray(src, dtype=np.int64))
        k = len(src)

        def col(v, default, dtype):
            if v is None:
                return np.full(k, default, dtype=dtype)
            a = np.asarray(v, dtype=dtype)
            return np.broadcast_to(a, (k,)).copy() if a.ndim == 0 or a.shape != (k,) else a

        lab = _label_index(self.labels, label)
        self._cols["kind"].append(np.full(k, kind, dtype=np.int8))
        self._cols["src"].append(src)
        self._cols["dst"].append(col(dst, -1, np.int64))
        self._cols["size"].append(col(size, 0, np.int64))
        self._cols["duration"].append(col(duration, 0.0, np.float64))
        self._cols["start"].append(col(start, 0.0, np.float64))
        self._cols["tag"].append(col(tag, -1, np.int64))
        self._cols["label"].append(np.full(k, lab, dtype=np.int16))
        if parents is None:
            counts, idx = np.zeros(k, dtype=np.int64), np.zeros(0, dtype=np.int64)
        elif isinstance(parents, tuple):
            ptr, idx = (np.asarray(x, dtype=np.int64) for x in parents)
            counts = np.diff(ptr)
        else:
            p = np.asarray(parents, dtype=np.int64)
            if p.ndim == 1:
                p = p[:, None]
            if p.shape[0] != k:
                raise ScheduleError(f"parents has {p.shape[0]} rows, expected {k}")
            valid = p >= 0
            counts = valid.sum(axis=1)
            idx = p[valid]
        if idx.size and (idx.max() >= self.n):
            raise ScheduleError(f"parent {int(idx.max())} is not an earlier node")
        self._dep_counts.append(counts)
        self._dep_idx.append(idx)
        for name, arr in (extra or {}).items():
            self._extra.setdefault(name, [np.full(self.n, -1, dtype=np.int64)] if self.n else [])
            self._extra[name].append(np.asarray(arr))
        for name in self._extra:
            if name not in (extra or {}):
                self._extra[name].append(np.full(k, -1, dtype=np.int64))
        ids = np.arange(self.n, self.n + k, dtype=np.int64)
        self.n += k
        return ids

    def add_transfers(self, src, dst, size, parents=None, start=None, tag=None,
                      label="transfer", extra=None) -> np.ndarray:
        return self._add(TRANSFER, src, dst, size, None, start, parents, tag, label, extra)

    def add_compute(self, rank, duration, parents=None, start=None, tag=None,
                    label="compute", extra=None) -> np.ndarray:
        return self._add(COMPUTE, rank, None, None, duration, start, parents, tag, label, extra)

    def add_delay(self, rank, duration, parents=None, start=None, tag=None,
                  label="delay", extra=None) -> np.ndarray:
        return self._add(DELAY, rank, None, None, duration, start, parents, tag, label, extra)

    def build(self) -> Schedule:
        if self.n == 0:
            s = Schedule.empty()
            s.meta = dict(self.meta)
            return s
        counts = np.concatenate(self._dep_counts)
        return Schedule(
            **{k: np.concatenate(v) for k, v in self._cols.items()},
            dep_ptr=np.concatenate([[0], np.cumsum(counts)]),
            dep_idx=np.concatenate(self._dep_idx),
            labels=list(self.labels) or ["transfer"],
            extra={k: np.concatenate(v) for k, v in self._extra.items()},
            meta=dict(self.meta),
        )


def _narrow(a, dtype, name: str) -> np.ndarray:
    """``a`` as a contiguous ``dtype`` array; ScheduleError when a value does not fit (a cast
    alone wraps silently: 2**31 + 5 serial steps became -2147483643)."""
    arr = np.asarray(a)
    if arr.dtype != dtype and arr.size and arr.dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            bad = hi if hi > info.max else lo
            raise ScheduleError(f"{name} = {bad}: beyond the {info.min}..{info.max} a "
                                f"schedule's {np.dtype(dtype).name} {name} column holds")
    elif arr.size and arr.dtype.kind == "f":  # a float cast past the range is undefined
        info = np.iinfo(dtype)
        bad = np.flatnonzero(~((arr >= float(info.min)) & (arr < float(info.max) + 1.0)))
        if bad.size:
            raise ScheduleError(f"{name} = {float(arr.reshape(-1)[bad[0]])!r}: beyond the "
                                f"{info.min}..{info.max} a schedule's "
                                f"{np.dtype(dtype).name} {name} column holds")
    return np.ascontiguousarray(arr, dtype=dtype)


def piece_edges(schedule: Schedule, orig: np.ndarray):
    """(dep_ptr, dep_idx, joined) of ``schedule`` grown by one node per entry of ``orig`` (node
    ids n .. n+c-1, piece i copying node ``orig[i]``), then by one *join* per split node that
    has children (ids n+c .., ``joined``: the node each join stands for; its columns:
    ``join_columns``). A node split into pieces (faults or planes: netcore/flow/fault_split.py,
    netcore/packet/plane_split.py) has ended when the node and every piece of it have: its join
    waits for all of them. Every piece waits for its original's parents, and where a parent was
    split, a child and each piece of the child wait for the parent's join. So every piece of a
    child waits for every piece of its parent (a piece once waited for the parent's original
    only, and started before the parent had ended), at |pieces| edges per split parent, not
    their product."""
    from topo.routing import spans

    n, c = schedule.n, len(orig)
    orig = np.asarray(orig, dtype=np.int64)
    n_par = np.diff(schedule.dep_ptr)
    n_kids = np.bincount(schedule.dep_idx, minlength=n)
    was_split = np.zeros(n, dtype=bool)
    was_split[orig] = True
    joined = np.flatnonzero(was_split & (n_kids > 0))
    join_of = np.arange(n, dtype=np.int64)  # whom a child of each node waits for
    join_of[joined] = n + c + np.arange(len(joined))
    # the original edges and the pieces' copies of their originals' edges, each parent
    # replaced by its join where it has one
    child = np.repeat(np.arange(n), n_par)
    piece_id = n + np.arange(c)
    deg = n_par[orig]
    pc = np.repeat(piece_id, deg)
    pp = schedule.dep_idx[spans(schedule.dep_ptr[orig], deg)]
    # a join waits for its node and the node's pieces
    jpos = np.full(n, -1, dtype=np.int64)
    jpos[joined] = np.arange(len(joined))
    of_piece = jpos[orig] >= 0
    jc = np.concatenate([n + c + np.arange(len(joined)), join_of[orig[of_piece]]])
    jp = np.concatenate([joined, piece_id[of_piece]])
    ch = np.concatenate([child, pc, jc])
    pa = np.concatenate([join_of[schedule.dep_idx], join_of[pp], jp])
    o = np.lexsort((pa, ch))
    ch, pa = ch[o], pa[o]
    m = n + c + len(joined)
    dep_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(ch, minlength=m), out=dep_ptr[1:])
    return dep_ptr, pa, joined


def with_pieces(schedule: Schedule, orig: np.ndarray, sets=None, **columns):
    """``schedule`` with a piece of node ``orig[i]`` appended for every i, then a join per split
    node that has children (``piece_edges`` gives the edges): ``(schedule, origin)``, origin
    the original node of every node. A piece copies its original's columns except those given
    in ``columns`` (name -> values for the n nodes and then the pieces, e.g. the bytes each
    keeps); a join is a zero-length DELAY on no rank with its node's tag, label and extra.
    ``sets``: the member sets of the result (the schedule's by default)."""
    dep_ptr, dep_idx, joined = piece_edges(schedule, orig)
    k = len(joined)
    join = {"kind": np.full(k, DELAY, dtype=np.int8), "src": np.full(k, -1, dtype=np.int64),
            "dst": np.full(k, -1, dtype=np.int64), "size": np.zeros(k, dtype=np.int64),
            "duration": np.zeros(k), "start": np.zeros(k), "tag": schedule.tag[joined],
            "label": schedule.label[joined], "mset": np.full(k, -1, dtype=schedule.mset.dtype),
            "steps": np.ones(k, dtype=schedule.steps.dtype),
            "conn": np.full(k, -1, dtype=np.int64)}

    def column(name):
        a = getattr(schedule, name)
        head = columns[name] if name in columns else np.concatenate([a, a[orig]])
        return np.concatenate([head, join[name]])

    out = Schedule(**{name: column(name) for name in join}, dep_ptr=dep_ptr, dep_idx=dep_idx,
                   labels=list(schedule.labels),
                   extra={key: np.concatenate([v, v[orig], np.asarray(v)[joined]])
                          for key, v in schedule.extra.items()},
                   meta=dict(schedule.meta), sets=schedule.sets if sets is None else sets)
    return out, np.concatenate([np.arange(schedule.n), orig, joined])

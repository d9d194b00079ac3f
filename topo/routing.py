"""Per-flow path selection shared by the flow and packet engines.

``Routing(topology, policy, seed).paths(src, dst, flow_id, alive)`` returns the links every flow
uses as one flat CSR (:class:`Paths`), never one Python object per flow. Everything per flow or
per hop runs in the compiled kernels of ``topo/_routing.pyx``; this module validates input,
groups flows by destination, caches distance rows and stitches results together.

Distances are hop counts to a destination from a reverse BFS over the alive directed links.
Hosts never transit traffic unless ``topology.hosts_forward`` (a GPU on a switched fabric does
not forward; on a torus the hosts are the routers). Policies (docs/routing.md has the detail):

* ``shortest``: one deterministic shortest path (lowest-id neighbour one hop closer).
* ``ecmp``: per hop, among the neighbours one hop closer (by id), index
  ``hash(seed, flow_id, node) mod count`` (splitmix64 mixing: same on every run and platform).
* ``dmodk``: per hop, index ``dst mod count`` (the ns-3 validation installs it).
* ``dmodk_level``: level-wise D-mod-k: the i-th hop with a choice takes digit i of ``dst`` in
  the mixed radix of the walk's candidate counts (``dst mod c1``, then ``dst // c1 mod c2``,
  ...), which on a k-ary fat-tree is Zahavi's rule and spreads destinations over every core.
* ``dor``: tori only; dimension 0 first, shorter way round each ring (tie: + direction). A flow
  whose DOR path crosses a link that is down falls back to ``shortest`` over the alive links.
* ``spray``: the flow is split over all shortest paths; a link's weight is the fraction of the
  shortest src->dst paths that cross it (path counting on the shortest-path DAG).
* ``valiant``: via an intermediate picked by ``hash(seed, flow_id)``: a switch on switched
  fabrics, a host on switchless ones whose hosts forward (tori); ecmp within each half. If a
  half is cut by faults (or no node may be an intermediate) the flow takes its direct ecmp path.
* ``adaptive``: at flow level the same weights as ``spray``; the packet engine makes the real
  per-hop least-loaded choice itself from :meth:`Routing.distances`.

Plane striping (``fullflat`` with ``planes >= 2``): a single-path policy (``shortest``,
``ecmp``, ``dmodk``, ``dmodk_level``, ``valiant``) routes every flow once in each plane, the
policy's own choice over that plane's links only (valiant: an intermediate among that plane's
switches), and splits it evenly over the planes that reach the destination: weight 1/k on each
of the k per-plane paths, listed plane after plane, each in hop order. This is how NCCL drives
one NIC per plane (channels) and how NVLink-style fabrics stripe a transfer; one plane per
connection would give a GPU talking to one peer 1/planes of its bandwidth. A plane cut for a
pair by faults drops out and its share moves to the surviving planes. ``latency`` is the mean
over the used planes (path-weighted, as for spray), ``hops`` the longest used plane path.
``stripe=False`` routes the fabric as one graph instead (:meth:`Routing.unstriped`). The packet engine, whose
connections send along one path, uses :meth:`Routing.plane_paths` for one connection per plane
(netcore/packet/plane_split.py).
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from topo import _routing as _k
from topo.errors import InputError
from topo.arrays import unique

POLICIES = ("shortest", "ecmp", "dmodk", "dmodk_level", "dor", "spray", "valiant", "adaptive")
# single-path policies that a multi-plane fabric stripes over its planes (module docstring)
STRIPED = ("shortest", "ecmp", "dmodk", "dmodk_level", "valiant")
# the single-path policies the routing kernel walks itself, by their kernel codes
_KERNEL_MODES = {"shortest": _k.SHORTEST, "ecmp": _k.ECMP, "dmodk": _k.DMODK,
                 "dmodk_level": _k.DMODK_LEVEL}
# Distance rows kept per Routing object (all alive masks together). 512 MiB holds the full
# table of a fat_tree(k=32) (8,192 destinations x 9,472 nodes x 4 bytes = 310 MB).
DEFAULT_CACHE_BYTES = 512 << 20
_U64 = (1 << 64) - 1
_VALIANT_SALT = -1  # the hash's "node" slot for the Valiant draw: no node has this id


class RoutingError(InputError):
    """Bad routing input (unknown policy, dor on a non-torus, node out of range, ...)."""


@dataclass(eq=False)
class Paths:
    """Links of n flows as CSR: flow i uses ``link[ptr[i]:ptr[i+1]]`` with ``weight[...]``.

    Single-path policies list links in hop order with weight 1.0; ``spray``/``adaptive`` list
    the shortest-path DAG level by level (the weights of each level sum to 1); a plane-striped
    flow (module docstring) lists its k per-plane paths one after another, weight 1/k each.
    Unreachable flows have ``reachable`` False, an empty range, ``hops`` -1 and ``latency`` 0.
    ``hops`` is the number of links a packet crosses (the shortest hop count for
    spray/adaptive); ``latency`` the propagation latency in seconds (path-count-weighted mean
    for spray/adaptive).
    """

    ptr: np.ndarray  # int64 (n+1,)
    link: np.ndarray  # int32 directed link ids
    weight: np.ndarray  # float64, fraction of the flow's rate on that link
    reachable: np.ndarray  # bool (n,)
    latency: np.ndarray  # float64 (n,) seconds
    hops: np.ndarray  # int32 (n,)
    # optional, for a flow standing for several paths (netcore/flow/member_routing.py): the
    # store-and-forward seconds per packet byte of its slowest member (hops after the first);
    # when set, engines use ``latency + packet * saf`` as the flow's tail
    saf: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.reachable)

    def links_of(self, i: int) -> np.ndarray:
        return self.link[self.ptr[i]:self.ptr[i + 1]]

    def take(self, idx) -> "Paths":
        """The flows ``idx`` (indices or bool mask), in that order, as a new Paths."""
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False)
        cnt = self.ptr[idx + 1] - self.ptr[idx]
        ptr = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(cnt, out=ptr[1:])
        pos = spans(self.ptr[idx], cnt)
        return Paths(ptr, self.link[pos], self.weight[pos], self.reachable[idx],
                     self.latency[idx], self.hops[idx],
                     None if self.saf is None else self.saf[idx])


def spans(starts, counts) -> np.ndarray:
    """The ranges ``[starts[i], starts[i] + counts[i])`` one after another, as one int64 array:
    the positions of chosen rows of a CSR (rows ``i`` of ``ptr`` are ``spans(ptr[i],
    ptr[i + 1] - ptr[i])``)."""
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return (np.repeat(np.asarray(starts, dtype=np.int64) - offsets, counts) +
            np.arange(int(counts.sum()), dtype=np.int64))


def _merge(n: int, parts) -> Paths:
    """Paths of n flows from parts ``(idx, Paths of those flows)`` covering every flow once."""
    cnt = np.zeros(n, dtype=np.int64)
    reachable = np.zeros(n, dtype=bool)
    latency = np.zeros(n, dtype=np.float64)
    hops = np.full(n, -1, dtype=np.int32)
    saf = None
    if any(p.saf is not None for _, p in parts):
        saf = np.full(n, np.nan)  # NaN: compute the tail from the path itself
    for idx, p in parts:
        cnt[idx] = np.diff(p.ptr)
        reachable[idx] = p.reachable
        latency[idx] = p.latency
        hops[idx] = p.hops
        if p.saf is not None:
            saf[idx] = p.saf
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cnt, out=ptr[1:])
    link = np.empty(ptr[-1], dtype=np.int32)
    weight = np.empty(ptr[-1], dtype=np.float64)
    for idx, p in parts:
        c = np.diff(p.ptr)
        pos = spans(ptr[idx], c)
        link[pos] = p.link
        weight[pos] = p.weight
    return Paths(ptr, link, weight, reachable, latency, hops, saf)


def _walk_buffers(hops: np.ndarray):
    """(ptr, link, latency) for single-path walks of the given hop counts (-1: unreachable)."""
    ptr = np.zeros(len(hops) + 1, dtype=np.int64)
    np.cumsum(np.maximum(hops, 0), out=ptr[1:])
    return ptr, np.empty(ptr[-1], dtype=np.int32), np.empty(len(hops), dtype=np.float64)


def _walked(stuck: int, ptr, link, lat, hops) -> Paths:
    if stuck:  # a bug, not bad input: the rows disagree with the graph
        raise RuntimeError(f"routing: {stuck} walks found no next hop")
    return Paths(ptr, link, np.ones(len(link)), hops >= 0, lat, hops)


class _Table:
    """Distance rows for one alive mask: ``rows[row_of[d]]`` is the row of destination d."""

    __slots__ = ("row_of", "rows", "count")

    def __init__(self, n_nodes: int):
        self.row_of = np.full(n_nodes, -1, dtype=np.int64)
        self.rows = np.empty((0, n_nodes), dtype=np.int32)
        self.count = 0


class Routing:
    # Single-path walks to hosts memoise a node's next hops per anchor of the destination at
    # nodes of this many neighbours or more (a shorter scan costs about a lookup), up to this
    # many link positions per call (32 MB); past it they scan (topo/_routing.pyx, walk_anchored)
    memo_degree = 256
    memo_entries = 1 << 22

    def __init__(self, topology, policy="ecmp", seed=0, *, cache_bytes=DEFAULT_CACHE_BYTES,
                 stripe=True):
        if policy not in POLICIES:
            raise RoutingError(f"routing.policy = {policy!r}: expected one of {', '.join(POLICIES)}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise RoutingError(f"routing.seed = {seed!r}: expected an integer")
        if not isinstance(cache_bytes, (int, np.integer)) or cache_bytes < 0:
            raise RoutingError(f"routing.cache_bytes = {cache_bytes!r}: expected an integer >= 0")
        self.topology = topology
        self.policy = policy
        self.seed = int(seed)
        self._seed64 = int(seed) & _U64
        self.cache_bytes = int(cache_bytes)
        t = topology
        ptr, nbr, dl = t.adjacency
        self._ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        self._nbr = np.ascontiguousarray(nbr, dtype=np.int32)
        self._dl = np.ascontiguousarray(dl, dtype=np.int32)
        self._dlat = np.ascontiguousarray(t.dlink_lat, dtype=np.float64)
        self._n = t.n_nodes
        self._hosts_forward = bool(t.hosts_forward)
        self._ones = np.ones(t.n_dlinks, dtype=np.uint8)
        self._tables: OrderedDict = OrderedDict()
        self._host_on_switches = None  # per host: hangs on switches only (anchored routing)
        self._domain = None  # per host: scale-up switch and other switch (_inside_domain)
        self._scaleup_mask = None
        if policy == "dor":
            self._dor_setup()
        # plane striping (module docstring): one uint8 link mask per plane, None when off
        self._plane_masks = None
        self._unstriped = None
        if stripe and policy in STRIPED:
            from topo.builders.fullflat import dlink_planes

            planes = dlink_planes(topology)
            if planes is not None:
                self._plane_masks = [(planes == p).view(np.uint8)
                                     for p in range(int(planes.max()) + 1)]

    @property
    def striped(self) -> bool:
        """Whether :meth:`paths` splits every flow over the fabric's planes."""
        return self._plane_masks is not None

    def unstriped(self) -> "Routing":
        """This routing (same policy, seed and cache budget) without plane striping: one path
        per flow over the whole fabric (the policy's choice of plane). Self when not striped."""
        if not self.striped:
            return self
        if self._unstriped is None:
            self._unstriped = Routing(self.topology, self.policy, self.seed,
                                      cache_bytes=self.cache_bytes, stripe=False)
        return self._unstriped

    # ------------------------------------------------------------------ public API
    def paths(self, src, dst, flow_id=None, alive=None) -> Paths:
        src, dst, fid = self._flows(src, dst, flow_id)
        key, alive8 = self._alive(alive)
        if self._plane_masks is not None:
            return self._striped(src, dst, fid, key, alive8)
        inside = self._inside_domain(src, dst)
        if inside is not None:
            return self._scaleup_first(src, dst, fid, key, alive8, inside)
        return self._policy(src, dst, fid, key, alive8)

    # ------------------------------------------------------------------ scale-up domains
    def _inside_domain(self, src, dst) -> np.ndarray | None:
        """Flows between two hosts of one scale-up domain that the network joins in as few
        hops (bool per flow), or None when there are none.

        Two GPUs of a node talk over their scale-up switch (NCCL's P2P/NVLink transport); a
        NIC never carries that traffic. On ``two_tier`` with ``rails = false`` the node's GPUs
        also share their top-of-rack leaf, so GPU -> leaf -> GPU is a shortest path too
        (2 hops, as GPU -> NVSwitch -> GPU), and the hop-count policies sent about half of a
        node's pairs through two NIC links: an 8-GPU ring all-reduce of 1 GiB on one node
        reached 49.9 GB/s of bus bandwidth instead of 873.6 (ecmp; spray split every pair
        over both), a ring over 16,384 GPUs ran 27% slow. Such flows are routed over the
        scale-up links only (``_scaleup_first``). Where the scale-up path is the only shortest
        one (rails = true: the GPUs' leaves differ) nothing changes, so nothing is re-routed."""
        if self._domain is None:
            t = self.topology
            nh = t.n_hosts
            su = np.full(nh, -1, dtype=np.int64)  # the host's scale-up switch
            other = np.full(nh, -1, dtype=np.int64)  # its one other switch (-2: several)
            if "scaleup" in t.layer_names and not self._hosts_forward:
                lay = t.layer_names.index("scaleup")
                u, v = t.link_u.astype(np.int64), t.link_v.astype(np.int64)
                host_end = np.where(u < nh, u, v)
                sw_end = np.where(u < nh, v, u)
                ok = ((u < nh) ^ (v < nh))  # host-switch links
                up = ok & (t.link_layer == lay)
                su[host_end[up]] = sw_end[up]
                rest = ok & (t.link_layer != lay)
                h, sw = host_end[rest], sw_end[rest]
                counts = np.bincount(h, minlength=nh)
                other[h] = sw
                other[counts > 1] = -2
                self._scaleup_mask = np.repeat((t.link_layer == lay).view(np.uint8), 2)
            self._domain = (su, other) if (su >= 0).any() else ()
        if not self._domain:  # no scale-up layer
            return None
        su, other = self._domain
        nh = self.topology.n_hosts
        h = (src < nh) & (dst < nh) & (src != dst)
        s, d = np.where(h, src, 0), np.where(h, dst, 0)
        inside = h & (su[s] >= 0) & (su[s] == su[d]) & (other[s] >= 0) & (other[s] == other[d])
        return inside if inside.any() else None

    def scaleup_pairs(self, src, dst) -> np.ndarray | None:
        """Which (src, dst) pairs this routing keeps on their scale-up links although the
        network joins them in as few hops (bool per pair; None: no such pair). The packet
        engine's per-hop policies route every other pair per packet from ``distances``, whose
        rows cannot tell these pairs apart (the leaf is as close as the scale-up switch to a
        GPU of the node), so they give these their ``paths`` path."""
        return self._inside_domain(np.asarray(src, dtype=np.int64),
                                   np.asarray(dst, dtype=np.int64))

    def _scaleup_first(self, src, dst, fid, key, alive8, inside) -> Paths:
        """``inside`` flows over the scale-up links only (cached under a key of their own);
        one whose scale-up path is cut by faults takes the fabric's as before."""
        a = np.flatnonzero(inside)
        p = self._policy(src[a], dst[a], fid[a], (key, "scaleup"), alive8 & self._scaleup_mask)
        cut = ~p.reachable
        rest = np.flatnonzero(~inside)
        if cut.any():
            rest = np.sort(np.concatenate([rest, a[cut]]))
            a, p = a[~cut], p.take(np.flatnonzero(~cut))
        if not len(rest):
            return p
        return _merge(len(src), [(a, p), (rest, self._policy(src[rest], dst[rest], fid[rest],
                                                             key, alive8))])

    @property
    def planes(self) -> int:
        """How many planes :meth:`paths` stripes over (0 when it does not)."""
        return 0 if self._plane_masks is None else len(self._plane_masks)

    def plane_paths(self, src, dst, plane, flow_id=None, alive=None) -> Paths:
        """One path per flow inside plane ``plane`` only (a striped routing's share of that
        plane, weight 1.0): the packet engine's per-plane connections. Unreachable where the
        plane is cut for the pair (or an end is a switch of another plane)."""
        if not 0 <= plane < self.planes:
            raise RoutingError(f"plane = {plane!r}: this routing stripes over {self.planes} "
                               f"planes")
        src, dst, fid = self._flows(src, dst, flow_id)
        key, alive8 = self._alive(alive)
        return self._in_plane(src, dst, fid, key, alive8, plane)

    def _in_plane(self, src, dst, fid, key, alive8, plane) -> Paths:
        # the alive mask cut to the plane's links (hosts do not forward, so no path leaves
        # the plane); the plane's distance rows are cached under a key of their own
        return self._policy(src, dst, fid, (key, plane), alive8 & self._plane_masks[plane],
                            plane=plane)

    def _flows(self, src, dst, flow_id):
        src = self._nodes(src, "src")
        dst = self._nodes(dst, "dst")
        if len(src) != len(dst):
            raise RoutingError(f"dst has {len(dst)} entries, expected {len(src)} (one per src)")
        if flow_id is None:
            fid = np.arange(len(src), dtype=np.int64)
        else:
            fid = np.atleast_1d(np.asarray(flow_id))
            if fid.ndim != 1 or len(fid) != len(src) or not np.issubdtype(fid.dtype, np.integer):
                raise RoutingError(f"flow_id: expected {len(src)} integers (one per flow), got "
                                   f"shape {fid.shape} of {fid.dtype}")
            fid = np.ascontiguousarray(fid, dtype=np.int64)
        return src, dst, fid

    def _policy(self, src, dst, fid, key, alive8, plane=None) -> Paths:
        p = self.policy
        if p in _KERNEL_MODES:
            return self._single(src, dst, fid, key, alive8, _KERNEL_MODES[p])
        if p in ("spray", "adaptive"):
            return self._spray(src, dst, key, alive8)
        if p == "dor":
            return self._dor(src, dst, fid, key, alive8)
        return self._valiant(src, dst, fid, key, alive8, plane)

    def _striped(self, src, dst, fid, key, alive8) -> Paths:
        """Every flow routed in each plane and split evenly over the planes that reach its
        destination."""
        per = [self._in_plane(src, dst, fid, key, alive8, p) for p in range(self.planes)]
        reach = np.stack([q.reachable for q in per])  # (planes, flows)
        cnt = np.stack([np.diff(q.ptr) for q in per]) * reach  # a cut plane adds no links
        k = reach.sum(axis=0)
        n = len(src)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(cnt.sum(axis=0), out=ptr[1:])
        start = ptr[:-1] + np.cumsum(cnt, axis=0) - cnt  # plane p's first link, per flow
        link = np.empty(ptr[-1], dtype=np.int32)
        for p, q in enumerate(per):
            link[spans(start[p], cnt[p])] = q.link[spans(q.ptr[:-1], cnt[p])]
        share = 1.0 / np.maximum(k, 1)
        weight = np.repeat(share, np.diff(ptr))
        lat = np.where(reach, np.stack([q.latency for q in per]), 0.0).sum(axis=0) * share
        hops = np.where(reach, np.stack([q.hops for q in per]), -1).max(axis=0)
        return Paths(ptr, link, weight, k > 0, lat, hops.astype(np.int32))

    def distances(self, dsts, alive=None) -> np.ndarray:
        """int32 (len(dsts), n_nodes): hops from every node to each destination, -1 unreachable."""
        dsts = self._nodes(dsts, "dsts")
        key, alive8 = self._alive(alive)
        got = self._rows(unique(dsts), key, alive8)
        if got is None:  # more rows than the cache budget: compute straight into the answer
            out = np.empty((len(dsts), self._n), dtype=np.int32)
            self._bfs(dsts, alive8, out)
            return out
        rows, row_of = got
        return rows[row_of[dsts]]

    def prepare(self, dsts=None, alive=None) -> None:
        """Compute and cache the distance rows of ``dsts`` (default: every host), i.e. build
        the routing table ahead of the first :meth:`paths` call, without returning a copy."""
        dsts = self.topology.hosts if dsts is None else self._nodes(dsts, "dsts")
        key, alive8 = self._alive(alive)
        if self._rows(unique(dsts), key, alive8) is None:
            raise RoutingError(f"routing.cache_bytes = {self.cache_bytes}: too small for "
                               f"{len(unique(dsts))} rows of {self._n * 4} bytes")

    def cache_clear(self) -> None:
        self._tables.clear()

    @property
    def cache_nbytes(self) -> int:
        return sum(t.rows.nbytes for t in self._tables.values())

    # ------------------------------------------------------------------ input checks
    def _nodes(self, x, name) -> np.ndarray:
        a = np.atleast_1d(np.asarray(x))
        if a.ndim != 1:
            raise RoutingError(f"{name}: expected a 1-D array of node ids, got shape {a.shape}")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise RoutingError(f"{name}: expected integer node ids, got {a.dtype}")
        bad = np.flatnonzero((a < 0) | (a >= self._n))
        if bad.size:
            i = int(bad[0])
            raise RoutingError(f"{name}[{i}] = {int(a[i])}: no such node "
                               f"(nodes are 0..{self._n - 1})")
        return np.ascontiguousarray(a, dtype=np.int32)

    def _alive(self, alive):
        """(cache key, uint8 mask); all-up masks share the key None with ``alive=None``."""
        if alive is None:
            return None, self._ones
        a = np.asarray(alive)
        nd = self.topology.n_dlinks
        if a.shape != (nd,):
            raise RoutingError(f"alive: expected one flag per directed link, shape ({nd},), "
                               f"got {a.shape}")
        a = a.astype(bool, copy=False)
        if a.all():
            return None, self._ones
        key = hashlib.blake2b(np.packbits(a).tobytes(), digest_size=16).digest()
        return key, np.ascontiguousarray(a, dtype=np.uint8)

    # ------------------------------------------------------------------ distance rows
    def _bfs(self, dsts, alive8, out):
        _k.bfs_rows(self._ptr, self._nbr, self._dl, alive8, self.topology.n_hosts,
                    self._hosts_forward, np.ascontiguousarray(dsts, dtype=np.int32), out)

    def _rows(self, dsts, key, alive8):
        """Cached ``(rows, row_of)`` covering the unique ``dsts`` for this mask, computing the
        missing ones in one compiled call; None when they cannot fit the cache budget."""
        row_bytes = self._n * 4
        if len(dsts) * row_bytes > self.cache_bytes:
            return None
        table = self._tables.pop(key, None) or _Table(self._n)
        self._tables[key] = table  # most recently used last
        missing = dsts[table.row_of[dsts] < 0]
        need = table.count + len(missing)
        if need * row_bytes > self.cache_bytes:
            # this mask's table is too full for the request: start it again
            table = _Table(self._n)
            self._tables[key] = table
            missing, need = dsts, len(dsts)
        if missing.size:
            # evict least-recently-used masks until the grown table fits the budget
            while len(self._tables) > 1 and \
                    self.cache_nbytes - table.rows.nbytes + need * row_bytes > self.cache_bytes:
                self._tables.popitem(last=False)
            if need > table.rows.shape[0]:
                room = (self.cache_bytes - (self.cache_nbytes - table.rows.nbytes)) // row_bytes
                cap = int(min(room, max(need, 2 * table.rows.shape[0])))
                grown = np.empty((cap, self._n), dtype=np.int32)
                grown[:table.count] = table.rows[:table.count]
                table.rows = grown
            self._bfs(missing, alive8, table.rows[table.count:need])
            table.row_of[missing] = np.arange(table.count, need)
            table.count = need
        return table.rows, table.row_of

    def _by_destination(self, dst, key, alive8, fn) -> Paths:
        """``fn(idx, rows, row_of_flow)`` over groups of flows (idx None: all flows) whose
        destination rows fit the cache budget together; results merged in flow order."""
        uniq = unique(dst)
        got = self._rows(uniq, key, alive8)
        if got is not None:
            rows, row_of = got
            return fn(None, rows, np.ascontiguousarray(row_of[dst]))
        per_chunk = max(1, self.cache_bytes // (self._n * 4))
        order = np.argsort(dst, kind="stable")
        sdst = dst[order]
        parts = []
        for c in range(0, len(uniq), per_chunk):
            chunk = uniq[c:c + per_chunk]
            lo = np.searchsorted(sdst, chunk[0], "left")
            hi = np.searchsorted(sdst, chunk[-1], "right")
            idx = order[lo:hi]
            rows = np.empty((len(chunk), self._n), dtype=np.int32)
            self._bfs(chunk, alive8, rows)
            rof = np.searchsorted(chunk, dst[idx]).astype(np.int64)
            parts.append((idx, fn(idx, rows, rof)))
        return _merge(len(dst), parts)

    # ------------------------------------------------------------------ policies
    def _single(self, src, dst, fid, key, alive8, mode) -> Paths:
        anchored = self._anchored_flows(dst)
        if anchored.all():
            return self._single_anchored(src, dst, fid, key, alive8, mode)
        if anchored.any():
            rest = np.flatnonzero(~anchored)
            a = np.flatnonzero(anchored)
            return _merge(len(src), [
                (a, self._single_anchored(src[a], dst[a], fid[a], key, alive8, mode)),
                (rest, self._single(src[rest], dst[rest], fid[rest], key, alive8, mode))])
        return self._single_rows(src, dst, fid, key, alive8, mode)

    def _anchored_flows(self, dst) -> np.ndarray:
        """Flows whose destination is a host that hangs on switches only (and hosts do not
        forward): their distances come from the switches' rows (``walk_anchored``)."""
        if self._hosts_forward or not len(dst):
            return np.zeros(len(dst), bool)
        if self._host_on_switches is None:
            nh = self.topology.n_hosts
            deg = np.diff(self._ptr[:nh + 1])
            owner = np.repeat(np.arange(nh), deg)
            has_host_nbr = np.zeros(nh, bool)
            has_host_nbr[owner[self._nbr[:self._ptr[nh]] < nh]] = True
            self._host_on_switches = (deg > 0) & ~has_host_nbr
        ok = np.zeros(len(dst), bool)
        h = dst < self.topology.n_hosts
        ok[h] = self._host_on_switches[dst[h]]
        return ok

    def _single_anchored(self, src, dst, fid, key, alive8, mode) -> Paths:
        """Single-path walks to host destinations through their anchors' rows, in groups of
        destinations whose anchors' rows fit the cache budget together."""
        uniq = unique(dst)
        deg = self._ptr[uniq + 1] - self._ptr[uniq]
        pos = spans(self._ptr[uniq], deg)
        live = alive8[self._dl[pos] ^ 1].astype(bool)  # the anchor's link towards the host
        # (destination, anchor) pairs, each once (parallel links name an anchor twice), in
        # ascending anchor order per destination
        pair = np.unique(np.stack([np.repeat(np.arange(len(uniq)), deg)[live],
                                   self._nbr[pos][live].astype(np.int64)], axis=1), axis=0)
        a_of, anchor = pair[:, 0], pair[:, 1].astype(np.int32)
        row_bytes = self._n * 4
        per_chunk = max(1, self.cache_bytes // row_bytes)
        order = np.argsort(dst, kind="stable")
        sdst = dst[order]
        parts = []
        lo = 0
        while lo < len(uniq):
            # destinations lo..hi-1 whose anchors fit the budget (a destination's anchors at
            # least: a host with more anchors than the budget rows still goes alone)
            first = np.searchsorted(a_of, lo)
            hi_e = first + per_chunk
            hi = max(lo + 1, int(a_of[hi_e]) if hi_e < len(a_of) else len(uniq))
            e0, e1 = first, np.searchsorted(a_of, hi)
            anch_u, anch_inv = np.unique(anchor[e0:e1], return_inverse=True)
            got = self._rows(anch_u.astype(np.int32), key, alive8)
            if got is None:
                rows = np.empty((len(anch_u), self._n), dtype=np.int32)
                self._bfs(anch_u, alive8, rows)
                row_idx = np.arange(len(anch_u), dtype=np.int64)
            else:
                rows, row_of = got
                row_idx = row_of[anch_u]
            # per destination of the chunk, its anchors' row indices (CSR)
            d_ptr = np.zeros(hi - lo + 1, dtype=np.int64)
            np.cumsum(np.bincount(a_of[e0:e1] - lo, minlength=hi - lo), out=d_ptr[1:])
            d_row = row_idx[anch_inv]
            d_node = anchor[e0:e1]
            f0 = np.searchsorted(sdst, uniq[lo], "left")
            f1 = np.searchsorted(sdst, uniq[hi - 1], "right")
            idx = order[f0:f1]
            parts.append((idx, self._walk_anchored(src[idx], dst[idx], fid[idx], alive8, mode,
                                                   rows, d_ptr, d_row, d_node,
                                                   np.searchsorted(uniq[lo:hi], dst[idx]))))
            lo = hi
        return _merge(len(dst), parts)

    def _walk_anchored(self, s, d, f, alive8, mode, rows, d_ptr, d_row, d_node, d_of) -> Paths:
        s, d, f = (np.ascontiguousarray(a) for a in (s, d, f))
        cnt = d_ptr[d_of + 1] - d_ptr[d_of]
        aptr = np.zeros(len(s) + 1, dtype=np.int64)
        np.cumsum(cnt, out=aptr[1:])
        pos = spans(d_ptr[d_of], cnt)
        arow = np.ascontiguousarray(d_row[pos], dtype=np.int64)
        anode = np.ascontiguousarray(d_node[pos], dtype=np.int32)
        # hops: 1 + the nearest anchor's distance from the source (0 when s == d)
        hops = np.full(len(s), -1, dtype=np.int32)
        if arow.size:
            x = rows[arow, np.repeat(s, cnt)].astype(np.int64)
            x[x < 0] = np.iinfo(np.int64).max
            has = cnt > 0
            best = np.minimum.reduceat(x, aptr[:-1][has]) if has.any() else x[:0]
            h = np.where(best == np.iinfo(np.int64).max, -1, best + 1)
            hops[has] = h
        hops[s == d] = 0
        ptr, link, lat = _walk_buffers(hops)
        stuck = _k.walk_anchored(self._ptr, self._nbr, self._dl, alive8, self.topology.n_hosts,
                                 self._hosts_forward, self._dlat, rows, aptr, arow, anode, s, d,
                                 f, mode, self._seed64, ptr, link, lat, self.memo_degree,
                                 self.memo_entries)
        return _walked(stuck, ptr, link, lat, hops)

    def _single_rows(self, src, dst, fid, key, alive8, mode) -> Paths:
        def fn(idx, rows, rof):
            s, d, f = (src, dst, fid) if idx is None else (src[idx], dst[idx], fid[idx])
            s, d, f = (np.ascontiguousarray(a) for a in (s, d, f))
            # visit flows grouped by destination row: each row is then read from cache
            order = np.argsort(rof, kind="stable")
            hops = rows[rof, s]
            ptr, link, lat = _walk_buffers(hops)
            stuck = _k.walk_single(self._ptr, self._nbr, self._dl, alive8, self.topology.n_hosts,
                                   self._hosts_forward, self._dlat, rows, rof, s, d, f, mode,
                                   self._seed64, ptr, link, lat, order)
            return _walked(stuck, ptr, link, lat, hops)

        return self._by_destination(dst, key, alive8, fn)

    def _spray(self, src, dst, key, alive8) -> Paths:
        def fn(idx, rows, rof):
            s, d = (src, dst) if idx is None else (src[idx], dst[idx])
            s, d = np.ascontiguousarray(s), np.ascontiguousarray(d)
            hops = rows[rof, s]
            ptr = np.empty(len(s) + 1, dtype=np.int64)
            lat = np.empty(len(s), dtype=np.float64)
            link, weight = _k.spray_dag(self._ptr, self._nbr, self._dl, alive8,
                                        self.topology.n_hosts, self._hosts_forward, self._dlat,
                                        rows, rof, s, d, ptr, lat)
            return Paths(ptr, link, weight, hops >= 0, lat, hops)

        return self._by_destination(dst, key, alive8, fn)

    def _dor_setup(self):
        t = self.topology
        dims = t.params.get("dims") if t.coords is not None else None
        if dims is None:
            raise RoutingError(f"routing.policy = 'dor': dimension-order routing needs a torus "
                               f"(node coordinates and params['dims']); this fabric is "
                               f"{t.kind!r}")
        dims = np.asarray(dims, dtype=np.int32).ravel()
        coords = np.ascontiguousarray(t.coords, dtype=np.int32)
        if coords.shape != (self._n, len(dims)) or (coords < 0).any() or (coords >= dims).any():
            raise RoutingError(f"routing.policy = 'dor': coordinates of shape {coords.shape} do "
                               f"not fit dims {tuple(int(x) for x in dims)}")
        stride = np.ones(len(dims), dtype=np.int64)
        for k in range(len(dims) - 2, -1, -1):
            stride[k] = stride[k + 1] * dims[k + 1]
        cell = coords.astype(np.int64) @ stride
        node_of_cell = np.full(int(np.prod(dims.astype(np.int64))), -1, dtype=np.int32)
        node_of_cell[cell] = np.arange(self._n, dtype=np.int32)
        if (node_of_cell < 0).any():
            raise RoutingError(f"routing.policy = 'dor': the {self._n} nodes do not fill a torus "
                               f"of dims {tuple(int(x) for x in dims)}")
        self._dims, self._coords, self._stride, self._node_of_cell = dims, coords, stride, node_of_cell

    def _dor(self, src, dst, fid, key, alive8) -> Paths:
        n = len(src)
        dims = self._dims.astype(np.int64)
        delta = (self._coords[dst].astype(np.int64) - self._coords[src]) % dims
        hops = np.minimum(delta, dims - delta).sum(axis=1).astype(np.int32)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(hops, out=ptr[1:])
        link = np.empty(ptr[-1], dtype=np.int32)
        lat = np.empty(n, dtype=np.float64)
        broken = np.zeros(n, dtype=np.uint8)
        _k.walk_dor(self._ptr, self._nbr, self._dl, alive8, self._dlat, self._coords,
                    self._dims, self._stride, self._node_of_cell, src, dst, ptr, link, lat,
                    broken)
        p = Paths(ptr, link, np.ones(len(link)), np.ones(n, dtype=bool), lat, hops)
        if not broken.any():
            return p
        # DOR path crosses a dead link: shortest path over the alive links instead
        bad = broken.view(bool)
        idx = np.flatnonzero(bad)
        alt = self._single(src[idx], dst[idx], fid[idx], key, alive8, _k.SHORTEST)
        good = np.flatnonzero(~bad)
        return _merge(n, [(good, p.take(good)), (idx, alt)])

    def _valiant(self, src, dst, fid, key, alive8, plane=None) -> Paths:
        t = self.topology
        if plane is not None:  # striped: an intermediate among this plane's switches
            count = t.n_switches // len(self._plane_masks)
            lo = t.n_hosts + plane * count
        elif t.n_switches > 0:
            lo, count = t.n_hosts, t.n_switches
        elif t.hosts_forward:
            lo, count = 0, t.n_hosts
        else:  # hosts only and none may forward: no intermediate is allowed
            return self._single(src, dst, fid, key, alive8, _k.ECMP)
        h = _k.hash3(self._seed64, fid, np.full(len(fid), _VALIANT_SALT, dtype=np.int64))
        mid = (lo + (h % np.uint64(count)).astype(np.int64)).astype(np.int32)
        a = self._single(src, mid, fid, key, alive8, _k.ECMP)
        b = self._single(mid, dst, fid, key, alive8, _k.ECMP)
        ca, cb = np.diff(a.ptr), np.diff(b.ptr)
        ptr = np.zeros(len(src) + 1, dtype=np.int64)
        np.cumsum(ca + cb, out=ptr[1:])
        link = np.empty(ptr[-1], dtype=np.int32)
        link[np.repeat(ptr[:-1] - a.ptr[:-1], ca) + np.arange(len(a.link))] = a.link
        link[np.repeat(ptr[:-1] + ca - b.ptr[:-1], cb) + np.arange(len(b.link))] = b.link
        ok = a.reachable & b.reachable & (src != dst)
        p = Paths(ptr, link, np.ones(len(link)), ok, a.latency + b.latency,
                  (a.hops + b.hops).astype(np.int32))
        if ok.all():
            return p
        # a half cut by faults (or src == dst): the direct ecmp path, if there is one
        idx = np.flatnonzero(~ok)
        direct = self._single(src[idx], dst[idx], fid[idx], key, alive8, _k.ECMP)
        good = np.flatnonzero(ok)
        return _merge(len(src), [(good, p.take(good)), (idx, direct)])

"""The one fabric type every layer shares.

Conventions (all builders follow them, engines rely on them):

* Node ids ``0 .. n_hosts-1`` are hosts (GPUs/NICs), ``n_hosts .. n_nodes-1`` are switches.
* A *physical* link ``i`` joins ``link_u[i]`` and ``link_v[i]`` and is full duplex: it is the two
  *directed* links ``2*i`` (u->v) and ``2*i+1`` (v->u), each with the full bandwidth.
  Engines, routing and results work on directed link ids.
* Bandwidth is bytes/s per direction (float64), latency is seconds (float64).
* ``link_layer`` names the tier a link climbs into (``"edge"`` for host-to-first-switch,
  ``"aggregation"``, ``"core"``, ``"scaleup"``, ``"global"``, ...), used by fault sampling.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

HOST = 0
SWITCH = 1


from topo.errors import InputError
from topo.arrays import unique


class TopologyError(InputError):
    """A fabric description that cannot be built; the message names the field and value."""


@dataclass(eq=False)
class Topology:
    kind: str
    n_hosts: int
    n_switches: int
    link_u: np.ndarray  # int32 (L,)
    link_v: np.ndarray  # int32 (L,)
    link_bw: np.ndarray  # float64 (L,) bytes/s per direction
    link_lat: np.ndarray  # float64 (L,) seconds
    link_layer: np.ndarray  # int8 (L,) index into layer_names
    layer_names: tuple = ("edge",)
    # per-host group id (scale-up domain / leaf / torus-less: 0); collectives use it for ordering
    host_group: np.ndarray | None = None
    # optional coordinates of every node (torus), shape (n_nodes, ndim)
    coords: np.ndarray | None = None
    # builder parameters plus textbook figures (e.g. "bisection_Bps") the builder knows exactly
    params: dict = field(default_factory=dict)
    # may traffic transit through a host? True on a torus (hosts are the routers), False on
    # switched fabrics (a GPU does not forward). None: True exactly when there are no switches.
    hosts_forward: bool | None = None
    # per node, the rate at which a switch reduces data in the network (bytes/s of result;
    # 0: it does not). None: no switch reduces. Set from ``reduce_gbps`` (topo/innet.py)
    reduce_bw: np.ndarray | None = None

    def __post_init__(self):
        n = self.n_hosts + self.n_switches
        self.link_u = _narrow(self.link_u, np.int32, "links[{i}]: node {v}", n)
        self.link_v = _narrow(self.link_v, np.int32, "links[{i}]: node {v}", n)
        self.link_bw = np.ascontiguousarray(self.link_bw, dtype=np.float64)
        self.link_lat = np.ascontiguousarray(self.link_lat, dtype=np.float64)
        self.link_layer = _narrow(self.link_layer, np.int8, "links[{i}]: layer {v}")
        L = len(self.link_u)
        for name in ("link_v", "link_bw", "link_lat", "link_layer"):
            if len(getattr(self, name)) != L:
                raise TopologyError(f"{name} has {len(getattr(self, name))} entries, expected {L}")
        if self.hosts_forward is None:
            self.hosts_forward = self.n_switches == 0
        if not isinstance(self.hosts_forward, (bool, np.bool_)):
            # a truthy string ("no") or number made the hosts relay traffic
            raise TopologyError(f"hosts_forward = {self.hosts_forward!r}: expected true, false "
                                f"or none")
        self.hosts_forward = bool(self.hosts_forward)
        if self.host_group is None:
            self.host_group = np.zeros(self.n_hosts, dtype=np.int32)
        self.host_group = _narrow(self.host_group, np.int32, "host_group[{i}] = {v}")
        if self.host_group.shape != (self.n_hosts,):
            raise TopologyError(f"host_group has shape {self.host_group.shape}, expected "
                                f"({self.n_hosts},): one group per host")
        if self.coords is not None:
            self.coords = _narrow(self.coords, np.int32, "coords (flat)[{i}] = {v}")
            if self.coords.ndim != 2 or self.coords.shape[0] != self.n_nodes:
                raise TopologyError(f"coords has shape {self.coords.shape}, expected "
                                    f"({self.n_nodes}, dimensions): one row per node")
        if isinstance(self.layer_names, str) or \
                not all(isinstance(x, str) for x in self.layer_names):
            raise TopologyError(f"layer_names = {self.layer_names!r}: expected a list of names")
        self.layer_names = tuple(self.layer_names)
        bad = np.flatnonzero((self.link_layer < 0) | (self.link_layer >= len(self.layer_names)))
        if bad.size:
            i = int(bad[0])
            raise TopologyError(f"links[{i}]: layer {int(self.link_layer[i])} does not exist "
                                f"(layers are 0..{len(self.layer_names) - 1}: "
                                f"{', '.join(self.layer_names)})")
        if self.reduce_bw is not None:
            self.reduce_bw = np.ascontiguousarray(self.reduce_bw, dtype=np.float64)
            if self.reduce_bw.shape != (self.n_nodes,):
                raise TopologyError(f"reduce_bw has shape {self.reduce_bw.shape}, expected "
                                    f"({self.n_nodes},): one rate per node")
        self._check()

    # ------------------------------------------------------------------ checks
    def _check(self):
        n = self.n_nodes
        if self.n_hosts < 1:
            raise TopologyError(f"hosts = {self.n_hosts}: a fabric needs at least one host")
        if self.n_switches < 0:
            raise TopologyError(f"switches = {self.n_switches} must be >= 0")
        for name, arr in (("link_u", self.link_u), ("link_v", self.link_v)):
            bad = np.flatnonzero((arr < 0) | (arr >= n))
            if bad.size:
                i = int(bad[0])
                raise TopologyError(f"links[{i}]: node {int(arr[i])} does not exist "
                                    f"(nodes are 0..{n - 1})")
        loops = np.flatnonzero(self.link_u == self.link_v)
        if loops.size:
            i = int(loops[0])
            raise TopologyError(f"links[{i}]: a link from node {int(self.link_u[i])} to itself")
        bad = np.flatnonzero(~(self.link_bw > 0) | ~np.isfinite(self.link_bw))
        if bad.size:
            i = int(bad[0])
            raise TopologyError(f"links[{i}]: bandwidth {self.link_bw[i] * 8 / 1e9:g} Gbps: "
                                f"must be a finite number > 0 (bytes/s in floating point)")
        bad = np.flatnonzero(~(self.link_lat >= 0) | ~np.isfinite(self.link_lat))
        if bad.size:
            i = int(bad[0])
            raise TopologyError(f"links[{i}]: latency {self.link_lat[i] * 1e6:g} us: must be a "
                                f"finite number >= 0")
        a = np.minimum(self.link_u, self.link_v).astype(np.int64)
        b = np.maximum(self.link_u, self.link_v).astype(np.int64)
        key = a * n + b
        uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        if (counts > 1).any():
            j = int(np.flatnonzero(counts > 1)[0])
            dup = np.flatnonzero(key == uniq[j])
            raise TopologyError(f"links[{int(dup[1])}]: duplicate link between nodes "
                                f"{int(a[dup[1]])} and {int(b[dup[1]])} (merge them into one "
                                f"link with the summed bandwidth)")
        if self.n_hosts > 1 or self.n_switches > 0:
            comp = self.components()
            if len(unique(comp)) > 1:
                lone = int(np.flatnonzero(comp != comp[0])[0])
                raise TopologyError(f"the fabric is disconnected: node {lone} cannot reach node 0")

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        return self.n_hosts + self.n_switches

    @property
    def n_links(self) -> int:
        """Physical (full-duplex) links."""
        return len(self.link_u)

    @property
    def n_dlinks(self) -> int:
        """Directed links (two per physical link)."""
        return 2 * len(self.link_u)

    # ------------------------------------------------------------------ directed view
    @cached_property
    def dlink_src(self) -> np.ndarray:
        out = np.empty(self.n_dlinks, dtype=np.int32)
        out[0::2] = self.link_u
        out[1::2] = self.link_v
        return out

    @cached_property
    def dlink_dst(self) -> np.ndarray:
        out = np.empty(self.n_dlinks, dtype=np.int32)
        out[0::2] = self.link_v
        out[1::2] = self.link_u
        return out

    @cached_property
    def dlink_bw(self) -> np.ndarray:
        return np.repeat(self.link_bw, 2)

    @cached_property
    def dlink_lat(self) -> np.ndarray:
        return np.repeat(self.link_lat, 2)

    @cached_property
    def adjacency(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR of out-going directed links per node, sorted by neighbour id.

        Returns ``(ptr, nbr, dlink)``: the neighbours of node u are ``nbr[ptr[u]:ptr[u+1]]``
        (ascending), reached over directed links ``dlink[ptr[u]:ptr[u+1]]``.
        """
        src, dst = self.dlink_src, self.dlink_dst
        order = np.lexsort((dst, src))
        ptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
        np.add.at(ptr, src.astype(np.int64) + 1, 1)
        np.cumsum(ptr, out=ptr)
        return ptr, np.ascontiguousarray(dst[order]), order.astype(np.int32)

    def dlink_id(self, u: int, v: int) -> int:
        """Directed link id of u->v, or -1 when there is no such link."""
        ptr, nbr, dl = self.adjacency
        lo, hi = int(ptr[u]), int(ptr[u + 1])
        j = lo + int(np.searchsorted(nbr[lo:hi], v))
        if j < hi and nbr[j] == v:
            return int(dl[j])
        return -1

    def dlink_ids(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`dlink_id` (-1 where absent)."""
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        n = self.n_nodes
        key = self.dlink_src.astype(np.int64) * n + self.dlink_dst
        order = np.argsort(key, kind="stable")
        skey = key[order]
        q = u * n + v
        pos = np.searchsorted(skey, q)
        pos = np.minimum(pos, len(skey) - 1)
        found = skey[pos] == q
        return np.where(found, order[pos], -1).astype(np.int64)

    # ------------------------------------------------------------------ kinds
    @cached_property
    def node_kind(self) -> np.ndarray:
        k = np.full(self.n_nodes, SWITCH, dtype=np.int8)
        k[: self.n_hosts] = HOST
        return k

    def is_host(self, node: int) -> bool:
        return 0 <= node < self.n_hosts

    @property
    def hosts(self) -> np.ndarray:
        return np.arange(self.n_hosts, dtype=np.int32)

    def layer_id(self, name: str) -> int:
        try:
            return self.layer_names.index(name)
        except ValueError:
            raise TopologyError(f"layer = {name!r}: this {self.kind} fabric has layers "
                                f"{', '.join(self.layer_names)}") from None

    # ------------------------------------------------------------------ graph view
    @cached_property
    def graph(self):
        """A networkx Graph for inspection (not used by the engines)."""
        import networkx as nx

        g = nx.Graph(kind=self.kind, **{k: v for k, v in self.params.items()
                                         if isinstance(v, (int, float, str, bool))})
        for i in range(self.n_nodes):
            g.add_node(i, kind="host" if i < self.n_hosts else "switch")
        for i in range(self.n_links):
            g.add_edge(int(self.link_u[i]), int(self.link_v[i]), bw=float(self.link_bw[i]),
                       latency=float(self.link_lat[i]),
                       layer=self.layer_names[int(self.link_layer[i])], index=i)
        return g

    def components(self) -> np.ndarray:
        """Connected-component label of every node (union-find over links, vectorised enough)."""
        parent = np.arange(self.n_nodes, dtype=np.int64)

        def find(x):
            root = x
            while parent[root] != root:
                root = parent[root]
            while parent[x] != root:
                parent[x], x = root, parent[x]
            return root

        for u, v in zip(self.link_u.tolist(), self.link_v.tolist()):
            ru, rv = find(u), find(v)
            if ru != rv:
                parent[max(ru, rv)] = min(ru, rv)
        return np.array([find(i) for i in range(self.n_nodes)], dtype=np.int64)

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict:
        """Counts and figures that `netcosim topo` prints."""
        from topo.metrics import bisection, diameter

        cut, cut_method = bisection(self)
        cut_gbps = cut / 1e9 * 8  # dividing first: 1e308 B/s is finite, 8e308 b/s is not
        if math.isinf(cut) and np.isfinite(self.link_bw).all():
            # rates near the top of the accepted range (1e299 Gb/s) overflow a float in
            # bytes/s once summed, where their sum in Gb/s does not: cut the fabric with its
            # rates scaled down by a power of two (exact) and scale the figure in Gb/s back
            params = {k: v for k, v in self.params.items() if k != "bisection_Bps"}
            small = dataclasses.replace(self, link_bw=self.link_bw * 2.0 ** -64, params=params)
            cut_small, cut_method = bisection(small)
            cut_gbps = cut_small / 1e9 * 8 * 2.0 ** 64
        hops, hops_method = diameter(self)
        return {
            "kind": self.kind,
            "hosts": self.n_hosts,
            "switches": self.n_switches,
            "links": self.n_links,
            "bisection_Gbps": cut_gbps,
            "bisection_method": cut_method,
            "diameter_hops": hops,
            "diameter_method": hops_method,
            "host_link_Gbps": sorted({round(float(b) * 8 / 1e9, 6) for b in
                                      self.link_bw[(self.link_u < self.n_hosts) |
                                                   (self.link_v < self.n_hosts)]}),
        }

    def __repr__(self):
        return (f"Topology({self.kind}, hosts={self.n_hosts}, switches={self.n_switches}, "
                f"links={self.n_links})")


def gbps(x: float) -> float:
    """Gbit/s -> bytes/s."""
    return float(x) * 1e9 / 8.0


def us(x: float) -> float:
    """microseconds -> seconds."""
    return float(x) * 1e-6


def _narrow(a, dtype, what: str, n: int | None = None) -> np.ndarray:
    """``a`` as a contiguous ``dtype`` array; TopologyError naming the entry when a value is
    not a whole number or does not fit (a cast alone wraps or truncates silently: a link to
    node 4294967297 of a 3-node fabric became a link to node 1, node 1.5 became node 1).
    ``what`` is the message head, with ``{i}`` and ``{v}``; ``n``: node ids are 0..n-1."""
    arr = np.asarray(a)
    if arr.size and arr.dtype != dtype and arr.dtype.kind in "iuf":
        flat = arr.reshape(-1)
        info = np.iinfo(dtype)
        if arr.dtype.kind == "f":
            bad = ~np.isfinite(flat) | (flat != np.floor(flat)) | (flat < info.min) | \
                (flat > info.max)
        else:
            bad = (flat < info.min) | (flat > info.max)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            v = flat[i].item()
            if isinstance(v, float) and np.isfinite(v) and v == np.floor(v) and abs(v) < 2**63:
                v = int(v)
            head = what.format(i=i, v=v)
            if isinstance(v, float) and not (np.isfinite(v) and v == np.floor(v)):
                raise TopologyError(f"{head}: expected a whole number")
            if n is not None:
                raise TopologyError(f"{head} does not exist (nodes are 0..{n - 1})")
            raise TopologyError(f"{head}: beyond the {info.min}..{info.max} of its "
                                f"{np.dtype(dtype).name} column")
    return np.ascontiguousarray(arr, dtype=dtype)

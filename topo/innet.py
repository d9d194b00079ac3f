"""In-network reduction: which switches reduce, at what rate, and the aggregation trees of
NVLS (inside a scale-up switch) and SHARP (through the scale-out switch tiers).

The fabric parameter is ``reduce_gbps`` on the ``[topology]`` table (any kind with switches):

* absent (default): no switch reduces; ``nvls`` and ``sharp`` are refused, naming this field;
* ``"line"`` (or ``true``): every switch reduces at its line rate (the fastest of its links);
* a number of Gb/s: every switch reduces at that rate; ``0`` / ``false``: none;
* a table per switch layer, e.g. ``{scaleup = "line"}`` or ``{edge = 400, aggregation = 400}``:
  the switches of the named layers (a switch's layer is the layer of the links that climb into
  it from the hosts' side, see ``switch_layers``), the others do not reduce.

The rate is the reduced output a switch produces per second (bytes of result, whatever the
number of inputs), stored per node as ``Topology.reduce_bw`` (bytes/s, 0: does not reduce).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topo.errors import InputError
from topo.arrays import unique

FIELD = "topology.reduce_gbps"


class NoReduction(InputError):
    """No switch reduces where an in-network algorithm needs one. The message names the fix
    as a scenario's [topology] key; ``for_cli`` names it as the key=value of a command-line
    fabric spec (netcosim collective --topo), which the user writes differently."""

    def __init__(self, msg: str, why: str | None = None, layer: str | None = None):
        # msg first and the rest optional, as PacketLimit: an exception pickled to or from a
        # worker process is rebuilt from its message alone
        super().__init__(msg)
        self.why, self.layer = why, layer

    def for_cli(self, option: str, spec: str) -> str:
        if self.why is None:
            return str(self)
        return (f"{option} = {spec!r}: {self.why}; add reduce_gbps=line (line rate), "
                f"reduce_gbps=<Gb/s>, or layer:rate pairs such as "
                f"reduce_gbps={self.layer or 'scaleup'}:line to {option}")


# --------------------------------------------------------------------------- switch layers
def host_distance(topology) -> np.ndarray:
    """Hops from the nearest host to every node (multi-source BFS, vectorised per level)."""
    t = topology
    dist = np.full(t.n_nodes, -1, dtype=np.int64)
    dist[:t.n_hosts] = 0
    src, dst = t.dlink_src.astype(np.int64), t.dlink_dst.astype(np.int64)
    level = 0
    frontier = np.zeros(t.n_nodes, bool)
    frontier[:t.n_hosts] = True
    while frontier.any():
        nxt = np.zeros(t.n_nodes, bool)
        hit = frontier[src] & (dist[dst] < 0)
        nxt[dst[hit]] = True
        level += 1
        dist[nxt] = level
        frontier = nxt
    return dist


def switch_layers(topology) -> np.ndarray:
    """Per node, the layer id of the links that climb into it (from a node nearer to the
    hosts); -1 for hosts. two_tier: node switches "scaleup", leaves "edge", spines "spine";
    fat_tree: "edge", "aggregation", "core". Cached on the topology."""
    t = topology
    got = t.__dict__.get("_switch_layers")
    if got is not None:
        return got
    t.__dict__["_switch_layers"] = out = _switch_layers(t)
    return out


def _switch_layers(t) -> np.ndarray:
    d = host_distance(t)
    out = np.full(t.n_nodes, -1, dtype=np.int64)
    u, v = t.link_u.astype(np.int64), t.link_v.astype(np.int64)
    lay = t.link_layer.astype(np.int64)
    for a, b in ((u, v), (v, u)):
        up = (d[a] < d[b]) & (b >= t.n_hosts)
        out[b[up]] = np.maximum(out[b[up]], lay[up])
    sw = np.arange(t.n_hosts, t.n_nodes)
    lone = sw[out[sw] < 0]  # a switch with no link from below (same distance only)
    if lone.size:
        for a, b in ((u, v), (v, u)):
            m = np.isin(b, lone)
            out[b[m]] = np.maximum(out[b[m]], lay[m])
    return out


def line_rate(topology) -> np.ndarray:
    """Per node, the fastest of its links (bytes/s)."""
    t = topology
    return _max_by(t.dlink_src, t.dlink_bw, t.n_nodes)


def _max_by(idx, w, n):
    out = np.zeros(n)
    np.maximum.at(out, np.asarray(idx, dtype=np.int64), np.asarray(w, dtype=np.float64))
    return out


# --------------------------------------------------------------------------- the parameter
def _number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{where} = {text!r}: expected \"line\" or a rate in Gb/s") from None


def _rate(value, where: str):
    """'line' -> None (line rate), a number of Gb/s -> bytes/s, 0/false -> 0.0."""
    if value is True or (isinstance(value, str) and value == "line"):
        return None
    if value is False:
        return 0.0
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                     np.floating)):
        raise InputError(f"{where} = {value!r}: expected \"line\", a rate in Gb/s (>= 0) or "
                         f"a table {{layer = rate}}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise InputError(f"{where} = {value!r}: expected a finite rate in Gb/s >= 0")
    if x == 0:
        return 0.0
    from topo.builders._check import as_gbps  # a reducing switch: a link's range of rates

    return as_gbps(x, where)


def apply_reduce(topology, spec, where: str = FIELD):
    """Set ``topology.reduce_bw`` from a ``reduce_gbps`` value (see the module); returns it."""
    t = topology
    if spec is None:
        return t
    sw = np.arange(t.n_hosts, t.n_nodes)
    if not len(sw):
        raise InputError(f"{where} = {spec!r}: this {t.kind} fabric has no switches to reduce in")
    lay = switch_layers(t)
    line = line_rate(t)
    bw = np.zeros(t.n_nodes)
    if isinstance(spec, str) and ":" in spec:  # the CLI's form: "scaleup:line/edge:400"
        try:
            spec = dict(tuple(x.split(":", 1)) for x in spec.split("/"))
        except ValueError:
            raise InputError(f"{where} = {spec!r}: expected layer:rate pairs joined by '/', "
                             f"e.g. \"scaleup:line/edge:400\"") from None
        spec = {k: (v if v == "line" else _number(v, f"{where}.{k}")) for k, v in spec.items()}
    if isinstance(spec, dict):
        names = [t.layer_names[i] for i in sorted(set(lay[sw].tolist())) if i >= 0]
        for key, val in spec.items():
            if key not in names:
                raise InputError(f"{where}.{key}: not a switch layer of this {t.kind} fabric "
                                 f"(switch layers: {', '.join(names)})")
            r = _rate(val, f"{where}.{key}")
            at = sw[lay[sw] == t.layer_names.index(key)]
            bw[at] = line[at] if r is None else r
    else:
        r = _rate(spec, where)
        bw[sw] = line[sw] if r is None else r
    t.reduce_bw = bw
    return t


def describe(topology) -> str:
    """Which switch layers reduce, for messages."""
    t = topology
    bw = getattr(t, "reduce_bw", None)
    if bw is None or not (bw > 0).any():
        return "no switch reduces"
    lay = switch_layers(t)
    names = sorted({t.layer_names[int(lay[i])] for i in np.flatnonzero(bw > 0)})
    return "switches of layer(s) " + ", ".join(names) + " reduce"


# --------------------------------------------------------------------------- trees
@dataclass
class Tree:
    """One aggregation tree over the ranks. ``switches``: switch node ids, parents before
    children (root first); ``parent[j]``: index of switch j's parent (-1: root);
    ``rank_switch[r]``: index of the switch rank r hangs on; ``rate[j]``: bytes/s."""
    switches: np.ndarray
    parent: np.ndarray
    rank_switch: np.ndarray
    rate: np.ndarray

    def key(self) -> tuple:
        """Shape of the tree with switches renumbered (equal keys: the same template)."""
        return (tuple(self.parent.tolist()), tuple(self.rank_switch.tolist()),
                tuple(float(x) for x in self.rate))


def _neighbours(topology, hosts, allowed: np.ndarray) -> list[np.ndarray]:
    """Per host, its switch neighbours where ``allowed`` (ascending ids)."""
    ptr, nbr, _ = topology.adjacency
    out = []
    for h in hosts.tolist():
        nb = nbr[ptr[h]:ptr[h + 1]].astype(np.int64)
        out.append(unique(nb[(nb >= topology.n_hosts) & allowed[nb]]))
    return out


def trees(topology, hosts, algorithm: str) -> list[Tree]:
    """The aggregation trees of ``algorithm`` ("nvls" or "sharp") over ``hosts`` (rank
    order); one per plane when every host hangs on several such switches (data is split
    evenly over them). InputError, naming the field, where the fabric cannot do it."""
    t = topology
    hosts = np.asarray(hosts, dtype=np.int64)
    if (hosts >= t.n_hosts).any() or (hosts < 0).any():
        raise InputError(f"ranks: host {int(hosts.max())} does not exist (hosts are "
                         f"0..{t.n_hosts - 1})")
    su = ("scaleup" in t.layer_names)
    lay = switch_layers(t)
    su_id = t.layer_names.index("scaleup") if su else -2
    is_su = lay == su_id
    is_sw = np.arange(t.n_nodes) >= t.n_hosts
    bw = getattr(t, "reduce_bw", None)
    if algorithm == "nvls":
        if not (is_sw & is_su).any():
            raise InputError(f"algorithm = 'nvls': needs a scale-up switch (a 'scaleup' switch "
                             f"layer, as two_tier's node switches); this {t.kind} fabric has "
                             f"none (use 'sharp' for scale-out switches)")
        scope = is_sw & is_su
    else:
        scope = is_sw & ~is_su
        if not scope.any():
            raise InputError(f"algorithm = 'sharp': needs scale-out switches; this {t.kind} "
                             f"fabric has none")
    if bw is None or not (bw[scope] > 0).any():
        what = "scale-up" if algorithm == "nvls" else "scale-out"
        why = (f"algorithm = {algorithm!r} reduces in the {what} switches, and in this "
               f"{t.kind} fabric none does ({describe(t)})")
        layer = t.layer_names[int(lay[np.flatnonzero(scope)[0]])]
        raise NoReduction(f"{FIELD}: {why}; set {FIELD} = \"line\" (line rate), a rate in "
                          f"Gb/s, or a table per switch layer", why=why, layer=layer)
    nb = _neighbours(t, hosts, scope)
    planes = min(len(x) for x in nb)
    if planes == 0:
        h = int(hosts[[len(x) == 0 for x in nb].index(True)])
        raise InputError(f"algorithm = {algorithm!r}: host {h} has no "
                         f"{'scale-up' if algorithm == 'nvls' else 'scale-out'} switch")
    out = []
    for p in range(planes):
        first = np.array([x[p] for x in nb], dtype=np.int64)
        if algorithm == "nvls":
            u = unique(first)
            if len(u) > 1:
                a = int(hosts[np.flatnonzero(first == u[0])[0]])
                b = int(hosts[np.flatnonzero(first == u[1])[0]])
                raise InputError(f"algorithm = 'nvls': the ranks span {len(u)} scale-up "
                                 f"switches (host {a} on switch {int(u[0])}, host {b} on "
                                 f"{int(u[1])}); NVLS reduces inside one scale-up switch: use "
                                 f"the ranks of one scale-up domain, or 'sharp' / "
                                 f"'hierarchical' across domains")
            if not bw[u[0]] > 0:
                raise InputError(f"{FIELD}: scale-up switch {int(u[0])} does not reduce "
                                 f"({describe(t)})")
            out.append(Tree(u, np.array([-1]), np.zeros(len(hosts), np.int64),
                            np.array([bw[u[0]]])))
        else:
            out.append(_sharp_tree(t, hosts, first, scope & (bw > 0)))
    return out


def _sharp_tree(t, hosts, leaf_of, capable) -> Tree:
    leaves = unique(leaf_of)
    bad = leaves[~capable[leaves]]
    bw = t.reduce_bw
    if bad.size:
        raise InputError(f"{FIELD}: switch {int(bad[0])} (the first switch of host "
                         f"{int(hosts[np.flatnonzero(leaf_of == bad[0])[0]])}) does not "
                         f"reduce ({describe(t)})")
    if len(leaves) == 1:
        return Tree(leaves, np.array([-1]), np.zeros(len(hosts), np.int64),
                    np.array([bw[leaves[0]]]))
    # the graph of reducing switches; root: least eccentricity over the leaves (ties: lowest
    # id), i.e. the lowest common tier (a pod's aggregation switch, else a core switch).
    # Distances come from the routing's compiled BFS over the links between reducing switches.
    from topo import _routing

    sw = np.flatnonzero(capable)
    ptr, nbr, dl = (np.ascontiguousarray(x) for x in t.adjacency)
    ptr = ptr.astype(np.int64)
    nbr = nbr.astype(np.int32)
    dl = dl.astype(np.int32)
    alive = (capable[t.dlink_src] & capable[t.dlink_dst]).astype(np.uint8)

    def rows(dsts):
        out = np.empty((len(dsts), t.n_nodes), dtype=np.int32)
        _routing.bfs_rows(ptr, nbr, dl, alive, t.n_hosts, False,
                          np.ascontiguousarray(dsts, dtype=np.int32), out)
        return out

    ecc = np.zeros(len(sw))
    for c in range(0, len(leaves), 256):  # bounded memory: a block of leaves at a time
        d = rows(leaves[c:c + 256])[:, sw].astype(float)
        d[d < 0] = np.inf
        ecc = np.maximum(ecc, d.max(axis=0))
    if not np.isfinite(ecc).any():
        raise InputError(f"{FIELD}: no tree of reducing switches joins the ranks' "
                         f"{len(leaves)} first switches ({describe(t)})")
    root = int(sw[np.flatnonzero(ecc == ecc.min())[0]])
    dist = rows([root])[0]
    # predecessor of every reducing switch: its lowest-id neighbour one hop nearer the root
    pred = np.full(t.n_nodes, -1, dtype=np.int64)
    for x in sw[dist[sw] > 0].tolist():
        js = np.arange(ptr[x], ptr[x + 1])
        w = nbr[js]
        ok = alive[dl[js]].astype(bool) & (dist[w] == dist[x] - 1)
        if ok.any():
            pred[x] = int(w[ok].min())
    # the union of the leaves' paths to the root, parents first (by distance, then id)
    keep = np.zeros(t.n_nodes, bool)
    for leaf in leaves.tolist():
        x = leaf
        while x >= 0 and not keep[x]:
            keep[x] = True
            x = int(pred[x]) if x != root else -1
    kept = np.flatnonzero(keep)
    nodes = kept[np.lexsort((kept, dist[kept]))]
    pos = np.full(t.n_nodes, -1, dtype=np.int64)
    pos[nodes] = np.arange(len(nodes))
    parent = np.where(nodes == root, -1, pos[np.maximum(pred[nodes], 0)])
    switches = nodes
    return Tree(switches, parent.astype(np.int64), pos[leaf_of], bw[switches])

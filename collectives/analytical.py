"""Alpha-beta estimates of every algorithm, for quick sweeps.

A *round* is a set of messages that go at once. Its time is the slowest message's
``alpha + bytes / rate + step_latency``, where alpha is the propagation latency of the
message's routed path and rate is the smallest of: the path's bottleneck link bandwidth,
the sender's injection bandwidth shared by its messages in that round, and the receiver's
ejection bandwidth shared likewise; and no shorter than the round's busiest link (the bytes
the round's messages put on it over its bandwidth, plus the shortest path latency). Messages
are routed as the engines route a collective's transfers: one path per (src, dst) connection
(``netcore.schedule.connection_keys`` as the ECMP hash key), so the estimate sees the same
ECMP collisions, and a host's several links (a GPU's NVLink and NIC, a torus node's ports)
one by one. Rounds are priced one at a time: traffic of *other* rounds in flight at once is
not seen.

Every algorithm is described by the rounds it performs, in order, with the per-rank send
sequence of the schedule builders (C chunks go one after another on each connection).
Pipelined chains and trees take (depth + C - 1) rounds of one chunk.
"""
from __future__ import annotations

import math

import numpy as np

from netcore.sizes import MAX_BYTES
from collectives._trees import binomial_parent, binomial_reduce_depths
from topo.errors import InputError
from topo.arrays import union1d, unique


# A round whose destinations need more than EXACT_WORK of routing work (distinct destinations
# x fabric nodes: one BFS row each) takes its pair figures (latency, bottleneck) from the
# pairs whose destination is one of SAMPLE_DSTS fixed hosts (drawn once per fabric, seed 0),
# so the estimate costs O(ranks) at any size (a ring on the 524,288 hosts of fat_tree k=128
# would otherwise need a BFS row for each of its 8,192 edge switches per round). Pair
# The sample is half the first hosts of evenly spaced host groups (builders number hosts
# hierarchically, so these include every level's boundaries: the slowest messages of a ring
# or tree in fabric order), half random, plus evenly spaced messages of the round. The
# sampled time is the slowest sampled message: exact when the sample holds a message of the
# slowest kind (tested on fat-trees), a lower bound otherwise. The per-host load terms (a
# sender's and receiver's messages in the round) are always exact; the busiest-link term
# needs every message's path, so a sampled round goes without it (a lower bound again).
EXACT_WORK = 100_000_000
SAMPLE_DSTS = 128
# all-pairs rounds (direct, pairwise, all-to-all matrices) beyond this many pairs are refused
MAX_PAIRS = 50_000_000
_ALL_PAIRS = {("all_reduce", "direct"), ("reduce_scatter", "direct"),
              ("all_gather", "direct")}
# what the model prices round by round instead, per op of an all-pairs algorithm (algorithms
# every fabric takes: no in-network reduction, no torus dims); an all-to-all has none
_NOT_ALL_PAIRS = {"all_reduce": ("ring", "double_binary_tree"), "reduce_scatter": ("ring",),
                  "all_gather": ("ring",)}


class TooManyPairs(InputError):
    """The estimate of an all-pairs collective over more than MAX_PAIRS rank pairs. Its
    message names the algorithm as the library was given it; the scenario and `netcosim
    collective` name the field that asked for the estimate instead (the automatic choice of
    algorithm or protocol, the analytical engine), with what works there."""

    def __init__(self, op: str, algorithm: str, n: int):
        self.op, self.algorithm, self.n = op, algorithm, int(n)
        self.pairs = self.n * (self.n - 1)
        instead = [repr(a) for a in self.instead()]
        super().__init__(f"algorithm = {algorithm!r}: {self.fact()}; use fewer ranks" +
                         (f", or algorithm = {' or '.join(instead)}" if instead else ""))

    def fact(self) -> str:
        """'the all_to_all estimate over N ranks has P rank pairs, more than ...'."""
        return (f"the {self.op} estimate over {self.n:,} ranks has {self.pairs:,} rank pairs, "
                f"more than the analytical model takes ({MAX_PAIRS:,})")

    @property
    def all_to_all(self) -> bool:
        """An all-to-all: every algorithm of it is priced pair by pair."""
        return self.op in ("all_to_all", "all_to_all_v")

    def instead(self) -> tuple[str, ...]:
        """Algorithms of the same op the model prices without all pairs (none for an
        all-to-all)."""
        return () if self.all_to_all else _NOT_ALL_PAIRS.get(self.op, ())


class Fabric:
    """Pair latencies and bandwidths between hosts on their routed paths (default ``ecmp``,
    as the engines); the figures of a round's pairs are kept (a size sweep reuses them),
    sampled for large rounds."""

    def __init__(self, topology, routing="ecmp"):
        from topo.routing import Routing

        self.topology = topology
        self.routing = Routing(topology, routing) if isinstance(routing, str) else routing
        t = topology
        hosts = np.arange(t.n_hosts)
        bw = t.dlink_bw
        # a host's injection (ejection) bandwidth: all its outgoing (incoming) links
        self.inj = np.bincount(t.dlink_src, weights=bw, minlength=t.n_nodes)[hosts]
        self.ej = np.bincount(t.dlink_dst, weights=bw, minlength=t.n_nodes)[hosts]
        # a host's links by kind, for a sampled round's host-link term (host_links): its
        # scale-up links (a two_tier GPU's NVLink) carry the messages to its own scale-up
        # domain and only those (topo/routing.py routes a domain's pairs over its switch),
        # its other links (the NICs) all the rest. None: no scale-up layer, one kind.
        self._domain = None
        names = list(getattr(t, "layer_names", ()) or ())
        if "scaleup" in names and not t.hosts_forward:
            up = np.repeat(t.link_layer == names.index("scaleup"), 2)
            s, d = t.dlink_src.astype(np.int64), t.dlink_dst.astype(np.int64)
            su = np.full(t.n_hosts, -1, dtype=np.int64)  # the host's scale-up switch
            m = up & (s < t.n_hosts) & (d >= t.n_hosts)
            su[s[m]] = d[m]
            inj_up = np.bincount(s[up], weights=bw[up], minlength=t.n_nodes)[hosts]
            ej_up = np.bincount(d[up], weights=bw[up], minlength=t.n_nodes)[hosts]
            self._domain = (su, inj_up, ej_up)
        self.sampled = False  # some round's figures came from a sample
        self._memo = {}
        self._in_sample = None

    @classmethod
    def cached(cls, topology, routing="ecmp") -> "Fabric":
        """One Fabric per topology object and routing policy name (its pair figures kept)."""
        store = topology.__dict__.setdefault("_analytical_fabrics", {})
        if routing not in store:
            store[routing] = cls(topology, routing)
        return store[routing]

    def figures(self, src, dst):
        """(idx, latency, bottleneck, links): figures of the pairs ``idx`` of the round (None:
        all); ``links`` (exact rounds only, else None): what the round's busiest-link load
        needs, a ``RoundLinks``."""
        import hashlib

        key = hashlib.blake2b(src.tobytes() + b"|" + dst.tobytes(), digest_size=16).digest()
        got = self._memo.get(key)
        if got is not None:
            return got
        idx = None
        if len(src) > SAMPLE_DSTS and \
                len(unique(dst)) * self.topology.n_nodes > EXACT_WORK:
            if self._in_sample is None:
                # half: the first hosts of evenly spaced host groups (builders number hosts
                # hierarchically, so these sit on every level's boundaries), half at random
                nh = self.topology.n_hosts
                g = np.asarray(self.topology.host_group)
                first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
                k = min(SAMPLE_DSTS // 2, len(first))
                step = 1 << max(0, (len(first) // max(k, 1)).bit_length() - 1)  # power of 2
                pick = first[::step][:k]
                rnd = np.random.default_rng(0).choice(nh, min(SAMPLE_DSTS - k, nh),
                                                      replace=False)
                self._in_sample = np.zeros(nh, bool)
                self._in_sample[pick] = True
                self._in_sample[rnd] = True
            idx = np.flatnonzero(self._in_sample[dst])[:SAMPLE_DSTS * 64]
            # and evenly spaced messages of the round itself
            idx = union1d(idx, np.linspace(0, len(src) - 1, SAMPLE_DSTS).astype(np.int64))
            self.sampled = True
        s_, d_ = (src, dst) if idx is None else (src[idx], dst[idx])
        p = self.route(s_, d_)
        lat, bott = self._pair_figures(p, s_, d_)
        links = RoundLinks(p, self.topology.n_dlinks) if idx is None else None
        if len(self._memo) > 512:
            self._memo.clear()
        self._memo[key] = (idx, lat, bott, links)
        return idx, lat, bott, links

    def route(self, src, dst):
        """Paths of messages src[i] -> dst[i], each keyed by its connection as the engines key
        a collective's transfers (same ECMP choice as the simulation)."""
        from netcore.schedule import connection_keys

        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        return self.routing.paths(src, dst, flow_id=connection_keys(src, dst))

    def pairs(self, src, dst):
        """(latency, bottleneck bandwidth) of each message src[i] -> dst[i]."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        return self._pair_figures(self.route(src, dst), src, dst)

    def host_links(self, src, dst, b) -> float:
        """Seconds the busiest host link takes to carry its bytes of the round (messages
        src[i] -> dst[i] of b[i] bytes): every host's sent and received bytes on each kind of
        its links (scale-up links for the messages inside its scale-up domain, the others for
        the rest) over those links' bandwidth. It needs no routing (a host forwards nothing,
        so its links carry its own messages only), so a sampled round keeps it where the
        busiest-link term needs every message's path: without it, two tree messages on one
        GPU's NIC were priced at the GPU's NVLink and NIC bandwidth together (a double binary
        tree over 2,048 two_tier nodes 21 % below the flow engine)."""
        nh = len(self.inj)
        if self._domain is None:
            kind = np.zeros(len(src), dtype=np.int64)
            caps = ((self.inj, self.inj), (self.ej, self.ej))
        else:
            su, inj_up, ej_up = self._domain
            kind = ((su[src] >= 0) & (su[src] == su[dst])).astype(np.int64)
            caps = ((self.inj - inj_up, inj_up), (self.ej - ej_up, ej_up))
        out = 0.0
        for host, (net, up) in zip((src, dst), caps):
            load = np.bincount(host * 2 + kind, weights=b, minlength=2 * nh)
            cap = np.stack([net, up], axis=1).reshape(-1)
            used = load > 0
            out = max(out, float(np.max(load[used] / cap[used], initial=0.0)))
        return out

    def _pair_figures(self, p, src, dst):
        if not np.all(p.reachable):
            i = int(np.flatnonzero(~p.reachable)[0])
            raise InputError(f"ranks: host {int(src[i])} cannot reach host {int(dst[i])}")
        # a link carrying the fraction w of a flow (spray, adaptive) lets it run at bw / w
        bw = self.topology.dlink_bw[p.link] / p.weight
        lens = np.diff(p.ptr)
        bott = np.full(len(src), np.inf)
        nz = lens > 0
        if nz.any():
            bott[nz] = np.minimum.reduceat(bw, p.ptr[:-1][nz])
        return np.asarray(p.latency, dtype=np.float64), bott


class RoundLinks:
    """A round's load on the directed links it uses per byte of each message: the sum of its
    messages' path weights, kept sparse (a small round on a big fabric keeps a few entries)
    for every size of a sweep. Messages of unequal bytes (all-to-all-v) route the round again
    rather than keep its paths in the memo."""

    def __init__(self, p, n_dlinks: int):
        unit = np.bincount(p.link, weights=p.weight, minlength=n_dlinks)
        self.used = np.flatnonzero(unit)
        self.unit = unit[self.used]

    def load(self, fab: "Fabric", src, dst, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(links, bytes on each) when message i carries b[i]."""
        if np.all(b == b[0]):
            return self.used, self.unit * b[0]
        p = fab.route(src, dst)
        per = np.bincount(p.link, weights=np.repeat(b, np.diff(p.ptr)) * p.weight,
                          minlength=fab.topology.n_dlinks)
        return self.used, per[self.used]


def _shared(host, b, n_hosts: int) -> np.ndarray:
    """Bytes a host's link carries by the time message i ends when the host's messages share
    it fairly (processor sharing): sum over its messages j of min(b_j, b_i). Equal messages:
    their count x b; a large message among small ones (an all-to-all-v row, a gather beside
    on-node pieces) runs alone once the small ones are done, not at its share throughout."""
    if np.all(b == b[0]):
        return b * np.bincount(host, minlength=n_hosts)[host]
    order = np.lexsort((b, host))
    h, v = host[order], b[order]
    first = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
    size = np.diff(np.r_[first, h.size])
    before = np.cumsum(v) - v  # bytes of the host's smaller messages, sorted before i
    before -= np.repeat(before[first], size)
    out = np.empty_like(v)
    out[order] = before + v * (np.repeat(first + size, size) - np.arange(h.size))
    return out


def round_parts(fab: Fabric, src, dst, nbytes) -> float:
    """One round without step latency: messages src[i] -> dst[i] of nbytes[i] (host ids) at
    the same time; the slowest message's path latency + bytes / rate, and no less than the
    busiest link's load (the bytes the round puts on it over its bandwidth) + the shortest
    path latency, where a host with several links (a GPU's NVLink and NIC, a torus node's
    ports) shares one of them between messages, or ECMP puts two connections on one link."""
    src = np.asarray(src, dtype=np.int64).reshape(-1)
    dst = np.asarray(dst, dtype=np.int64).reshape(-1)
    if not src.size:
        return 0.0
    b = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)
    idx, lat, bott, links = fab.figures(src, dst)
    # every pair's load terms (exact); latency and bottleneck for the pairs the fabric holds
    load = np.maximum(_shared(src, b, len(fab.inj)) / fab.inj[src],
                      _shared(dst, b, len(fab.ej)) / fab.ej[dst])
    if idx is not None:
        # a sampled round: no path for most messages, so no busiest-link term; the hosts'
        # own links (no routing needed) stand for it, each kind (scale-up, network) with its
        # own messages, which is the busiest-link term wherever a host link is the busiest
        # (a GPU's NIC shared by tree messages: Fabric.host_links)
        t = float(np.max(np.maximum(lat + b[idx] / bott, lat + load[idx])))
        busiest = max(float(np.max(load)), fab.host_links(src, dst, b))
        return max(t, busiest + float(np.min(lat)))
    t = float(np.max(np.maximum(lat + b / bott, lat + load)))
    used, per = links.load(fab, src, dst, b)
    if used.size:
        busiest = float(np.max(per / fab.topology.dlink_bw[used]))
        t = max(t, busiest + float(np.min(lat)))
    return t


def round_time(fab: Fabric, src, dst, nbytes, step_latency_s=0.0) -> float:
    """One round: messages src[i] -> dst[i] of nbytes[i] (host ids) at the same time."""
    if not np.asarray(src).size:
        return 0.0
    return round_parts(fab, src, dst, nbytes) + step_latency_s


def _serial(rounds, C: int) -> float:
    """Rounds a sender runs one after another, each of C chunks sent back to back (rings,
    all-pairs, halving-doubling: collectives/_ring.py's send order). ``rounds``: (t, L) per
    round for one chunk (t: latency + bytes / rate; L: its step latency, which follows the
    data). The first round pays L + C t; a later one waits for its first chunk's data and the
    step latency, or for the sender's previous chunks, whichever is later."""
    total = 0.0
    for k, (t, L) in enumerate(rounds):
        total += L + C * t if k == 0 else max(C * t, t + L)
    return total


def _pipeline(stages, C: int, beat: float | None = None) -> float:
    """Chunks flowing through stages (chains, trees): the first chunk crosses every stage and
    pays its step latency (fill); each further chunk adds the slowest stage (the beat)."""
    fill = sum(t + L for t, L in stages)
    if beat is None:
        beat = max((t for t, _ in stages), default=0.0)
    return fill + (C - 1) * beat


def estimate(topology, op, algorithm, ranks, nbytes, chunks=None, step_latency_s=None,
             routing="ecmp", fabric: Fabric | None = None, protocol=None,
             **options) -> float:
    """Seconds ``op`` with ``algorithm`` takes on ``topology`` by the alpha-beta model.

    ``chunks`` None: NCCL's count, the builders' default (collectives.protocols
    .default_chunks) without their bound on a schedule's transfers (_default_chunks);
    ``protocol``: its wire bytes, per-step latencies (inside / across scale-up domains) and
    launch latency, as the builders apply them; ``step_latency_s``: a fixed per-step latency
    instead of the protocol's."""
    import collectives as co
    from collectives import protocols
    from collectives._plan import (check_chunks, check_latency, check_ranks,
                                   check_root)

    op, algorithm = co.resolve(op, algorithm)
    ranks = check_ranks(ranks)
    if ranks.max() >= topology.n_hosts:
        raise InputError(f"ranks: host {int(ranks.max())} does not exist (hosts are "
                         f"0..{topology.n_hosts - 1})")
    n = len(ranks)
    if ((op, algorithm) in _ALL_PAIRS or op in ("all_to_all", "all_to_all_v")) and \
            n * (n - 1) > MAX_PAIRS:
        raise TooManyPairs(op, algorithm, n)
    proto = protocols.check_for(algorithm, protocol)
    if proto == protocols.AUTO:
        raise InputError("protocol = 'auto': estimate one protocol at a time "
                         "(collectives.protocols.best picks the fastest)")
    costs = protocols.costs(proto, check_latency(step_latency_s, allow_none=True), topology,
                            algorithm)
    wire = 1.0 if costs.num == costs.den else costs.den / costs.num
    fab = fabric or Fabric.cached(topology, routing)

    def R2(s, d, b):
        """(t, L) of a round over rank indices s -> d of b payload bytes each."""
        hs, hd = ranks[np.asarray(s)].reshape(-1), ranks[np.asarray(d)].reshape(-1)
        if not hs.size:
            return 0.0, 0.0
        t = round_parts(fab, hs, hd, np.asarray(b, dtype=np.float64) * wire)
        if cap > 0:
            t = max(t, float(np.max(b)) / cap)
        L = float(np.max(costs.latency(hs, hd))) if costs.any_latency else 0.0
        return t, L

    def R1(s, d, b):
        """Sum over the messages s -> d of b payload bytes of each one's time alone (path
        latency + bytes / its bottleneck, and its step latency): the fill of a chain, whose
        hops a chunk crosses one after another. A sampled round scales its sample's mean."""
        hs, hd = ranks[np.asarray(s)].reshape(-1), ranks[np.asarray(d)].reshape(-1)
        if not hs.size:
            return 0.0
        idx, lat, bott, _ = fab.figures(hs, hd)
        b = np.broadcast_to(np.asarray(b, dtype=np.float64), hs.shape)
        bi = b if idx is None else b[idx]
        t = lat + bi * wire / bott
        if cap > 0:
            t = np.maximum(t, bi / cap)
        if costs.any_latency:
            L = np.broadcast_to(np.asarray(costs.latency(hs, hd), dtype=np.float64), hs.shape)
            t = t + (L if idx is None else L[idx])
        return float(np.sum(t)) if idx is None else float(np.mean(t)) * len(hs)

    if op == "all_to_all_v":
        from collectives.all_to_all import _check_matrix

        M_int = _check_matrix(nbytes, n)  # the schedule builders' own check
        M = M_int.astype(np.float64)
        S = float(M.sum(axis=1).max())
        nb = int(S)
    else:
        nb = int(co._plan.check_nbytes(nbytes))  # exact: float(2**63 - 1) is 2**63
        S = float(nb)
        M = None
    if op == "send_recv":  # the builder's check (out-of-range pairs were an IndexError)
        from collectives.p2p import _check_pairs

        options = dict(options, pairs=_check_pairs(options.get("pairs"), n))
    if algorithm in co.IN_NETWORK:
        from collectives import innet

        return innet.estimate(fab, op, algorithm, ranks, nb, chunks, step_latency_s,
                              options.get("trees"), proto)
    if algorithm == "nvls_tree":
        from collectives import nvls_tree

        return nvls_tree.estimate(fab, ranks, nb, chunks, step_latency_s,
                                  options.get("group_size"), proto, options.get("trees"))
    if algorithm == "ring" and op in ("all_reduce", "reduce_scatter", "all_gather",
                                      "broadcast", "reduce"):
        # one ring (or chain) per rail on whole two_tier nodes, as the builders lay them
        from collectives.rail import rail_chains, rail_rings

        if op in ("broadcast", "reduce"):
            root = check_root(options.get("root", 0), n)
            rails = rail_chains(topology, ranks, root, towards_root=op == "reduce")
        else:
            rails = rail_rings(topology, ranks)
        options = dict(options, rails=rails)
    if algorithm == "double_binary_tree" and op == "all_reduce":
        from collectives.all_reduce import tree_parents

        options = dict(options, tree_parents=tree_parents(topology, ranks))
    if algorithm in ("ring", "bidirectional_ring") and op in ("all_reduce", "reduce_scatter",
                                                             "all_gather") \
            and costs.any_latency and costs.fixed_step_s is None:
        # a ring's steps pay its connections' mean step latency, as the builders price them
        # (collectives._ring.ring_step_latency)
        rings = options.get("rails")
        if rings is None:
            rings = np.arange(n)[None, :]
        hs = ranks[rings]
        options = dict(options, ring_step_s=float(costs.mean_latency(
            hs.reshape(-1), np.roll(hs, -1, axis=1).reshape(-1))))
    # an LL transfer lasts at least its payload / its share of LL's cap: the rank's sends side
    # by side share it, as the builders share it (R2 and R1 read it when _rounds calls them)
    cap = costs.rate_cap(ranks, protocols.channels(algorithm, n, _lanes(algorithm, options), op))
    if chunks is None:
        C = _default_chunks(op, algorithm, nb, n, options, proto)
    elif op == "all_to_all_v":
        from collectives.all_to_all import check_chunks_v

        C = check_chunks_v(chunks, M_int)  # the builders' check
    else:  # the builders' check: every block of every chunk keeps a byte
        rings = _side_by_side(options)
        C = check_chunks(chunks, nb, rings * protocols.blocks_per_chunk(
            op, algorithm, n, options.get("group_size")), f"{algorithm} {op} over {n} ranks")
    return _rounds(op, algorithm, n, S, M, C, options, R2, R1) + costs.launch_s


def _default_chunks(op, algorithm, S, n, options, proto) -> int:
    """NCCL's chunk count: the builders' default (their block layout) without the bound on
    the schedule's transfers (protocols.MAX_DEFAULT_TRANSFERS). That bound holds the memory of
    a schedule the estimate never builds, and at scale it cut the pipelines to a few chunks
    whose fill NCCL does not pay: the rail trees over 16,384 GPUs (1 GiB) ran 4 chunks, 113
    GB/s of bus bandwidth, against NCCL's 128, 344 GB/s (docs/collectives.md, 'Protocols and
    chunks'). Below the bound (up to about 1,000 GPUs at 1 GiB) the two counts are equal."""
    from collectives import protocols

    return protocols.chunks_for(op, algorithm, S, n, proto, options.get("group_size"),
                                _side_by_side(options), bounded=False)


def _lanes(algorithm, options) -> int:
    """Rings, chains or trees a rank sends on side by side, as the builders lay them."""
    if options.get("tree_parents") is not None:
        return len(options["tree_parents"])
    if options.get("rails") is not None:
        return options["rails"].shape[0]
    return 2 if algorithm == "bidirectional_ring" else 1


def _side_by_side(options) -> int:
    """Rings (or chains) per rail, or double-binary-tree pairs, that each cut every chunk."""
    if options.get("tree_parents") is not None:
        return len(options["tree_parents"]) // 2
    rails = options.get("rails")
    return 1 if rails is None else rails.shape[0]


def _rounds(op, algorithm, n, S, M, C, options, R2, R1) -> float:
    """The algorithm's rounds, in the builders' send order (R2: (t, L) of one round; R1: the
    summed times of messages sent one after another)."""
    from collectives._plan import check_root, split
    from collectives.hierarchical import _check_groups

    i = np.arange(n)
    nxt = (i + 1) % n
    rails = options.get("rails")
    mean_L = options.get("ring_step_s") if C == 1 else None
    if mean_L is not None:
        # one chunk: a ring's steps each pay its connections' mean step latency (the builders')
        R2_own = R2

        def R2(s, d, b):  # noqa: F811
            return R2_own(s, d, b)[0], mean_L
    if algorithm == "ring" and rails is not None and op in ("all_reduce", "reduce_scatter",
                                                            "all_gather"):
        # one ring per rail (collectives/rail.py): every step, each ring moves its 1/g share
        g = rails.shape[0]
        i, nxt = rails.reshape(-1), np.roll(rails, -1, axis=1).reshape(-1)
        S = S / g
    if op == "all_reduce":
        if algorithm == "ring":
            return _serial([R2(i, nxt, S / n / C)] * (2 * (n - 1)), C)
        if algorithm == "bidirectional_ring":
            prv = (i - 1) % n
            return _serial([R2(np.r_[i, i], np.r_[nxt, prv], S / (2 * n) / C)] * (2 * (n - 1)),
                           C)
        if algorithm == "direct":
            a, b = np.nonzero(~np.eye(n, dtype=bool))
            return _serial([R2(a, b, S / n / C)] * 2, C)
        if algorithm == "recursive_halving_doubling":
            p = 1 << (n.bit_length() - 1)
            r = n - p
            v = np.arange(p)
            rank_of = np.where(v < r, 2 * v + 1, v + r)
            rounds = []
            if r:
                rounds.append(R2(2 * np.arange(r), 2 * np.arange(r) + 1, S / C))
            steps = [R2(rank_of, rank_of[v ^ (p >> (k + 1))], S * (p >> (k + 1)) / p / C)
                     for k in range(p.bit_length() - 1)]
            rounds += steps + steps[::-1]
            if r:
                rounds.append(R2(2 * np.arange(r) + 1, 2 * np.arange(r), S / C))
            return _serial(rounds, C)
        if algorithm == "double_binary_tree":
            from collectives._trees import depths, double_binary_trees, heights

            par = options.get("tree_parents")
            if par is None:
                par = double_binary_trees(n)
            T = len(par)
            dep = [depths(p) for p in par]
            hgt = [heights(p) for p in par]
            D = int(max(d.max() for d in dep))
            m = S / T / C
            # stage -> (senders, receivers) of every tree. Up: a node sends once its
            # children's sums arrived, so its send is stage height(node) (leaves at once,
            # whatever their depth: the trees of n not a power of two have leaves one level
            # apart, which staged by depth shared a parent's link with a sibling that had sent
            # a stage earlier, +12 % against the flow engine on 5 ranks); down: the root
            # sends first, a node's send is stage depth(child)
            edges = {}
            for t in range(T):
                y = np.flatnonzero(par[t] >= 0)
                for lvl in range(D):
                    at = y[hgt[t][y] == lvl]
                    edges.setdefault(("up", lvl), []).append((at, par[t][at]))
                for lvl in range(1, D + 1):
                    at = y[dep[t][y] == lvl]
                    edges.setdefault(("down", lvl), []).append((par[t][at], at))

            def rnd(parts):
                return R2(np.concatenate([a for a, _ in parts]),
                          np.concatenate([b for _, b in parts]), m)
            # fill and drain: one chunk crosses the stages one after another (up from the
            # leaves, then down from the roots) ...
            stages = [rnd(edges[("up", lvl)]) for lvl in range(D)]
            stages += [rnd(edges[("down", lvl)]) for lvl in range(1, D + 1)]
            # ... and every further chunk adds one steady-state round, where all tree edges
            # carry a chunk up and one down at once
            beat = rnd([e for v in edges.values() for e in v])[0] if C > 1 else 0.0
            return _pipeline(stages, C, beat)
        if algorithm == "hierarchical":
            g = _check_groups(n, options.get("group_size"))
            G = n // g
            grp = (i // g) * g + (i % g + 1) % g
            rail = (i + g) % n
            rounds = [R2(i, grp, S / g / C)] * (g - 1) if g > 1 else []
            rounds += [R2(i, rail, S / n / C)] * (2 * (G - 1)) if G > 1 else []
            rounds += [R2(i, grp, S / g / C)] * (g - 1) if g > 1 else []
            return _serial(rounds, C)
        if algorithm == "torus":
            dims = tuple(options.get("dims") or ())
            if math.prod(dims) != n:
                raise InputError(f"dims = {list(dims)}: the product must equal {n}")
            coords = np.stack(np.unravel_index(i, dims), axis=1)
            frac, phases = 1.0, []
            for j, d in enumerate(dims):
                if d == 1:
                    continue
                frac /= d
                nb = coords.copy()
                nb[:, j] = (nb[:, j] + 1) % d
                phases.append([R2(i, np.ravel_multi_index(nb.T, dims), S * frac / C)] * (d - 1))
            rounds = [r for ph in phases for r in ph] + [r for ph in phases[::-1] for r in ph]
            return _serial(rounds, C)
    if op in ("reduce_scatter", "all_gather"):
        if algorithm == "ring":
            return _serial([R2(i, nxt, S / n / C)] * (n - 1), C)
        a, b = np.nonzero(~np.eye(n, dtype=bool))
        return _serial([R2(a, b, S / n / C)], C)
    if op in ("broadcast", "reduce"):
        root = check_root(options.get("root", 0), n)
        if algorithm == "ring":
            # a chunk crosses the chain's hops one after another (fill: each hop alone); in
            # steady state every hop carries a chunk at once (beat: that round). Broadcast:
            # root -> root+1 -> ...; reduce: root+1 -> root+2 -> ... -> root (the builders')
            if rails is not None:
                # one chain per rail, each with 1/g of a chunk; the chains fill side by side,
                # each crossing nodes at its own hops: the slowest chain's fill, its hops
                # priced alone. That leaves out the chains' sharing of a GPU's next-GPU
                # connection while they fill (7 of 8 take it): 3-6% low against the flow
                # engine at 1 MiB and 1 GiB on 2-4 nodes of 8, up to 20% low at 64 MiB
                # (docs/collectives.md); pricing every hop with all its chains' bytes is as
                # far the other way (+50%)
                g = rails.shape[0]
                fill = max(R1(m[:-1], m[1:], S / C / g) for m in rails)
                beat = R2(rails[:, :-1], rails[:, 1:], S / C / g)[0] if C > 1 else 0.0
                return fill + (C - 1) * beat
            m = (root + i + (0 if op == "broadcast" else 1)) % n
            fill = R1(m[:-1], m[1:], S / C)
            beat = R2(m[:-1], m[1:], S / C)[0] if C > 1 else 0.0
            return fill + (C - 1) * beat
        v = np.arange(1, n)
        par = binomial_parent(n)[1:]
        # a chunk crosses the binomial tree's stages (fill). Broadcast: in round r every rank
        # w < 2^r that has it sends it to w + 2^r. Reduce: a rank sends once its children's
        # sums arrived, so stage k holds the sends of the ranks whose deepest child chain is
        # k long; a rank's children of equal depth send to it at once (leaves of a tree of
        # n not a power of two: the rounds mirrored from the broadcast put them one round
        # apart, +67% against the engine on 3 ranks). In steady state every tree edge carries
        # a chunk, and the busiest rank (the root) or link sets the beat
        stages = []
        if op == "broadcast":
            for r in range(max(1, (n - 1).bit_length())):
                w = np.arange(min(1 << r, n - (1 << r)))
                stages.append(R2((root + w) % n, (root + w + (1 << r)) % n, S / C))
        else:
            depth = binomial_reduce_depths(n)
            for k in range(int(depth[0])):
                w = v[depth[1:] == k]
                stages.append(R2((root + w) % n, (root + par[w - 1]) % n, S / C))
        beat = R2((par + root) % n, (v + root) % n, S / C)[0] if C > 1 else 0.0
        if op == "broadcast" and C > 1:
            # a rank sends a chunk to its children one after another (the builder orders
            # them), so the root, which has the most children, spends the sum of their
            # times alone on every chunk: its several links (a torus node's ports, a GPU's
            # NVLink and NIC) do not carry two of them at once (-26% to -64% on tori and
            # two_tier at 16 MiB when the beat let them share)
            kids = (root + (1 << np.arange(max(1, (n - 1).bit_length())))) % n
            beat = max(beat, R1(np.full(len(kids), root), kids, S / C))
        return _pipeline(stages, C, beat)
    if op in ("all_to_all", "all_to_all_v"):
        if M is None:
            # S is a float: 2**63 for the largest int64 size, which split cannot hold
            M = np.broadcast_to(split(min(int(S), MAX_BYTES), n), (n, n)).astype(np.float64)
        a, b = np.nonzero(~np.eye(n, dtype=bool))
        if algorithm == "direct":
            return _serial([R2(a, b, M[a, b] / C)], C)
        if algorithm == "pairwise":
            return _serial([R2(i, (i + k) % n, M[i, (i + k) % n] / C) for k in range(1, n)], C)
        g = _check_groups(n, options.get("group_size"))
        G = n // g
        grp_a, grp_b = a[(a // g) == (b // g)], b[(a // g) == (b // g)]
        leader = options.get("leader", "node")
        if leader not in ("node", "rail"):
            raise InputError(f"leader = {leader!r}: expected 'node' or 'rail'")
        if leader == "rail":
            # intra: rank a hands b everything for b's rail; inter: one message per rail peer
            intra = np.array([M[x, (np.arange(G) * g + y % g)].sum() for x, y in
                              zip(grp_a, grp_b)])
            rail_a, rail_b = a[(a % g) == (b % g)], b[(a % g) == (b % g)]
            inter = np.array([M[(x // g) * g + np.arange(g), y].sum() for x, y in
                              zip(rail_a, rail_b)])
            return _serial([R2(grp_a, grp_b, intra / C), R2(rail_a, rail_b, inter / C)], C)
        lead = (i // g) * g
        off = np.array([M[x][(np.arange(n) // g) != x // g].sum() for x in range(n)])
        nl = i[i % g > 0]
        la, lb = lead[a], lead[b]
        cross = (a // g) != (b // g)
        ex = np.zeros((n, n))
        np.add.at(ex, (la[cross], lb[cross]), M[a[cross], b[cross]])
        ea, eb = np.nonzero(ex)
        into = np.array([M[(i // g) != x // g, x].sum() for x in range(n)])
        # the on-node pieces and the gather to the leader go at once (the builder orders
        # neither after the other): one round of both, so a sender's messages share its
        # links; the exchange waits for the gather, the scatter for the exchange
        first = R2(np.concatenate([grp_a, nl]), np.concatenate([grp_b, lead[nl]]),
                   np.concatenate([M[grp_a, grp_b], off[nl]]) / C)
        return _serial([first, R2(ea, eb, ex[ea, eb] / C), R2(lead[nl], nl, into[nl] / C)], C)
    if op == "send_recv":
        P = options.get("pairs")
        P = np.stack([i[:-1], i[1:]], axis=1) if P is None else np.asarray(P)
        return _serial([R2(P[:, 0], P[:, 1], S / C)], C)
    raise InputError(f"algorithm = {algorithm!r}: no estimate for {op}")

"""Routing for schedules whose transfers stand for member sets (``netcore.members``), with the
links folded into equivalence classes so the engine's work does not grow with the members.

Two reductions, both exact for the fluid model (docs/scale.md has the argument):

* **A set is one flow.** Its members are routed once (each with its own path and hash key) and
  their paths are summed: the flow's weight on a directed link is how many members cross it
  (fractions under ``spray``). With one rate r for the set, link l carries ``r * weight``,
  exactly the load of its members.
* **Equivalent links are one link.** Two directed links with the same capacity that every set
  (and every single transfer) crosses with the same weight carry the same load at every instant,
  whatever the rates are. The engine keeps one representative per class; the others get its
  bytes and busy time when results are collected. A link that has a fault event is always its
  own class, and for every set whose path touches a faulted link the paths it would take after
  each fault instant are part of the signature too, so re-routing never lands on a link that
  stands for others it does not share the new load with.

A set's path is a function of (set, alive mask): it is computed once per mask and reused by
every node naming that set.
"""
from __future__ import annotations

import numpy as np

from netcore.schedule import TRANSFER, connection_keys
from topo._routing import hash3
from topo.routing import Paths
from topo.arrays import unique

def _alive_states(n_dlinks: int, faults) -> list[np.ndarray]:
    """The alive masks the engine can route with: all up, then the mask after each fault
    instant (in time order) that has some link down."""
    states = []
    factor = np.ones(n_dlinks)
    t = np.asarray(faults.time, dtype=float)
    i = 0
    while i < len(t):
        j = i
        while j < len(t) and t[j] == t[i]:
            factor[int(faults.dlink[j])] = float(faults.factor[j])
            j += 1
        alive = factor > 0
        if not alive.all() and not any((alive == s).all() for s in states):
            states.append(alive.copy())
        i = j
    return states


def route_members(routing, ms, pos: np.ndarray, alive=None, memo=None) -> Paths:
    """Paths of members ``pos`` of member sets ``ms``, each hashed as the connection it stands
    for (the full form keys its transfers alike). ``memo`` (a ``MemberPathMemo``) answers the
    paths with every link up from what was routed before."""
    src, dst = ms.src[pos], ms.dst[pos]
    if memo is not None and alive is None:
        return memo.paths(src, dst)
    return routing.paths(src, dst, flow_id=connection_keys(src, dst), alive=alive)


class MemberPathMemo:
    """Paths with every link up, by connection, kept from one routing to the next of a run.

    The flow engine routes every member before a run to find uneven sets (uneven_split), then
    routes the sets again, split, to build the link classes (MemberRouting): the members are
    the same connections, and a connection's path is a function of its key. On GPT-3 175B on
    102,400 GPUs the second routing took 2.0 of the command's 6.8 s."""

    def __init__(self, routing):
        self.routing = routing
        self._keys = None  # sorted connection keys
        self._paths = None  # Paths in the order of _keys

    def paths(self, src, dst) -> Paths:
        keys = connection_keys(src, dst)
        if self._keys is not None and len(self._keys):
            at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
            if (self._keys[at] == keys).all():
                return self._paths.take(at)
        p = self.routing.paths(src, dst, flow_id=keys)
        order = np.argsort(keys, kind="stable")
        self._keys, self._paths = keys[order], p.take(order)
        return p


class MemberRouting:
    """Paths of schedule nodes (single transfers and member sets) over representative links.

    ``node_paths(nodes, alive)`` is what the flow engine calls instead of ``Routing.paths``;
    ``rep`` maps every directed link to the link whose figures it shares.
    """

    def __init__(self, topology, routing, schedule, faults, memo=None):
        self.routing = routing
        self.memo = memo
        self.topology = topology
        self.L = topology.n_dlinks
        self.sched = schedule
        self.sets = schedule.sets
        self.mset = schedule.mset
        tr = np.flatnonzero(schedule.kind == TRANSFER)
        self.single = tr[self.mset[tr] < 0]
        used = unique(self.mset[tr][self.mset[tr] >= 0])
        self.used_sets = used
        self._cache: dict = {}
        self.states = _alive_states(self.L, faults)
        faulted = unique(np.asarray(faults.dlink, dtype=np.int64))
        self.rep = np.arange(self.L, dtype=np.int64)
        self.n_classes = self.n_used_links = 0
        self._singles_up = None  # every single transfer's path with all links up (unfolded)
        set_paths = self._build_quotient(used, faulted)
        if set_paths is not None:
            self._cache[None] = self._fold(set_paths)

    # ------------------------------------------------------------------ raw routing
    def _route_sets(self, sets: np.ndarray, alive) -> Paths:
        """Summed member paths of ``sets`` (over the physical links)."""
        ms = self.sets
        cnt = ms.sizes[sets]
        p = route_members(self.routing, ms, ms.positions(sets), alive, self.memo)
        # member -> set: concatenate each set's member rows, then merge duplicate links
        owner_ptr = np.concatenate([[0], np.cumsum(cnt)])
        eptr = p.ptr[owner_ptr]
        # one entry per (set, link), weights summed: sort-based (a set has thousands of
        # entries, where the engine's per-flow merge would be quadratic)
        owner = np.repeat(np.arange(len(sets), dtype=np.int64), np.diff(eptr))
        key = owner * self.L + np.asarray(p.link, dtype=np.int64)
        uk, inv = np.unique(key, return_inverse=True)
        weight = np.bincount(inv.reshape(-1), weights=np.asarray(p.weight, dtype=np.float64),
                             minlength=len(uk))
        link = uk % self.L
        ptr = np.zeros(len(sets) + 1, dtype=np.int64)
        np.cumsum(np.bincount(uk // self.L, minlength=len(sets)), out=ptr[1:])
        reach = np.logical_and.reduceat(p.reachable, owner_ptr[:-1]) if len(sets) else \
            np.zeros(0, bool)
        lat = np.maximum.reduceat(p.latency, owner_ptr[:-1]) if len(sets) else np.zeros(0)
        hops = np.maximum.reduceat(p.hops, owner_ptr[:-1]) if len(sets) else \
            np.zeros(0, np.int32)
        cnt_l = np.diff(ptr)
        reach = reach & (cnt_l > 0)
        saf = np.maximum.reduceat(self._member_saf(p), owner_ptr[:-1]) if len(sets) else \
            np.zeros(0)
        return Paths(ptr, link.astype(np.int32), weight, reach, lat, hops.astype(np.int32), saf)

    def _member_saf(self, p: Paths) -> np.ndarray:
        """Per member path, seconds per packet byte of store-and-forward: 1/bandwidth summed
        over the hops after the first (a split path: (hops - 1) at its slowest link), as the
        engine's own tail computation for one transfer."""
        bw = np.asarray(self.topology.dlink_bw, dtype=np.float64)
        cnt = np.diff(p.ptr)
        owner = np.repeat(np.arange(len(cnt)), cnt)
        link = np.asarray(p.link, dtype=np.int64)
        w = np.asarray(p.weight)
        first = np.zeros(len(link), bool)
        first[p.ptr[:-1][cnt > 0]] = True
        inv = np.where(first, 0.0, 1.0 / bw[link])
        single = np.bincount(owner, weights=inv, minlength=len(cnt))
        split = np.bincount(owner, weights=(w != 1.0).astype(float), minlength=len(cnt)) > 0
        if split.any():
            bmin = np.full(len(cnt), np.inf)
            np.minimum.at(bmin, owner, bw[link])
            single = np.where(split, np.maximum(p.hops - 1, 0) / bmin, single)
        return single

    def _route_single(self, nodes: np.ndarray, alive) -> Paths:
        return self.routing.paths(self.sched.src[nodes], self.sched.dst[nodes],
                                  flow_id=self.sched.routing_keys(nodes), alive=alive)

    # ------------------------------------------------------------------ link classes
    def _build_quotient(self, used: np.ndarray, faulted: np.ndarray):
        """Signature of every directed link = (capacity, multiset of (user, weight)); links
        with equal signatures share one representative."""
        users, links, weights = [], [], []
        uid = 0

        def add(paths: Paths, first_uid: int):
            cnt = np.diff(paths.ptr)
            users.append(np.repeat(np.arange(first_uid, first_uid + len(cnt)), cnt))
            links.append(np.asarray(paths.link, dtype=np.int64))
            weights.append(np.asarray(paths.weight, dtype=np.float64))

        set_paths = self._route_sets(used, None) if len(used) else None
        single_paths = self._route_single(self.single, None) if len(self.single) else None
        self._singles_up = single_paths
        dead_any = np.zeros(self.L, bool)
        dead_any[faulted] = True
        for p, ids, route in ((set_paths, used, self._route_sets),
                              (single_paths, self.single, self._route_single)):
            if p is None:
                continue
            add(p, uid)
            uid += len(ids)
            if not len(self.states):
                continue
            # users whose path touches a faulted link: add every path they may take later
            cnt = np.diff(p.ptr)
            owner = np.repeat(np.arange(len(ids)), cnt)
            hit = unique(owner[dead_any[np.asarray(p.link, dtype=np.int64)]])
            if hit.size:
                for alive in self.states:
                    q = route(ids[hit], alive)
                    add(q, uid)
                    uid += len(hit)
        # a faulted link is its own class: a user id of its own marks it
        if faulted.size:
            users.append(np.arange(uid, uid + faulted.size))
            links.append(faulted)
            weights.append(np.ones(faulted.size))
            uid += faulted.size
        if not users:
            return set_paths
        u = np.concatenate(users).astype(np.int64)
        lk = np.concatenate(links)
        w = np.ascontiguousarray(np.concatenate(weights)).view(np.int64)
        # two independent 64-bit hashes of (user, weight) (routing's splitmix64 mix, seeds 0
        # and 1): a link's signature is their sums, so the order of its users does not matter
        h1 = hash3(0, u, w)
        h2 = hash3(1, u, w)
        with np.errstate(over="ignore"):
            s1 = np.zeros(self.L, dtype=np.uint64)
            s2 = np.zeros(self.L, dtype=np.uint64)
            order = np.argsort(lk, kind="stable")
            lk_s = lk[order]
            starts = np.flatnonzero(np.concatenate([[True], lk_s[1:] != lk_s[:-1]]))
            s1[lk_s[starts]] = np.add.reduceat(h1[order], starts)
            s2[lk_s[starts]] = np.add.reduceat(h2[order], starts)
        usedl = np.zeros(self.L, bool)
        usedl[lk] = True
        ids = np.flatnonzero(usedl)
        bw = np.asarray(self.topology.dlink_bw, dtype=np.float64)[ids].view(np.uint64)
        o = np.lexsort((ids, bw, s2[ids], s1[ids]))
        k1, k2, kb = s1[ids][o], s2[ids][o], bw[o]
        new = np.concatenate([[True], (k1[1:] != k1[:-1]) | (k2[1:] != k2[:-1]) |
                              (kb[1:] != kb[:-1])])
        first = ids[o][np.flatnonzero(new)]
        grp = np.cumsum(new) - 1
        self.rep[ids[o]] = first[grp]
        self.n_classes = int(new.sum())
        self.n_used_links = int(ids.size)
        return set_paths

    def _fold(self, p: Paths) -> Paths:
        """Map a path's links to representatives; one entry per (flow, representative), with
        the weight of one of its links (all links of a class carry the same weight)."""
        cnt = np.diff(p.ptr)
        if not len(p.link):
            return p
        owner = np.repeat(np.arange(len(cnt)), cnt)
        r = self.rep[np.asarray(p.link, dtype=np.int64)]
        o = np.lexsort((r, owner))
        keep = np.concatenate([[True], (owner[o][1:] != owner[o][:-1]) | (r[o][1:] != r[o][:-1])])
        sel = o[keep]
        sel.sort(kind="stable")  # back to hop order within each flow
        new_cnt = np.bincount(owner[sel], minlength=len(cnt))
        ptr = np.concatenate([[0], np.cumsum(new_cnt)])
        return Paths(ptr, r[sel].astype(np.int32), np.asarray(p.weight)[sel], p.reachable,
                     p.latency, p.hops)

    # ------------------------------------------------------------------ engine interface
    def _set_table(self, akey, alive) -> Paths:
        """Folded paths of every used set under one alive mask (``akey``: its packed bits,
        None with every link up), routed once per mask."""
        table = self._cache.get(akey)
        if table is None:  # every used set at once: one routing call per alive mask
            table = self._cache[akey] = self._fold(self._route_sets(self.used_sets, alive))
        return table

    def _single_table(self, nodes: np.ndarray, alive) -> Paths:
        """Folded paths of the single transfers ``nodes``: with every link up and all of them
        asked for, the routing made when the classes were built is reused."""
        if alive is None and self._singles_up is not None and \
                np.array_equal(nodes, self.single):
            return self._fold(self._singles_up)
        return self._fold(self._route_single(nodes, alive))

    def entry_count(self, nodes: np.ndarray) -> int:
        """Path entries (flow, representative link) the engine will hold for ``nodes`` with
        every link up, without building them: the set table's once (every node naming a set
        shares its row), and each single transfer's own folded path (several planes or paths
        under striping). What the engine's memory grows with (netcore/flow/engine.py,
        memory_budget), besides the arena of the shared paths in use at once."""
        nodes = np.asarray(nodes, dtype=np.int64)
        ms = self.mset[nodes]
        n = 0
        if (ms >= 0).any():
            n += len(self._set_table(None, None).link)
        single = nodes[ms < 0]
        if single.size:
            n += int(np.diff(self._single_table(single, None).ptr).sum())
        return n

    def node_paths(self, nodes: np.ndarray, alive):
        """Paths of ``nodes`` under ``alive`` (None: every link up), in two parts: the single
        transfers (positions in ``nodes`` and their folded Paths) and the nodes naming a set
        (positions, their rows in the set table, the table and its key). Every node naming a
        set is a flow of its own, and all of them share the table's one copy of its path."""
        nodes = np.asarray(nodes, dtype=np.int64)
        ms = self.mset[nodes]
        akey = None if alive is None or np.asarray(alive).all() else \
            np.packbits(np.asarray(alive, dtype=bool)).tobytes()
        single = np.flatnonzero(ms < 0)
        single_paths = self._single_table(nodes[single], alive) if single.size else None
        grouped = np.flatnonzero(ms >= 0)
        rows = np.searchsorted(self.used_sets, ms[grouped])
        table = self._set_table(akey, alive) if grouped.size else None
        return single, single_paths, grouped, rows, table, akey

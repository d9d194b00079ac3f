"""Incremental driving of the packet engine, for co-simulation (docs/packet_engine.md).

A caller adds transfers while the simulation runs and advances it to the next completion:

    inc = PacketIncremental(topology, routing, faults, transport="tcp")
    ids = inc.add_transfers(src, dst, size, start_s=0.0)
    while inc.pending():
        t, done = inc.advance(t_limit)      # stops at the first completion time stamp
        ...inc.add_transfers(..., start_s=t) for what `done` releases...
    res = inc.result()

The C++ core runs every event; Python is entered once per `advance` call (plus once per
reroute), never per event. Transfers added at the completion time of the ones they follow run
exactly as the same DAG handed to `run` in one batch (tests/test_packet_incremental.py):
`advance` returns after every event of that time stamp has run, and new transfers get their
start events with the next sequence numbers, as the DAG's release of a child would.
"""
from __future__ import annotations

import time

import numpy as np

from netcore.packet import limits, plane_split
from netcore.packet.engine import PS, _collect, _config, per_hop_paths, single_path
from netcore.packet.options import check_options
from netcore.incremental_input import check_new_transfers
from topo.errors import InputError

_NEVER = (1 << 63) - 1


def _ps_scalar(seconds: float) -> int:
    return int(round(float(seconds) * PS))


def _on_the_clock(start_s, now_ps: int) -> np.ndarray:
    """Start times that round to the clock's picosecond or later, raised to at least now() in
    seconds. The clock stops on whole picoseconds: ``advance(t)`` to t = 5.27 * 1e-6 s
    (5.2699999999999995e-06) stops at 5,270,000 ps, whose seconds (5.27e-06) are one ulp
    above t, so a caller sending at the t it asked for (Session.run_until(t), a callback at t)
    was refused as starting before now(). Starts that round below the clock stay as given
    (check_new_transfers refuses them); non-numbers are left for it to name."""
    try:
        s = np.array(np.asarray(start_s, dtype=np.float64), dtype=np.float64, ndmin=1)
    except (TypeError, ValueError):
        return start_s
    with np.errstate(invalid="ignore", over="ignore"):
        on = np.isfinite(s) & (np.rint(s * PS) >= now_ps)
    return np.where(on, np.maximum(s, now_ps / PS), s)


def _core(fn, *args):
    """A call into the core, with its range guards (clock, event numbers) as PacketLimit."""
    try:
        return fn(*args)
    except OverflowError as e:
        raise (limits.from_core(e) or e) from None


class PacketIncremental:
    """The packet engine driven step by step: `add_transfers`, `advance`, `now`, `pending`,
    `result`. Options are the packet engine's (`netcore.packet.options`)."""

    def __init__(self, topology, routing, faults=None, seed: int = 0, **options):
        from netcore import _packet

        self.topology = topology
        self.routing = single_path(routing)
        self.opts = check_options(options)
        # a fabric a single-path policy stripes over (fullflat): every transfer of at least
        # `planes` bytes becomes one connection per plane, as `run` splits it
        # (plane_split.py); the caller sees its own transfers only
        self._planes = int(getattr(routing, "planes", 0) or 0)
        self._striped = routing if self._planes >= 2 and \
            not self.opts["warm_connections"] else None
        limits.check_fabric(topology, self.opts)
        limits.check_faults(topology, faults)
        policy = getattr(routing, "policy", "ecmp")
        self.per_hop = policy in ("spray", "adaptive")
        cfg = _config(self.opts, self.per_hop, policy == "adaptive")
        ptr, _nbr, adj_link = topology.adjacency
        nf = len(faults) if faults is not None else 0
        e32, e64 = np.zeros(0, np.int32), np.zeros(0, np.int64)
        self._sim = _packet.Sim(
            cfg, int(topology.n_hosts), bool(topology.hosts_forward),
            int(seed) & ((1 << 64) - 1), topology.dlink_src, topology.dlink_dst,
            topology.dlink_bw, np.rint(np.asarray(topology.dlink_lat) * PS).astype(np.int64),
            ptr.astype(np.int64), adj_link.astype(np.int32),
            np.zeros(0, np.int8), e32, e32, e64, e64, e64, np.zeros(1, np.int64), e64, e32,
            np.rint(np.asarray(faults.time) * PS).astype(np.int64) if nf else e64,
            faults.dlink.astype(np.int32) if nf else e32,
            faults.kind.astype(np.int8) if nf else np.zeros(0, np.int8),
            faults.factor if nf else np.zeros(0))
        self._sim.log_done = True
        self._src = np.zeros(0, np.int32)
        self._dst = np.zeros(0, np.int32)
        self._flow = np.zeros(0, np.int64)
        self._plane = np.zeros(0, np.int64)  # per core transfer: its plane, -1 not split
        self._owner = np.zeros(0, np.int64)  # per core transfer: the caller's transfer id
        self._left = np.zeros(0, np.int64)  # per caller's transfer: pieces not done yet
        self._alive = None  # None until a link fails: routing over the full fabric
        self._reroutes = 0
        self._route_s = 0.0
        self._wall = 0.0
        if self.per_hop:
            # per-packet next hops need hop distances to every host (any may become an end)
            hosts = np.arange(topology.n_hosts, dtype=np.int32)
            self._rows = np.full(topology.n_nodes, -1, dtype=np.int32)
            self._rows[hosts] = np.arange(len(hosts), dtype=np.int32)
            self._hosts = hosts
            self._set_distances(None)

    # ------------------------------------------------------------------ routing
    def _set_distances(self, alive):
        dist = np.ascontiguousarray(self.routing.distances(self._hosts, alive=alive), np.int32)
        self._sim.set_distances(self._rows, dist.ravel(), len(self._hosts))
        self._dist = dist

    def _paths(self, src, dst, flow, alive, plane=None):
        if self.per_hop:
            reach = self._dist[self._rows[dst], src] >= 0
            return per_hop_paths(self.routing, self.topology, src, dst, flow, alive, reach)
        if self._striped is not None:
            p = plane_split.paths(self._striped, src, dst, flow, plane, alive)
        else:
            p = self.routing.paths(src, dst, flow_id=flow, alive=alive)
        return (np.asarray(p.ptr, np.int64), np.asarray(p.link, np.int32),
                np.asarray(p.reachable, bool))

    def _reroute(self):
        r0 = time.perf_counter()
        alive = self._sim.alive().astype(bool)
        self._alive = alive
        if self.per_hop:
            self._set_distances(alive)
        nodes = self._sim.dead_transfers().astype(np.int32)
        ptr, links, reach = self._paths(self._src[nodes], self._dst[nodes], self._flow[nodes],
                                        alive, self._plane[nodes])
        self._sim.set_paths(nodes, ptr, links, reach.astype(np.uint8))
        self._route_s += time.perf_counter() - r0
        self._reroutes += 1

    # ------------------------------------------------------------------ API
    def now(self) -> float:
        """Simulated time reached, in seconds."""
        return float(self._sim.now) / PS

    def pending(self) -> int:
        """Transfers added and neither finished nor stranded (with plane pieces: transfers with
        a piece still running)."""
        if self._striped is None or not self._sim.pending():
            return int(self._sim.pending())
        return int(min(self._sim.pending(), np.count_nonzero(self._left)))

    def add_transfers(self, src, dst, size, start_s=None, flow_ids=None) -> np.ndarray:
        """Adds transfers src[i] -> dst[i] of size[i] bytes that become ready at start_s
        (scalar or per transfer, seconds, >= now(); default now()). `flow_ids` (optional) is
        the key routing hashes for ECMP-like policies (default: the returned ids, as `run`
        uses the schedule's node ids). Returns the transfer ids (0, 1, ... in order of adding)."""
        now = int(self._sim.now)
        if start_s is not None:
            start_s = _on_the_clock(start_s, now)
        src, dst, size, start = check_new_transfers(self.topology.n_hosts, now / PS, src, dst,
                                                    size, start_s)
        n = len(src)
        limits.check_segments(self.topology, src, dst, np.asarray(size, np.int64),
                              np.arange(n), self.opts)
        # picoseconds; a start at now() must stay exactly now (no rounding below it)
        st = np.maximum(np.rint(start * PS).astype(np.int64), now)
        first_user = len(self._left)
        ids = np.arange(first_user, first_user + n, dtype=np.int64)
        flow = ids if flow_ids is None else np.broadcast_to(
            np.asarray(flow_ids, np.int64), (n,)).copy()
        size = np.asarray(size, np.int64)
        owner, plane, left = ids, np.full(n, -1, np.int64), np.ones(n, np.int64)
        if self._striped is not None:
            # the transfers keep plane 0 and their pieces follow them, as `run` orders them
            cut = (src != dst) & (size >= self._planes)
            size, orig, pplane, psize = plane_split.pieces_of(size, self._planes, cut)
            plane = np.where(cut, 0, -1)
            left = np.where(cut, self._planes, 1)
            src, dst = np.concatenate([src, src[orig]]), np.concatenate([dst, dst[orig]])
            size, st = np.concatenate([size, psize]), np.concatenate([st, st[orig]])
            flow, owner = np.concatenate([flow, flow[orig]]), np.concatenate([ids, ids[orig]])
            plane = np.concatenate([plane, pplane])
        first = len(self._src)
        if first + len(src) > limits.MAX_NODES:
            raise limits.PacketLimit(f"{first + len(src):,} transfers in all: the packet engine "
                                     f"numbers at most {limits.MAX_NODES:,} (int32)")
        src32, dst32 = src.astype(np.int32), dst.astype(np.int32)
        ptr, links, reach = self._paths(src32, dst32, flow, self._alive, plane)
        got = _core(self._sim.add_transfers, src32, dst32, size, st, ptr, links,
                    reach.astype(np.uint8))
        assert got == first
        self._src = np.concatenate([self._src, src32])
        self._dst = np.concatenate([self._dst, dst32])
        self._flow = np.concatenate([self._flow, flow])
        self._plane = np.concatenate([self._plane, plane])
        self._owner = np.concatenate([self._owner, owner])
        self._left = np.concatenate([self._left, left])
        return ids

    def advance(self, t_limit: float | None = None):
        """Runs events until t_limit (seconds; None: no limit) or until the first time stamp at
        which transfers complete, whichever is first. Returns (t, ids): that time stamp and every
        transfer completing at it (in completion order), or (t_limit, empty) if none did."""
        if t_limit is not None and not float(t_limit) <= float("inf"):
            raise InputError(f"t_limit must be a time in seconds; got {t_limit!r}")
        if t_limit is None or float(t_limit) == float("inf"):
            limit = _NEVER
        else:
            limit = min(_ps_scalar(t_limit), _NEVER)  # beyond the clock: no limit
            if limit < int(self._sim.now):
                raise InputError(f"t_limit must be >= now() = {self.now()!r} s; got {t_limit!r}")
        t0 = time.perf_counter()
        try:
            while True:
                code = _core(self._sim.advance, limit, True)
                if code == 1:  # a link failed reroute_delay ago: new paths over what survives
                    self._reroute()
                    continue
                if code == 2:
                    done = self._finished(self._sim.take_done().astype(np.int64))
                    if len(done):
                        return float(self._sim.now) / PS, done
                    continue  # only pieces of unfinished transfers: on to the next time

                t = self.now() if t_limit is None else float(t_limit)
                return t, np.zeros(0, np.int64)
        finally:
            self._wall += time.perf_counter() - t0

    def _finished(self, core_ids: np.ndarray) -> np.ndarray:
        """The caller's transfers whose last piece is among ``core_ids`` (in that order)."""
        owners = self._owner[core_ids]
        np.subtract.at(self._left, owners, 1)
        last = self._left[owners] == 0
        # a transfer once, at its last piece
        _, first = np.unique(owners[last][::-1], return_index=True)
        keep = np.zeros(int(last.sum()), dtype=bool)
        keep[int(last.sum()) - 1 - first] = True
        return owners[last][keep]

    def result(self):
        """The `Result` over every transfer added (statistics closed at the last activity).
        Packets still in flight (ACKs of the last segments) are drained first, as `run` does;
        call it once, at the end."""
        t0 = time.perf_counter()
        while _core(self._sim.run) == 1:
            self._reroute()
        self._wall += time.perf_counter() - t0
        self._sim.finish()
        res = _collect(self._sim, self.topology, None, self.opts, self._wall, self._route_s,
                       self._reroutes)
        if self._striped is None:
            return res
        return plane_split.fold_back(res, self._owner, len(self._left))
